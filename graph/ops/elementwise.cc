// Element-wise ops of the default domain: arithmetic, activations, comparisons, logic, Where and
// Cast, with broadcasting and propagation of symbolic shape data through integer arithmetic.
#include <algorithm>
#include <cmath>
#include <optional>

#include "graph/gradient.h"
#include "graph/op_table.h"
#include "graph/ops/infer_util.h"

namespace otter {
namespace {

using infer::add;
using infer::Types;

using infer::SymElem;

Dim nonneg(int64_t v) { return v >= 0 ? Dim(v) : Dim(); }
using Elems = std::vector<SymElem>;

// Combines the known contents of inputs `ins` element by element (lengths 1 or n broadcast) into
// output 0's symbolic data, when all are known, the output is integer or bool and at most 1-D.
template <typename F>
void propagate_sym(InferContext& ctx, const std::vector<int>& ins, F f) {
  Value* out_value = ctx.node().output(0);
  if (!out_value || !(is_integer(out_value->dtype()) || out_value->dtype() == DataType::kBool)) return;
  if (!out_value->shape().rank_known || out_value->shape().rank() > 1) return;
  std::vector<std::vector<SymElem>> data;
  size_t n = 1;
  for (int i : ins) {
    if (ctx.in_shape(i).rank() > 1) return;
    auto d = infer::sym_elems(ctx, i);
    if (!d) return;
    if (d->size() != 1) {
      if (n != 1 && n != d->size()) return;
      n = d->size();
    }
    data.push_back(std::move(*d));
  }
  std::vector<Dim> out;
  std::vector<SymElem> args(data.size());
  for (size_t k = 0; k < n; ++k) {
    for (size_t j = 0; j < data.size(); ++j) args[j] = data[j].size() == 1 ? data[j][0] : data[j][k];
    out.push_back(f(args));
  }
  infer::set_sym(ctx, 0, std::move(out));
}

// ---- unary --------------------------------------------------------------------------------------
using infer::unary;

void infer_neg(InferContext& ctx) {
  unary(Types::kSignedNumeric)(ctx);
  propagate_sym(ctx, {0}, [](const Elems& a) { return a[0].exact ? nonneg(-*a[0].exact) : Dim(); });
}

void infer_gelu(InferContext& ctx) {
  unary(Types::kFloat)(ctx);
  std::string a = ctx.node().attr_s("approximate", "none");
  if (a != "none" && a != "tanh")
    ctx.error("attribute 'approximate' must be \"none\" or \"tanh\", got \"" + a + "\"");
}

void infer_clip(InferContext& ctx) {
  infer::check_arity(ctx, 1, 3);
  infer::check_type(ctx, 0, Types::kNumeric);
  for (int i = 1; i <= 2; ++i) {
    if (!ctx.has_input(i)) continue;
    infer::check_same_type(ctx, 0, i);
    const Shape& s = ctx.in_shape(i);
    if (s.rank_known && s.numel() != 1 && s.is_static())
      ctx.error(str_cat(infer::input_desc(ctx, i), " (", i == 1 ? "min" : "max",
                        ") must be a scalar, got shape ", s.to_string()));
  }
  ctx.set_output(0, ctx.in_dtype(0), ctx.in_shape(0));
}

// ---- binary and variadic ------------------------------------------------------------------------
bool exact2(const Elems& a) { return a[0].exact && a[1].exact; }
Dim sym_add(const Elems& a) {
  return exact2(a) ? nonneg(*a[0].exact + *a[1].exact) : infer::dim_add(a[0].d, a[1].d);
}
Dim sym_sub(const Elems& a) {
  return exact2(a) ? nonneg(*a[0].exact - *a[1].exact) : infer::dim_sub(a[0].d, a[1].d);
}
Dim sym_mul(const Elems& a) {
  return exact2(a) ? nonneg(*a[0].exact * *a[1].exact) : infer::dim_mul(a[0].d, a[1].d);
}
Dim sym_div(const Elems& a) {
  if (a[1].exact && *a[1].exact == 0) return Dim();
  if (exact2(a)) return nonneg(*a[0].exact / *a[1].exact);
  if (a[1].exact && *a[1].exact < 0) return Dim();
  return infer::dim_div(a[0].d, a[1].d);
}

InferFn arith(Dim (*sym)(const Elems&)) {
  return [sym](InferContext& ctx) {
    infer::check_arity(ctx, 2, 2);
    infer::check_type(ctx, 0, Types::kNumeric);
    infer::check_same_type(ctx, 0, 1);
    ctx.set_output(0, ctx.in_dtype(0), broadcast_shapes(ctx, {ctx.in_shape(0), ctx.in_shape(1)}));
    if (sym) propagate_sym(ctx, {0, 1}, sym);
  };
}

void infer_pow(InferContext& ctx) {
  infer::check_arity(ctx, 2, 2);
  infer::check_type(ctx, 0, Types::kNumeric);
  infer::check_type(ctx, 1, Types::kNumeric);
  ctx.set_output(0, ctx.in_dtype(0), broadcast_shapes(ctx, {ctx.in_shape(0), ctx.in_shape(1)}));
}

InferFn min_max(bool is_max) {
  return [is_max](InferContext& ctx) {
    infer::check_arity(ctx, 1, 1 << 20);
    infer::check_type(ctx, 0, Types::kNumeric);
    std::vector<Shape> shapes;
    std::vector<int> ins;
    for (int i = 0; i < ctx.num_inputs(); ++i) {
      if (!ctx.has_input(i)) ctx.error(str_cat("input ", i, " is missing (inputs are not optional)"));
      infer::check_same_type(ctx, 0, i);
      shapes.push_back(ctx.in_shape(i));
      ins.push_back(i);
    }
    ctx.set_output(0, ctx.in_dtype(0), broadcast_shapes(ctx, shapes));
    propagate_sym(ctx, ins, [is_max](const Elems& a) {
      bool all_exact = std::all_of(a.begin(), a.end(), [](const SymElem& e) { return e.exact.has_value(); });
      if (all_exact) {
        int64_t r = *a[0].exact;
        for (const SymElem& e : a) r = is_max ? std::max(r, *e.exact) : std::min(r, *e.exact);
        return nonneg(r);
      }
      bool same = std::all_of(a.begin(), a.end(), [&](const SymElem& e) { return e.d == a[0].d; });
      return same ? a[0].d : Dim();
    });
  };
}

void infer_where(InferContext& ctx) {
  infer::check_arity(ctx, 3, 3);
  infer::check_type(ctx, 0, Types::kBool);
  infer::check_same_type(ctx, 1, 2);
  ctx.set_output(0, ctx.in_dtype(1),
                 broadcast_shapes(ctx, {ctx.in_shape(0), ctx.in_shape(1), ctx.in_shape(2)}));
  propagate_sym(ctx, {0, 1, 2}, [](const Elems& a) {
    if (a[0].exact) return *a[0].exact ? a[1].d : a[2].d;
    return a[1].d == a[2].d && infer::dim_known(a[1].d) ? a[1].d : Dim();
  });
}

enum class Cmp { kEqual, kLess, kGreater, kLessOrEqual, kGreaterOrEqual };

// Comparison of two elements; a known dim is never negative, so it compares with a negative
// constant even when symbolic.
Dim compare_elems(Cmp op, const SymElem& a, const SymElem& b) {
  auto result = [](bool r) { return Dim(int64_t{r}); };
  if (a.exact && b.exact) {
    int64_t x = *a.exact, y = *b.exact;
    switch (op) {
      case Cmp::kEqual: return result(x == y);
      case Cmp::kLess: return result(x < y);
      case Cmp::kGreater: return result(x > y);
      case Cmp::kLessOrEqual: return result(x <= y);
      case Cmp::kGreaterOrEqual: return result(x >= y);
    }
  }
  const bool ge = op == Cmp::kGreater || op == Cmp::kGreaterOrEqual, le = op == Cmp::kLess || op == Cmp::kLessOrEqual;
  if (a.d.is_symbolic() && a.d == b.d) return result(op == Cmp::kEqual || op == Cmp::kLessOrEqual || op == Cmp::kGreaterOrEqual);
  bool a_dim = infer::dim_known(a.d), b_dim = infer::dim_known(b.d);
  if (a_dim && b.exact && *b.exact < 0) return result(ge);  // dim vs negative
  if (b_dim && a.exact && *a.exact < 0) return result(le);  // negative vs dim
  return Dim();
}

InferFn compare(Cmp op) {
  return [op](InferContext& ctx) {
    infer::check_arity(ctx, 2, 2);
    infer::check_type(ctx, 0, op == Cmp::kEqual ? Types::kAny : Types::kNumeric);
    infer::check_same_type(ctx, 0, 1);
    ctx.set_output(0, DataType::kBool, broadcast_shapes(ctx, {ctx.in_shape(0), ctx.in_shape(1)}));
    propagate_sym(ctx, {0, 1}, [op](const Elems& a) { return compare_elems(op, a[0], a[1]); });
  };
}

void infer_not(InferContext& ctx) {
  infer::check_arity(ctx, 1, 1);
  infer::check_type(ctx, 0, Types::kBool);
  ctx.set_output(0, DataType::kBool, ctx.in_shape(0));
  propagate_sym(ctx, {0}, [](const Elems& a) { return a[0].exact ? Dim(int64_t{*a[0].exact == 0}) : Dim(); });
}

// Or / Xor of bool tensors, broadcast.
InferFn logic(bool is_xor) {
  return [is_xor](InferContext& ctx) {
    infer::check_arity(ctx, 2, 2);
    infer::check_type(ctx, 0, Types::kBool);
    infer::check_type(ctx, 1, Types::kBool);
    ctx.set_output(0, DataType::kBool, broadcast_shapes(ctx, {ctx.in_shape(0), ctx.in_shape(1)}));
    propagate_sym(ctx, {0, 1}, [is_xor](const Elems& a) {
      if (exact2(a)) return Dim(int64_t{is_xor ? ((*a[0].exact != 0) != (*a[1].exact != 0))
                                                : ((*a[0].exact != 0) || (*a[1].exact != 0))});
      return Dim();
    });
  };
}

// Sum / Mean of one or more float (Sum: numeric) inputs, broadcast.
InferFn variadic(Types types) {
  return [types](InferContext& ctx) {
    infer::check_arity(ctx, 1, 1 << 20);
    infer::check_type(ctx, 0, types);
    std::vector<Shape> shapes;
    for (int i = 0; i < ctx.num_inputs(); ++i) {
      if (!ctx.has_input(i)) ctx.error(str_cat("input ", i, " is missing (inputs are not optional)"));
      infer::check_same_type(ctx, 0, i);
      shapes.push_back(ctx.in_shape(i));
    }
    ctx.set_output(0, ctx.in_dtype(0), broadcast_shapes(ctx, shapes));
  };
}

void infer_and(InferContext& ctx) {
  infer::check_arity(ctx, 2, 2);
  infer::check_type(ctx, 0, Types::kBool);
  infer::check_type(ctx, 1, Types::kBool);
  ctx.set_output(0, DataType::kBool, broadcast_shapes(ctx, {ctx.in_shape(0), ctx.in_shape(1)}));
  propagate_sym(ctx, {0, 1}, [](const Elems& a) {
    if ((a[0].exact && *a[0].exact == 0) || (a[1].exact && *a[1].exact == 0)) return Dim(int64_t{0});
    if (exact2(a)) return Dim(int64_t{1});
    return Dim();
  });
}

void infer_cast(InferContext& ctx) {
  infer::check_arity(ctx, 1, 1);
  const Attribute* to = ctx.node().find_attr("to");
  if (!to) ctx.error("attribute 'to' is required");
  if (to->kind() != Attribute::Kind::kInt) ctx.error("attribute 'to' must be an int");
  DataType t = dtype_from_onnx(static_cast<int>(to->i()));
  if (t == DataType::kUndefined)
    ctx.error(str_cat("attribute 'to' = ", to->i(), " (", onnx_dtype_name(static_cast<int>(to->i())),
                      ") is not a supported data type"));
  ctx.set_output(0, t, ctx.in_shape(0));
  if (is_integer(t) || t == DataType::kBool) {
    bool to_bool = t == DataType::kBool;
    propagate_sym(ctx, {0}, [to_bool](const Elems& a) {
      if (!to_bool) return a[0].d;
      if (a[0].exact) return Dim(int64_t{*a[0].exact != 0});
      return Dim();
    });
  }
}

// ---- gradient rules -----------------------------------------------------------------------------
// Binary arithmetic: each operand's gradient is summed back over the axes it was broadcast along.
void grad_add(GradContext& c) {
  for (int i = 0; i < 2; ++i)
    if (c.needs_grad(i)) c.set_grad_input(i, c.sum_to_shape(c.grad_output(0), c.input(i)));
}

void grad_sub(GradContext& c) {
  Value* dy = c.grad_output(0);
  if (c.needs_grad(0)) c.set_grad_input(0, c.sum_to_shape(dy, c.input(0)));
  if (c.needs_grad(1)) c.set_grad_input(1, c.emit("Neg", {c.sum_to_shape(dy, c.input(1))}));
}

void grad_mul(GradContext& c) {
  Value* dy = c.grad_output(0);
  for (int i = 0; i < 2; ++i)
    if (c.needs_grad(i)) c.set_grad_input(i, c.sum_to_shape(c.emit("Mul", {dy, c.input(1 - i)}), c.input(i)));
}

// y = a / b: da = dy / b, db = -dy * y / b.
void grad_div(GradContext& c) {
  Value *dy = c.grad_output(0), *a = c.input(0), *b = c.input(1);
  if (c.needs_grad(0)) c.set_grad_input(0, c.sum_to_shape(c.emit("Div", {dy, b}), a));
  if (c.needs_grad(1)) {
    Value* t = c.emit("Div", {c.emit("Mul", {dy, c.output(0)}), b});
    c.set_grad_input(1, c.emit("Neg", {c.sum_to_shape(t, b)}));
  }
}

// y = a ^ b: da = dy * b * a^(b-1), db = dy * y * log(a) (b may have another float type).
void grad_pow(GradContext& c) {
  Value *dy = c.grad_output(0), *a = c.input(0), *b = c.input(1);
  if (c.needs_grad(0)) {
    Value* bf = c.cast(b, a->dtype());
    Value* p = c.emit("Pow", {a, c.emit("Sub", {bf, c.scalar_like(1, a)})});
    c.set_grad_input(0, c.sum_to_shape(c.emit("Mul", {dy, c.emit("Mul", {bf, p})}), a));
  }
  if (c.needs_grad(1)) {
    Value* t = c.emit("Mul", {dy, c.emit("Mul", {c.output(0), c.emit("Log", {a})})});
    c.set_grad_input(1, c.cast(c.sum_to_shape(t, b), b->dtype()));
  }
}

void grad_sqrt(GradContext& c) {  // dx = dy * 0.5 / y
  Value* dy = c.grad_output(0);
  c.set_grad_input(0, c.emit("Div", {c.emit("Mul", {dy, c.scalar_like(0.5, dy)}), c.output(0)}));
}
void grad_reciprocal(GradContext& c) {  // dx = -dy * y^2
  Value* y = c.output(0);
  c.set_grad_input(0, c.emit("Neg", {c.emit("Mul", {c.grad_output(0), c.emit("Mul", {y, y})})}));
}
void grad_exp(GradContext& c) { c.set_grad_input(0, c.emit("Mul", {c.grad_output(0), c.output(0)})); }
void grad_log(GradContext& c) { c.set_grad_input(0, c.emit("Div", {c.grad_output(0), c.input(0)})); }
void grad_neg(GradContext& c) { c.set_grad_input(0, c.emit("Neg", {c.grad_output(0)})); }

// Activations whose derivative is an ai.otter op `op`(dY, X or Y) with the forward attributes.
GradFn activation_grad(std::string op, bool from_output, std::vector<std::string> attrs = {}) {
  return [op, from_output, attrs](GradContext& c) {
    Value* arg = from_output ? c.output(0) : c.input(0);
    c.set_grad_input(0, c.emit_otter(op, {c.grad_output(0), arg}, c.forward_attrs(attrs)));
  };
}

// ClipGrad(dY, X, min?, max?) -> dX, dMin, dMax: X inside [min, max] passes dY; min and max collect
// what fell below / above them.
void grad_clip(GradContext& c) {
  std::vector<Value*> ins = {c.grad_output(0), c.input(0), c.input(1), c.input(2)};
  while (!ins.back()) ins.pop_back();
  std::vector<bool> want = {c.needs_grad(0), c.needs_grad(1), c.needs_grad(2)};  // false when absent
  if (!want[0] && !want[1] && !want[2]) return;
  std::vector<Value*> g = c.emit_some("ClipGrad", ins, want, {}, kOtterDomain);
  for (int i = 0; i < c.node().num_inputs(); ++i) c.set_grad_input(i, g[i]);
}

// Min / Max: the gradient goes to the inputs equal to the result, split evenly between ties.
void grad_min_max(GradContext& c) {
  Value *dy = c.grad_output(0), *y = c.output(0);
  int n = c.node().num_inputs();
  if (n == 1) return c.set_grad_input(0, dy);
  std::vector<Value*> masks;
  for (int i = 0; i < n; ++i) masks.push_back(c.cast(c.emit("Equal", {c.input(i), y}), y->dtype()));
  Value* count = masks[0];
  for (int i = 1; i < n; ++i) count = c.emit("Add", {count, masks[i]});
  Value* share = c.emit("Div", {dy, count});
  for (int i = 0; i < n; ++i)
    if (c.needs_grad(i)) c.set_grad_input(i, c.sum_to_shape(c.emit("Mul", {share, masks[i]}), c.input(i)));
}

// Sum / Mean: each input gets dY (divided by the input count for Mean), summed back over the axes
// it was broadcast along.
GradFn grad_sum_mean(bool mean) {
  return [mean](GradContext& c) {
    Value* dy = c.grad_output(0);
    const int n = c.node().num_inputs();
    if (mean && n > 1) dy = c.emit("Div", {dy, c.scalar_like(static_cast<double>(n), dy)});
    for (int i = 0; i < n; ++i)
      if (c.needs_grad(i)) c.set_grad_input(i, c.sum_to_shape(dy, c.input(i)));
  };
}

// Where(cond, x, y): x's gradient where cond holds, y's elsewhere.
void grad_where(GradContext& c) {
  Value *dy = c.grad_output(0), *cond = c.input(0);
  Value* zero = c.scalar_like(0, dy);
  if (c.needs_grad(1)) c.set_grad_input(1, c.sum_to_shape(c.emit("Where", {cond, dy, zero}), c.input(1)));
  if (c.needs_grad(2)) c.set_grad_input(2, c.sum_to_shape(c.emit("Where", {cond, zero, dy}), c.input(2)));
}

// Cast: the gradient is cast back to the input's float type.
void grad_cast(GradContext& c) { c.set_grad_input(0, c.cast(c.grad_output(0), c.input(0)->dtype())); }

// ---- gradient ops (ai.otter) --------------------------------------------------------------------

void infer_clip_grad(InferContext& ctx) {
  infer::check_arity(ctx, 2, 4, 1, 3);
  infer::check_float(ctx, 0);
  for (int i = 1; i < 4; ++i) infer::check_same_type(ctx, 0, i);
  for (int i = 0; i < 3; ++i)
    if (ctx.has_output(i)) {
      if (!ctx.has_input(i + 1)) ctx.error(str_cat("output ", i, " needs input ", i + 1));
      infer::same_as_input(ctx, i + 1, i);
    }
}

void infer_dropout_grad(InferContext& ctx) {
  infer::check_arity(ctx, 2, 4);
  infer::check_float(ctx, 0);
  infer::check_type(ctx, 1, Types::kBool);
  infer::check_type(ctx, 2, Types::kFloat);
  infer::check_type(ctx, 3, Types::kBool);
  infer::same_as_input(ctx, 0);
}

void register_elementwise_grad_ops(OpTable& t) {
  using P = PrecisionClass;
  infer::add_otter_op(t, "ReluGrad", infer::unary_grad, P::kFollow, "ReluGrad(dY, Y): dY where Y > 0, else 0");
  infer::add_otter_op(t, "LeakyReluGrad", infer::unary_grad, P::kFollow,
                      "LeakyReluGrad(dY, X) {alpha}: dY where X >= 0, else alpha * dY");
  infer::add_otter_op(t, "SigmoidGrad", infer::unary_grad, P::kFollow, "SigmoidGrad(dY, Y): dY * Y * (1 - Y)");
  infer::add_otter_op(t, "TanhGrad", infer::unary_grad, P::kFollow, "TanhGrad(dY, Y): dY * (1 - Y^2)");
  infer::add_otter_op(t, "GeluGrad", infer::unary_grad, P::kFollow,
                      "GeluGrad(dY, X) {approximate}: dY * Gelu'(X), exact or tanh form");
  infer::add_otter_op(t, "ErfGrad", infer::unary_grad, P::kFollow, "ErfGrad(dY, X): dY * 2/sqrt(pi) * exp(-X^2)");
  infer::add_otter_op(t, "SoftplusGrad", infer::unary_grad, P::kFp32, "SoftplusGrad(dY, X): dY * sigmoid(X)");
  infer::add_otter_op(t, "SoftsignGrad", infer::unary_grad, P::kFollow, "SoftsignGrad(dY, X): dY / (1 + |X|)^2");
  infer::add_otter_op(t, "AbsGrad", infer::unary_grad, P::kFollow, "AbsGrad(dY, X): dY * sign(X)");
  infer::add_otter_op(t, "ClipGrad", infer_clip_grad, P::kFollow,
                      "ClipGrad(dY, X, min?, max?) -> dX, dMin?, dMax?: dY where min <= X <= max; "
                      "dMin/dMax sum dY below/above");
  infer::add_otter_op(t, "DropoutGrad", infer_dropout_grad, P::kFollow,
                      "DropoutGrad(dY, mask, ratio?, training_mode?): dY * mask / (1 - ratio) in training, "
                      "else dY");
  // Each dX element reads only the same element of dY: dX may take over dY's buffer.
  for (const char* op : {"ReluGrad", "LeakyReluGrad", "SigmoidGrad", "TanhGrad", "GeluGrad", "ErfGrad", "SoftplusGrad",
                         "SoftsignGrad", "AbsGrad", "DropoutGrad"})
    t.mutable_find(kOtterDomain, op, 1)->inplace = true;
}

}  // namespace

// ---- registration -------------------------------------------------------------------------------

void register_elementwise_ops(OpTable& t) {
  using P = PrecisionClass;
  const GradSpec kNoGrad = no_gradient();
  auto rule = grad_rule;
  // Since-versions are those of the ONNX schema in force at opset 13; later schema versions up to
  // opset 21 only widen type lists (noted per op), so one definition covers the whole range.
  // Binary arithmetic: Add/Sub/Mul/Div 13, 14 (more integer types).
  add(t, "Add", 13, arith(sym_add), P::kFollow, true, rule(grad_add), "A + B with numpy broadcasting");
  add(t, "Sub", 13, arith(sym_sub), P::kFollow, true, rule(grad_sub), "A - B with numpy broadcasting");
  add(t, "Mul", 13, arith(sym_mul), P::kFollow, true, rule(grad_mul), "A * B with numpy broadcasting");
  add(t, "Div", 13, arith(sym_div), P::kFollow, true, rule(grad_div),
      "A / B with numpy broadcasting (integers truncate)");
  add(t, "Pow", 13, infer_pow, P::kFp32, true, rule(grad_pow), "A ** B with numpy broadcasting (Pow 13, 15)");
  // Unary math: all 13 (Gelu 20, Softplus 1, LeakyRelu 6/16, Relu 13/14).
  add(t, "Sqrt", 13, unary(Types::kFloat), P::kFollow, true, rule(grad_sqrt), "sqrt(X)");
  add(t, "Reciprocal", 13, unary(Types::kFloat), P::kFp32, true, rule(grad_reciprocal), "1 / X");
  add(t, "Exp", 13, unary(Types::kFloat), P::kFp32, true, rule(grad_exp), "exp(X)");
  add(t, "Log", 13, unary(Types::kFloat), P::kFp32, true, rule(grad_log), "natural log of X");
  add(t, "Neg", 13, infer_neg, P::kFollow, true, rule(grad_neg), "-X");
  add(t, "Abs", 13, unary(Types::kNumeric), P::kFollow, true, rule(activation_grad("AbsGrad", false)), "|X|");
  add(t, "Erf", 13, unary(Types::kNumeric), P::kFollow, true, rule(activation_grad("ErfGrad", false)),
      "error function of X");
  add(t, "Tanh", 13, unary(Types::kFloat), P::kFollow, true, rule(activation_grad("TanhGrad", true)), "tanh(X)");
  add(t, "Sigmoid", 13, unary(Types::kFloat), P::kFollow, true, rule(activation_grad("SigmoidGrad", true)),
      "1 / (1 + exp(-X))");
  add(t, "Relu", 13, unary(Types::kSignedNumeric), P::kFollow, true, rule(activation_grad("ReluGrad", true)),
      "max(X, 0)");
  add(t, "LeakyRelu", 6, unary(Types::kFloat), P::kFollow, true,
      rule(activation_grad("LeakyReluGrad", false, {"alpha"})), "X >= 0 ? X : alpha * X (LeakyRelu 6, 16)");
  add(t, "Gelu", 20, infer_gelu, P::kFollow, true, rule(activation_grad("GeluGrad", false, {"approximate"})),
      "Gaussian error linear unit, exact or tanh approximation");
  add(t, "Softplus", 1, unary(Types::kFloat), P::kFp32, true, rule(activation_grad("SoftplusGrad", false)),
      "log(1 + exp(X))");
  add(t, "Softsign", 1, unary(Types::kFloat), P::kFollow, true, rule(activation_grad("SoftsignGrad", false)),
      "X / (1 + |X|)");
  add(t, "Clip", 13, infer_clip, P::kFollow, true, rule(grad_clip),
      "clamp X to [min, max] (optional scalar inputs)");
  add(t, "Min", 13, min_max(false), P::kFollow, true, rule(grad_min_max),
      "element-wise minimum of the inputs, broadcast");
  add(t, "Max", 13, min_max(true), P::kFollow, true, rule(grad_min_max),
      "element-wise maximum of the inputs, broadcast");
  add(t, "Sum", 13, variadic(Types::kNumeric), P::kFollow, false, rule(grad_sum_mean(false)),
      "element-wise sum of the inputs, broadcast");
  add(t, "Mean", 13, variadic(Types::kFloat), P::kFollow, false, rule(grad_sum_mean(true)),
      "element-wise mean of the inputs, broadcast");
  add(t, "Where", 9, infer_where, P::kFollow, false, rule(grad_where), "condition ? X : Y, broadcast (Where 9, 16)");
  // Comparisons and logic: bool outputs, no gradient. Equal 13/19, Not 1, And 7.
  add(t, "Equal", 13, compare(Cmp::kEqual), P::kNone, false, kNoGrad, "A == B (bool), broadcast");
  add(t, "Less", 13, compare(Cmp::kLess), P::kNone, false, kNoGrad, "A < B (bool), broadcast");
  add(t, "Greater", 13, compare(Cmp::kGreater), P::kNone, false, kNoGrad, "A > B (bool), broadcast");
  add(t, "LessOrEqual", 12, compare(Cmp::kLessOrEqual), P::kNone, false, kNoGrad, "A <= B (bool), broadcast");
  add(t, "GreaterOrEqual", 12, compare(Cmp::kGreaterOrEqual), P::kNone, false, kNoGrad,
      "A >= B (bool), broadcast");
  add(t, "Not", 1, infer_not, P::kNone, true, kNoGrad, "logical not of a bool tensor");
  add(t, "And", 7, infer_and, P::kNone, true, kNoGrad, "logical and of bool tensors, broadcast");
  add(t, "Or", 7, logic(false), P::kNone, true, kNoGrad, "logical or of bool tensors, broadcast");
  add(t, "Xor", 7, logic(true), P::kNone, true, kNoGrad, "logical xor of bool tensors, broadcast");
  // Cast 13, 19 (saturate), 21 (4-bit types): the mixed-precision pass places Casts itself. Its
  // gradient is a Cast back; a Cast from an integer type passes no gradient (autodiff skips it).
  add(t, "Cast", 13, infer_cast, P::kNone, false, rule(grad_cast), "converts X to the type of attribute 'to'");
  register_elementwise_grad_ops(t);
  register_bias_gelu_ops(t);
}

}  // namespace otter
