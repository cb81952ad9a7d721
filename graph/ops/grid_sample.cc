// Op-table rows of GridSample (opset 16: 4-D X, modes bilinear / nearest / bicubic; opset 20: X of
// rank 3 to 5 here, modes linear / nearest / cubic; padding_mode zeros / border / reflection;
// align_corners), with its gradient rule and the ai.otter GridSampleGrad op it emits (dX and dGrid
// in every mode; nearest's dGrid is zero). Kernels: kernels/cpu/grid_sample.cc; index and weight
// arithmetic in kernels/common/grid_sample.h.
#include "graph/gradient.h"
#include "graph/op_table.h"
#include "graph/ops/infer_util.h"

namespace otter {
namespace {

using P = PrecisionClass;

// Spatial axes the kernels take (kernels/common/grid_sample.h, kMaxGridSampleDims).
constexpr int64_t kMaxGridSampleDims = 3;

// Checks the mode (named as the node's opset spells it; GridSampleGrad, an internal op, takes the
// opset 20 names), padding_mode and align_corners attributes.
void check_attrs(InferContext& ctx, bool opset16_names) {
  const std::string mode = ctx.node().attr_s("mode", opset16_names ? "bilinear" : "linear");
  const bool known = opset16_names ? mode == "bilinear" || mode == "nearest" || mode == "bicubic"
                                   : mode == "linear" || mode == "nearest" || mode == "cubic";
  if (!known)
    ctx.error(
        str_cat("attribute 'mode' must be ",
                opset16_names ? "\"bilinear\", \"nearest\" or \"bicubic\"" : "\"linear\", \"nearest\" or \"cubic\"",
                opset16_names ? " (GridSample 16)" : "", ", got \"", mode, "\""));
  const std::string pad = ctx.node().attr_s("padding_mode", "zeros");
  if (pad != "zeros" && pad != "border" && pad != "reflection")
    ctx.error(str_cat("attribute 'padding_mode' must be \"zeros\", \"border\" or \"reflection\", got \"", pad, "\""));
  const int64_t ac = ctx.node().attr_i("align_corners", 0);
  if (ac != 0 && ac != 1) ctx.error(str_cat("attribute 'align_corners' must be 0 or 1, got ", ac));
}

// X [N, C, D1, ..., Dr] and Grid [N, H1, ..., Hr, r]: the output dims [N, C, H1, ..., Hr] (rank
// unknown: an unknown shape).
Shape sampled_shape(InferContext& ctx, int x_in, int grid_in, bool four_d_only) {
  const Shape& x = ctx.in_shape(x_in);
  const Shape& grid = ctx.in_shape(grid_in);
  if (x.rank_known) {
    if (four_d_only && x.rank() != 4)
      ctx.error(str_cat("X must be 4-D [N, C, H, W] at opset 16-19 (N-D from opset 20), got ", x.to_string()));
    if (x.rank() < 3 || x.rank() > 2 + kMaxGridSampleDims)
      ctx.error(str_cat("X must have 1 to ", kMaxGridSampleDims, " spatial axes [N, C, D1, ...], got ", x.to_string()));
  }
  if (grid.rank_known && (grid.rank() < 3 || grid.rank() > 2 + kMaxGridSampleDims))
    ctx.error(str_cat("Grid must be [N, H1, ..., Hr, r] with 1 to ", kMaxGridSampleDims, " spatial axes, got ",
                      grid.to_string()));
  if (!x.rank_known || !grid.rank_known) {
    if (x.rank_known || grid.rank_known) {
      std::vector<Dim> d(static_cast<size_t>(x.rank_known ? x.rank() : grid.rank()));
      return Shape(d);
    }
    return Shape::unknown();
  }
  if (grid.rank() != x.rank())
    ctx.error(str_cat("Grid ", grid.to_string(), " must have X's rank (", x.rank(), ": [N, H1, ..., Hr, r]), X is ",
                      x.to_string()));
  const int64_t r = x.rank() - 2;
  infer::check_dims_match(ctx, grid.dims.back(), Dim(r),
                          str_cat("the last axis of Grid ", grid.to_string(),
                                  " must hold one coordinate per spatial axis of X ", x.to_string()));
  infer::check_dims_match(ctx, grid.dims[0], x.dims[0],
                          str_cat("the batch sizes of X ", x.to_string(), " and Grid ", grid.to_string()));
  std::vector<Dim> out = {infer::dim_known(x.dims[0]) ? x.dims[0] : grid.dims[0], x.dims[1]};
  out.insert(out.end(), grid.dims.begin() + 1, grid.dims.end() - 1);
  return Shape(out);
}

// GridSample(X [N, C, D1, ..., Dr], Grid [N, H1, ..., Hr, r]) -> Y [N, C, H1, ..., Hr].
void infer_grid_sample(InferContext& ctx) {
  infer::check_arity(ctx, 2, 2);
  infer::check_float(ctx, 0);
  infer::check_float(ctx, 1);
  const bool v16 = ctx.node().opset() < 20;
  check_attrs(ctx, v16);
  ctx.set_output(0, ctx.in_dtype(0), sampled_shape(ctx, 0, 1, v16));
}

// GridSampleGrad(dY, X, Grid) {mode, padding_mode, align_corners} -> dX?, dGrid?.
void infer_grid_sample_grad(InferContext& ctx) {
  infer::grads_like(3, 3, {1, 2})(ctx);
  infer::check_float(ctx, 2);
  check_attrs(ctx, false);
  const Shape y = sampled_shape(ctx, 1, 2, false);
  const Shape& dy = ctx.in_shape(0);
  if (y.rank_known && dy.rank_known && !(y == dy) && y.is_static() && dy.is_static())
    ctx.error(str_cat("dY ", dy.to_string(), " does not have GridSample's output shape ", y.to_string()));
}

// dX and dGrid from one GridSampleGrad; the mode in its opset 20 name.
void grad_grid_sample(GradContext& c) {
  const std::string m = c.node().attr_s("mode", "linear");
  const std::string mode = m == "bilinear" ? "linear" : m == "bicubic" ? "cubic" : m;
  infer::grad_fused(c, "GridSampleGrad", {c.grad_output(0), c.input(0), c.input(1)}, {0, 1},
                    {"padding_mode", "align_corners"}, {{"mode", Attribute(mode)}});
}

}  // namespace

void register_grid_sample_ops(OpTable& t) {
  // GridSample 16 (4-D, bilinear / bicubic) and 20 (N-D, linear / cubic); 22 only adds types.
  const char* summary =
      "samples X at the normalised coordinates of Grid (linear, nearest or cubic; zeros, border "
      "or reflection padding)";
  infer::add(t, "GridSample", 16, 19, infer_grid_sample, P::kFp32, false, grad_rule(grad_grid_sample), summary);
  infer::add(t, "GridSample", 20, infer_grid_sample, P::kFp32, false, grad_rule(grad_grid_sample), summary);
  infer::add_otter_op(t, "GridSampleGrad", infer_grid_sample_grad, P::kFp32,
                      "gradients of GridSample with respect to X and Grid");
}

}  // namespace otter
