// CPU element-wise kernels: arithmetic, activations, comparisons, logic, Where and Cast, with numpy
// broadcasting; the per-element math is the shared functors of kernels/common/elementwise.h.
#include <cmath>
#include <cstring>
#include <limits>

#include "kernels/common/checks.h"
#include "kernels/common/convert.h"
#include "kernels/common/elementwise.h"
#include "kernels/cpu/broadcast.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/dispatch.h"
#include "kernels/cpu/half.h"
#include "kernels/cpu/isa.h"

namespace otter {
namespace {

using cpu::compute_t;
using cpu::load;
using cpu::store;

const std::vector<DataType> kFloatTypes = {DataType::kFloat32, DataType::kFloat64,
                                           DataType::kFloat16, DataType::kBFloat16};
const std::vector<DataType> kNumericTypes = {DataType::kFloat32, DataType::kFloat64,
                                             DataType::kFloat16, DataType::kBFloat16,
                                             DataType::kInt64,   DataType::kInt32,
                                             DataType::kInt8,    DataType::kUInt8};
const std::vector<DataType> kWideNumericTypes = {DataType::kFloat32, DataType::kFloat64, DataType::kFloat16,
                                                 DataType::kBFloat16, DataType::kInt64,   DataType::kInt32,
                                                 DataType::kInt8,     DataType::kUInt8,   DataType::kInt16,
                                                 DataType::kUInt16,   DataType::kUInt32,  DataType::kUInt64};
const std::vector<DataType> kUnsignedTypes = {DataType::kUInt8, DataType::kUInt16, DataType::kUInt32,
                                              DataType::kUInt64};
const std::vector<DataType> kIntegerTypes = {DataType::kInt8,  DataType::kInt16,  DataType::kInt32,
                                             DataType::kInt64, DataType::kUInt8,  DataType::kUInt16,
                                             DataType::kUInt32, DataType::kUInt64};
const std::vector<DataType> kBoolTypes = {DataType::kBool};

// Which storage types a kernel instantiates its functor for.
enum class TypeSet { kFloat, kNumeric, kWideNumeric, kUnsigned, kInteger, kAll, kBool };

template <TypeSet Set, typename F>
decltype(auto) visit_set(DataType t, F&& f) {
  if constexpr (Set == TypeSet::kFloat) return cpu::visit_float(t, std::forward<F>(f));
  else if constexpr (Set == TypeSet::kNumeric) return cpu::visit_numeric(t, std::forward<F>(f));
  else if constexpr (Set == TypeSet::kWideNumeric) return cpu::visit_wide_numeric(t, std::forward<F>(f));
  else if constexpr (Set == TypeSet::kUnsigned) return cpu::visit_unsigned(t, std::forward<F>(f));
  else if constexpr (Set == TypeSet::kInteger) return cpu::visit_integer(t, std::forward<F>(f));
  else if constexpr (Set == TypeSet::kAll) return cpu::visit_all(t, std::forward<F>(f));
  else {
    OTTER_CHECK(t == DataType::kBool, "expected bool, got ", dtype_name(t));
    return f(cpu::Tag<bool>{});
  }
}

std::vector<int64_t> broadcast_or_fail(const KernelContext& ctx,
                                       const std::vector<const std::vector<int64_t>*>& shapes) {
  std::vector<int64_t> out;
  if (!cpu::broadcast_dims(shapes, &out))
    ctx.error(str_cat("cannot broadcast shapes ", cpu::shapes_to_string(shapes)));
  return out;
}

// out[i] = f(a[ia], b[ib]) over the broadcast of a and b onto out.dims(); Out is the storage type
// of the output. Inner runs are specialised by which operand moves, so they vectorise.
template <typename S, typename Out, typename F>
void binary_loop(const Tensor& a, const Tensor& b, Tensor& out, F f) {
  if (out.numel() == 0) return;
  cpu::BroadcastPlan<2> plan({&a.dims(), &b.dims()}, out.dims());
  const S* pa = static_cast<const S*>(a.raw());
  const S* pb = static_cast<const S*>(b.raw());
  Out* po = static_cast<Out*>(out.raw());
  const auto st = plan.inner_strides();
  plan.for_each_run([&](int64_t o, const std::array<int64_t, 2>& offs, int64_t len) {
    const S* x = pa + offs[0];
    const S* y = pb + offs[1];
    Out* z = po + o;
    cpu::isa_dispatch_if<std::is_same_v<compute_t<S>, float>>([&] {
      if (st[0] == 1 && st[1] == 1) {
        for (int64_t j = 0; j < len; ++j) z[j] = store<Out>(f(load(x[j]), load(y[j])));
      } else if (st[0] == 1) {
        const auto yv = load(y[0]);
        for (int64_t j = 0; j < len; ++j) z[j] = store<Out>(f(load(x[j]), yv));
      } else if (st[1] == 1) {
        const auto xv = load(x[0]);
        for (int64_t j = 0; j < len; ++j) z[j] = store<Out>(f(xv, load(y[j])));
      } else {
        const Out v = store<Out>(f(load(x[0]), load(y[0])));
        for (int64_t j = 0; j < len; ++j) z[j] = v;
      }
    });
  });
}

template <typename S, typename Out, typename F>
void unary_loop(const Tensor& a, Tensor& out, F f, int64_t cost) {
  const S* x = static_cast<const S*>(a.raw());
  Out* z = static_cast<Out*>(out.raw());
  cpu::parallel_ranges(a.numel(), [&](int64_t b, int64_t e) {
    cpu::isa_dispatch_if<std::is_same_v<compute_t<S>, float>>([&] {
      for (int64_t j = b; j < e; ++j) z[j] = store<Out>(f(load(x[j])));
    });
  }, cost);
}

// Rejects integer division by zero before any element is computed.
template <typename S>
void check_no_zero_divisor(const KernelContext& ctx, const Tensor& b) {
  if constexpr (std::is_integral_v<S> && !std::is_same_v<S, bool>) {
    const S* p = b.data<S>();
    for (int64_t i = 0; i < b.numel(); ++i)
      if (p[i] == 0) ctx.error(str_cat("integer division by zero (divisor element ", i, ")"));
  }
}

// ---- binary ops: arithmetic (output type = input type) and comparisons (bool output) ------------
template <typename F, TypeSet Set, bool kBoolOut>
class BinaryKernel : public Kernel {
 public:
  explicit BinaryKernel(F f = F{}) : f_(f) {}
  void run(KernelContext& ctx) override {
    check_same_dtype(ctx, 0, 1);
    const Tensor& a = ctx.input(0);
    const Tensor& b = ctx.input(1);
    auto dims = broadcast_or_fail(ctx, {&a.dims(), &b.dims()});
    visit_set<Set>(a.dtype(), [&](auto tag) {
      using S = typename decltype(tag)::type;
      if constexpr (std::is_same_v<F, DivOp> || std::is_same_v<F, ModOp<true>> || std::is_same_v<F, ModOp<false>>)
        check_no_zero_divisor<S>(ctx, b);
      if constexpr (kBoolOut) {
        Tensor& out = ctx.allocate_output(0, DataType::kBool, dims);
        binary_loop<S, bool>(a, b, out, f_);
      } else {
        Tensor& out = ctx.allocate_output(0, a.dtype(), dims);
        binary_loop<S, S>(a, b, out, f_);
      }
    });
  }

 private:
  F f_;
};

template <typename F, TypeSet Set>
class UnaryKernel : public Kernel {
 public:
  explicit UnaryKernel(F f = F{}, int64_t cost = 1) : f_(f), cost_(cost) {}
  void run(KernelContext& ctx) override {
    const Tensor& a = ctx.input(0);
    visit_set<Set>(a.dtype(), [&](auto tag) {
      using S = typename decltype(tag)::type;
      Tensor& out = ctx.allocate_output(0, a.dtype(), a.dims());
      unary_loop<S, S>(a, out, f_, cost_);
    });
  }

 private:
  F f_;
  int64_t cost_;
};

// Sum / Mean / Min / Max over any number of broadcast inputs: folded pairwise into the output.
template <typename F, TypeSet Set>
class VariadicKernel : public Kernel {
 public:
  explicit VariadicKernel(bool mean = false) : mean_(mean) {}
  void run(KernelContext& ctx) override {
    int n = ctx.num_inputs();
    if (n < 1) ctx.error("needs at least one input");
    std::vector<const std::vector<int64_t>*> shapes;
    for (int i = 0; i < n; ++i) {
      check_same_dtype(ctx, 0, i);
      shapes.push_back(&ctx.input(i).dims());
    }
    auto dims = broadcast_or_fail(ctx, shapes);
    const Tensor& a = ctx.input(0);
    visit_set<Set>(a.dtype(), [&](auto tag) {
      using S = typename decltype(tag)::type;
      Tensor& out = ctx.allocate_output(0, a.dtype(), dims);
      if (n == 1) {
        // Broadcast a onto itself: a plain copy (out has a's dims).
        if (out.raw() != a.raw() && a.nbytes()) std::memcpy(out.raw(), a.raw(), a.nbytes());
      } else {
        binary_loop<S, S>(a, ctx.input(1), out, F{});
        for (int i = 2; i < n; ++i) binary_loop<S, S>(out, ctx.input(i), out, F{});
      }
      if constexpr (std::is_floating_point_v<compute_t<S>>) {
        if (mean_) {
          const ScaleOp scale{1.f / static_cast<float>(n)};
          S* p = out.data<S>();
          cpu::parallel_ranges(out.numel(), [&](int64_t b, int64_t e) {
            for (int64_t j = b; j < e; ++j) p[j] = store<S>(scale(load(p[j])));
          });
        }
      }
    });
  }

 private:
  bool mean_;
};

// ---- Cast (the conversion rule is cast_value of kernels/common/convert.h) ----------------------
bool is_wide_integer(DataType t) {
  return t == DataType::kInt16 || t == DataType::kUInt16 || t == DataType::kUInt32 || t == DataType::kUInt64;
}

Tensor& cast_into(const Tensor& src, Tensor& dst);
Tensor cast_tensor(const Tensor& src, DataType to);

// Calls f(Tag<W>{}) for the wider integer types (i16 u16 u32 u64) only.
template <typename F>
void visit_wide_only(DataType t, F&& f) {
  switch (t) {
    case DataType::kInt16: return f(cpu::Tag<int16_t>{});
    case DataType::kUInt16: return f(cpu::Tag<uint16_t>{});
    case DataType::kUInt32: return f(cpu::Tag<uint32_t>{});
    case DataType::kUInt64: return f(cpu::Tag<uint64_t>{});
    default: fail("not a wide integer type: ", dtype_name(t));
  }
}

// Casts to or from the wider integer types go through int64 (or, for a float side, double).
Tensor& cast_wide(const Tensor& src, Tensor& dst) {
  if (is_wide_integer(src.dtype())) {
    const bool to_float = is_float(dst.dtype());
    Tensor mid(to_float ? DataType::kFloat64 : DataType::kInt64, src.dims());
    visit_wide_only(src.dtype(), [&](auto st) {
      using S = typename decltype(st)::type;
      const S* p = src.data<S>();
      for (int64_t j = 0; j < src.numel(); ++j) {
        if (to_float) mid.data<double>()[j] = static_cast<double>(p[j]);
        else mid.data<int64_t>()[j] = static_cast<int64_t>(p[j]);
      }
    });
    return is_wide_integer(dst.dtype()) ? cast_wide(mid, dst) : cast_into(mid, dst);
  }
  Tensor mid = cast_tensor(src, DataType::kInt64);
  visit_wide_only(dst.dtype(), [&](auto dt) {
    using D = typename decltype(dt)::type;
    for (int64_t j = 0; j < src.numel(); ++j) dst.data<D>()[j] = static_cast<D>(mid.data<int64_t>()[j]);
  });
  return dst;
}

Tensor& cast_into(const Tensor& src, Tensor& dst) {
  if (src.dtype() == dst.dtype()) {
    if (src.nbytes() && src.raw() != dst.raw()) std::memcpy(dst.raw(), src.raw(), src.nbytes());
    return dst;
  }
  if (is_wide_integer(src.dtype()) || is_wide_integer(dst.dtype())) return cast_wide(src, dst);
  // float32 <-> float16/bfloat16, the casts of mixed precision: the ISA-dispatched (and F16C)
  // conversions of kernels/cpu/half.cc, which round as cast_value does (to nearest even).
  if (src.dtype() == DataType::kFloat32 && is_half(dst.dtype())) {
    cpu::round_into(src, dst);
    return dst;
  }
  if (is_half(src.dtype()) && dst.dtype() == DataType::kFloat32) {
    cpu::widen_into(src, dst);
    return dst;
  }
  cpu::visit_all(src.dtype(), [&](auto st) {
    using S = typename decltype(st)::type;
    cpu::visit_all(dst.dtype(), [&](auto dt) {
      using D = typename decltype(dt)::type;
      const S* x = static_cast<const S*>(src.raw());
      D* z = static_cast<D*>(dst.raw());
      cpu::parallel_ranges(src.numel(), [&](int64_t b, int64_t e) {
        for (int64_t j = b; j < e; ++j) z[j] = cast_value<D>(x[j]);
      });
    });
  });
  return dst;
}

Tensor cast_tensor(const Tensor& src, DataType to) {
  Tensor t(to, src.dims());
  cast_into(src, t);
  return t;
}

class CastKernel : public Kernel {
 public:
  explicit CastKernel(const Node& n) {
    if (n.op_type() == "CastLike") return;  // the type of input 1, at run time
    int64_t code = n.attr_i("to", -1);
    to_ = dtype_from_onnx(static_cast<int>(code));
    if (to_ == DataType::kUndefined)
      fail(n.describe(), ": Cast to unsupported type ", onnx_dtype_name(static_cast<int>(code)));
  }
  void run(KernelContext& ctx) override {
    const Tensor& a = ctx.input(0);
    cast_into(a, ctx.allocate_output(0, ctx.num_inputs() > 1 ? ctx.input(1).dtype() : to_, a.dims()));
  }

 private:
  DataType to_ = DataType::kUndefined;
};

// ---- Pow: the exponent may have another type than the base ---------------------------------------
// A constant exponent of 2 or 3 (variances, GPT-2's GELU) as a unary loop: PowOp's values, but a
// loop that may call powf does not vectorise.
template <int E>
struct PowConstOp {
  template <typename T>
  T operator()(T a) const {
    return PowOp{}(a, static_cast<T>(E));
  }
};

class PowKernel : public Kernel {
 public:
  void run(KernelContext& ctx) override {
    const Tensor& a = ctx.input(0);
    const Tensor& b = ctx.input(1);
    auto dims = broadcast_or_fail(ctx, {&a.dims(), &b.dims()});
    if (is_float(a.dtype()) && (is_float(b.dtype()) || is_integer(b.dtype())) && b.numel() == 1 && dims == a.dims()) {
      const double e = b.get_as_double(0);
      if (e == 2 || e == 3) {
        cpu::visit_float(a.dtype(), [&](auto tag) {
          using S = typename decltype(tag)::type;
          Tensor& out = ctx.allocate_output(0, a.dtype(), dims);
          if (e == 2) unary_loop<S, S>(a, out, PowConstOp<2>{}, 1);
          else unary_loop<S, S>(a, out, PowConstOp<3>{}, 1);
        });
        return;
      }
    }
    if (a.dtype() == b.dtype()) {
      cpu::visit_numeric(a.dtype(), [&](auto tag) {
        using S = typename decltype(tag)::type;
        binary_loop<S, S>(a, b, ctx.allocate_output(0, a.dtype(), dims), PowOp{});
      });
    } else if (is_float(a.dtype())) {  // float base, other exponent: exponent in the base type
      if (!is_float(b.dtype()) && !is_integer(b.dtype()))
        ctx.error(str_cat("unsupported exponent type ", dtype_name(b.dtype())));
      Tensor e = cast_tensor(b, a.dtype());
      cpu::visit_float(a.dtype(), [&](auto tag) {
        using S = typename decltype(tag)::type;
        binary_loop<S, S>(a, e, ctx.allocate_output(0, a.dtype(), dims), PowOp{});
      });
    } else if (is_integer(a.dtype()) && (is_float(b.dtype()) || is_integer(b.dtype()))) {
      // Integer base: integer exponent by squaring in int64, float exponent in double.
      DataType wide = is_float(b.dtype()) ? DataType::kFloat64 : DataType::kInt64;
      Tensor x = cast_tensor(a, wide), e = cast_tensor(b, wide), r(wide, dims);
      cpu::visit_numeric(wide, [&](auto tag) {
        using S = typename decltype(tag)::type;
        binary_loop<S, S>(x, e, r, PowOp{});
      });
      cast_into(r, ctx.allocate_output(0, a.dtype(), dims));
    } else {
      ctx.error(str_cat("unsupported types ", dtype_name(a.dtype()), " ^ ", dtype_name(b.dtype())));
    }
  }
};

// ---- Clip: optional scalar min / max inputs -----------------------------------------------------
class ClipKernel : public Kernel {
 public:
  void run(KernelContext& ctx) override {
    const Tensor& a = ctx.input(0);
    check_clip_bounds(ctx);
    cpu::visit_numeric(a.dtype(), [&](auto tag) {
      using S = typename decltype(tag)::type;
      using C = compute_t<S>;
      ClipOp<C> op{std::numeric_limits<C>::lowest(), std::numeric_limits<C>::max()};
      if constexpr (std::is_floating_point_v<C>) {
        op.lo = -std::numeric_limits<C>::infinity();
        op.hi = std::numeric_limits<C>::infinity();
      }
      if (ctx.has_input(1)) op.lo = load(ctx.input(1).data<S>()[0]);
      if (ctx.has_input(2)) op.hi = load(ctx.input(2).data<S>()[0]);
      unary_loop<S, S>(a, ctx.allocate_output(0, a.dtype(), a.dims()), op, 1);
    });
  }
};

// ---- Where(cond, x, y) ------------------------------------------------------------------------
class WhereKernel : public Kernel {
 public:
  void run(KernelContext& ctx) override {
    const Tensor& c = ctx.input(0);
    const Tensor& x = ctx.input(1);
    const Tensor& y = ctx.input(2);
    check_where_inputs(ctx);
    auto dims = broadcast_or_fail(ctx, {&c.dims(), &x.dims(), &y.dims()});
    Tensor& out = ctx.allocate_output(0, x.dtype(), dims);
    if (out.numel() == 0) return;
    cpu::BroadcastPlan<3> plan({&c.dims(), &x.dims(), &y.dims()}, dims);
    const auto st = plan.inner_strides();
    OTTER_DISPATCH_BYTES(x.dtype(), T, [&] {
      const bool* pc = c.data<bool>();
      const T* px = static_cast<const T*>(x.raw());
      const T* py = static_cast<const T*>(y.raw());
      T* po = static_cast<T*>(out.raw());
      plan.for_each_run([&](int64_t o, const std::array<int64_t, 3>& offs, int64_t len) {
        const bool* cc = pc + offs[0];
        const T* xx = px + offs[1];
        const T* yy = py + offs[2];
        T* z = po + o;
        for (int64_t j = 0; j < len; ++j)
          z[j] = cc[j * st[0]] ? xx[j * st[1]] : yy[j * st[2]];
      });
    });
  }
};

// ---- registration -------------------------------------------------------------------------------
// Opsets from the op table (kOpTableOpsets).
void add(KernelRegistry& r, const char* op, std::vector<DataType> types, KernelFactory f) {
  KernelDef d;
  d.op_type = op;
  d.dtypes = std::move(types);
  d.create = std::move(f);
  r.add(std::move(d));
}

template <typename K, typename... Args>
KernelFactory make(Args... args) {
  return [=](const Node&) -> std::unique_ptr<Kernel> { return std::make_unique<K>(args...); };
}

template <typename F, TypeSet Set>
KernelFactory unary(int64_t cost = 8) {
  return make<UnaryKernel<F, Set>>(F{}, cost);
}

}  // namespace

void register_cpu_elementwise_kernels(KernelRegistry& r) {
  using TS = TypeSet;
  // Arithmetic with broadcasting.
  add(r, "Add", kNumericTypes, make<BinaryKernel<AddOp, TS::kNumeric, false>>());
  add(r, "Sub", kNumericTypes, make<BinaryKernel<SubOp, TS::kNumeric, false>>());
  add(r, "Mul", kNumericTypes, make<BinaryKernel<MulOp, TS::kNumeric, false>>());
  add(r, "Div", kNumericTypes, make<BinaryKernel<DivOp, TS::kNumeric, false>>());
  add(r, "Pow", kNumericTypes, make<PowKernel>());
  // Variadic.
  add(r, "Sum", kNumericTypes, make<VariadicKernel<AddOp, TS::kNumeric>>(false));
  add(r, "Mean", kFloatTypes, make<VariadicKernel<AddOp, TS::kFloat>>(true));
  add(r, "Min", kWideNumericTypes, make<VariadicKernel<MinOp, TS::kWideNumeric>>(false));
  add(r, "Max", kWideNumericTypes, make<VariadicKernel<MaxOp, TS::kWideNumeric>>(false));
  // Mod {fmod}, BitShift {direction} (graph/ops/integer.cc).
  add(r, "Mod", kWideNumericTypes, [](const Node& n) -> std::unique_ptr<Kernel> {
    if (n.attr_i("fmod", 0) != 0) return std::make_unique<BinaryKernel<ModOp<true>, TS::kWideNumeric, false>>();
    return std::make_unique<BinaryKernel<ModOp<false>, TS::kWideNumeric, false>>();
  });
  add(r, "BitShift", kUnsignedTypes, [](const Node& n) -> std::unique_ptr<Kernel> {
    if (n.attr_s("direction", "") == "LEFT")
      return std::make_unique<BinaryKernel<BitShiftOp<true>, TS::kUnsigned, false>>();
    return std::make_unique<BinaryKernel<BitShiftOp<false>, TS::kUnsigned, false>>();
  });
  // BitwiseAnd / Or / Xor (broadcasting) and BitwiseNot of every integer type (graph/ops/integer.cc).
  add(r, "BitwiseAnd", kIntegerTypes, make<BinaryKernel<BitwiseAndOp, TS::kInteger, false>>());
  add(r, "BitwiseOr", kIntegerTypes, make<BinaryKernel<BitwiseOrOp, TS::kInteger, false>>());
  add(r, "BitwiseXor", kIntegerTypes, make<BinaryKernel<BitwiseXorOp, TS::kInteger, false>>());
  add(r, "BitwiseNot", kIntegerTypes, unary<BitwiseNotOp, TS::kInteger>(1));
  // Unary math.
  add(r, "Neg", kNumericTypes, unary<NegOp, TS::kNumeric>(1));
  add(r, "Abs", kNumericTypes, unary<AbsOp, TS::kNumeric>(1));
  add(r, "Relu", kNumericTypes, unary<ReluOp, TS::kNumeric>(1));
  add(r, "Sqrt", kFloatTypes, unary<SqrtOp, TS::kFloat>(2));
  add(r, "Reciprocal", kFloatTypes, unary<ReciprocalOp, TS::kFloat>(2));
  add(r, "Exp", kFloatTypes, unary<ExpOp, TS::kFloat>());
  add(r, "Log", kFloatTypes, unary<LogOp, TS::kFloat>());
  add(r, "Erf", kFloatTypes, unary<ErfOp, TS::kFloat>());
  add(r, "Tanh", kFloatTypes, unary<TanhOp, TS::kFloat>());
  add(r, "Sigmoid", kFloatTypes, unary<SigmoidOp, TS::kFloat>());
  add(r, "Softplus", kFloatTypes, unary<SoftplusOp, TS::kFloat>());
  add(r, "Softsign", kFloatTypes, unary<SoftsignOp, TS::kFloat>());
  add(r, "LeakyRelu", kFloatTypes, [](const Node& n) -> std::unique_ptr<Kernel> {
    return std::make_unique<UnaryKernel<LeakyReluOp, TS::kFloat>>(LeakyReluOp{n.attr_f("alpha", 0.01f)}, 1);
  });
  add(r, "Gelu", kFloatTypes, [](const Node& n) -> std::unique_ptr<Kernel> {
    std::string approx = n.attr_s("approximate", "none");
    if (approx != "none" && approx != "tanh")
      fail(n.describe(), ": attribute 'approximate' must be 'none' or 'tanh', got '", approx, "'");
    return std::make_unique<UnaryKernel<GeluOp, TS::kFloat>>(GeluOp{approx == "tanh"}, 8);
  });
  add(r, "Clip", kNumericTypes, make<ClipKernel>());
  // Comparisons and logic.
  add(r, "Equal", {}, make<BinaryKernel<EqualOp, TS::kAll, true>>());
  add(r, "Less", kNumericTypes, make<BinaryKernel<LessOp, TS::kNumeric, true>>());
  add(r, "LessOrEqual", kNumericTypes, make<BinaryKernel<LessOrEqualOp, TS::kNumeric, true>>());
  add(r, "Greater", kNumericTypes, make<BinaryKernel<GreaterOp, TS::kNumeric, true>>());
  add(r, "GreaterOrEqual", kNumericTypes, make<BinaryKernel<GreaterOrEqualOp, TS::kNumeric, true>>());
  add(r, "And", kBoolTypes, make<BinaryKernel<AndOp, TS::kBool, true>>());
  add(r, "Or", kBoolTypes, make<BinaryKernel<OrOp, TS::kBool, true>>());
  add(r, "Xor", kBoolTypes, make<BinaryKernel<XorOp, TS::kBool, true>>());
  add(r, "Not", kBoolTypes, make<UnaryKernel<NotOp, TS::kBool>>(NotOp{}, int64_t{1}));
  // Selection and conversion.
  add(r, "Where", {}, make<WhereKernel>());
  add(r, "Cast", {}, [](const Node& n) -> std::unique_ptr<Kernel> { return std::make_unique<CastKernel>(n); });
  add(r, "CastLike", {}, [](const Node& n) -> std::unique_ptr<Kernel> { return std::make_unique<CastKernel>(n); });
}

}  // namespace otter
