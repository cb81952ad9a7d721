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

class ElementsKernel : public Kernel {
 public:
  ElementsKernel(const Node& n, bool scatter)
      : scatter_(scatter),
        axis_(n.attr_i("axis", 0)),
        red_(scatter ? scatter_reduction(n) : ScatterReduction::kNone),
        reporter_(n, out_of_range) {}
  void run(KernelContext& ctx) override {
    const Tensor& x = ctx.input(0);
    const Tensor& idx = ctx.input(1);
    if (idx.dtype() != DataType::kInt64 && idx.dtype() != DataType::kInt32)
      ctx.error(str_cat("indices must be int64 or int32, got ", idx.describe()));
    ElementsGeom g;
    if (std::string e = make_elements_geom(x.dims(), idx.dims(), axis_, &g); !e.empty())
      ctx.error(str_cat(e, " (data ", x.describe(), ", indices ", idx.describe(), ")"));
    CudaDevice& dev = device_of(ctx);
    const int rep = reporter_.id(dev);
    const int64_t n = idx.numel();
    Tensor& out = ctx.allocate_output(0, x.dtype(), scatter_ ? x.dims() : idx.dims());
    auto with_index = [&](auto body) {
      if (idx.dtype() == DataType::kInt64)
        body(static_cast<const int64_t*>(idx.raw()));
      else
        body(static_cast<const int32_t*>(idx.raw()));
    };
    if (!scatter_) {
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
    scatter_typed(ctx, x, out, red_, [&](auto tag) {
      using S = typename decltype(tag)::type;
      if (n == 0) return;
      with_index([&](auto* ip) {
        scatter_elements_kernel<<<1, 1, 0, dev.cuda_stream()>>>(
            g, n, ip, static_cast<const S*>(upd.raw()), static_cast<S*>(out.raw()), red_, dev.error_slot(), rep);
        OTTER_CUDA_LAUNCH_CHECK();
      });
    });
  }

 private:
  bool scatter_;
  int64_t axis_;
  ScatterReduction red_;
  ErrorReporter reporter_;
};

class NdKernel : public Kernel {
 public:
  NdKernel(const Node& n, bool scatter)
      : scatter_(scatter),
        batch_dims_(scatter ? 0 : n.attr_i("batch_dims", 0)),
        red_(scatter ? scatter_reduction(n) : ScatterReduction::kNone),
        reporter_(n, out_of_range) {}
  void run(KernelContext& ctx) override {
    const Tensor& x = ctx.input(0);
    const Tensor& idx = ctx.input(1);
    if (idx.dtype() != DataType::kInt64) ctx.error(str_cat("indices must be int64, got ", idx.describe()));
    NdGeom g;
    if (std::string e = make_nd_geom(x.dims(), idx.dims(), batch_dims_, &g); !e.empty())
      ctx.error(str_cat(e, " (data ", x.describe(), ", indices ", idx.describe(), ")"));
    CudaDevice& dev = device_of(ctx);
    const int rep = reporter_.id(dev);
    const int64_t tuples = g.batches * g.tuples;
    const auto* ip = static_cast<const int64_t*>(idx.raw());
    if (!scatter_) {
      Tensor& out = ctx.allocate_output(0, x.dtype(), nd_gather_dims(x.dims(), idx.dims(), batch_dims_));
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
    const Tensor& upd = ctx.input(2);
    if (upd.dims() != nd_gather_dims(x.dims(), idx.dims(), 0) || upd.dtype() != x.dtype())
      ctx.error(str_cat("updates ", upd.describe(), " must have shape indices[:-1] + data[k:] and the type of data"));
    Tensor& out = ctx.allocate_output(0, x.dtype(), x.dims());
    scatter_typed(ctx, x, out, red_, [&](auto tag) {
      using S = typename decltype(tag)::type;
      if (tuples == 0) return;
      scatter_nd_kernel<<<1, 1, 0, dev.cuda_stream()>>>(g, tuples, ip, static_cast<const S*>(upd.raw()),
                                                        static_cast<S*>(out.raw()), red_, dev.error_slot(), rep);
      OTTER_CUDA_LAUNCH_CHECK();
    });
  }

 private:
  bool scatter_;
  int64_t batch_dims_;
  ScatterReduction red_;
  ErrorReporter reporter_;
};

template <typename T>
__global__ void space_depth_kernel(SpaceDepthGeom g, int64_t n, const T* x, T* out) {
  OTTER_GRID_STRIDE(i, n) { out[i] = x[space_depth_source(g, i)]; }
}

class SpaceDepthKernel : public Kernel {
 public:
  SpaceDepthKernel(const Node& n, bool to_space)
      : to_space_(to_space), crd_(n.attr_s("mode", "DCR") == "CRD"), b_(n.attr_i("blocksize", 0)) {}
  void run(KernelContext& ctx) override {
    const Tensor& x = ctx.input(0);
    SpaceDepthGeom g;
    std::vector<int64_t> od;
    if (std::string e = make_space_depth_geom(x.dims(), b_, to_space_, crd_, &g, &od); !e.empty())
      ctx.error(str_cat(e, " (input ", x.describe(), ", blocksize ", b_, ")"));
    Tensor& out = ctx.allocate_output(0, x.dtype(), od);
    const int64_t n = out.numel();
    if (n == 0) return;
    dispatch_bytes(x.dtype(), [&](auto tag) {
      using T = typename decltype(tag)::type;
      space_depth_kernel<<<grid_for(n), kBlock, 0, stream_of(ctx)>>>(g, n, static_cast<const T*>(x.raw()),
                                                                     static_cast<T*>(out.raw()));
      OTTER_CUDA_LAUNCH_CHECK();
    });
  }

 private:
  bool to_space_, crd_;
  int64_t b_;
};

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
