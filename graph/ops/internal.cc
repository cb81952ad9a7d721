// Internal ops of the ai.otter domain used by the training passes: gradient accumulation, the
// finite check, norms, learning-rate schedules, optimizer updates and loss-scale updates. Each is
// documented in docs/ops.md. Gradient ops of the op families live next to their forward op.
#include "graph/error.h"
#include "graph/op_table.h"

namespace otter {

namespace {

const Shape& shape_of(InferContext& ctx, int i) { return ctx.in_shape(i); }

OpDef internal(const std::string& op, std::string summary, InferFn infer) {
  OpDef d;
  d.domain = kOtterDomain;
  d.op_type = op;
  d.since_version = 1;
  d.infer = std::move(infer);
  d.summary = std::move(summary);
  d.grad_kind = GradKind::kNotDifferentiable;
  return d;
}

void require_float(InferContext& ctx, int i) {
  if (!is_float(ctx.in_dtype(i))) ctx.error(str_cat("input ", i, " must be float, got ", dtype_name(ctx.in_dtype(i))));
}

Shape scalar() { return Shape(std::vector<Dim>{}); }

// The optional half-precision copy of an optimizer update's parameter: input `in` (float16 or
// bfloat16, the parameter's shape) is rewritten in place as output `out`.
void set_half_copy_output(InferContext& ctx, int in, int out) {
  if (!ctx.has_input(in)) {
    if (ctx.has_output(out)) ctx.error(str_cat("output ", out, " (the half copy) needs input ", in));
    return;
  }
  if (!is_half(ctx.in_dtype(in))) ctx.error(str_cat("input ", in, " (the half copy) must be f16 or bf16"));
  if (!(ctx.in_shape(in) == ctx.in_shape(0))) ctx.error(str_cat("input ", in, " (the half copy) differs in shape"));
  ctx.set_output(out, ctx.in_dtype(in), shape_of(ctx, in));
}

// The optimizer's ops: the gradient multiplier, the learning rate and the updates.
void register_optimizer_ops(OpTable& t) {
  // GradScale(inv_scale, norm_sq?) {max_norm}: the multiplier applied to accumulated gradients:
  // inv_scale, times torch's clip_grad_norm_ coefficient min(1, max_norm / (norm + 1e-6)) when
  // max_norm > 0, where norm = sqrt(norm_sq) * inv_scale is the norm of the unscaled gradient.
  t.add(internal("GradScale", "gradient multiplier: 1/S times the global-norm clipping coefficient", [](InferContext& ctx) {
    ctx.set_output(0, DataType::kFloat32, scalar());
  }));
  // LearningRate(step) {schedule, lr, warmup, total, min_lr}: lr of the update taken after `step`
  // completed (non-skipped) updates.
  t.add(internal("LearningRate", "learning rate of the next update (constant, linear-warmup, cosine)", [](InferContext& ctx) {
    ctx.set_output(0, DataType::kFloat32, scalar());
  }));
  // SGDUpdate(p, g, mom?, lr, gscale, finite, p_half?) {momentum, nesterov, weight_decay}
  //   -> p_out, mom_out, p_half_out. p_half, when given, is the weight's half-precision copy: the
  //   kernel rounds each new weight into it (in place), so one kernel keeps both copies in step.
  t.add(internal("SGDUpdate", "torch.optim.SGD update (momentum, Nesterov, weight decay), skipped when not finite",
                 [](InferContext& ctx) {
                   require_float(ctx, 0);
                   ctx.set_output(0, ctx.in_dtype(0), shape_of(ctx, 0));
                   if (ctx.has_input(2)) ctx.set_output(1, ctx.in_dtype(2), shape_of(ctx, 2));
                   set_half_copy_output(ctx, 6, 2);
                 }));
  // AdamUpdate(p, g, m, v, step, lr, gscale, finite, p_half?) {beta1, beta2, eps, weight_decay,
  //   decoupled} -> p_out, m_out, v_out, p_half_out. step counts completed updates before this
  //   one; p_half as in SGDUpdate.
  t.add(internal("AdamUpdate", "torch.optim.Adam / AdamW update, skipped when not finite", [](InferContext& ctx) {
    require_float(ctx, 0);
    ctx.set_output(0, ctx.in_dtype(0), shape_of(ctx, 0));
    ctx.set_output(1, ctx.in_dtype(2), shape_of(ctx, 2));
    ctx.set_output(2, ctx.in_dtype(3), shape_of(ctx, 3));
    set_half_copy_output(ctx, 8, 3);
  }));
}

// The data-parallel collectives (passes/all_reduce.h).
void register_collective_ops(OpTable& t) {
  // AllReduce(x0, ..., xn) {op=avg|sum, world=N} -> y0, ..., yn: each yi, xi's own buffer, holds the
  // mean (or sum) of xi over the N ranks of a data-parallel job (passes/all_reduce.h).
  t.add(internal("AllReduce", "mean (or sum) of each input over the ranks of a data-parallel job (in place)",
                 [](InferContext& ctx) {
                   for (int i = 0; i < ctx.num_inputs(); ++i) {
                     require_float(ctx, i);
                     ctx.set_output(i, ctx.in_dtype(i), shape_of(ctx, i));
                   }
                 }));
  // ZeRO-1 (passes/all_reduce.h, zero=1): shards of ceil(numel/N) elements, the last rank's padded with zeros.
  // ReduceScatter(x) {op=sum, world=N} -> y[ceil(numel(x)/N)]: this rank's shard of the sum over the ranks.
  // Shard(x) {world=N} -> y[ceil(numel(x)/N)]: a copy of this rank's shard of x.
  // AllGather(y, x) {world=N} -> x': every rank's shard y, in rank order, written into x's buffer.
  auto shard_shape = [](InferContext& ctx) {
    const Shape& s = shape_of(ctx, 0);
    if (!s.is_static()) ctx.error("input 0 must have a static shape to be sharded");
    const int64_t n = ctx.node().attr_i("world", 1);
    if (n < 1) ctx.error("world must be positive");
    return Shape::of({(s.numel() + n - 1) / n});
  };
  t.add(internal("ReduceScatter", "this rank's shard of the sum of the input over the ranks (ZeRO-1)",
                 [shard_shape](InferContext& ctx) {
                   require_float(ctx, 0);
                   ctx.set_output(0, ctx.in_dtype(0), shard_shape(ctx));
                 }));
  t.add(internal("Shard", "a copy of this rank's shard of the input (ZeRO-1)",
                 [shard_shape](InferContext& ctx) { ctx.set_output(0, ctx.in_dtype(0), shard_shape(ctx)); }));
  t.add(internal("AllGather", "the ranks' shards, in rank order, written into input 1 (ZeRO-1)", [](InferContext& ctx) {
    const int64_t n = ctx.node().attr_i("world", 1);
    const Shape& full = shape_of(ctx, 1);
    if (ctx.in_dtype(0) != ctx.in_dtype(1)) ctx.error("the shard and the target differ in type");
    if (!full.is_static() || !shape_of(ctx, 0).is_static() || shape_of(ctx, 0).numel() != (full.numel() + n - 1) / n)
      ctx.error("input 0 must be a shard of ceil(numel/world) elements of input 1");
    ctx.set_output(0, ctx.in_dtype(1), full);
  }));
}

}  // namespace

void register_internal_ops(OpTable& t) {
  t.add(internal("SumToShape", "sum a broadcast gradient back to the shape of `like` (numpy unbroadcasting)",
                 [](InferContext& ctx) {
                   ctx.set_output(0, ctx.in_dtype(0), shape_of(ctx, 1));
                 }));
  // AccumulateGrad(acc, g) -> acc_out. The first micro-step of an optimizer step writes g (cast to
  // acc's type), later ones add in place; acc_out shares acc's buffer.
  t.add(internal("AccumulateGrad", "acc = g on the first micro-step, acc += g after (in place)", [](InferContext& ctx) {
    require_float(ctx, 0);
    require_float(ctx, 1);
    ctx.set_output(0, ctx.in_dtype(0), shape_of(ctx, 0));
  }));
  // GemmAccumulate(a, b, acc) {transA, transB, alpha}: acc = alpha op(a) op(b) (+ acc after the
  // first micro-step): a weight-gradient GEMM with beta 0 then 1, the fused accumulation.
  t.add(internal("GemmAccumulate", "acc (+)= alpha * op(a) * op(b): a weight-gradient GEMM accumulating in place",
                 [](InferContext& ctx) {
                   require_float(ctx, 0);
                   require_float(ctx, 1);
                   require_float(ctx, 2);
                   const Shape& a = ctx.in_shape(0);
                   const Shape& b = ctx.in_shape(1);
                   const Shape& c = ctx.in_shape(2);
                   if (a.rank_known && b.rank_known && (a.rank() != 2 || b.rank() != 2))
                     ctx.error("GemmAccumulate takes 2-D operands");
                   if (!c.rank_known || c.rank() != 2) ctx.error("GemmAccumulate accumulator must be 2-D");
                   ctx.set_output(0, ctx.in_dtype(2), c);
                 }));
  t.add(internal("AllFinite", "true when every element of every input is finite", [](InferContext& ctx) {
    for (int i = 0; i < ctx.num_inputs(); ++i) require_float(ctx, i);
    ctx.set_output(0, DataType::kBool, scalar());
  }));
  t.add(internal("GlobalNormSq", "sum of squares of all elements of all inputs (fp32)", [](InferContext& ctx) {
    for (int i = 0; i < ctx.num_inputs(); ++i) require_float(ctx, i);
    ctx.set_output(0, DataType::kFloat32, scalar());
  }));
  // StepCount(step, finite) -> step + finite.
  t.add(internal("StepCount", "count of applied updates: +1 unless the step was skipped", [](InferContext& ctx) {
    ctx.set_output(0, ctx.in_dtype(0), shape_of(ctx, 0));
  }));
  // LossScaleUpdate(S, good, finite) {growth, backoff, interval, min_scale, max_scale} -> S_out, good_out
  t.add(internal("LossScaleUpdate", "dynamic loss scale: back off on overflow, grow after `interval` good steps",
                 [](InferContext& ctx) {
                   ctx.set_output(0, ctx.in_dtype(0), shape_of(ctx, 0));
                   ctx.set_output(1, ctx.in_dtype(1), shape_of(ctx, 1));
                 }));
  t.add(internal("LossScaleInverse", "1 / S, the unscale factor of the apply program", [](InferContext& ctx) {
    ctx.set_output(0, DataType::kFloat32, shape_of(ctx, 0));
  }));
  // ScaleSeed(S) {k}: the backward seed S / K.
  t.add(internal("ScaleSeed", "backward seed: loss scale S divided by the accumulation count K", [](InferContext& ctx) {
    ctx.set_output(0, DataType::kFloat32, shape_of(ctx, 0));
  }));
  register_collective_ops(t);
  register_optimizer_ops(t);
  // The accumulate and update kernels write their state input in place and return it as the output.
  t.mutable_find(kOtterDomain, "AccumulateGrad", 1)->views = {{0, 0}};
  t.mutable_find(kOtterDomain, "GemmAccumulate", 1)->views = {{0, 2}};
  t.mutable_find(kOtterDomain, "SGDUpdate", 1)->views = {{0, 0}, {1, 2}, {2, 6}};
  t.mutable_find(kOtterDomain, "AdamUpdate", 1)->views = {{0, 0}, {1, 2}, {2, 3}, {3, 8}};
  t.mutable_find(kOtterDomain, "AllGather", 1)->views = {{0, 1}};
  auto& reduced = t.mutable_find(kOtterDomain, "AllReduce", 1)->views;
  for (int i = 0; i < 256; ++i) reduced.emplace_back(i, i);  // passes/all_reduce.cc: at most 256 per bucket
}

}  // namespace otter
