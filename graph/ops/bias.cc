// Type rules and gradient rules of the fused bias ops (ai.otter.BiasGelu, BiasGeluGrad, BiasAdd),
// which the fuse-bias-gelu and cast-elimination passes make; registered with the element-wise ops
// (graph/ops/elementwise.cc).
#include "graph/gradient.h"
#include "graph/op_table.h"
#include "graph/ops/infer_util.h"

namespace otter {
namespace {

using infer::Types;

// ---- ai.otter.BiasGelu (the fuse-bias-gelu pass makes it, passes/fuse_bias_gelu.h) -------------
//   BiasGelu(X, bias?) -> Y = Gelu(X + bias), the exact (erf) form; bias 1-D, X's last axis long.
//   BiasGeluGrad(dY, X, bias?) -> dX = dY * Gelu'(X + bias): recomputes the pre-activation X + bias
//   instead of keeping it or the GELU chain's intermediates; the bias gradient is dX summed over
//   the broadcast axes (GradContext::sum_to_shape, as Add's gradient).
// The bias has X's type, or float32 where X is float16/bfloat16: cast-elimination makes that mix
// from Casts around a float32 BiasGelu (passes/cast_elimination.h); the sum X + bias and the GELU
// are then float32, as they were, and Y is rounded to X's type. dX has the bias's type (float32
// in the mix), since the bias gradient is its sum; without a bias, dY's.
// Inputs x and x + 1 (bias, optional) of a BiasGelu or BiasGeluGrad.
void check_bias_gelu_inputs(InferContext& ctx, int x) {
  infer::check_type(ctx, x, Types::kFloat);
  if (!ctx.has_input(x + 1)) return;
  const DataType xt = ctx.in_dtype(x), bt = ctx.in_dtype(x + 1);
  const bool half_x = xt == DataType::kFloat16 || xt == DataType::kBFloat16;
  if (!(half_x && bt == DataType::kFloat32)) infer::check_same_type(ctx, x, x + 1);
  const Shape &xs = ctx.in_shape(x), &bs = ctx.in_shape(x + 1);
  if (!bs.rank_known) return;
  if (bs.rank() != 1) ctx.error("the bias must be 1-D, got shape " + bs.to_string());
  if (!xs.rank_known) return;
  if (xs.rank() < 1) ctx.error("X must have rank >= 1 to take a bias, got a scalar");
  infer::check_dims_match(ctx, bs.dims[0], xs.dims[xs.rank() - 1], "the bias length differs from X's last axis");
}

void infer_bias_gelu(InferContext& ctx) {
  infer::check_arity(ctx, 1, 2);
  check_bias_gelu_inputs(ctx, 0);
  infer::same_as_input(ctx, 0);
}

void infer_bias_gelu_grad(InferContext& ctx) {
  infer::check_arity(ctx, 2, 3);
  infer::check_float(ctx, 0);
  infer::check_same_type(ctx, 0, 1);
  check_bias_gelu_inputs(ctx, 1);
  const Shape &dy = ctx.in_shape(0), &x = ctx.in_shape(1);
  if (dy.rank_known && x.rank_known && dy.is_static() && x.is_static() && !(dy == x))
    ctx.error("input 0 (dY) has shape " + dy.to_string() + ", X " + x.to_string());
  ctx.set_output(0, ctx.in_dtype(ctx.has_input(2) ? 2 : 0), x);
}

// One BiasGeluGrad gives the pre-activation's gradient dX; the bias gradient sums it over the
// axes the bias was broadcast along.
void grad_bias_gelu(GradContext& c) {
  Value* dy = c.grad_output(0);
  const bool bias = c.node().has_input(1);
  const bool want_bias = bias && c.needs_grad(1);
  if (!dy || (!c.needs_grad(0) && !want_bias)) return;
  std::vector<Value*> ins = {dy, c.input(0)};
  if (bias) ins.push_back(c.input(1));
  Value* dx = c.emit_otter("BiasGeluGrad", ins);
  // With a float32 bias on a half X, dX is float32 (for the bias's sum); X's gradient is its cast.
  c.set_grad_input(0, dx->dtype() == c.input(0)->dtype() ? dx : c.cast(dx, c.input(0)->dtype()));
  if (want_bias) c.set_grad_input(1, c.sum_to_shape(dx, c.input(1)));
}

// ---- ai.otter.BiasAdd (cast-elimination makes it, passes/cast_elimination.h) -------------------
//   BiasAdd(X, bias) {to?} -> Y = X + bias, bias of X's trailing shape (1-D along X's last axis, up
//   to X's whole shape) broadcast over the leading axes, summed in the wider type, rounded once to
//   `to` (X's type, or float32 for a half X): Add(bias, Cast(X, f32)), or that sum cast back; a
//   mixed-precision GEMM's Linear bias, or a float32 gradient sum taking a half GEMM's gradient,
//   without the Casts around it.
void infer_bias_add(InferContext& ctx) {
  infer::check_arity(ctx, 2, 2);
  if (!ctx.has_input(1)) ctx.error("input 1 (bias) is required");
  infer::check_type(ctx, 0, Types::kFloat);
  const DataType xt0 = ctx.in_dtype(0), bt = ctx.in_dtype(1);
  if (!((xt0 == DataType::kFloat16 || xt0 == DataType::kBFloat16) && bt == DataType::kFloat32))
    infer::check_same_type(ctx, 0, 1);
  const Shape &xs = ctx.in_shape(0), &bs = ctx.in_shape(1);
  if (bs.rank_known && bs.rank() < 1) ctx.error("the bias must have rank >= 1, got a scalar");
  if (bs.rank_known && xs.rank_known) {
    if (bs.rank() > xs.rank())
      ctx.error(str_cat("the bias ", bs.to_string(), " has more axes than X ", xs.to_string()));
    for (int64_t i = 1; i <= bs.rank(); ++i)
      infer::check_dims_match(ctx, bs.dims[bs.rank() - i], xs.dims[xs.rank() - i],
                              "the bias's shape is not X's trailing shape");
  }
  const DataType xt = ctx.in_dtype(0);
  DataType to = xt;
  if (ctx.node().has_attr("to")) {
    to = dtype_from_onnx(static_cast<int>(ctx.node().attr_i("to", 0)));
    const bool half_x = xt == DataType::kFloat16 || xt == DataType::kBFloat16;
    if (to != xt && !(half_x && to == DataType::kFloat32))
      ctx.error(str_cat("to must be X's type, or float32 for a half X; got ", dtype_name(to), " for X ",
                        dtype_name(xt)));
  }
  ctx.set_output(0, to, ctx.in_shape(0));
}

// dX = dY in X's type, dbias = dY summed over the broadcast axes.
void grad_bias_add(GradContext& c) {
  Value* dy = c.grad_output(0);
  if (!dy) return;
  if (c.needs_grad(0)) c.set_grad_input(0, c.cast(dy, c.input(0)->dtype()));
  if (c.needs_grad(1)) c.set_grad_input(1, c.sum_to_shape(c.cast(dy, c.input(1)->dtype()), c.input(1)));
}

}  // namespace

void register_bias_gelu_ops(OpTable& t) {
  using P = PrecisionClass;
  OpDef d;
  d.domain = kOtterDomain;
  d.op_type = "BiasGelu";
  d.infer = infer_bias_gelu;
  d.precision = P::kFollow;  // as Gelu and the element-wise chain it replaces
  d.inplace = true;          // Y[j] reads X[j] only (and the bias)
  d.grad_kind = GradKind::kRule;
  d.grad = grad_bias_gelu;
  d.summary = "BiasGelu(X, bias?) -> Y: Gelu(X + bias), exact erf form, bias broadcast over X's last axis";
  t.add(d);
  infer::add_otter_op(t, "BiasGeluGrad", infer_bias_gelu_grad, P::kFollow,
                      "BiasGeluGrad(dY, X, bias?) -> dX: dY * Gelu'(X + bias), the pre-activation recomputed");
  t.mutable_find(kOtterDomain, "BiasGeluGrad", 1)->inplace = true;
  OpDef a;
  a.domain = kOtterDomain;
  a.op_type = "BiasAdd";
  a.infer = infer_bias_add;
  a.precision = P::kFollow;
  a.inplace = true;  // Y[j] reads X[j] only (and the bias); the planner checks the sizes agree
  a.grad_kind = GradKind::kRule;
  a.grad = grad_bias_add;
  a.summary = "BiasAdd(X, bias) {to?} -> Y: X + bias of X's trailing shape, rounded once to `to` (X's type or "
              "float32)";
  t.add(a);
}

}  // namespace otter
