// CUDA element-wise kernels: arithmetic, activations, comparisons, logic, Clip, Pow, Where, Cast and
// the variadic Min/Max with numpy broadcasting, and the element-wise gradients (ReluGrad, ...,
// ClipGrad, DropoutGrad); the fused BiasGelu is in bias_gelu.cu. The per-element math is the shared
// functors of kernels/common/elementwise.h and elementwise_grad.h; half types compute in float.
#include <limits>

#include "kernels/common/elementwise_grad.h"
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/cuda_kernels.h"

namespace otter::cuda {
namespace {

// ---- kernels -----------------------------------------------------------------------------------

// out[i] = f(a, b) at the broadcast offsets of flat output index i.
template <typename S, typename O, typename F>
__global__ void binary_kernel(int64_t n, const S* a, const S* b, O* out, StridedIndexer<2> ix, F f) {
  OTTER_GRID_STRIDE(i, n) {
    int64_t off[2];
    ix.offsets(i, off);
    out[i] = store_value<O>(f(load_value(a[off[0]]), load_value(b[off[1]])));
  }
}

// Integer division: a zero divisor is reported (and gives 0) instead of being computed.
template <typename S>
__global__ void int_div_kernel(int64_t n, const S* a, const S* b, S* out, StridedIndexer<2> ix,
                               DeviceError* slot, int reporter) {
  OTTER_GRID_STRIDE(i, n) {
    int64_t off[2];
    ix.offsets(i, off);
    const S d = b[off[1]];
    if (d == S(0)) {
      report_error(slot, reporter, 1, off[1], 0, 0);
      out[i] = S(0);
    } else {
      out[i] = DivOp{}(a[off[0]], d);
    }
  }
}

template <typename S, typename F>
__global__ void unary_kernel(int64_t n, const S* x, S* y, F f) {
  OTTER_GRID_STRIDE(i, n) { y[i] = store_value<S>(f(load_value(x[i]))); }
}

// Clip with bounds lo/hi, replaced by *lo_p / *hi_p where those optional inputs are given.
template <typename S>
__global__ void clip_kernel(int64_t n, const S* x, S* y, compute_type<S> lo, compute_type<S> hi, const S* lo_p,
                            const S* hi_p) {
  const ClipOp<compute_type<S>> op{lo_p ? load_value(*lo_p) : lo, hi_p ? load_value(*hi_p) : hi};
  OTTER_GRID_STRIDE(i, n) { y[i] = store_value<S>(op(load_value(x[i]))); }
}

template <typename T>
__global__ void where_kernel(int64_t n, const bool* c, const T* x, const T* y, T* out, StridedIndexer<3> ix) {
  OTTER_GRID_STRIDE(i, n) {
    int64_t off[3];
    ix.offsets(i, off);
    out[i] = c[off[0]] ? x[off[1]] : y[off[2]];
  }
}

template <typename D, typename S>
__global__ void cast_kernel(int64_t n, const S* x, D* y) {
  OTTER_GRID_STRIDE(i, n) { y[i] = cast_value<D>(x[i]); }
}

// ---- launchers ---------------------------------------------------------------------------------

std::vector<int64_t> broadcast_or_fail(const KernelContext& ctx, const std::vector<const Tensor*>& ins) {
  size_t rank = 0;
  for (const Tensor* t : ins) rank = std::max(rank, static_cast<size_t>(t->rank()));
  std::vector<int64_t> out(rank, 1);
  for (const Tensor* t : ins) {
    const size_t off = rank - t->rank();
    for (int64_t i = 0; i < t->rank(); ++i) {
      const int64_t d = t->dims()[i];
      int64_t& o = out[off + i];
      if (d == o || d == 1) continue;
      if (o != 1) {
        std::string shapes;
        for (const Tensor* u : ins) shapes += (shapes.empty() ? "" : " and ") + dims_to_string(u->dims());
        ctx.error(str_cat("cannot broadcast shapes ", shapes));
      }
      o = d;
    }
  }
  return out;
}

StridedIndexer<2> indexer2(const Tensor& a, const Tensor& b, const std::vector<int64_t>& dims) {
  return make_indexer<2>(dims, {broadcast_strides(a.dims(), dims), broadcast_strides(b.dims(), dims)});
}

// out = f(a, b) broadcast; out may be a itself when a already has the output's dims.
template <typename S, typename O, typename F>
void launch_binary(const KernelContext& ctx, const Tensor& a, const Tensor& b, Tensor& out, F f) {
  const int64_t n = out.numel();
  if (n == 0) return;
  binary_kernel<S, O, F><<<grid_for(n), kBlock, 0, stream_of(ctx)>>>(
      n, static_cast<const S*>(a.raw()), static_cast<const S*>(b.raw()), static_cast<O*>(out.raw()),
      indexer2(a, b, out.dims()), f);
  OTTER_CUDA_LAUNCH_CHECK();
}

template <typename S>
void launch_int_div(const KernelContext& ctx, const Tensor& a, const Tensor& b, Tensor& out, ErrorReporter& rep) {
  const int64_t n = out.numel();
  if (n == 0) return;
  CudaDevice& dev = device_of(ctx);
  int_div_kernel<S><<<grid_for(n), kBlock, 0, dev.cuda_stream()>>>(
      n, static_cast<const S*>(a.raw()), static_cast<const S*>(b.raw()), static_cast<S*>(out.raw()),
      indexer2(a, b, out.dims()), dev.error_slot(), rep.id(dev));
  OTTER_CUDA_LAUNCH_CHECK();
}

template <typename S, typename F>
void launch_unary(const KernelContext& ctx, const Tensor& x, Tensor& y, F f) {
  const int64_t n = x.numel();
  if (n == 0) return;
  unary_kernel<S, F><<<grid_for(n), kBlock, 0, stream_of(ctx)>>>(n, static_cast<const S*>(x.raw()),
                                                                  static_cast<S*>(y.raw()), f);
  OTTER_CUDA_LAUNCH_CHECK();
}

// dst (of dtype D) = src converted element by element; same dtype is a copy.
void launch_cast(const KernelContext& ctx, const Tensor& src, Tensor& dst) {
  const int64_t n = src.numel();
  if (n == 0) return;
  if (src.dtype() == dst.dtype()) {
    device_of(ctx).copy_async(dst.raw(), src.raw(), src.nbytes());
    return;
  }
  dispatch_all(src.dtype(), [&](auto st) {
    using S = typename decltype(st)::type;
    dispatch_all(dst.dtype(), [&](auto dt) {
      using D = typename decltype(dt)::type;
      cast_kernel<D, S><<<grid_for(n), kBlock, 0, stream_of(ctx)>>>(n, static_cast<const S*>(src.raw()),
                                                                    static_cast<D*>(dst.raw()));
      OTTER_CUDA_LAUNCH_CHECK();
    });
  });
}

// ---- kernels by op -----------------------------------------------------------------------------

// Which storage types an op instantiates its functor for.
enum class Types { kFloat, kNumeric, kUnsigned, kAll, kBool };

template <Types Set, typename F>
decltype(auto) dispatch_set(DataType t, F&& f) {
  if constexpr (Set == Types::kFloat) return dispatch_float(t, std::forward<F>(f));
  else if constexpr (Set == Types::kNumeric) return dispatch_numeric(t, std::forward<F>(f));
  else if constexpr (Set == Types::kUnsigned) return dispatch_unsigned(t, std::forward<F>(f));
  else if constexpr (Set == Types::kAll) return dispatch_all(t, std::forward<F>(f));
  else {
    if (t != DataType::kBool) fail_dtype(t, "bool");
    return f(Tag<bool>{});
  }
}

template <typename F, Types Set, bool kBoolOut>
class BinaryKernel : public Kernel {
 public:
  explicit BinaryKernel(const Node& n)
      : div_reporter_(n, [](const DeviceError& e) { return str_cat("integer division by zero (divisor element ", e.a, ")"); }) {}
  void run(KernelContext& ctx) override {
    check_same_dtype(ctx, 0, 1);
    const Tensor& a = ctx.input(0);
    const Tensor& b = ctx.input(1);
    const auto dims = broadcast_or_fail(ctx, {&a, &b});
    dispatch_set<Set>(a.dtype(), [&](auto tag) {
      using S = typename decltype(tag)::type;
      if constexpr (kBoolOut) {
        launch_binary<S, bool>(ctx, a, b, ctx.allocate_output(0, DataType::kBool, dims), F{});
      } else if constexpr (std::is_same_v<F, DivOp> && std::is_integral_v<S>) {
        launch_int_div<S>(ctx, a, b, ctx.allocate_output(0, a.dtype(), dims), div_reporter_);
      } else {
        launch_binary<S, S>(ctx, a, b, ctx.allocate_output(0, a.dtype(), dims), F{});
      }
    });
  }

 private:
  ErrorReporter div_reporter_;
};

template <typename F, Types Set>
class UnaryKernel : public Kernel {
 public:
  UnaryKernel(const Node&, F f) : f_(f) {}
  void run(KernelContext& ctx) override {
    const Tensor& x = ctx.input(0);
    dispatch_set<Set>(x.dtype(), [&](auto tag) {
      using S = typename decltype(tag)::type;
      launch_unary<S>(ctx, x, ctx.allocate_output(0, x.dtype(), x.dims()), f_);
    });
  }

 private:
  F f_;
};

// Sum / Mean / Min / Max over any number of broadcast inputs, folded pairwise into the output
// (as on the CPU); Mean then scales by 1/n.
template <typename F, bool kMean = false>
class VariadicKernel : public Kernel {
 public:
  explicit VariadicKernel(const Node&) {}
  void run(KernelContext& ctx) override {
    const int n = ctx.num_inputs();
    if (n < 1) ctx.error("needs at least one input");
    std::vector<const Tensor*> ins;
    for (int i = 0; i < n; ++i) {
      check_same_dtype(ctx, 0, i);
      ins.push_back(&ctx.input(i));
    }
    const auto dims = broadcast_or_fail(ctx, ins);
    const Tensor& a = ctx.input(0);
    dispatch_numeric(a.dtype(), [&](auto tag) {
      using S = typename decltype(tag)::type;
      Tensor& out = ctx.allocate_output(0, a.dtype(), dims);
      if (n == 1) {
        device_of(ctx).copy_async(out.raw(), a.raw(), a.nbytes());
        return;
      }
      launch_binary<S, S>(ctx, a, ctx.input(1), out, F{});
      for (int i = 2; i < n; ++i) launch_binary<S, S>(ctx, out, ctx.input(i), out, F{});
      if constexpr (kMean) launch_unary<S>(ctx, out, out, ScaleOp{1.f / static_cast<float>(n)});
    });
  }
};

class CastKernel : public Kernel {
 public:
  explicit CastKernel(const Node& n) {
    if (n.op_type() == "CastLike") return;  // the type of input 1, at run time
    const int64_t code = n.attr_i("to", -1);
    to_ = dtype_from_onnx(static_cast<int>(code));
    if (to_ == DataType::kUndefined || to_ == DataType::kFloat64)
      fail(n.describe(), ": Cast to ", onnx_dtype_name(static_cast<int>(code)), " is not supported on CUDA");
  }
  void run(KernelContext& ctx) override {
    const Tensor& x = ctx.input(0);
    const DataType to = ctx.num_inputs() > 1 ? ctx.input(1).dtype() : to_;
    if (to == DataType::kFloat64) ctx.error("CastLike to f64 is not supported on CUDA");
    launch_cast(ctx, x, ctx.allocate_output(0, to, x.dims()));
  }

 private:
  DataType to_ = DataType::kUndefined;
};

// Pow: the same numeric type on both sides, or a float base with an exponent of another numeric
// type (converted to the base type first, as the CPU kernel does).
class PowKernel : public Kernel {
 public:
  explicit PowKernel(const Node&) {}
  void run(KernelContext& ctx) override {
    const Tensor& a = ctx.input(0);
    const Tensor& b = ctx.input(1);
    const auto dims = broadcast_or_fail(ctx, {&a, &b});
    Tensor e = b;
    if (b.dtype() != a.dtype()) {
      if (!is_float(a.dtype()))
        ctx.error(str_cat("an integer base needs an exponent of its type on CUDA, got ", a.describe(), " ^ ",
                          b.describe()));
      e = ctx.scratch(a.dtype(), b.dims());
      launch_cast(ctx, b, e);
    }
    dispatch_numeric(a.dtype(), [&](auto tag) {
      using S = typename decltype(tag)::type;
      launch_binary<S, S>(ctx, a, e, ctx.allocate_output(0, a.dtype(), dims), PowOp{});
    });
  }
};

class ClipKernel : public Kernel {
 public:
  explicit ClipKernel(const Node&) {}
  void run(KernelContext& ctx) override {
    const Tensor& x = ctx.input(0);
    check_clip_bounds(ctx);
    dispatch_numeric(x.dtype(), [&](auto tag) {
      using S = typename decltype(tag)::type;
      using C = compute_type<S>;
      C lo = std::numeric_limits<C>::lowest(), hi = std::numeric_limits<C>::max();
      if constexpr (std::is_floating_point_v<C>) {
        lo = -std::numeric_limits<C>::infinity();
        hi = std::numeric_limits<C>::infinity();
      }
      const S* lo_p = ctx.has_input(1) ? static_cast<const S*>(ctx.input(1).raw()) : nullptr;
      const S* hi_p = ctx.has_input(2) ? static_cast<const S*>(ctx.input(2).raw()) : nullptr;
      Tensor& y = ctx.allocate_output(0, x.dtype(), x.dims());
      const int64_t n = x.numel();
      if (n == 0) return;
      clip_kernel<S><<<grid_for(n), kBlock, 0, stream_of(ctx)>>>(n, static_cast<const S*>(x.raw()),
                                                                  static_cast<S*>(y.raw()), lo, hi, lo_p, hi_p);
      OTTER_CUDA_LAUNCH_CHECK();
    });
  }
};

class WhereKernel : public Kernel {
 public:
  explicit WhereKernel(const Node&) {}
  void run(KernelContext& ctx) override {
    const Tensor& c = ctx.input(0);
    const Tensor& x = ctx.input(1);
    const Tensor& y = ctx.input(2);
    check_where_inputs(ctx);
    const auto dims = broadcast_or_fail(ctx, {&c, &x, &y});
    Tensor& out = ctx.allocate_output(0, x.dtype(), dims);
    const int64_t n = out.numel();
    if (n == 0) return;
    const auto ix = make_indexer<3>(dims, {broadcast_strides(c.dims(), dims), broadcast_strides(x.dims(), dims),
                                           broadcast_strides(y.dims(), dims)});
    dispatch_bytes(x.dtype(), [&](auto tag) {
      using T = typename decltype(tag)::type;
      where_kernel<T><<<grid_for(n), kBlock, 0, stream_of(ctx)>>>(
          n, static_cast<const bool*>(c.raw()), static_cast<const T*>(x.raw()), static_cast<const T*>(y.raw()),
          static_cast<T*>(out.raw()), ix);
      OTTER_CUDA_LAUNCH_CHECK();
    });
  }
};

// ---- gradients (ai.otter) ----------------------------------------------------------------------

// dX = F(dY, V) element by element, V the forward input or output the derivative reads.
template <typename F>
class ActivationGradKernel : public Kernel {
 public:
  ActivationGradKernel(const Node&, F f) : f_(f) {}
  void run(KernelContext& ctx) override {
    const Tensor& dy = ctx.input(0);
    check_like(ctx, 1, dy, "forward value");
    dispatch_float(dy.dtype(), [&](auto tag) {
      using S = typename decltype(tag)::type;
      launch_binary<S, S>(ctx, dy, ctx.input(1), ctx.allocate_output(0, dy.dtype(), dy.dims()), f_);
    });
  }

 private:
  F f_;
};

constexpr int kClipGradBlocks = 256;

// dX where the forward Clip returned x, and per-block sums of dY where it returned min / max
// (partial[2 * block + 0 / 1], double).
template <typename S>
__global__ void clip_grad_kernel(int64_t n, const S* dy, const S* x, S* dx, compute_type<S> lo, compute_type<S> hi,
                                 const S* lo_p, const S* hi_p, double* partial) {
  const ClipGradOp<compute_type<S>> op{lo_p ? load_value(*lo_p) : lo, hi_p ? load_value(*hi_p) : hi};
  double below = 0, above = 0;
  OTTER_GRID_STRIDE(i, n) {
    const int src = op.source(load_value(x[i]));
    const compute_type<S> g = load_value(dy[i]);
    if (dx) dx[i] = store_value<S>(src == 0 ? g : compute_type<S>(0));
    if (src == 1) below += static_cast<double>(g);
    if (src == 2) above += static_cast<double>(g);
  }
  below = block_reduce(below, SumOp{}, 0.0);
  above = block_reduce(above, SumOp{}, 0.0);
  if (threadIdx.x == 0) {
    partial[2 * blockIdx.x] = below;
    partial[2 * blockIdx.x + 1] = above;
  }
}

// One block: the partial sums in a fixed order into the dMin / dMax scalars (either may be null).
template <typename S>
__global__ void clip_grad_total_kernel(const double* partial, int blocks, S* dmin, S* dmax) {
  double below = 0, above = 0;
  for (int b = threadIdx.x; b < blocks; b += blockDim.x) {
    below += partial[2 * b];
    above += partial[2 * b + 1];
  }
  below = block_reduce(below, SumOp{}, 0.0);
  above = block_reduce(above, SumOp{}, 0.0);
  if (threadIdx.x == 0) {
    if (dmin) *dmin = store_value<S>(static_cast<compute_type<S>>(below));
    if (dmax) *dmax = store_value<S>(static_cast<compute_type<S>>(above));
  }
}

// ClipGrad(dY, X, min?, max?) -> dX?, dMin?, dMax?: each element's gradient goes to whichever of
// x, min, max the forward returned; dMin / dMax are sums.
class ClipGradKernel : public Kernel {
 public:
  explicit ClipGradKernel(const Node&) {}
  void run(KernelContext& ctx) override {
    const Tensor& dy = ctx.input(0);
    check_clip_grad_inputs(ctx);
    dispatch_float(dy.dtype(), [&](auto tag) {
      using S = typename decltype(tag)::type;
      using C = compute_type<S>;
      auto in = [&](int i) { return ctx.has_input(i) ? static_cast<const S*>(ctx.input(i).raw()) : nullptr; };
      auto out = [&](int i, const std::vector<int64_t>& dims) {
        return ctx.has_output(i) ? static_cast<S*>(ctx.allocate_output(i, dy.dtype(), dims).raw()) : nullptr;
      };
      S* dx = out(0, dy.dims());
      S* dmin = ctx.has_input(2) ? out(1, ctx.input(2).dims()) : nullptr;
      S* dmax = ctx.has_input(3) ? out(2, ctx.input(3).dims()) : nullptr;
      Tensor partial = ctx.scratch(DataType::kFloat64, {2 * kClipGradBlocks});
      const cudaStream_t s = stream_of(ctx);
      clip_grad_kernel<S><<<kClipGradBlocks, kBlock, 0, s>>>(
          dy.numel(), static_cast<const S*>(dy.raw()), static_cast<const S*>(ctx.input(1).raw()), dx,
          -std::numeric_limits<C>::infinity(), std::numeric_limits<C>::infinity(), in(2), in(3),
          static_cast<double*>(partial.raw()));
      OTTER_CUDA_LAUNCH_CHECK();
      if (!dmin && !dmax) return;
      clip_grad_total_kernel<S><<<1, kBlock, 0, s>>>(static_cast<const double*>(partial.raw()), kClipGradBlocks, dmin, dmax);
      OTTER_CUDA_LAUNCH_CHECK();
    });
  }
};

template <typename S>
__global__ void dropout_grad_kernel(int64_t n, const S* dy, const bool* mask, S* dx, float scale) {
  OTTER_GRID_STRIDE(i, n) { dx[i] = store_value<S>(DropoutGradOp{}(load_value(dy[i]), mask[i], scale)); }
}

// DropoutGrad(dY, mask, ratio?, training_mode?): dY * mask / (1 - ratio) in training mode, dY
// otherwise (the forward was the identity).
class DropoutGradKernel : public Kernel {
 public:
  explicit DropoutGradKernel(const Node&) {}
  void run(KernelContext& ctx) override {
    const Tensor& dy = ctx.input(0);
    const Tensor& mask = ctx.input(1);
    if (mask.dtype() != DataType::kBool || mask.dims() != dy.dims())
      ctx.error(str_cat("mask ", mask.describe(), " must be bool of dY's shape ", dy.describe()));
    const double ratio = ctx.has_input(2) ? host_scalar(ctx, 2, "ratio") : 0.5;
    const bool training = ctx.has_input(3) && host_scalar(ctx, 3, "training_mode") != 0;
    Tensor& dx = ctx.allocate_output(0, dy.dtype(), dy.dims());
    if (!training || ratio == 0) {
      device_of(ctx).copy_async(dx.raw(), dy.raw(), dy.nbytes());
      return;
    }
    const int64_t n = dy.numel();
    if (n == 0) return;
    dispatch_float(dy.dtype(), [&](auto tag) {
      using S = typename decltype(tag)::type;
      dropout_grad_kernel<S><<<grid_for(n), kBlock, 0, stream_of(ctx)>>>(
          n, static_cast<const S*>(dy.raw()), static_cast<const bool*>(mask.raw()), static_cast<S*>(dx.raw()),
          static_cast<float>(1.0 / (1.0 - ratio)));
      OTTER_CUDA_LAUNCH_CHECK();
    });
  }
};

template <typename K, typename... Args>
KernelFactory make(Args... args) {
  return [=](const Node& n) -> std::unique_ptr<Kernel> { return std::make_unique<K>(n, args...); };
}

template <typename F, Types Set>
KernelFactory unary() {
  return make<UnaryKernel<F, Set>>(F{});
}

}  // namespace

namespace {

// The element-wise gradient ops (ai.otter); an empty factory for any other op.
KernelFactory gradient_kernel(const std::string& op) {
  if (op == "ReluGrad") return make<ActivationGradKernel<ReluGradOp>>(ReluGradOp{});
  if (op == "SigmoidGrad") return make<ActivationGradKernel<SigmoidGradOp>>(SigmoidGradOp{});
  if (op == "TanhGrad") return make<ActivationGradKernel<TanhGradOp>>(TanhGradOp{});
  if (op == "ErfGrad") return make<ActivationGradKernel<ErfGradOp>>(ErfGradOp{});
  if (op == "SoftplusGrad") return make<ActivationGradKernel<SoftplusGradOp>>(SoftplusGradOp{});
  if (op == "SoftsignGrad") return make<ActivationGradKernel<SoftsignGradOp>>(SoftsignGradOp{});
  if (op == "AbsGrad") return make<ActivationGradKernel<AbsGradOp>>(AbsGradOp{});
  if (op == "LeakyReluGrad")
    return [](const Node& n) -> std::unique_ptr<Kernel> {
      return std::make_unique<ActivationGradKernel<LeakyReluGradOp>>(n, LeakyReluGradOp{n.attr_f("alpha", 0.01f)});
    };
  if (op == "GeluGrad")
    return [](const Node& n) -> std::unique_ptr<Kernel> {
      const std::string a = n.attr_s("approximate", "none");
      if (a != "none" && a != "tanh") fail(n.describe(), ": attribute 'approximate' must be 'none' or 'tanh'");
      return std::make_unique<ActivationGradKernel<GeluGradOp>>(n, GeluGradOp{a == "tanh"});
    };
  if (op == "ClipGrad") return make<ClipGradKernel>();
  if (op == "DropoutGrad") return make<DropoutGradKernel>();
  return {};
}

}  // namespace

KernelFactory elementwise_kernel(const std::string& op) {
  using T = Types;
  if (op == "Add") return make<BinaryKernel<AddOp, T::kNumeric, false>>();
  if (op == "Sub") return make<BinaryKernel<SubOp, T::kNumeric, false>>();
  if (op == "Mul") return make<BinaryKernel<MulOp, T::kNumeric, false>>();
  if (op == "Div") return make<BinaryKernel<DivOp, T::kNumeric, false>>();
  if (op == "Pow") return make<PowKernel>();
  if (op == "Min") return make<VariadicKernel<MinOp>>();
  if (op == "Max") return make<VariadicKernel<MaxOp>>();
  if (op == "Sum") return make<VariadicKernel<AddOp>>();
  if (op == "Mean") return make<VariadicKernel<AddOp, true>>();
  if (op == "Neg") return unary<NegOp, T::kNumeric>();  // the op table admits signed types only
  if (op == "Abs") return unary<AbsOp, T::kNumeric>();
  if (op == "Relu") return unary<ReluOp, T::kNumeric>();
  if (op == "Sqrt") return unary<SqrtOp, T::kFloat>();
  if (op == "Reciprocal") return unary<ReciprocalOp, T::kFloat>();
  if (op == "Exp") return unary<ExpOp, T::kFloat>();
  if (op == "Log") return unary<LogOp, T::kFloat>();
  if (op == "Erf") return unary<ErfOp, T::kFloat>();
  if (op == "Tanh") return unary<TanhOp, T::kFloat>();
  if (op == "Sigmoid") return unary<SigmoidOp, T::kFloat>();
  if (op == "Softplus") return unary<SoftplusOp, T::kFloat>();
  if (op == "Softsign") return unary<SoftsignOp, T::kFloat>();
  if (op == "LeakyRelu")
    return [](const Node& n) -> std::unique_ptr<Kernel> {
      return std::make_unique<UnaryKernel<LeakyReluOp, T::kFloat>>(n, LeakyReluOp{n.attr_f("alpha", 0.01f)});
    };
  if (op == "Gelu")
    return [](const Node& n) -> std::unique_ptr<Kernel> {
      const std::string approx = n.attr_s("approximate", "none");
      if (approx != "none" && approx != "tanh")
        fail(n.describe(), ": attribute 'approximate' must be 'none' or 'tanh', got '", approx, "'");
      return std::make_unique<UnaryKernel<GeluOp, T::kFloat>>(n, GeluOp{approx == "tanh"});
    };
  if (op == "Clip") return make<ClipKernel>();
  if (op == "Equal") return make<BinaryKernel<EqualOp, T::kAll, true>>();
  if (op == "Less") return make<BinaryKernel<LessOp, T::kNumeric, true>>();
  if (op == "Greater") return make<BinaryKernel<GreaterOp, T::kNumeric, true>>();
  if (op == "LessOrEqual") return make<BinaryKernel<LessOrEqualOp, T::kNumeric, true>>();
  if (op == "GreaterOrEqual") return make<BinaryKernel<GreaterOrEqualOp, T::kNumeric, true>>();
  if (op == "And") return make<BinaryKernel<AndOp, T::kBool, true>>();
  if (op == "Or") return make<BinaryKernel<OrOp, T::kBool, true>>();
  if (op == "Xor") return make<BinaryKernel<XorOp, T::kBool, true>>();
  if (op == "Not") return unary<NotOp, T::kBool>();
  if (op == "Where") return make<WhereKernel>();
  if (op == "Cast" || op == "CastLike") return make<CastKernel>();
  if (op == "Mod")
    return [](const Node& n) -> std::unique_ptr<Kernel> {
      if (n.attr_i("fmod", 0) != 0) return std::make_unique<BinaryKernel<ModOp<true>, T::kNumeric, false>>(n);
      return std::make_unique<BinaryKernel<ModOp<false>, T::kNumeric, false>>(n);
    };
  if (op == "BitShift")
    return [](const Node& n) -> std::unique_ptr<Kernel> {
      if (n.attr_s("direction", "") == "LEFT")
        return std::make_unique<BinaryKernel<BitShiftOp<true>, T::kUnsigned, false>>(n);
      return std::make_unique<BinaryKernel<BitShiftOp<false>, T::kUnsigned, false>>(n);
    };
  if (KernelFactory k = gradient_kernel(op)) return k;
  fail("elementwise_kernel: no CUDA kernel for ", op);
}

// Shared with the other families: dst = src converted to dst's dtype, on ctx's stream.
void cast_tensor(const KernelContext& ctx, const Tensor& src, Tensor& dst) { launch_cast(ctx, src, dst); }

}  // namespace otter::cuda
