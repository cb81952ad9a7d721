// Op-table rows of InstanceNormalization (per sample and channel over the spatial axes, then scale
// and bias per channel), GroupNormalization {num_groups} (per sample over each group of channels;
// scale and bias per group at opset 18, per channel from 21), MeanVarianceNormalization {axes} and
// LpNormalization {axis, p}. Their gradient rules are built from primitive ops (ReduceSum, Mul,
// ...), recomputing the statistics.
// Kernels: kernels/cpu/normalize.cc, kernels/cuda/normalize.cu.
#include <numeric>

#include "graph/gradient.h"
#include "graph/op_table.h"
#include "graph/ops/infer_util.h"

namespace otter {
namespace {

using infer::add;
using infer::Types;
using P = PrecisionClass;

void infer_instance_norm(InferContext& ctx) {
  infer::check_arity(ctx, 3, 3);
  infer::check_float(ctx, 0);
  infer::check_same_type(ctx, 0, 1);
  infer::check_same_type(ctx, 0, 2);
  const Shape& x = ctx.in_shape(0);
  if (x.rank_known && x.rank() < 3)
    ctx.error(str_cat(infer::input_desc(ctx, 0), " must have rank >= 3 (N, C, spatial...), got ", x.to_string()));
  for (int i = 1; i <= 2; ++i) {
    const Shape& s = ctx.in_shape(i);
    if (s.rank_known && s.rank() != 1)
      ctx.error(str_cat(infer::input_desc(ctx, i), " must be 1-D [C], got ", s.to_string()));
    if (s.rank_known && x.rank_known)
      infer::check_dims_match(ctx, s.dims[0], x.dims[1], str_cat(infer::input_desc(ctx, i), " and the channels of X"));
  }
  ctx.set_output(0, ctx.in_dtype(0), x);
}

// GroupNormalization: X [N, C, ...] with C divisible by num_groups; scale and bias 1-D of length
// num_groups (opset 18-20) or C (opset 21); stash_type (21) names a float type.
void infer_group_norm(InferContext& ctx) {
  infer::check_arity(ctx, 3, 3);
  infer::check_float(ctx, 0);
  infer::check_same_type(ctx, 0, 1);
  infer::check_same_type(ctx, 0, 2);
  const int64_t groups = ctx.node().attr_i("num_groups", 0);
  if (groups <= 0) ctx.error(str_cat("attribute 'num_groups' is required and must be positive, got ", groups));
  const int64_t stash = ctx.node().attr_i("stash_type", 1);
  if (stash != 1 && stash != 10 && stash != 11 && stash != 16)
    ctx.error(str_cat("attribute 'stash_type' must be a float type (1, 10, 11 or 16), got ", stash));
  const Shape& x = ctx.in_shape(0);
  if (x.rank_known && x.rank() < 2)
    ctx.error(str_cat(infer::input_desc(ctx, 0), " must have rank >= 2 (N, C, ...), got ", x.to_string()));
  const Dim c = infer::dim_at(x, 1);
  if (c.is_static() && c.value % groups != 0)
    ctx.error(str_cat("the channels of X (", c.value, ") are not divisible by num_groups (", groups, ")"));
  const bool per_channel = ctx.node().opset() >= 21;
  for (int i = 1; i <= 2; ++i) {
    const Shape& s = ctx.in_shape(i);
    if (s.rank_known && s.rank() != 1)
      ctx.error(str_cat(infer::input_desc(ctx, i), " must be 1-D, got ", s.to_string()));
    if (!s.rank_known) continue;
    if (per_channel)
      infer::check_dims_match(ctx, s.dims[0], c, str_cat(infer::input_desc(ctx, i), " and the channels of X"));
    else
      infer::check_dims_match(ctx, s.dims[0], Dim(groups), str_cat(infer::input_desc(ctx, i), " and num_groups"));
  }
  ctx.set_output(0, ctx.in_dtype(0), x);
}

void infer_mvn(InferContext& ctx) {
  infer::check_arity(ctx, 1, 1);
  infer::check_float(ctx, 0);
  const Shape& x = ctx.in_shape(0);
  if (x.rank_known) infer::normalize_axes(ctx, ctx.node().attr_ints("axes", {0, 2, 3}), x.rank());
  ctx.set_output(0, ctx.in_dtype(0), x);
}

void infer_lp_norm(InferContext& ctx) {
  infer::check_arity(ctx, 1, 1);
  infer::check_float(ctx, 0);
  const int64_t p = ctx.node().attr_i("p", 2);
  if (p != 1 && p != 2) ctx.error(str_cat("attribute 'p' must be 1 or 2, got ", p));
  const Shape& x = ctx.in_shape(0);
  if (x.rank_known) normalize_axis(ctx, ctx.node().attr_i("axis", -1), x.rank());
  ctx.set_output(0, ctx.in_dtype(0), x);
}

// ReduceSum over `axes`, kept as size-1 dims.
Value* sum_keep(GradContext& c, Value* v, const std::vector<int64_t>& axes) {
  return c.emit("ReduceSum", {v, c.ints(axes)}, {{"keepdims", Attribute(int64_t{1})}});
}

// The mean over `axes` (kept) of v, whose shape is x's.
Value* mean_keep(GradContext& c, Value* v, const std::vector<int64_t>& axes, Value* x) {
  Value* s = sum_keep(c, v, axes);
  return c.emit("Mul", {s, c.numel_ratio(s, x, x)});
}

// y = scale * (x - mean) / sqrt(var + eps) + bias over `axes`: with g = dy * scale,
// dx = (g - mean(g) - xhat * mean(g * xhat)) / sqrt(var + eps).
void grad_mean_var(GradContext& c, const std::vector<int64_t>& axes, double eps, bool affine) {
  Value *x = c.input(0), *dy = c.grad_output(0);
  const int64_t r = c.rank_of(x);
  Value* xc = c.emit("Sub", {x, mean_keep(c, x, axes, x)});
  Value* var = mean_keep(c, c.emit("Mul", {xc, xc}), axes, x);
  Value* rstd = c.emit("Reciprocal", {c.emit("Sqrt", {c.emit("Add", {var, c.scalar_like(eps, x)})})});
  Value* xhat = c.emit("Mul", {xc, rstd});
  Value* g = dy;
  if (affine) {
    std::vector<int64_t> ones(static_cast<size_t>(r - 2));
    std::iota(ones.begin(), ones.end(), 1);
    g = c.emit("Mul", {dy, c.emit("Unsqueeze", {c.input(1), c.ints(ones)})});
  }
  if (c.needs_grad(0)) {
    Value* t = c.emit("Sub", {g, mean_keep(c, g, axes, x)});
    t = c.emit("Sub", {t, c.emit("Mul", {xhat, mean_keep(c, c.emit("Mul", {g, xhat}), axes, x)})});
    c.set_grad_input(0, c.emit("Mul", {t, rstd}));
  }
  if (!affine) return;
  std::vector<int64_t> not_c = {0};
  for (int64_t i = 2; i < r; ++i) not_c.push_back(i);
  auto channel_sum = [&](Value* v) {
    return c.emit("ReduceSum", {v, c.ints(not_c)}, {{"keepdims", Attribute(int64_t{0})}});
  };
  if (c.needs_grad(1)) c.set_grad_input(1, channel_sum(c.emit("Mul", {dy, xhat})));
  if (c.needs_grad(2)) c.set_grad_input(2, channel_sum(dy));
}

void grad_instance_norm(GradContext& c) {
  std::vector<int64_t> axes;
  for (int64_t i = 2; i < c.rank_of(c.input(0)); ++i) axes.push_back(i);
  grad_mean_var(c, axes, c.node().attr_f("epsilon", 1e-5f), true);
}

// GroupNormalization: X viewed as [N, G, M] (Reshape [0, G, -1]), each row normalised as above
// over axis 2; g = dY * scale, with scale per channel (opset 21) or per group (18).
void grad_group_norm(GradContext& c) {
  Value *x = c.input(0), *dy = c.grad_output(0), *scale = c.input(1);
  const int64_t r = c.rank_of(x);
  const bool per_channel = c.node().opset() >= 21;
  const std::vector<int64_t> row = {2};
  Value* view = c.ints({0, c.node().attr_i("num_groups", 0), -1});
  Value* xr = c.emit("Reshape", {x, view});
  Value* xc = c.emit("Sub", {xr, mean_keep(c, xr, row, xr)});
  Value* var = mean_keep(c, c.emit("Mul", {xc, xc}), row, xr);
  const double eps = c.node().attr_f("epsilon", 1e-5f);
  Value* rstd = c.emit("Reciprocal", {c.emit("Sqrt", {c.emit("Add", {var, c.scalar_like(eps, x)})})});
  Value* xhat = c.emit("Mul", {xc, rstd});  // [N, G, M]
  Value* dyr = c.emit("Reshape", {dy, view});
  std::vector<int64_t> spatial(static_cast<size_t>(r - 2));
  std::iota(spatial.begin(), spatial.end(), 1);
  Value* g;
  if (per_channel) {
    Value* s = spatial.empty() ? scale : c.emit("Unsqueeze", {scale, c.ints(spatial)});
    g = c.emit("Reshape", {c.emit("Mul", {dy, s}), view});
  } else {
    g = c.emit("Mul", {dyr, c.emit("Unsqueeze", {scale, c.ints({1})})});
  }
  if (c.needs_grad(0)) {
    Value* t = c.emit("Sub", {g, mean_keep(c, g, row, xr)});
    t = c.emit("Sub", {t, c.emit("Mul", {xhat, mean_keep(c, c.emit("Mul", {g, xhat}), row, xr)})});
    c.set_grad_input(0, c.reshape_like(c.emit("Mul", {t, rstd}), x));
  }
  // Per channel: sums over all axes but 1 of X's shape; per group: over axes 0 and 2 of the view.
  std::vector<int64_t> axes = {0, 2};
  Value *d = dyr, *dh = c.emit("Mul", {dyr, xhat});
  if (per_channel) {
    axes = {0};
    for (int64_t i = 2; i < r; ++i) axes.push_back(i);
    d = dy;
    dh = c.emit("Mul", {dy, c.reshape_like(xhat, x)});
  }
  auto reduce = [&](Value* v) { return c.emit("ReduceSum", {v, c.ints(axes)}, {{"keepdims", Attribute(int64_t{0})}}); };
  if (c.needs_grad(1)) c.set_grad_input(1, reduce(dh));
  if (c.needs_grad(2)) c.set_grad_input(2, reduce(d));
}

void grad_mvn(GradContext& c) {
  const int64_t r = c.rank_of(c.input(0));
  std::vector<int64_t> axes;
  for (int64_t a : c.node().attr_ints("axes", {0, 2, 3})) axes.push_back(a < 0 ? a + r : a);
  grad_mean_var(c, axes, 1e-9, false);
}

// y = x / n with n = sum |x| (p = 1) or sqrt(sum x^2) (p = 2) along axis:
// dx = (dy - d * sum(dy * y)) / n with d = sign(x) (p = 1) or y (p = 2).
void grad_lp_norm(GradContext& c) {
  Value *x = c.input(0), *y = c.output(0), *dy = c.grad_output(0);
  const int64_t r = c.rank_of(x);
  int64_t axis = c.node().attr_i("axis", -1);
  const std::vector<int64_t> axes = {axis < 0 ? axis + r : axis};
  const bool l1 = c.node().attr_i("p", 2) == 1;
  Value* n = l1 ? sum_keep(c, c.emit("Abs", {x}), axes) : c.emit("Sqrt", {sum_keep(c, c.emit("Mul", {x, x}), axes)});
  Value* d = l1 ? c.emit("Sign", {x}) : y;
  Value* t = c.emit("Sub", {dy, c.emit("Mul", {d, sum_keep(c, c.emit("Mul", {dy, y}), axes)})});
  c.set_grad_input(0, c.emit("Div", {t, n}));
}

}  // namespace

void register_normalization_ops(OpTable& t) {
  // InstanceNormalization 6; MeanVarianceNormalization 13; LpNormalization 1 (all unchanged to 21).
  // Statistics in fp32 under mixed precision, like LayerNormalization.
  add(t, "InstanceNormalization", 6, infer_instance_norm, P::kFp32, false, grad_rule(grad_instance_norm),
      "(X - mean) / sqrt(var + epsilon) per sample and channel over the spatial axes, * scale[c] + B[c]");
  // GroupNormalization 18 (scale, bias [num_groups]); 21 (scale, bias [C]; stash_type: the
  // statistics are computed in double on the CPU whatever it names).
  add(t, "GroupNormalization", 18, 20, infer_group_norm, P::kFp32, false, grad_rule(grad_group_norm),
      "(X - mean) / sqrt(var + epsilon) per sample over each of num_groups channel groups, * scale[g] + B[g]");
  add(t, "GroupNormalization", 21, infer_group_norm, P::kFp32, false, grad_rule(grad_group_norm),
      "(X - mean) / sqrt(var + epsilon) per sample over each of num_groups channel groups, * scale[c] + B[c]");
  add(t, "MeanVarianceNormalization", 13, infer_mvn, P::kFp32, false, grad_rule(grad_mvn),
      "(X - mean) / sqrt(var) over 'axes'");
  add(t, "LpNormalization", 1, infer_lp_norm, P::kFp32, false, grad_rule(grad_lp_norm),
      "X / ||X||_p along 'axis' {p: 1 or 2}");
}

}  // namespace otter
