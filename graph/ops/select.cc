// Op-table rows of the selecting and generating ops: TopK (values and int64 indices of the k largest
// or smallest along 'axis'; the values' gradient is a scatter-add of dY at the indices), NonZero,
// Compress, OneHot and EyeLike (no gradient: integer outputs, or outputs that do not depend smoothly
// on a float input). Kernels: kernels/cpu/select.cc; on CUDA the CPU kernels run on host copies
// (kernels/cuda/host_ops.cc).
#include "graph/gradient.h"
#include "graph/op_table.h"
#include "graph/ops/infer_util.h"

namespace otter {
namespace {

using infer::add;
using infer::Types;
using P = PrecisionClass;

// TopK(X, K) {axis, largest, sorted} -> Values, Indices.
void infer_topk(InferContext& ctx) {
  infer::check_arity(ctx, 2, 2, 2, 2);
  infer::check_type(ctx, 0, Types::kNumeric);
  infer::check_type(ctx, 1, Types::kInt64);
  const Shape& x = ctx.in_shape(0);
  Shape out = Shape::unknown();
  if (x.rank_known) {
    const int64_t axis = normalize_axis(ctx, ctx.node().attr_i("axis", -1), x.rank());
    out = x;
    out.dims[axis] = Dim();
    if (auto k = infer::const_ints(ctx, 1); k && k->size() == 1) {
      if ((*k)[0] < 0) ctx.error(str_cat("K must not be negative, got ", (*k)[0]));
      if (x.dims[axis].is_static() && (*k)[0] > x.dims[axis].value)
        ctx.error(str_cat("K = ", (*k)[0], " is larger than axis ", axis, " of X ", x.to_string()));
      out.dims[axis] = Dim((*k)[0]);
    }
  }
  ctx.set_output(0, ctx.in_dtype(0), out);
  ctx.set_output(1, DataType::kInt64, out);
}

// dX = ScatterElements(zeros, Indices, dValues) {axis, reduction add}.
void grad_topk(GradContext& c) {
  if (c.grad_output(1)) c.unsupported("a gradient reaches TopK's Indices output");
  c.set_grad_input(
      0, c.emit("ScatterElements", {c.zeros_like(c.input(0)), c.output(1), c.grad_output(0)},
                {{"axis", Attribute(c.node().attr_i("axis", -1))}, {"reduction", Attribute(std::string("add"))}}));
}

void infer_nonzero(InferContext& ctx) {
  infer::check_arity(ctx, 1, 1);
  const Shape& x = ctx.in_shape(0);
  ctx.set_output(0, DataType::kInt64, x.rank_known ? Shape({Dim(x.rank()), Dim()}) : Shape::unknown());
}

// Compress(input, condition) {axis?}: a 1-D result without axis, else input with axis shortened.
void infer_compress(InferContext& ctx) {
  infer::check_arity(ctx, 2, 2);
  infer::check_type(ctx, 1, Types::kBool);
  const Shape& x = ctx.in_shape(0);
  if (!ctx.node().find_attr("axis")) return ctx.set_output(0, ctx.in_dtype(0), Shape({Dim()}));
  if (!x.rank_known) return ctx.set_output(0, ctx.in_dtype(0), Shape::unknown());
  Shape out = x;
  out.dims[normalize_axis(ctx, ctx.node().attr_i("axis", 0), x.rank())] = Dim();
  ctx.set_output(0, ctx.in_dtype(0), out);
}

// OneHot(indices, depth, values) {axis}: indices' shape with a depth axis inserted.
void infer_onehot(InferContext& ctx) {
  infer::check_arity(ctx, 3, 3);
  infer::check_type(ctx, 0, Types::kNumeric);
  infer::check_type(ctx, 1, Types::kNumeric);
  const Shape& idx = ctx.in_shape(0);
  if (!idx.rank_known) return ctx.set_output(0, ctx.in_dtype(2), Shape::unknown());
  const int64_t axis = normalize_axis(ctx, ctx.node().attr_i("axis", -1), idx.rank() + 1);
  Dim depth;
  if (auto d = infer::const_doubles(ctx, 1); d && d->size() == 1) depth = Dim(static_cast<int64_t>((*d)[0]));
  std::vector<Dim> out = idx.dims;
  out.insert(out.begin() + axis, depth);
  ctx.set_output(0, ctx.in_dtype(2), Shape(out));
}

// EyeLike(input) {dtype, k}: a 2-D tensor of input's shape.
void infer_eyelike(InferContext& ctx) {
  infer::check_arity(ctx, 1, 1);
  const Shape& x = ctx.in_shape(0);
  if (x.rank_known && x.rank() != 2) ctx.error(str_cat("input must be 2-D, got ", x.to_string()));
  DataType t = ctx.in_dtype(0);
  if (const Attribute* a = ctx.node().find_attr("dtype")) {
    t = dtype_from_onnx(static_cast<int>(a->i()));
    if (t == DataType::kUndefined) ctx.error(str_cat("attribute 'dtype' = ", a->i(), " is not a supported type"));
  }
  ctx.set_output(0, t, x);
}

}  // namespace

void register_detect_ops(OpTable& t);  // graph/ops/detect.cc

void register_select_ops(OpTable& t) {
  // TopK 11; NonZero 13; Compress 11; OneHot 11; EyeLike 9 (all unchanged to 21 but for types).
  add(t, "TopK", 11, infer_topk, P::kNone, false, grad_rule(grad_topk),
      "the K largest (or smallest) values along 'axis' and their int64 indices {largest, sorted}");
  add(t, "NonZero", 13, infer_nonzero, P::kNone, false, no_gradient(),
      "int64 [rank, n] coordinates of the nonzero elements");
  add(t, "Compress", 11, infer_compress, P::kNone, false, not_differentiable(),
      "the slices along 'axis' (or elements of the flattened input) where condition is true");
  add(t, "OneHot", 11, infer_onehot, P::kNone, false, not_differentiable(),
      "values[1] at each index along a new 'axis', values[0] elsewhere");
  add(t, "EyeLike", 9, infer_eyelike, P::kNone, false, no_gradient(),
      "ones on diagonal 'k' of a 2-D tensor of input's shape {dtype}");
  register_detect_ops(t);
}

}  // namespace otter
