// ConvTranspose (the adjoint of Conv: N-d, groups, strides, dilations, pads, auto_pad,
// output_padding, output_shape): type/shape inference on graph/conv_transpose.h's arithmetic, and
// its gradient rule, written with Conv's own ops:
//   dX = Conv(dY, W) with the same strides, dilations, group and the resolved pads
//   dW = ConvGrad(X, dY, W)'s filter gradient (the correlation of dY with X)
//   dB = dY summed over the batch and spatial axes
// Registered by register_matmul_conv_ops (graph/ops/matmul_conv.cc).
#include <algorithm>

#include "graph/conv_transpose.h"
#include "graph/gradient.h"
#include "graph/op_table.h"
#include "graph/ops/infer_util.h"

namespace otter {
namespace {

using infer::dim_at;
using infer::Types;

// The kernel's spatial sizes: kernel_shape, else W's static spatial dims; empty where unknown.
std::vector<int64_t> kernel_sizes(const conv_transpose::Attrs& a, const Shape& w, int64_t nsp) {
  if (!a.kernel_shape.empty()) return a.kernel_shape;
  if (!w.rank_known) return {};
  std::vector<int64_t> k;
  for (int64_t i = 0; i < nsp; ++i) {
    if (!w.dims[2 + i].is_static()) return {};
    k.push_back(w.dims[2 + i].value);
  }
  return k;
}

// Checks X [N, C, spatial...], W [C, M / group, kernel...] and B [M]; returns M (output channels).
Dim check_operands(InferContext& ctx, const conv_transpose::Attrs& a, int64_t nsp) {
  const Shape& x = ctx.in_shape(0);
  const Shape& wt = ctx.in_shape(1);
  if (a.group < 1) ctx.error(str_cat("attribute 'group' = ", a.group, " must be >= 1"));
  if (x.rank_known && wt.rank_known && wt.rank() != x.rank())
    ctx.error(
        str_cat("input 1 (W) has shape ", wt.to_string(), " but X has shape ", x.to_string(), " (ranks must match)"));
  if (!a.kernel_shape.empty() && static_cast<int64_t>(a.kernel_shape.size()) != nsp)
    ctx.error(str_cat("attribute 'kernel_shape' has ", a.kernel_shape.size(), " values, expected ", nsp));
  if (wt.rank_known && !a.kernel_shape.empty())
    for (int64_t i = 0; i < nsp; ++i)
      if (wt.dims[2 + i].is_static() && wt.dims[2 + i].value != a.kernel_shape[i])
        ctx.error(str_cat("attribute 'kernel_shape' ", Shape::of(a.kernel_shape).to_string(),
                          " does not match W's shape ", wt.to_string()));
  const Dim c = dim_at(x, 1), cw = dim_at(wt, 0);
  infer::check_dims_match(ctx, c, cw,
                          "X's channels differ from W's first dimension (ConvTranspose's W is [C, M/group, k...])");
  if (cw.is_static() && cw.value % a.group != 0)
    ctx.error(str_cat("W has ", cw.value, " input channels, not divisible by group = ", a.group));
  const Dim mg = dim_at(wt, 1);
  const Dim m = mg.is_static() ? Dim(mg.value * a.group) : Dim();
  if (ctx.has_input(2)) {
    const Shape& b = ctx.in_shape(2);
    if (b.rank_known && b.rank() != 1) ctx.error("input 2 (B) must be 1-D, got shape " + b.to_string());
    if (b.rank_known) infer::check_dims_match(ctx, b.dims[0], m, "input 2 (B) size differs from the output channels");
  }
  return m;
}

void infer_conv_transpose(InferContext& ctx) {
  const DataType t = infer::check_conv_inputs(ctx);
  const conv_transpose::Attrs a(ctx.node());
  const Shape& x = ctx.in_shape(0);
  const Shape& wt = ctx.in_shape(1);
  if (!x.rank_known && !wt.rank_known && a.kernel_shape.empty()) return ctx.set_output(0, t, Shape::unknown());
  const int64_t nsp = x.rank_known    ? x.rank() - 2
                      : wt.rank_known ? wt.rank() - 2
                                      : static_cast<int64_t>(a.kernel_shape.size());
  if (nsp < 1) ctx.error(str_cat("input 0 (X) must have rank >= 3, got ", x.to_string()));
  std::vector<Dim> out = {dim_at(x, 0), check_operands(ctx, a, nsp)};
  const std::vector<int64_t> kernel = kernel_sizes(a, wt, nsp);
  // Per axis: the resolved size where the input size (or output_shape) determines it.
  std::vector<int64_t> in(nsp, 1);
  std::vector<bool> known(nsp, true);
  for (int64_t i = 0; i < nsp; ++i) {
    const Dim d = dim_at(x, 2 + i);
    if (d.is_static()) {
      in[i] = d.value;
    } else {
      known[i] = false;
      in[i] = int64_t{1} << 30;  // a stand-in: that axis' output size is not used
    }
  }
  std::vector<conv_transpose::Axis> axes;
  if (!kernel.empty()) {
    const std::string err = conv_transpose::resolve(a, in, kernel, axes);
    if (!err.empty()) ctx.error(err);
  }
  // SAME_* with stride 1 keeps a symbolic size.
  const bool same = a.auto_pad == "SAME_UPPER" || a.auto_pad == "SAME_LOWER";
  for (int64_t i = 0; i < nsp; ++i) {
    const bool unit_stride = a.strides.empty() || a.strides[i] == 1;
    if (!kernel.empty() && (known[i] || !a.output_shape.empty()))
      out.emplace_back(axes[i].out);
    else if (same && unit_stride && a.output_shape.empty())
      out.push_back(dim_at(x, 2 + i));
    else
      out.emplace_back();
  }
  ctx.set_output(0, t, Shape(out));
}

// ---- gradient -----------------------------------------------------------------------------------

// The attributes of the Conv (and ConvGrad) over ConvTranspose's output that is its adjoint: the
// forward's strides, dilations and group, and its pads resolved (they depend on shapes only with
// output_shape). Fails where that Conv cannot give X's spatial sizes exactly (an output extension of
// a stride or more).
std::map<std::string, Attribute> adjoint_conv_attrs(GradContext& c) {
  const conv_transpose::Attrs a(c.node());
  const Shape& x = c.input(0)->shape();
  const int64_t nsp = c.rank_of(c.input(0)) - 2;
  const std::vector<int64_t> kernel = kernel_sizes(a, c.input(1)->shape(), nsp);
  if (kernel.empty()) c.unsupported("the gradient of ConvTranspose needs W's kernel sizes (static W or kernel_shape)");
  std::vector<int64_t> in(nsp, 1);
  for (int64_t i = 0; i < nsp; ++i) {
    if (x.dims[2 + i].is_static())
      in[i] = x.dims[2 + i].value;
    else if (a.pads_need_input())
      c.unsupported("the gradient of ConvTranspose with output_shape needs X's spatial sizes to be static");
  }
  std::vector<conv_transpose::Axis> axes;
  const std::string err = conv_transpose::resolve(a, in, kernel, axes);
  if (!err.empty()) c.unsupported(err);
  std::vector<int64_t> pads(2 * nsp), strides = a.strides.empty() ? std::vector<int64_t>(nsp, 1) : a.strides;
  for (int64_t i = 0; i < nsp; ++i) {
    if (axes[i].extra >= strides[i])
      c.unsupported(str_cat("ConvTranspose's output extends ", axes[i].extra,
                            " positions past its last window on "
                            "spatial axis ",
                            i, " (stride ", strides[i], "): no gradient rule for that"));
    pads[i] = axes[i].pad_begin;
    pads[i + nsp] = axes[i].pad_end;
  }
  std::map<std::string, Attribute> attrs = c.forward_attrs({"dilations", "group", "strides"});
  attrs["pads"] = Attribute(pads);
  attrs["kernel_shape"] = Attribute(kernel);
  return attrs;
}

void grad_conv_transpose(GradContext& c) {
  Value *x = c.input(0), *w = c.input(1), *dy = c.grad_output(0);
  const bool want_x = c.needs_grad(0), want_w = c.needs_grad(1);
  if (want_x || want_w) {
    const std::map<std::string, Attribute> attrs = adjoint_conv_attrs(c);
    if (want_x) c.set_grad_input(0, c.emit("Conv", {dy, w}, attrs));
    if (want_w) c.set_grad_input(1, c.emit_some("ConvGrad", {x, dy, w}, {false, true}, attrs, kOtterDomain)[1]);
  }
  if (c.node().has_input(2) && c.needs_grad(2)) {
    std::vector<int64_t> axes = {0};
    for (int64_t i = 2; i < c.rank_of(dy); ++i) axes.push_back(i);
    c.set_grad_input(2, c.emit("ReduceSum", {dy, c.ints(axes)}, {{"keepdims", Attribute(int64_t{0})}}));
  }
}

}  // namespace

void register_conv_transpose_ops(OpTable& t) {
  infer::add(t, "ConvTranspose", 11, infer_conv_transpose, PrecisionClass::kLow, false, grad_rule(grad_conv_transpose),
             "N-d transposed convolution (Conv's adjoint) with groups, pads, strides, dilations, output_padding, "
             "output_shape");
}

}  // namespace otter
