// CUDA kernels of Resize (graph/ops/resize.cc) and ai.otter.ResizeGrad: one thread per output
// element visits its taps with the CPU kernels' arithmetic (kernels/common/resize.h); the gradient
// adds dY times each weight into an f32 accumulator with atomics, then converts it to dX's type.
#include "kernels/common/resize.h"
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/cuda_kernels.h"

namespace otter::cuda {
namespace {

template <typename S>
__global__ void resize_kernel(ResizeGeom g, int64_t n, const S* x, S* y) {
  OTTER_GRID_STRIDE(o, n) {
    double acc = 0;
    if (!resize_visit(g, o, [&](int64_t off, double w) { acc += w * static_cast<double>(load_value(x[off])); }))
      acc = g.extrapolation;
    if constexpr (std::is_integral_v<S>) acc = rint(acc);
    y[o] = store_value<S>(static_cast<compute_type<S>>(acc));
  }
}

template <typename S>
__global__ void resize_grad_kernel(ResizeGeom g, int64_t n, const S* dy, float* acc) {
  OTTER_GRID_STRIDE(o, n) {
    const float v = static_cast<float>(load_value(dy[o]));
    resize_visit(g, o, [&](int64_t off, double w) { atomicAdd(acc + off, static_cast<float>(w) * v); });
  }
}

std::vector<double> host_doubles(const KernelContext& ctx, int i) {
  std::vector<double> v;
  if (!ctx.has_input(i)) return v;
  const Tensor t = host_tensor(ctx, i);
  for (int64_t k = 0; k < t.numel(); ++k) v.push_back(t.get_as_double(k));
  return v;
}

ResizeGeom geom_of(const KernelContext& ctx, const ResizeAttrs& a, const std::vector<int64_t>& in, int first) {
  std::vector<int64_t> sizes;
  if (ctx.has_input(first + 2)) sizes = host_ints(ctx, first + 2, "sizes");
  ResizeGeom g;
  const std::string e = make_resize_geom(a, in, host_doubles(ctx, first), host_doubles(ctx, first + 1), sizes, &g);
  if (!e.empty()) ctx.error(str_cat(e, " (input dims ", dims_to_string(in), ")"));
  return g;
}

class ResizeKernel : public Kernel {
 public:
  explicit ResizeKernel(const Node& n) : a_(resize_attrs(n)) {}
  void run(KernelContext& ctx) override {
    const Tensor& x = ctx.input(0);
    const ResizeGeom g = geom_of(ctx, a_, x.dims(), 1);
    Tensor& y = ctx.allocate_output(0, x.dtype(), std::vector<int64_t>(g.out, g.out + g.rank));
    const int64_t n = y.numel();
    if (n == 0) return;
    dispatch_numeric(x.dtype(), [&](auto tag) {
      using S = typename decltype(tag)::type;
      resize_kernel<S>
          <<<grid_for(n), kBlock, 0, stream_of(ctx)>>>(g, n, static_cast<const S*>(x.raw()), static_cast<S*>(y.raw()));
      OTTER_CUDA_LAUNCH_CHECK();
    });
  }

 private:
  ResizeAttrs a_;
};

class ResizeGradKernel : public Kernel {
 public:
  explicit ResizeGradKernel(const Node& n) : a_(resize_attrs(n)) {}
  void run(KernelContext& ctx) override {
    const Tensor& dy = ctx.input(0);
    const std::vector<int64_t> in = host_ints(ctx, 1, "shape");
    const ResizeGeom g = geom_of(ctx, a_, in, 2);
    if (dy.dims() != std::vector<int64_t>(g.out, g.out + g.rank))
      ctx.error(str_cat("dY ", dy.describe(), " does not match the forward output"));
    Tensor& dx = ctx.allocate_output(0, dy.dtype(), in);
    Tensor acc = dx.dtype() == DataType::kFloat32 ? dx : ctx.scratch(DataType::kFloat32, in);
    if (acc.nbytes()) OTTER_CUDA_CHECK(cudaMemsetAsync(acc.raw(), 0, acc.nbytes(), stream_of(ctx)));
    const int64_t n = dy.numel();
    if (n > 0)
      dispatch_float(dy.dtype(), [&](auto tag) {
        using S = typename decltype(tag)::type;
        resize_grad_kernel<S><<<grid_for(n), kBlock, 0, stream_of(ctx)>>>(g, n, static_cast<const S*>(dy.raw()),
                                                                          static_cast<float*>(acc.raw()));
        OTTER_CUDA_LAUNCH_CHECK();
      });
    if (dx.dtype() != DataType::kFloat32) cast_tensor(ctx, acc, dx);
  }

 private:
  ResizeAttrs a_;
};

}  // namespace

KernelFactory resize_kernel(const std::string& op) {
  if (op == "Resize") return node_kernel<ResizeKernel>();
  if (op == "ResizeGrad") return node_kernel<ResizeGradKernel>();
  fail("resize_kernel: no CUDA kernel for ", op);
}

}  // namespace otter::cuda
