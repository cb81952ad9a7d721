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

struct CudaResize {
  static std::vector<int64_t> ints(const KernelContext& ctx, int i, const char* what) { return host_ints(ctx, i, what); }
  static Tensor host(const KernelContext& ctx, int i) { return host_tensor(ctx, i); }
  static void resize(KernelContext& ctx, const ResizeGeom& g, const Tensor& x, Tensor& y) {
    const int64_t n = y.numel();
    if (n == 0) return;
    dispatch_numeric(x.dtype(), [&](auto tag) {
      using S = typename decltype(tag)::type;
      resize_kernel<S>
          <<<grid_for(n), kBlock, 0, stream_of(ctx)>>>(g, n, static_cast<const S*>(x.raw()), static_cast<S*>(y.raw()));
      OTTER_CUDA_LAUNCH_CHECK();
    });
  }
  static void resize_grad(KernelContext& ctx, const ResizeGeom& g, const Tensor& dy, Tensor& dx) {
    Tensor acc = dx.dtype() == DataType::kFloat32 ? dx : ctx.scratch(DataType::kFloat32, dx.dims());
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
};

}  // namespace

KernelFactory resize_kernel(const std::string& op) {
  if (op == "Resize") return node_kernel<ResizeKernelT<CudaResize, false>>();
  if (op == "ResizeGrad") return node_kernel<ResizeKernelT<CudaResize, true>>();
  fail("resize_kernel: no CUDA kernel for ", op);
}

}  // namespace otter::cuda
