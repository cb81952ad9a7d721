// Op-table rows of the along-one-axis ops: CumSum (exclusive / reverse; its gradient is the
// running sum the other way) and ArgMax / ArgMin (int64 indices, no gradient). Kernels:
// kernels/cpu/scan.cc, kernels/cuda/scan.cu.
#include "graph/gradient.h"
#include "graph/op_table.h"
#include "graph/ops/infer_util.h"

namespace otter {
namespace {

using infer::Types;

// CumSum(X, axis): axis is an int32 / int64 scalar (or one-element 1-D) tensor.
void infer_cumsum(InferContext& ctx) {
  infer::check_arity(ctx, 2, 2);
  infer::check_type(ctx, 0, Types::kNumeric);
  infer::check_type(ctx, 1, Types::kIndex);
  const Shape& a = ctx.in_shape(1);
  if (a.rank_known && (a.rank() > 1 || (a.is_static() && a.numel() != 1)))
    ctx.error(str_cat(infer::input_desc(ctx, 1), " (axis) must be a scalar, got shape ", a.to_string()));
  const Shape& x = ctx.in_shape(0);
  if (auto axis = infer::const_ints(ctx, 1); axis && x.rank_known && !axis->empty())
    normalize_axis(ctx, (*axis)[0], x.rank());
  ctx.set_output(0, ctx.in_dtype(0), x);
}

// dX = CumSum(dY) running the other way, with the same exclusive flag.
void grad_cumsum(GradContext& c) {
  const Node& n = c.node();
  c.set_grad_input(0, c.emit("CumSum", {c.grad_output(0), c.input(1)},
                             {{"exclusive", Attribute(n.attr_i("exclusive", 0))},
                              {"reverse", Attribute(int64_t{n.attr_i("reverse", 0) == 0})}}));
}

// ArgMax / ArgMin {axis, keepdims, select_last_index}: int64 indices.
void infer_arg(InferContext& ctx) {
  infer::check_arity(ctx, 1, 1);
  infer::check_type(ctx, 0, Types::kNumeric);
  const Shape& x = ctx.in_shape(0);
  if (!x.rank_known) return ctx.set_output(0, DataType::kInt64, Shape::unknown());
  const int64_t axis = normalize_axis(ctx, ctx.node().attr_i("axis", 0), x.rank());
  const bool keep = ctx.node().attr_i("keepdims", 1) != 0;
  std::vector<Dim> out;
  for (int64_t i = 0; i < x.rank(); ++i) {
    if (i != axis)
      out.push_back(x.dims[i]);
    else if (keep)
      out.emplace_back(int64_t{1});
  }
  ctx.set_output(0, DataType::kInt64, Shape(out));
}

void add(OpTable& t, const char* op, int since, InferFn f, PrecisionClass p, GradSpec g, const char* summary) {
  t.add({.domain = "",
         .op_type = op,
         .since_version = since,
         .until_version = kMaxOnnxOpset,
         .infer = std::move(f),
         .precision = p,
         .grad_kind = g.kind,
         .grad = std::move(g.fn),
         .summary = summary});
}

}  // namespace

void register_scan_ops(OpTable& t) {
  using P = PrecisionClass;
  // CumSum 11, 14 (half types); PyTorch's autocast runs cumsum in fp32.
  add(t, "CumSum", 14, infer_cumsum, P::kFp32, grad_rule(grad_cumsum),
      "running sums of X along input 'axis' {exclusive, reverse}");
  // ArgMax / ArgMin 12 (select_last_index), 13 (bfloat16).
  add(t, "ArgMax", 13, infer_arg, P::kNone, no_gradient(),
      "index of the largest element along 'axis' (int64) {keepdims, select_last_index}");
  add(t, "ArgMin", 13, infer_arg, P::kNone, no_gradient(),
      "index of the smallest element along 'axis' (int64) {keepdims, select_last_index}");
}

}  // namespace otter
