// Private to the CUDA data-movement kernels (shape.cu) and their gradients (shape_grad.cu): Pad's
// geometry as the kernels read it, and element addressing inside a tensor.
#pragma once

#include <cstdint>
#include <vector>

#include "graph/tensor.h"
#include "kernels/common/indexing.h"
#include "kernels/common/shape_params.h"
#include "kernels/cuda/indexer.h"

namespace otter::cuda {

struct PadGeometry {
  int rank;
  int64_t out[kMaxDims], in[kMaxDims], lo[kMaxDims], stride[kMaxDims];
};

// The kernels' copy of a resolved Pad on an input of dims `in` (rank <= kMaxDims, checked by the
// caller).
inline PadGeometry pad_geometry(const std::vector<int64_t>& in, const params::PadSpec& p) {
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

// The address of element `offset` (in elements) of t's storage.
inline const char* at_element(const Tensor& t, int64_t offset) {
  return static_cast<const char*>(t.raw()) + offset * static_cast<int64_t>(dtype_size(t.dtype()));
}
inline char* at_element(Tensor& t, int64_t offset) {
  return static_cast<char*>(t.raw()) + offset * static_cast<int64_t>(dtype_size(t.dtype()));
}

}  // namespace otter::cuda
