// Fused scaled-dot-product attention of the ai.otter domain (the fuse-attention pass makes it,
// passes/fuse_attention.h) and its gradient op:
//
//   Attention(Q, Kt, V, mask?, seed?) {scale, mask_mode, fill, dropout} -> Y, LSE, Seed?
//     Q [..., H, S, D], Kt [..., Hk, D, T] (K already transposed, as MatMul(Q, Kt) reads it),
//     V [..., Hk, T, Dv]; H a multiple of Hk (grouped-query heads: head h reads K/V head
//     h / (H / Hk)); the other leading axes equal. scores = Q Kt * scale, then the mask
//     (broadcast to [..., H, S, T]): mask_mode "add" adds a float mask, "fill_true" replaces the
//     scores where a bool mask is true with `fill`, "fill_false" where it is false; "none": no
//     mask. Y = softmax(scores, last axis) V [..., H, S, Dv]; LSE [..., H, S] = logsumexp of each
//     row of scores (float32 for half inputs), kept for the backward pass instead of the
//     probabilities. dropout (default 0) drops each probability with that ratio and scales the
//     kept ones by 1 / (1 - dropout) before the product with V, as Dropout(Softmax) does; which
//     ones is a function of a 64-bit seed (kernels/common/attention_dropout.h): input `seed`
//     (int64 scalar) or, without it, one drawn per run from the training generator. Seed [] is
//     the seed used, which AttentionGrad takes to drop the same probabilities.
//   AttentionGrad(dY, Q, Kt, V, mask?, Y, LSE, seed?) {same} -> dQ?, dKt?, dV?, dScores?
//     recomputes the probabilities from LSE (kernels/cpu/attention.cc). dScores [..., H, S, T], in
//     the mask's type, is the gradient of the masked scores, only with mask_mode "add": the
//     gradient of a trained additive mask (T5's relative position bias) before its broadcast is
//     summed away. Without it nothing of size [S, T] is written.
// A bool mask carries no gradient.
#include "graph/gradient.h"
#include "graph/op_table.h"
#include "graph/ops/infer_util.h"

namespace otter {
namespace {

using infer::check_dims_match;
using infer::dim_at;
using infer::Types;

DataType lse_type(DataType t) { return is_half(t) ? DataType::kFloat32 : t; }

// The mask is input `m`.
void check_mask_mode(InferContext& ctx, int m) {
  const std::string mode = ctx.node().attr_s("mask_mode", "none");
  const bool want_mask = mode != "none";
  if (mode != "none" && mode != "add" && mode != "fill_true" && mode != "fill_false")
    ctx.error("attribute 'mask_mode' must be none, add, fill_true or fill_false, got '" + mode + "'");
  if (want_mask != ctx.has_input(m))
    ctx.error(want_mask ? str_cat("mask_mode ", mode, " needs input ", m, " (mask)")
                        : str_cat("input ", m, " (mask) needs a mask_mode"));
  if (want_mask) infer::check_type(ctx, m, mode == "add" ? Types::kFloat : Types::kBool);
}

// Checks Q, Kt, V (inputs q, q+1, q+2) and returns Y's shape.
Shape attention_shape(InferContext& ctx, int q) {
  for (int i = q; i < q + 3; ++i) infer::check_type(ctx, i, Types::kFloat);
  infer::check_same_type(ctx, q, q + 1);
  infer::check_same_type(ctx, q, q + 2);
  const Shape& qs = ctx.in_shape(q);
  const Shape& ks = ctx.in_shape(q + 1);
  const Shape& vs = ctx.in_shape(q + 2);
  if (!qs.rank_known || !ks.rank_known || !vs.rank_known) return Shape::unknown();
  const int64_t r = qs.rank();
  if (r < 2 || ks.rank() != r || vs.rank() != r)
    ctx.error("Q, Kt and V must have one rank >= 2, got " + qs.to_string() + ", " + ks.to_string() + ", " +
              vs.to_string());
  for (int64_t a = 0; a + 3 < r; ++a) {
    check_dims_match(ctx, ks.dims[a], qs.dims[a], str_cat("Kt's axis ", a, " differs from Q's"));
    check_dims_match(ctx, vs.dims[a], qs.dims[a], str_cat("V's axis ", a, " differs from Q's"));
  }
  if (r >= 3) {
    const Dim h = qs.dims[r - 3], hk = ks.dims[r - 3];
    check_dims_match(ctx, vs.dims[r - 3], hk, "V's heads differ from Kt's");
    if (h.is_static() && hk.is_static() && (hk.value == 0 || h.value % hk.value != 0))
      ctx.error(str_cat("Q's ", h.value, " heads are not a multiple of Kt's ", hk.value));
  }
  check_dims_match(ctx, ks.dims[r - 2], qs.dims[r - 1], "Kt's axis -2 (D) differs from Q's last axis");
  check_dims_match(ctx, vs.dims[r - 2], ks.dims[r - 1], "V's axis -2 (T) differs from Kt's last axis");
  std::vector<Dim> y = qs.dims;
  y[r - 1] = vs.dims[r - 1];
  return Shape(y);
}

// The dropout attribute, and the seed input `seed_in` it needs (`need_seed`) or may take.
void check_dropout(InferContext& ctx, int seed_in, bool need_seed) {
  const float p = ctx.node().attr_f("dropout", 0.f);
  if (!(p >= 0 && p < 1)) ctx.error(str_cat("attribute 'dropout' must be in [0, 1), got ", p));
  if (need_seed && p > 0 && !ctx.has_input(seed_in))
    ctx.error(str_cat("dropout ", p, " needs input ", seed_in, " (the forward's Seed)"));
  if (!ctx.has_input(seed_in)) return;
  infer::check_type(ctx, seed_in, Types::kInt64);
  const Shape& s = ctx.in_shape(seed_in);
  if (s.is_static() && s.numel() != 1)
    ctx.error("input " + std::to_string(seed_in) + " (seed) must hold one value, got " + s.to_string());
}

void infer_attention(InferContext& ctx) {
  infer::check_arity(ctx, 3, 5, 1, 3);
  check_mask_mode(ctx, 3);
  check_dropout(ctx, 4, false);
  if (ctx.has_output(2)) ctx.set_output(2, DataType::kInt64, Shape());
  Shape y = attention_shape(ctx, 0);
  const DataType t = ctx.in_dtype(0);
  ctx.set_output(0, t, y);
  if (!ctx.has_output(1)) return;
  if (!y.rank_known) return ctx.set_output(1, lse_type(t), Shape::unknown());
  std::vector<Dim> l = y.dims;
  l.pop_back();
  ctx.set_output(1, lse_type(t), Shape(l));
}

void infer_attention_grad(InferContext& ctx) {
  infer::check_arity(ctx, 4, 8, 1, 4);  // the mask (input 4) is optional
  for (int i : {5, 6})
    if (!ctx.has_input(i)) ctx.error(str_cat("input ", i, i == 5 ? " (Y)" : " (LSE)", " is required but missing"));
  check_mask_mode(ctx, 4);
  check_dropout(ctx, 7, true);
  Shape y = attention_shape(ctx, 1);
  infer::check_same_type(ctx, 0, 1);
  if (y.rank_known && ctx.in_shape(0).rank_known && !(ctx.in_shape(0) == y))
    ctx.error("input 0 (dY) has shape " + ctx.in_shape(0).to_string() + ", Y " + y.to_string());
  for (int i = 0; i < 3; ++i)
    if (ctx.has_output(i)) infer::same_as_input(ctx, i + 1, i);
  if (!ctx.has_output(3)) return;
  if (ctx.node().attr_s("mask_mode", "none") != "add") ctx.error("output 3 (dScores) needs mask_mode add");
  const Shape& kt = ctx.in_shape(2);
  if (!y.rank_known || !kt.rank_known) return ctx.set_output(3, ctx.in_dtype(4), Shape::unknown());
  std::vector<Dim> sc = y.dims;
  sc.back() = kt.dims.back();
  ctx.set_output(3, ctx.in_dtype(4), Shape(sc));
}

// One AttentionGrad for the wanted gradients of Q, Kt, V and an additive mask (its dScores summed
// to the mask's shape).
void grad_attention(GradContext& c) {
  if (c.grad_output(1)) c.unsupported("a gradient reaches Attention's LSE output");
  const bool mask_grad = c.node().has_input(3) && c.needs_grad(3);
  if (mask_grad && c.node().attr_s("mask_mode", "none") != "add")
    c.unsupported("a gradient reaches Attention's bool mask");
  Value* dy = c.grad_output(0);
  std::vector<bool> want = {c.needs_grad(0), c.needs_grad(1), c.needs_grad(2), mask_grad};
  if (!dy || (!want[0] && !want[1] && !want[2] && !want[3])) return;
  if (!c.output(1)) c.unsupported("Attention without its LSE output cannot be differentiated");
  const bool dropout = c.node().attr_f("dropout", 0.f) > 0;
  if (dropout && !c.output(2)) c.unsupported("Attention with dropout and without its Seed output");
  std::vector<Value*> in = {dy, c.input(0), c.input(1), c.input(2), c.input(3), c.output(0), c.output(1)};
  if (dropout) in.push_back(c.output(2));
  std::vector<Value*> g =
      c.emit_some("AttentionGrad", in, want, c.forward_attrs({"scale", "mask_mode", "fill", "dropout"}), kOtterDomain);
  for (int i = 0; i < 3; ++i) c.set_grad_input(i, g[i]);
  if (mask_grad) c.set_grad_input(3, c.sum_to_shape(g[3], c.input(3)));
}

}  // namespace

void register_attention_ops(OpTable& t) {
  OpDef d;
  d.domain = kOtterDomain;
  d.op_type = "Attention";
  d.infer = infer_attention;
  // Like the two MatMuls it replaces: Q, K and V in the half type (the kernel accumulates and
  // takes the softmax in float32), the mask keeps its own type.
  d.precision = PrecisionClass::kLow;
  d.precision_inputs = {0, 1, 2};
  d.grad_kind = GradKind::kRule;
  d.grad = grad_attention;
  d.summary =
      "Attention(Q, Kt, V, mask?, seed?) {scale, mask_mode, fill, dropout} -> Y, LSE, Seed?: "
      "dropout(softmax(Q Kt * scale, masked)) V, grouped-query heads; LSE keeps each row's logsumexp for the "
      "backward pass, Seed the dropout's seed";
  t.add(d);
  infer::add_otter_op(
      t, "AttentionGrad", infer_attention_grad, PrecisionClass::kLow,
      "AttentionGrad(dY, Q, Kt, V, mask?, Y, LSE, seed?) {scale, mask_mode, fill, dropout} -> dQ?, dKt?, dV?, "
      "dScores?: recomputes the probabilities from LSE block by block; dScores (additive masks "
      "only) is the gradient of the masked scores");
  t.mutable_find(kOtterDomain, "AttentionGrad", 1)->precision_inputs = {0, 1, 2, 3, 5};
}

}  // namespace otter
