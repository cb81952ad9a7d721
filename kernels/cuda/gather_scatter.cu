// CUDA kernels of GatherElements, ScatterElements, GatherND, ScatterND, DepthToSpace and
// SpaceToDepth (graph/ops/indexing.cc),
// on the index arithmetic the CPU kernels share (kernels/common/gather_scatter.h). Gathers run one
// thread per output element; scatters copy data, then apply the updates in index order from a
// single thread, so repeated indices combine exactly as on the CPU (simple, not fast: the
// scatters of otter's models are small masks and gradients). Out-of-range indices are reported.
#include "kernels/common/gather_scatter.h"
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/cuda_kernels.h"

namespace otter::cuda {
namespace {

// Reporter codes: 1 index out of range (a = index, b = indices element, c = size).
template <typename I>
__device__ int64_t elements_or_report(const ElementsGeom& g, const I* idx, int64_t i, DeviceError* slot, int rep) {
  const int64_t v = static_cast<int64_t>(idx[i]);
  const int64_t off = elements_offset(g, i, v);
  if (off < 0) report_error(slot, rep, 1, v, i, g.axis_len);
  return off;
}

template <typename T, typename I>
__global__ void gather_elements_kernel(ElementsGeom g, int64_t n, const T* x, const I* idx, T* out, DeviceError* slot,
                                       int rep) {
  OTTER_GRID_STRIDE(i, n) {
    const int64_t off = elements_or_report(g, idx, i, slot, rep);
    out[i] = off < 0 ? T{} : x[off];
  }
}

template <typename S, typename I>
__global__ void scatter_elements_kernel(ElementsGeom g, int64_t n, const I* idx, const S* upd, S* out,
                                        ScatterReduction red, DeviceError* slot, int rep) {
  if (blockIdx.x != 0 || threadIdx.x != 0) return;
  for (int64_t i = 0; i < n; ++i) {
    const int64_t off = elements_or_report(g, idx, i, slot, rep);
    if (off >= 0) out[off] = scatter_combine(red, out[off], upd[i]);
  }
}

__device__ int64_t nd_or_report(const NdGeom& g, const int64_t* idx, int64_t t, DeviceError* slot, int rep) {
  int bad = 0;
  const int64_t off = nd_offset(g, t, idx + t * g.k, &bad);
  if (off < 0) report_error(slot, rep, 1, idx[t * g.k + bad], t * g.k + bad, g.dims[bad]);
  return off;
}

template <typename T>
__global__ void gather_nd_kernel(NdGeom g, int64_t n, const T* x, const int64_t* idx, T* out, DeviceError* slot,
                                 int rep) {
  OTTER_GRID_STRIDE(i, n) {
    const int64_t off = nd_or_report(g, idx, i / g.slice, slot, rep);
    out[i] = off < 0 ? T{} : x[off + i % g.slice];
  }
}

template <typename S>
__global__ void scatter_nd_kernel(NdGeom g, int64_t tuples, const int64_t* idx, const S* upd, S* out,
                                  ScatterReduction red, DeviceError* slot, int rep) {
  if (blockIdx.x != 0 || threadIdx.x != 0) return;
  for (int64_t t = 0; t < tuples; ++t) {
    const int64_t off = nd_or_report(g, idx, t, slot, rep);
    if (off < 0) continue;
    for (int64_t j = 0; j < g.slice; ++j) out[off + j] = scatter_combine(red, out[off + j], upd[t * g.slice + j]);
  }
}

std::string out_of_range(const DeviceError& e) {
  return str_cat("index ", e.a, " (indices element ", e.b, ") is out of range for a dim of size ", e.c);
}

// Scatter: out = data, then the updates of the element type (reductions: numeric types).
template <typename F>
void scatter_typed(KernelContext& ctx, const Tensor& x, Tensor& out, ScatterReduction red, F launch) {
  if (x.nbytes()) device_of(ctx).copy_async(out.raw(), x.raw(), x.nbytes());
  if (red == ScatterReduction::kNone) return dispatch_bytes(x.dtype(), launch);
  dispatch_numeric(x.dtype(), launch);
}

// What the Elements and ND kernels share: their attributes, the reporter of out-of-range indices
// and the run's set-up; run_indexed gets data x, indices idx, the device and the reporter's id.
class IndexKernel : public Kernel {
 public:
  IndexKernel(const Node& n, bool scatter, bool nd) : at_(n, scatter, nd), reporter_(n, out_of_range) {}
  void run(KernelContext& ctx) override {
    CudaDevice& dev = device_of(ctx);
    run_indexed(ctx, ctx.input(0), ctx.input(1), dev, reporter_.id(dev));
  }

 protected:
  virtual void run_indexed(KernelContext& ctx, const Tensor& x, const Tensor& idx, CudaDevice& dev, int rep) = 0;
  IndexOpAttrs at_;
  ErrorReporter reporter_;
};

class ElementsKernel : public IndexKernel {
 public:
  ElementsKernel(const Node& n, bool scatter) : IndexKernel(n, scatter, false) {}
  void run_indexed(KernelContext& ctx, const Tensor& x, const Tensor& idx, CudaDevice& dev, int rep) override {
    const ElementsGeom g = resolve_elements(ctx, x, idx, at_.axis);
    const int64_t n = idx.numel();
    Tensor& out = ctx.allocate_output(0, x.dtype(), at_.scatter ? x.dims() : idx.dims());
    auto with_index = [&](auto body) {
      if (idx.dtype() == DataType::kInt64)
        body(static_cast<const int64_t*>(idx.raw()));
      else
        body(static_cast<const int32_t*>(idx.raw()));
    };
    if (!at_.scatter) {
      if (n == 0) return;
      dispatch_bytes(x.dtype(), [&](auto tag) {
        using T = typename decltype(tag)::type;
        with_index([&](auto* ip) {
          gather_elements_kernel<<<grid_for(n), kBlock, 0, dev.cuda_stream()>>>(
              g, n, static_cast<const T*>(x.raw()), ip, static_cast<T*>(out.raw()), dev.error_slot(), rep);
          OTTER_CUDA_LAUNCH_CHECK();
        });
      });
      return;
    }
    const Tensor& upd = ctx.input(2);
    if (upd.dims() != idx.dims() || upd.dtype() != x.dtype())
      ctx.error(str_cat("updates ", upd.describe(), " must have the shape of indices and the type of data"));
    scatter_typed(ctx, x, out, at_.red, [&](auto tag) {
      using S = typename decltype(tag)::type;
      if (n == 0) return;
      with_index([&](auto* ip) {
        scatter_elements_kernel<<<1, 1, 0, dev.cuda_stream()>>>(
            g, n, ip, static_cast<const S*>(upd.raw()), static_cast<S*>(out.raw()), at_.red, dev.error_slot(), rep);
        OTTER_CUDA_LAUNCH_CHECK();
      });
    });
  }
};

class NdKernel : public IndexKernel {
 public:
  NdKernel(const Node& n, bool scatter) : IndexKernel(n, scatter, true) {}
  void run_indexed(KernelContext& ctx, const Tensor& x, const Tensor& idx, CudaDevice& dev, int rep) override {
    const NdGeom g = resolve_nd(ctx, x, idx, at_.axis);
    const int64_t tuples = g.batches * g.tuples;
    const auto* ip = static_cast<const int64_t*>(idx.raw());
    if (!at_.scatter) {
      Tensor& out = ctx.allocate_output(0, x.dtype(), nd_gather_dims(x.dims(), idx.dims(), at_.axis));
      const int64_t n = out.numel();
      if (n == 0) return;
      dispatch_bytes(x.dtype(), [&](auto tag) {
        using T = typename decltype(tag)::type;
        gather_nd_kernel<<<grid_for(n), kBlock, 0, dev.cuda_stream()>>>(
            g, n, static_cast<const T*>(x.raw()), ip, static_cast<T*>(out.raw()), dev.error_slot(), rep);
        OTTER_CUDA_LAUNCH_CHECK();
      });
      return;
    }
    check_nd_updates(ctx, x, idx);
    const Tensor& upd = ctx.input(2);
    Tensor& out = ctx.allocate_output(0, x.dtype(), x.dims());
    scatter_typed(ctx, x, out, at_.red, [&](auto tag) {
      using S = typename decltype(tag)::type;
      if (tuples == 0) return;
      scatter_nd_kernel<<<1, 1, 0, dev.cuda_stream()>>>(g, tuples, ip, static_cast<const S*>(upd.raw()),
                                                        static_cast<S*>(out.raw()), at_.red, dev.error_slot(), rep);
      OTTER_CUDA_LAUNCH_CHECK();
    });
  }
};

template <typename T>
__global__ void space_depth_kernel(SpaceDepthGeom g, int64_t n, const T* x, T* out) {
  OTTER_GRID_STRIDE(i, n) { out[i] = x[space_depth_source(g, i)]; }
}

struct CudaSpaceDepth {
  static void space_depth(KernelContext& ctx, const SpaceDepthGeom& g, const Tensor& x, Tensor& out) {
    const int64_t n = out.numel();
    dispatch_bytes(x.dtype(), [&](auto tag) {
      using T = typename decltype(tag)::type;
      space_depth_kernel<<<grid_for(n), kBlock, 0, stream_of(ctx)>>>(g, n, static_cast<const T*>(x.raw()),
                                                                     static_cast<T*>(out.raw()));
      OTTER_CUDA_LAUNCH_CHECK();
    });
  }
};
using SpaceDepthKernel = SpaceDepthKernelT<CudaSpaceDepth>;

}  // namespace

KernelFactory gather_scatter_kernel(const std::string& op) {
  if (op == "DepthToSpace") return node_kernel<SpaceDepthKernel>(true);
  if (op == "SpaceToDepth") return node_kernel<SpaceDepthKernel>(false);
  if (op == "GatherElements") return node_kernel<ElementsKernel>(false);
  if (op == "ScatterElements") return node_kernel<ElementsKernel>(true);
  if (op == "GatherND") return node_kernel<NdKernel>(false);
  if (op == "ScatterND") return node_kernel<NdKernel>(true);
  fail("gather_scatter_kernel: no CUDA kernel for ", op);
}

}  // namespace otter::cuda
