// Private to the CUDA data-movement kernels (shape.cu) and their gradients (shape_grad.cu): Pad's
// geometry as the kernels read it and the source addressing of Pad and Gather that the forward
// and gradient kernels share.
#pragma once

#include <cstdint>
#include <vector>

#include "graph/tensor.h"
#include "kernels/common/indexing.h"
#include "kernels/common/shape_params.h"
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/indexer.h"

namespace otter::cuda {

struct PadGeometry {
  int rank;
  int64_t out[kMaxDims], in[kMaxDims], lo[kMaxDims], stride[kMaxDims];
};

// The kernels' copy of a resolved Pad on `x` (Pad's input, PadGrad's dX) of rank <= kMaxDims.
inline PadGeometry pad_geometry(const KernelContext& ctx, const Tensor& x, const params::PadSpec& p) {
  if (x.rank() > kMaxDims)
    ctx.error(str_cat(ctx.node().op_type(), " on CUDA takes at most ", kMaxDims, " dims, got ", x.describe()));
  const std::vector<int64_t>& in = x.dims();
  PadGeometry g{};
  g.rank = static_cast<int>(in.size());
  const std::vector<int64_t> is = contiguous_strides(in);
  for (int i = 0; i < g.rank; ++i) {
    g.in[i] = in[i];
    g.out[i] = p.out_dims[i];
    g.lo[i] = p.lo[i];
    g.stride[i] = is[i];
  }
  return g;
}

// The input offset that element i of Pad's output copies; -1 where it holds the constant.
__device__ inline int64_t pad_input_offset(const PadGeometry& g, PadMode mode, int64_t i) {
  int64_t rem = i, off = 0;
  for (int d = g.rank - 1; d >= 0; --d) {
    const int64_t o = rem % g.out[d];
    rem /= g.out[d];
    const int64_t s = pad_source(mode, o - g.lo[d], g.in[d]);
    if (s < 0) return -1;
    off += s * g.stride[d];
  }
  return off;
}

// The data offset that element i of Gather's output [outer, ni, inner] reads (data [outer, n,
// inner], indices idx of ni elements, wrapped once when negative); -1, reported to the slot, when
// the index is outside [-n, n).
template <typename I>
__device__ int64_t gather_offset(int64_t i, const I* idx, int64_t ni, int64_t inner, int64_t n, DeviceError* slot,
                                 int reporter) {
  const int64_t j = i % inner, t = i / inner, k = t % ni, o = t / ni;
  int64_t v = static_cast<int64_t>(idx[k]);
  if (v < -n || v >= n) {
    report_error(slot, reporter, 1, v, k, n);
    return -1;
  }
  if (v < 0) v += n;
  return (o * n + v) * inner + j;
}

// Calls body(p) with p the data of an int64 or int32 index tensor, typed.
template <typename F>
void with_index_data(const Tensor& idx, F&& body) {
  if (idx.dtype() == DataType::kInt64) body(static_cast<const int64_t*>(idx.raw()));
  else body(static_cast<const int32_t*>(idx.raw()));
}

// What Gather and GatherGrad keep: attribute 'axis' and the reporter of out-of-range indices
// (gather_offset).
class GatherKernelBase : public Kernel {
 protected:
  explicit GatherKernelBase(const Node& n)
      : axis_(n.attr_i("axis", 0)), reporter_(n, [](const DeviceError& e) {
          return str_cat("index ", e.a, " (indices element ", e.b, ") is out of range for an axis of size ", e.c);
        }) {}
  // The device a run launches on and the reporter's id there.
  struct Launch {
    CudaDevice& dev;
    int reporter;
  };
  Launch launch_on(KernelContext& ctx) {
    CudaDevice& dev = device_of(ctx);
    return {dev, reporter_.id(dev)};
  }
  int64_t axis_;
  ErrorReporter reporter_;
};

using params::element_at;

}  // namespace otter::cuda
