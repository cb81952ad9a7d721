// ai.otter.BiasGelu and BiasGeluGrad on CUDA (made by the fuse-bias-gelu pass, passes/fuse_bias_gelu.h),
// and ai.otter.BiasAdd (made by cast-elimination):
// one grid-stride pass each over the shared functors of kernels/common/elementwise_grad.h.
#include "kernels/common/checks.h"
#include "kernels/common/elementwise_grad.h"
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/cuda_kernels.h"

namespace otter::cuda {
namespace {

// BiasGelu / BiasGeluGrad: the bias element of flat index i is b[i % cols] (cols 0: no bias). S is
// X's (and dY's) storage type, B the bias's: S, or float for a half X (graph/ops/elementwise.cc);
// BiasGeluGrad stores dX as B.
template <typename S, typename B>
__global__ void bias_gelu_kernel(int64_t n, const S* x, const B* b, int64_t cols, S* y) {
  using C = compute_type<S>;
  OTTER_GRID_STRIDE(i, n) {
    y[i] = store_value<S>(BiasGeluOp{}(load_value(x[i]), b ? C(load_value(b[i % cols])) : C(0)));
  }
}
template <typename S, typename B>
__global__ void bias_gelu_grad_kernel(int64_t n, const S* dy, const S* x, const B* b, int64_t cols, B* dx) {
  using C = compute_type<S>;
  OTTER_GRID_STRIDE(i, n) {
    dx[i] = store_value<B>(
        BiasGeluGradOp{}(load_value(dy[i]), load_value(x[i]), b ? C(load_value(b[i % cols])) : C(0)));
  }
}

// ai.otter.BiasAdd: Y = X + bias in X's compute type, stored as O (X's type, or float).
template <typename S, typename B, typename O>
__global__ void bias_add_kernel(int64_t n, const S* x, const B* b, int64_t cols, O* y) {
  using C = compute_type<S>;
  OTTER_GRID_STRIDE(i, n) { y[i] = store_value<O>(AddOp{}(load_value(x[i]), C(load_value(b[i % cols])))); }
}

// ai.otter.BiasAdd(X, bias) {to?} (made by cast-elimination, passes/cast_elimination.h).
class BiasAddKernel : public Kernel {
 public:
  explicit BiasAddKernel(const Node& n) : to_(bias_add_to_attr(n)) {}
  void run(KernelContext& ctx) override {
    const Tensor& x = ctx.input(0);
    const auto [cols, to] = check_bias_add(ctx, to_);
    const bool float_bias = ctx.input(1).dtype() != x.dtype();
    Tensor& out = ctx.allocate_output(0, to, x.dims());
    const int64_t n = x.numel();
    if (n == 0) return;
    dispatch_float(x.dtype(), [&](auto tag) {
      using S = typename decltype(tag)::type;
      if (float_bias)
        launch<S, float>(ctx, x, cols, out, n, to != x.dtype());
      else
        launch<S, S>(ctx, x, cols, out, n, to != x.dtype());
    });
  }

 private:
  template <typename S, typename B>
  void launch(KernelContext& ctx, const Tensor& x, int64_t cols, Tensor& out, int64_t n, bool float_out) {
    const S* px = static_cast<const S*>(x.raw());
    const B* b = static_cast<const B*>(ctx.input(1).raw());
    if (float_out)
      bias_add_kernel<S, B, float><<<grid_for(n), kBlock, 0, stream_of(ctx)>>>(n, px, b, cols,
                                                                                static_cast<float*>(out.raw()));
    else
      bias_add_kernel<S, B, S><<<grid_for(n), kBlock, 0, stream_of(ctx)>>>(n, px, b, cols, static_cast<S*>(out.raw()));
    OTTER_CUDA_LAUNCH_CHECK();
  }

  DataType to_;
};

// ai.otter.BiasGelu(X, bias?) -> Y = Gelu(X + bias) (made by the fuse-bias-gelu pass), and
// BiasGeluGrad(dY, X, bias?) -> dX = dY Gelu'(X + bias): one pass each, no broadcast indexer (the
// bias is 1-D along X's last axis, checked on the host).
class BiasGeluKernel : public Kernel {
 public:
  BiasGeluKernel(const Node&, bool grad) : grad_(grad) {}
  void run(KernelContext& ctx) override {
    const int xi = grad_ ? 1 : 0;
    const Tensor& x = ctx.input(xi);
    if (grad_) check_like(ctx, 1, ctx.input(0), "X");
    const int64_t cols = check_bias_gelu_bias(ctx, xi);
    const bool float_bias = cols && ctx.input(xi + 1).dtype() != x.dtype();
    const DataType out_type = grad_ && cols ? ctx.input(xi + 1).dtype() : x.dtype();
    Tensor& out = ctx.allocate_output(0, out_type, x.dims());
    const int64_t n = x.numel();
    if (n == 0) return;
    dispatch_float(x.dtype(), [&](auto tag) {
      using S = typename decltype(tag)::type;
      if (float_bias)
        launch<S, float>(ctx, x, cols, out, n);
      else
        launch<S, S>(ctx, x, cols, out, n);
    });
  }

 private:
  template <typename S, typename B>
  void launch(KernelContext& ctx, const Tensor& x, int64_t cols, Tensor& out, int64_t n) {
    const int xi = grad_ ? 1 : 0;
    const B* b = cols ? static_cast<const B*>(ctx.input(xi + 1).raw()) : nullptr;
    const S* px = static_cast<const S*>(x.raw());
    if (grad_ && cols)
      bias_gelu_grad_kernel<S, B><<<grid_for(n), kBlock, 0, stream_of(ctx)>>>(
          n, static_cast<const S*>(ctx.input(0).raw()), px, b, cols, static_cast<B*>(out.raw()));
    else if (grad_)
      bias_gelu_grad_kernel<S, S><<<grid_for(n), kBlock, 0, stream_of(ctx)>>>(
          n, static_cast<const S*>(ctx.input(0).raw()), px, static_cast<const S*>(nullptr), 0,
          static_cast<S*>(out.raw()));
    else
      bias_gelu_kernel<S, B><<<grid_for(n), kBlock, 0, stream_of(ctx)>>>(n, px, b, cols, static_cast<S*>(out.raw()));
    OTTER_CUDA_LAUNCH_CHECK();
  }

  bool grad_;
};

}  // namespace

KernelFactory bias_gelu_kernel(const std::string& op) {
  if (op == "BiasAdd")
    return [](const Node& n) -> std::unique_ptr<Kernel> { return std::make_unique<BiasAddKernel>(n); };
  const bool grad = op == "BiasGeluGrad";
  if (op != "BiasGelu" && !grad) fail("bias_gelu_kernel: no CUDA kernel for ", op);
  return [grad](const Node& n) -> std::unique_ptr<Kernel> { return std::make_unique<BiasGeluKernel>(n, grad); };
}

}  // namespace otter::cuda
