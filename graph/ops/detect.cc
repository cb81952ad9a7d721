// Op-table rows of the detection and sequence ops: NonMaxSuppression (int64 [num_selected, 3], a
// data-dependent length), Unique (data-dependent length), ReverseSequence (its own inverse, so its
// gradient is ReverseSequence of dY), MaxUnpool (gradient: dY gathered at the indices) and RoiAlign
// (not differentiable); TfIdfVectorizer's row is in graph/ops/tfidf.cc. Kernels:
// kernels/cpu/detect.cc and kernels/cpu/unique.cc; on CUDA the CPU kernels run on host copies
// (kernels/cuda/host_ops.cc). Registered by register_select_ops.
#include "graph/gradient.h"
#include "graph/op_table.h"
#include "graph/ops/infer_util.h"

namespace otter {
namespace {

using infer::add;
using infer::Types;
using P = PrecisionClass;

// Fails unless input i (when its rank is known) has rank r; `name` is its ONNX name, `layout` the
// layout expected.
void check_rank(InferContext& ctx, int i, int64_t r, const char* name, const char* layout) {
  const Shape& s = ctx.in_shape(i);
  if (s.rank_known && s.rank() != r)
    ctx.error(str_cat(name, " (", infer::input_desc(ctx, i), ") must be ", layout, ", got ", s.to_string()));
}

// NonMaxSuppression(boxes [B, N, 4], scores [B, C, N], max_output_boxes_per_class?, iou_threshold?,
// score_threshold?) {center_point_box} -> int64 [num_selected, 3] (batch, class, box).
void infer_nms(InferContext& ctx) {
  infer::check_arity(ctx, 2, 5);
  infer::check_type(ctx, 0, Types::kFloat);
  infer::check_type(ctx, 1, Types::kFloat);
  if (ctx.has_input(2)) infer::check_type(ctx, 2, Types::kInt64);
  for (int i = 3; i < 5; ++i)
    if (ctx.has_input(i)) infer::check_type(ctx, i, Types::kFloat);
  check_rank(ctx, 0, 3, "boxes", "[num_batches, spatial_dimension, 4]");
  check_rank(ctx, 1, 3, "scores", "[num_batches, num_classes, spatial_dimension]");
  const Shape& boxes = ctx.in_shape(0);
  const Shape& scores = ctx.in_shape(1);
  if (boxes.rank_known) infer::check_dims_match(ctx, boxes.dims[2], Dim(4), "boxes' last dimension (box coordinates)");
  if (boxes.rank_known && scores.rank_known) {
    infer::check_dims_match(ctx, boxes.dims[0], scores.dims[0], "num_batches of boxes and scores");
    infer::check_dims_match(ctx, boxes.dims[1], scores.dims[2], "spatial_dimension of boxes and scores");
  }
  for (int i = 2; i < 5; ++i)
    if (ctx.has_input(i)) infer::check_scalar(ctx, i, i == 2 ? "max_output_boxes_per_class" : i == 3 ? "iou_threshold" : "score_threshold");
  const int64_t cpb = ctx.node().attr_i("center_point_box", 0);
  if (cpb != 0 && cpb != 1) ctx.error(str_cat("attribute 'center_point_box' must be 0 or 1, got ", cpb));
  ctx.set_output(0, DataType::kInt64, Shape({Dim(), Dim(3)}));
}

// Unique(X) {axis?, sorted} -> Y, indices?, inverse_indices?, counts? (int64).
void infer_unique(InferContext& ctx) {
  infer::check_arity(ctx, 1, 1, 1, 4);
  const Shape& x = ctx.in_shape(0);
  const int64_t sorted = ctx.node().attr_i("sorted", 1);
  if (sorted != 0 && sorted != 1) ctx.error(str_cat("attribute 'sorted' must be 0 or 1, got ", sorted));
  Shape y({Dim()});
  Dim inverse_len;
  if (ctx.node().find_attr("axis")) {
    y = Shape::unknown();
    if (x.rank_known) {
      if (x.rank() == 0) ctx.error("X must have rank >= 1 when 'axis' is given, got a scalar");
      const int64_t axis = normalize_axis(ctx, ctx.node().attr_i("axis", 0), x.rank());
      y = x;
      y.dims[axis] = Dim();
      inverse_len = x.dims[axis];
    }
  } else if (x.rank_known) {
    inverse_len = infer::dims_product(x.dims);
  }
  ctx.set_output(0, ctx.in_dtype(0), y);
  for (int i = 1; i < 4; ++i)
    if (i < ctx.num_outputs() && ctx.has_output(i))
      ctx.set_output(i, DataType::kInt64, Shape({i == 2 ? inverse_len : Dim()}));
}

// ReverseSequence(input, sequence_lens) {batch_axis, time_axis}: input's shape.
void infer_reverse_sequence(InferContext& ctx) {
  infer::check_arity(ctx, 2, 2);
  infer::check_type(ctx, 1, Types::kInt64);
  infer::check_1d(ctx, 1, "sequence_lens");
  const int64_t batch = ctx.node().attr_i("batch_axis", 1), time = ctx.node().attr_i("time_axis", 0);
  if ((batch != 0 && batch != 1) || (time != 0 && time != 1) || batch == time)
    ctx.error(str_cat("attributes 'batch_axis' and 'time_axis' must be 0 and 1 in either order, got ", batch,
                      " and ", time));
  const Shape& x = ctx.in_shape(0);
  if (x.rank_known && x.rank() < 2) ctx.error(str_cat("input must have rank >= 2, got ", x.to_string()));
  if (x.rank_known && ctx.in_shape(1).rank_known)
    infer::check_dims_match(ctx, x.dims[batch], ctx.in_shape(1).dims[0], "sequence_lens' length and the batch axis");
  ctx.set_output(0, ctx.in_dtype(0), x);
}

// dX = ReverseSequence(dY, sequence_lens): reversing the first len steps twice is the identity.
void grad_reverse_sequence(GradContext& c) {
  c.set_grad_input(0, c.emit("ReverseSequence", {c.grad_output(0), c.input(1)},
                             c.forward_attrs({"batch_axis", "time_axis"})));
}

// MaxUnpool(X [N, C, D1...], I, output_shape?) {kernel_shape, pads, strides}.
void infer_max_unpool(InferContext& ctx) {
  infer::check_arity(ctx, 2, 3);
  infer::check_type(ctx, 0, Types::kFloat);
  infer::check_type(ctx, 1, Types::kInt64);
  const Shape& x = ctx.in_shape(0);
  const std::vector<int64_t> kernel = ctx.node().attr_ints("kernel_shape");
  if (kernel.empty()) ctx.error("attribute 'kernel_shape' is required");
  const size_t n = kernel.size();
  const std::vector<int64_t> strides = ctx.node().attr_ints("strides", std::vector<int64_t>(n, 1));
  const std::vector<int64_t> pads = ctx.node().attr_ints("pads", std::vector<int64_t>(2 * n, 0));
  if (strides.size() != n || pads.size() != 2 * n)
    ctx.error(str_cat("attributes 'strides' (", strides.size(), " values) and 'pads' (", pads.size(),
                      ") must have ", n, " and ", 2 * n, " values, one per spatial axis of 'kernel_shape'"));
  if (x.rank_known && x.rank() != static_cast<int64_t>(n) + 2)
    ctx.error(str_cat("X ", x.to_string(), " must have rank ", n + 2, " ([N, C] and the ", n,
                      " spatial axes of 'kernel_shape')"));
  const Shape& idx = ctx.in_shape(1);
  if (x.rank_known && idx.rank_known)
    for (size_t i = 0; i < x.dims.size(); ++i) infer::check_dims_match(ctx, x.dims[i], idx.dims[i], "X and I");
  if (ctx.has_input(2)) {
    infer::check_type(ctx, 2, Types::kInt64);
    infer::check_1d(ctx, 2, "output_shape");
    if (auto s = infer::const_ints(ctx, 2)) {
      if (s->size() != n + 2) ctx.error(str_cat("output_shape must have ", n + 2, " values, got ", s->size()));
      return ctx.set_output(0, ctx.in_dtype(0), Shape(std::vector<Dim>(s->begin(), s->end())));
    }
    return ctx.set_output(0, ctx.in_dtype(0), Shape(std::vector<Dim>(n + 2)));
  }
  if (!x.rank_known) return ctx.set_output(0, ctx.in_dtype(0), Shape::unknown());
  std::vector<Dim> out = x.dims;
  for (size_t i = 0; i < n; ++i)
    out[i + 2] = x.dims[i + 2].is_static()
                     ? Dim((x.dims[i + 2].value - 1) * strides[i] + kernel[i] - pads[i] - pads[i + n])
                     : Dim();
  ctx.set_output(0, ctx.in_dtype(0), Shape(out));
}

// dX = Gather(Reshape(dY, [-1]), I): each input element went to the flat output position I names.
void grad_max_unpool(GradContext& c) {
  Value* flat = c.emit("Reshape", {c.grad_output(0), c.ints({-1})});
  c.set_grad_input(0, c.emit("Gather", {flat, c.input(1)}, {{"axis", Attribute(int64_t{0})}}));
}

// RoiAlign(X [N, C, H, W], rois [R, 4], batch_indices [R]) -> [R, C, output_height, output_width].
void infer_roi_align(InferContext& ctx) {
  infer::check_arity(ctx, 3, 3);
  infer::check_type(ctx, 0, Types::kFloat);
  infer::check_type(ctx, 1, Types::kFloat);
  infer::check_type(ctx, 2, Types::kIndex);
  check_rank(ctx, 0, 4, "X", "[N, C, H, W]");
  check_rank(ctx, 1, 2, "rois", "[num_rois, 4]");
  check_rank(ctx, 2, 1, "batch_indices", "[num_rois]");
  const Node& n = ctx.node();
  const std::string mode = n.attr_s("mode", "avg");
  if (mode != "avg" && mode != "max") ctx.error("attribute 'mode' must be avg or max, got '" + mode + "'");
  const std::string ctm = n.attr_s("coordinate_transformation_mode", "half_pixel");
  if (ctm != "half_pixel" && ctm != "output_half_pixel")
    ctx.error("attribute 'coordinate_transformation_mode' must be half_pixel or output_half_pixel, got '" + ctm + "'");
  const int64_t oh = n.attr_i("output_height", 1), ow = n.attr_i("output_width", 1);
  if (oh < 1 || ow < 1) ctx.error(str_cat("attributes 'output_height' and 'output_width' must be >= 1, got ", oh, " and ", ow));
  if (n.attr_i("sampling_ratio", 0) < 0) ctx.error("attribute 'sampling_ratio' must be >= 0");
  const Shape& rois = ctx.in_shape(1);
  if (rois.rank_known) infer::check_dims_match(ctx, rois.dims[1], Dim(4), "rois' last dimension (x1, y1, x2, y2)");
  const Dim r = infer::dim_at(rois, 0);
  if (rois.rank_known && ctx.in_shape(2).rank_known)
    infer::check_dims_match(ctx, r, ctx.in_shape(2).dims[0], "num_rois of rois and batch_indices");
  ctx.set_output(0, ctx.in_dtype(0), Shape({r, infer::dim_at(ctx.in_shape(0), 1), Dim(oh), Dim(ow)}));
}

}  // namespace

void register_tfidf_ops(OpTable& t);  // graph/ops/tfidf.cc

void register_detect_ops(OpTable& t) {
  // NonMaxSuppression 11; Unique 11; ReverseSequence 10; MaxUnpool 11; RoiAlign 10 and 16 (16 adds
  // coordinate_transformation_mode, default half_pixel; before it the kernel uses output_half_pixel).
  add(t, "NonMaxSuppression", 11, infer_nms, P::kNone, false, no_gradient(),
      "int64 [num_selected, 3] (batch, class, box) of the boxes greedy IoU suppression keeps per batch and class");
  add(t, "Unique", 11, infer_unique, P::kNone, false, not_differentiable(),
      "the unique elements (or slices along 'axis') of X, first indices, inverse indices and counts {sorted}");
  add(t, "ReverseSequence", 10, infer_reverse_sequence, P::kFollow, false, grad_rule(grad_reverse_sequence),
      "the first sequence_lens[b] steps along 'time_axis' of each batch entry reversed");
  add(t, "MaxUnpool", 11, infer_max_unpool, P::kFollow, false, grad_rule(grad_max_unpool),
      "zeros with X's values at MaxPool's flat indices I {kernel_shape, pads, strides}");
  add(t, "RoiAlign", 10, 15, infer_roi_align, P::kFollow, false, not_differentiable(),
      "bilinear average or max pooling of each region of interest to [output_height, output_width]");
  add(t, "RoiAlign", 16, infer_roi_align, P::kFollow, false, not_differentiable(),
      "bilinear average or max pooling of each region of interest to [output_height, output_width]");
  register_tfidf_ops(t);
}

}  // namespace otter
