// Op-table rows of Resize (opsets 11-17 attributes: mode nearest / linear / cubic, the coordinate
// transformation modes, nearest_mode, cubic_coeff_a, exclude_outside, extrapolation_value) and its
// gradient ai.otter.ResizeGrad(dY, shape, roi?, scales?, sizes?), which adds each dY element into
// its taps with their weights (nearest and linear; cubic has no gradient rule). Kernels:
// kernels/cpu/resize.cc, kernels/cuda/resize.cu.
#include <cmath>

#include "graph/gradient.h"
#include "graph/op_table.h"
#include "graph/ops/infer_util.h"

namespace otter {
namespace {

using infer::Types;
using P = PrecisionClass;

// Whether optional input i is given: present and not an empty tensor (exporters write an empty
// scales tensor next to sizes).
bool given(InferContext& ctx, int i) { return ctx.has_input(i) && infer::static_length(ctx, i) != int64_t{0}; }

// Output dims from input dims `x` and the scales (input s) or sizes (input s + 1) when constant.
Shape resized_shape(InferContext& ctx, const Shape& x, int s) {
  if (!x.rank_known) return Shape::unknown();
  std::vector<Dim> out(static_cast<size_t>(x.rank()));
  const bool has_sizes = given(ctx, s + 1);
  if (has_sizes) {
    if (auto sizes = infer::const_ints(ctx, s + 1)) {
      if (static_cast<int64_t>(sizes->size()) != x.rank())
        ctx.error(str_cat("sizes ", dims_to_string(*sizes), " must have one entry per dim of X ", x.to_string()));
      for (size_t i = 0; i < out.size(); ++i) out[i] = Dim((*sizes)[i]);
    }
  } else if (given(ctx, s)) {
    if (auto scales = infer::const_doubles(ctx, s)) {
      if (static_cast<int64_t>(scales->size()) != x.rank())
        ctx.error(str_cat("scales must have one entry per dim of X ", x.to_string(), ", got ", scales->size()));
      for (size_t i = 0; i < out.size(); ++i)
        if (x.dims[i].is_static())
          out[i] = Dim(static_cast<int64_t>(std::floor(static_cast<double>(x.dims[i].value) * (*scales)[i])));
    }
  } else {
    ctx.error("one of the inputs scales and sizes must be given");
  }
  return Shape(out);
}

void infer_resize(InferContext& ctx) {
  infer::check_arity(ctx, 1, 4);
  infer::check_type(ctx, 0, Types::kNumeric);
  const std::string mode = ctx.node().attr_s("mode", "nearest");
  if (mode != "nearest" && mode != "linear" && mode != "cubic")
    ctx.error("attribute 'mode' must be \"nearest\", \"linear\" or \"cubic\", got \"" + mode + "\"");
  if (ctx.node().find_attr("axes") || ctx.node().find_attr("keep_aspect_ratio_policy"))
    ctx.error("attributes 'axes' and 'keep_aspect_ratio_policy' (Resize 18) are not supported");
  if (given(ctx, 2) && given(ctx, 3)) ctx.error("only one of the inputs scales and sizes may be given");
  ctx.set_output(0, ctx.in_dtype(0), resized_shape(ctx, ctx.in_shape(0), 2));
}

// ResizeGrad(dY, shape, roi?, scales?, sizes?) -> dX.
void infer_resize_grad(InferContext& ctx) {
  infer::check_arity(ctx, 2, 5);
  infer::check_float(ctx, 0);
  infer::check_type(ctx, 1, Types::kInt64);
  std::vector<Dim> dims;
  if (auto d = infer::sym_data(ctx, 1))
    dims = *d;
  else if (auto n = infer::static_length(ctx, 1))
    dims.assign(static_cast<size_t>(*n), Dim());
  else
    return ctx.set_output(0, ctx.in_dtype(0), Shape::unknown());
  ctx.set_output(0, ctx.in_dtype(0), Shape(dims));
}

void grad_resize(GradContext& c) {
  const std::string mode = c.node().attr_s("mode", "nearest");
  if (mode == "cubic") c.unsupported("no gradient rule for Resize in cubic mode (nearest and linear have one)");
  const Node& n = c.node();
  auto in = [&](int i) { return n.has_input(i) ? c.input(i) : nullptr; };
  c.set_grad_input(0, c.emit_otter("ResizeGrad", {c.grad_output(0), c.shape_of(c.input(0)), in(1), in(2), in(3)},
                                   c.forward_attrs({"mode", "coordinate_transformation_mode", "nearest_mode",
                                                    "cubic_coeff_a", "exclude_outside", "extrapolation_value"})));
}

}  // namespace

void register_resize_ops(OpTable& t) {
  // Resize 13 (11's inputs and attributes; 18 adds axes / keep_aspect_ratio_policy, refused).
  t.add({.domain = "",
         .op_type = "Resize",
         .since_version = 13,
         .until_version = kMaxOnnxOpset,
         .infer = infer_resize,
         .precision = P::kFollow,
         .precision_inputs = {0},
         .grad_kind = GradKind::kRule,
         .grad = grad_resize,
         .summary = "X resized by scales or to sizes {mode: nearest, linear, cubic; coordinate_transformation_mode}"});
  infer::add_otter_op(t, "ResizeGrad", infer_resize_grad, P::kFollow,
                      "gradient of Resize: dY added into the input positions of its taps, weighted");
}

}  // namespace otter
