// Op-table rows of LRN (local response normalization across channels, with its gradient rule and
// the ai.otter LRNGrad op it emits) and Det (determinants of square matrices, not differentiable).
// Kernels: kernels/cpu/lrn.cc, kernels/cpu/linalg.cc; element math in kernels/common/lrn.h.
#include "graph/gradient.h"
#include "graph/op_table.h"
#include "graph/ops/infer_util.h"

namespace otter {
namespace {

// LRN(X [N, C, d1, ...]) {alpha, beta, bias, size} -> Y of X's shape.
void infer_lrn(InferContext& ctx) {
  infer::check_arity(ctx, 1, 1);
  infer::check_type(ctx, 0, infer::Types::kFloat);
  if (!ctx.node().has_attr("size")) ctx.error("the required attribute 'size' is missing");
  if (ctx.node().attr_i("size", 0) < 1)
    ctx.error(str_cat("attribute 'size' must be positive, got ", ctx.node().attr_i("size", 0)));
  const Shape& x = ctx.in_shape(0);
  if (x.rank_known && x.rank() < 2) ctx.error(str_cat("X of shape ", x.to_string(), " has no channel axis [N, C, ...]"));
  infer::same_as_input(ctx, 0);
}


void grad_lrn(GradContext& c) {
  c.set_grad_input(0, c.emit_otter("LRNGrad", {c.grad_output(0), c.input(0)},
                                   c.forward_attrs({"alpha", "beta", "bias", "size"})));
}

// Det(X [..., M, M]) -> [...].
void infer_det(InferContext& ctx) {
  infer::check_arity(ctx, 1, 1);
  infer::check_type(ctx, 0, infer::Types::kFloat);
  const Shape& x = ctx.in_shape(0);
  if (!x.rank_known) return ctx.set_output(0, ctx.in_dtype(0), Shape::unknown());
  if (x.rank() < 2) ctx.error(str_cat("X of shape ", x.to_string(), " is not a (batch of) square matrices [..., M, M]"));
  infer::check_dims_match(ctx, x.dims[x.rank() - 1], x.dims[x.rank() - 2],
                          str_cat("X of shape ", x.to_string(), " is not square"));
  ctx.set_output(0, ctx.in_dtype(0), Shape(std::vector<Dim>(x.dims.begin(), x.dims.end() - 2)));
}

}  // namespace

void register_lrn_det_ops(OpTable& t) {
  t.add({.domain = "",
         .op_type = "LRN",
         .since_version = 13,
         .until_version = kMaxOnnxOpset,
         .infer = infer_lrn,
         .precision = PrecisionClass::kFp32,
         .grad_kind = GradKind::kRule,
         .grad = grad_lrn,
         .summary = "X / (bias + alpha / size * sum of X^2 over a window of size channels)^beta"});
  infer::add_otter_op(t, "LRNGrad", infer::unary_grad, PrecisionClass::kFp32, "gradient of LRN with respect to X");
  t.add({.domain = "",
         .op_type = "Det",
         .since_version = 11,
         .until_version = kMaxOnnxOpset,
         .infer = infer_det,
         .precision = PrecisionClass::kFp32,
         .grad_kind = GradKind::kNotDifferentiable,
         .summary = "determinant of each square matrix [..., M, M] (LU with partial pivoting in double)"});
}

}  // namespace otter
