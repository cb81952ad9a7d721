// Type rule and gradient rule of ai.otter.AddLayerNorm, the residual Add and the LayerNormalization
// that reads it in one op (the fuse-add-layernorm pass makes it, passes/fuse_add_layernorm.h);
// registered with the nn ops (graph/ops/nn.cc).
//   AddLayerNorm(X, R, scale, bias?) {axis, epsilon} -> Y, S?
//   S = X + R (X and R of one shape and type: no broadcasting), Y = LayerNormalization(S, scale,
//   bias) over the last axis (axis must name it), scale and bias 1-D of that axis's length. S is an
//   output only where something besides the normalisation reads the sum.
// Precision class FP32, as LayerNormalization: under mixed precision half inputs are cast to
// float32, so the sum, the statistics and Y are float32.
// Gradient: dS = LayerNormalizationGrad(dY, S, scale) + the gradient reaching S from its other
// readers, which LayerNormalizationGrad's optional fourth input dResidual adds in its dX loop; dX =
// dR = dS. Without the S output the rule recomputes S = Add(X, R) for the backward pass.
#include <algorithm>

#include "graph/gradient.h"
#include "graph/op_table.h"
#include "graph/ops/infer_util.h"

namespace otter {
namespace {

using infer::Types;

void infer_add_layer_norm(InferContext& ctx) {
  infer::check_arity(ctx, 3, 4, 1, 2);
  infer::check_type(ctx, 0, Types::kFloat);
  for (int i = 1; i < 4; ++i) infer::check_same_type(ctx, 0, i);
  const Shape &x = ctx.in_shape(0), &r = ctx.in_shape(1);
  if (x.rank_known && r.rank_known) {
    if (x.rank() != r.rank()) ctx.error("X " + x.to_string() + " and R " + r.to_string() + " differ in rank");
    for (int64_t k = 0; k < x.rank(); ++k)
      infer::check_dims_match(ctx, x.dims[k], r.dims[k], "X and R differ in shape (AddLayerNorm does not broadcast)");
  }
  const Shape& shape = x.rank_known ? x : r;
  if (shape.rank_known) {
    if (shape.rank() < 1) ctx.error("X must have rank >= 1, got a scalar");
    const int64_t axis = normalize_axis(ctx, ctx.node().attr_i("axis", -1), shape.rank());
    if (axis != shape.rank() - 1)
      ctx.error(str_cat("axis ", ctx.node().attr_i("axis", -1), " is not the last axis of X ", shape.to_string()));
    for (int i = 2; i < 4; ++i) {
      if (!ctx.has_input(i) || !ctx.in_shape(i).rank_known) continue;
      const Shape& s = ctx.in_shape(i);
      if (s.rank() != 1) ctx.error(str_cat(infer::input_desc(ctx, i), " must be 1-D, got ", s.to_string()));
      infer::check_dims_match(ctx, s.dims[0], shape.dims[shape.rank() - 1],
                              str_cat(infer::input_desc(ctx, i), " and X's last axis"));
    }
  }
  for (int o = 0; o < ctx.num_outputs(); ++o) ctx.set_output(o, ctx.in_dtype(0), shape);
}

void grad_add_layer_norm(GradContext& c) {
  Value* dy = c.grad_output(0);
  Value* ds = c.node().num_outputs() > 1 ? c.grad_output(1) : nullptr;  // from S's other readers
  const bool want_sum = c.needs_grad(0) || c.needs_grad(1);
  const std::vector<bool> want = {want_sum, c.needs_grad(2), c.node().has_input(3) && c.needs_grad(3)};
  Value* dsum = ds;
  if (dy && std::any_of(want.begin(), want.end(), [](bool w) { return w; })) {
    Value* s = c.node().num_outputs() > 1 && c.output(1) ? c.output(1) : c.emit("Add", {c.input(0), c.input(1)});
    std::vector<Value*> ins = {dy, s, c.input(2)};
    if (ds && want_sum) ins.push_back(ds);  // dResidual: added to dX in LayerNormalizationGrad's loop
    std::vector<Value*> g =
        c.emit_some("LayerNormalizationGrad", ins, want, c.forward_attrs({"axis", "epsilon"}), kOtterDomain);
    if (want_sum) dsum = g[0];
    for (int i = 1; i <= 2; ++i)
      if (g[i]) c.set_grad_input(i + 1, c.sum_to_shape(g[i], c.input(i + 1)));
  }
  if (!want_sum || !dsum) return;
  c.set_grad_input(0, dsum);
  c.set_grad_input(1, dsum);
}

}  // namespace

void register_add_layer_norm_op(OpTable& t) {
  OpDef d;
  d.domain = kOtterDomain;
  d.op_type = "AddLayerNorm";
  d.infer = infer_add_layer_norm;
  d.precision = PrecisionClass::kFp32;  // as LayerNormalization: statistics and Y in float32
  d.grad_kind = GradKind::kRule;
  d.grad = grad_add_layer_norm;
  d.summary =
      "AddLayerNorm(X, R, scale, bias?) {axis, epsilon} -> Y, S?: S = X + R (one shape), Y = "
      "LayerNormalization(S) over the last axis, in one pass";
  t.add(d);
}

}  // namespace otter
