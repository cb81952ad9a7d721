// CUDA kernels of the math op families (graph/ops/math.cc): trigonometric and hyperbolic
// functions, rounding, Sign, IsNaN / IsInf, the activations HardSigmoid ... Shrink, PRelu (slope
// broadcast onto X) and the ai.otter derivative ops <Op>Grad(dY, X). The per-element math is the
// functors of kernels/common/math.h, the same the CPU kernels run; half types compute in float.
#include "kernels/common/checks.h"
#include "kernels/common/math_attrs.h"
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/cuda_kernels.h"

namespace otter::cuda {
namespace {

template <typename S, typename O, typename F>
__global__ void map_kernel(int64_t n, const S* x, O* y, F f) {
  OTTER_GRID_STRIDE(i, n) { y[i] = store_value<O>(f(load_value(x[i]))); }
}

template <typename S, typename F>
__global__ void derivative_kernel(int64_t n, const S* dy, const S* x, S* dx, F f) {
  OTTER_GRID_STRIDE(i, n) { dx[i] = store_value<S>(f(load_value(dy[i]), load_value(x[i]))); }
}

template <typename S>
__global__ void prelu_kernel(int64_t n, const S* x, const S* slope, S* y, StridedIndexer<2> ix) {
  OTTER_GRID_STRIDE(i, n) {
    int64_t off[2];
    ix.offsets(i, off);
    y[i] = store_value<S>(PReluOp{}(load_value(x[off[0]]), load_value(slope[off[1]])));
  }
}

// y = f(x); bool output for the classification ops, else x's dtype.
template <typename F, bool kNumeric, bool kBoolOut>
class MapKernel : public Kernel {
 public:
  explicit MapKernel(const Node& n) : f_(functor_from<F>(n)) {}
  void run(KernelContext& ctx) override {
    const Tensor& x = ctx.input(0);
    Tensor& y = ctx.allocate_output(0, kBoolOut ? DataType::kBool : x.dtype(), x.dims());
    const int64_t n = x.numel();
    if (n == 0) return;
    auto body = [&](auto tag) {
      using S = typename decltype(tag)::type;
      using O = std::conditional_t<kBoolOut, bool, S>;
      map_kernel<S, O, F>
          <<<grid_for(n), kBlock, 0, stream_of(ctx)>>>(n, static_cast<const S*>(x.raw()), static_cast<O*>(y.raw()), f_);
      OTTER_CUDA_LAUNCH_CHECK();
    };
    if constexpr (kNumeric)
      dispatch_numeric(x.dtype(), body);
    else
      dispatch_float(x.dtype(), body);
  }

 private:
  F f_;
};

template <typename F>
class DerivativeKernel : public Kernel {
 public:
  explicit DerivativeKernel(const Node& n) : f_(functor_from<F>(n)) {}
  void run(KernelContext& ctx) override {
    const Tensor& dy = ctx.input(0);
    const Tensor& x = ctx.input(1);
    check_derivative_inputs(ctx);
    Tensor& dx = ctx.allocate_output(0, dy.dtype(), dy.dims());
    const int64_t n = dy.numel();
    if (n == 0) return;
    dispatch_float(dy.dtype(), [&](auto tag) {
      using S = typename decltype(tag)::type;
      derivative_kernel<S, F><<<grid_for(n), kBlock, 0, stream_of(ctx)>>>(
          n, static_cast<const S*>(dy.raw()), static_cast<const S*>(x.raw()), static_cast<S*>(dx.raw()), f_);
      OTTER_CUDA_LAUNCH_CHECK();
    });
  }

 private:
  F f_;
};

class PReluKernel : public Kernel {
 public:
  explicit PReluKernel(const Node&) {}
  void run(KernelContext& ctx) override {
    const Tensor& x = ctx.input(0);
    const Tensor& slope = ctx.input(1);
    check_same_dtype(ctx, 0, 1);
    bool ok = slope.rank() <= x.rank();
    for (int64_t i = 1; ok && i <= slope.rank(); ++i) {
      const int64_t d = slope.dims()[slope.rank() - i];
      ok = d == 1 || d == x.dims()[x.rank() - i];
    }
    if (!ok) ctx.error(str_cat("slope ", slope.describe(), " does not broadcast onto X ", x.describe()));
    Tensor& y = ctx.allocate_output(0, x.dtype(), x.dims());
    const int64_t n = x.numel();
    if (n == 0) return;
    const auto ix =
        make_indexer<2>(x.dims(), {broadcast_strides(x.dims(), x.dims()), broadcast_strides(slope.dims(), x.dims())});
    dispatch_numeric(x.dtype(), [&](auto tag) {
      using S = typename decltype(tag)::type;
      prelu_kernel<S><<<grid_for(n), kBlock, 0, stream_of(ctx)>>>(
          n, static_cast<const S*>(x.raw()), static_cast<const S*>(slope.raw()), static_cast<S*>(y.raw()), ix);
      OTTER_CUDA_LAUNCH_CHECK();
    });
  }
};

template <typename K>
KernelFactory make() {
  return [](const Node& n) -> std::unique_ptr<Kernel> { return std::make_unique<K>(n); };
}

}  // namespace

KernelFactory math_kernel(const std::string& op) {
#define OTTER_FLOAT(Name) \
  if (op == #Name) return make<MapKernel<Name##Op, false, false>>();
#define OTTER_NUMERIC(Name) \
  if (op == #Name) return make<MapKernel<Name##Op, true, false>>();
#define OTTER_CLASSIFY(Name) \
  if (op == #Name) return make<MapKernel<Name##Op, false, true>>();
#define OTTER_DERIVATIVE(Name) \
  if (op == #Name "Grad") return make<DerivativeKernel<Name##GradOp>>();
  OTTER_MATH_ALL_OPS(OTTER_FLOAT, OTTER_NUMERIC, OTTER_CLASSIFY, OTTER_DERIVATIVE)
#undef OTTER_FLOAT
#undef OTTER_NUMERIC
#undef OTTER_CLASSIFY
#undef OTTER_DERIVATIVE
  if (op == "PRelu") return make<PReluKernel>();
  fail("math_kernel: no CUDA kernel for ", op);
}

}  // namespace otter::cuda
