// MatMul, Gemm, convolution and pooling ops of the default domain (full window arithmetic with pads,
// strides, dilations, auto_pad and ceil_mode), their gradient rules and gradient ops (ConvGrad,
// MaxPoolGrad, AveragePoolGrad); ConvTranspose is in graph/ops/conv_transpose.cc. Normalisations,
// softmaxes, Dropout and the losses are in graph/ops/nn.cc.
#include <algorithm>

#include "graph/gradient.h"
#include "graph/op_table.h"
#include "graph/ops/infer_util.h"

namespace otter {
namespace {

using infer::add;
using infer::dim_at;
using infer::Types;

// ---- MatMul / Gemm ------------------------------------------------------------------------------
}  // namespace

Shape infer::matmul_shape(InferContext& ctx, int ia, int ib) {
  const Shape& a = ctx.in_shape(ia);
  const Shape& b = ctx.in_shape(ib);
  if (!a.rank_known || !b.rank_known) return Shape::unknown();
  for (int i : {ia, ib})
    if (ctx.in_shape(i).rank() == 0)
      ctx.error(infer::input_desc(ctx, i) + " is a scalar; " + ctx.node().op_type() + " needs rank >= 1");
  std::vector<Dim> ad = a.dims, bd = b.dims;
  bool a_vec = ad.size() == 1, b_vec = bd.size() == 1;
  if (a_vec) ad.insert(ad.begin(), Dim(int64_t{1}));
  if (b_vec) bd.push_back(Dim(int64_t{1}));
  const Dim& ka = ad[ad.size() - 1];
  const Dim& kb = bd[bd.size() - 2];
  if (ka.is_static() && kb.is_static() && ka.value != kb.value)
    ctx.error(str_cat("inner dimensions differ: A is ", a.to_string(), ", B is ", b.to_string(), " (", ka.value,
                      " vs ", kb.value, ")"));
  Shape batch = broadcast_shapes(ctx, {Shape(std::vector<Dim>(ad.begin(), ad.end() - 2)),
                                       Shape(std::vector<Dim>(bd.begin(), bd.end() - 2))});
  std::vector<Dim> out = batch.dims;
  if (!a_vec) out.push_back(ad[ad.size() - 2]);
  if (!b_vec) out.push_back(bd.back());
  return Shape(out);
}

namespace {

void infer_matmul(InferContext& ctx) {
  infer::check_arity(ctx, 2, 2);
  infer::check_type(ctx, 0, Types::kNumeric);
  infer::check_same_type(ctx, 0, 1);
  ctx.set_output(0, ctx.in_dtype(0), infer::matmul_shape(ctx, 0, 1));
}

void infer_gemm(InferContext& ctx) {
  infer::check_arity(ctx, 2, 3);
  infer::check_type(ctx, 0, Types::kNumeric);
  infer::check_same_type(ctx, 0, 1);
  infer::check_same_type(ctx, 0, 2);
  for (int i = 0; i < 2; ++i) {
    const Shape& s = ctx.in_shape(i);
    if (s.rank_known && s.rank() != 2)
      ctx.error(str_cat(infer::input_desc(ctx, i), " must be 2-D, got shape ", s.to_string()));
  }
  bool ta = ctx.node().attr_i("transA", 0) != 0;
  bool tb = ctx.node().attr_i("transB", 0) != 0;
  const Shape& a = ctx.in_shape(0);
  const Shape& b = ctx.in_shape(1);
  Dim m = dim_at(a, ta ? 1 : 0), ka = dim_at(a, ta ? 0 : 1);
  Dim kb = dim_at(b, tb ? 1 : 0), n = dim_at(b, tb ? 0 : 1);
  if (ka.is_static() && kb.is_static() && ka.value != kb.value)
    ctx.error(str_cat("inner dimensions differ: A is ", a.to_string(), (ta ? " (transposed)" : ""), ", B is ",
                      b.to_string(), (tb ? " (transposed)" : ""), " (", ka.value, " vs ", kb.value, ")"));
  if (ctx.has_input(2)) {
    const Shape& c = ctx.in_shape(2);
    if (c.rank_known) {
      if (c.rank() > 2) ctx.error("input 2 (C) must have rank <= 2, got shape " + c.to_string());
      std::vector<Dim> mn = {m, n};
      for (int64_t i = 0; i < c.rank(); ++i) {
        const Dim& d = c.dims[c.rank() - 1 - i];
        const Dim& o = mn[1 - i];
        if (d.is_static() && d.value != 1 && o.is_static() && d.value != o.value)
          ctx.error(str_cat("input 2 (C) of shape ", c.to_string(), " does not broadcast to ",
                            Shape(mn).to_string()));
      }
    }
  }
  ctx.set_output(0, ctx.in_dtype(0), Shape({m, n}));
}

// ---- convolution and pooling windows ------------------------------------------------------------
struct Window {
  std::vector<int64_t> kernel, strides, dilations, pads;  // pads: begins then ends
  std::string auto_pad;
  bool ceil_mode = false;
};

std::vector<int64_t> ints_attr(InferContext& ctx, const char* name, size_t n, int64_t dflt, int64_t min) {
  std::vector<int64_t> v = ctx.node().attr_ints(name, std::vector<int64_t>(n, dflt));
  if (v.size() != n) ctx.error(str_cat("attribute '", name, "' has ", v.size(), " values, expected ", n));
  for (int64_t x : v)
    if (x < min) ctx.error(str_cat("attribute '", name, "' has value ", x, ", must be >= ", min));
  return v;
}

Window read_window(InferContext& ctx, std::vector<int64_t> kernel, bool pool) {
  Window w;
  size_t n = kernel.size();
  w.kernel = std::move(kernel);
  for (int64_t k : w.kernel)
    if (k < 1) ctx.error(str_cat("kernel size ", k, " must be >= 1"));
  w.strides = ints_attr(ctx, "strides", n, 1, 1);
  w.dilations = ints_attr(ctx, "dilations", n, 1, 1);
  w.pads = ints_attr(ctx, "pads", 2 * n, 0, 0);
  w.auto_pad = ctx.node().attr_s("auto_pad", "NOTSET");
  if (w.auto_pad != "NOTSET" && w.auto_pad != "SAME_UPPER" && w.auto_pad != "SAME_LOWER" && w.auto_pad != "VALID")
    ctx.error("attribute 'auto_pad' must be NOTSET, SAME_UPPER, SAME_LOWER or VALID, got '" + w.auto_pad + "'");
  bool any_pad = std::any_of(w.pads.begin(), w.pads.end(), [](int64_t p) { return p != 0; });
  if (any_pad && w.auto_pad != "NOTSET")
    ctx.error("attribute 'pads' cannot be used together with auto_pad=" + w.auto_pad);
  if (w.auto_pad == "VALID") std::fill(w.pads.begin(), w.pads.end(), 0);
  if (pool) {
    w.ceil_mode = ctx.node().attr_i("ceil_mode", 0) != 0;
    for (size_t i = 0; i < n; ++i)
      if (w.pads[i] >= w.kernel[i] || w.pads[i + n] >= w.kernel[i])
        ctx.error(str_cat("pads on spatial axis ", i, " (", w.pads[i], ", ", w.pads[i + n],
                          ") must be smaller than the kernel size ", w.kernel[i]));
  }
  return w;
}

// Output spatial sizes: floor((in + pads - dilation*(k-1) - 1) / stride) + 1 (ceil in ceil_mode,
// where, as in PyTorch, a last window starting in the end padding is dropped); SAME_*: ceil(in/stride).
std::vector<Dim> window_output(InferContext& ctx, const std::vector<Dim>& in, const Window& w) {
  size_t n = w.kernel.size();
  std::vector<Dim> out;
  for (size_t i = 0; i < n; ++i) {
    int64_t s = w.strides[i];
    int64_t ek = w.dilations[i] * (w.kernel[i] - 1) + 1;
    const Dim& d = in[i];
    if (w.auto_pad == "SAME_UPPER" || w.auto_pad == "SAME_LOWER") {
      if (d.is_static()) out.emplace_back((d.value + s - 1) / s);
      else out.push_back(s == 1 ? d : Dim());
      continue;
    }
    int64_t pb = w.pads[i], pe = w.pads[i + n];
    if (!d.is_static()) {
      out.push_back(s == 1 && pb + pe - ek + 1 == 0 ? d : Dim());
      continue;
    }
    int64_t num = d.value + pb + pe - ek;
    if (num < 0)
      ctx.error(str_cat("spatial axis ", i, ": input size ", d.value, " with pads ", pb, "+", pe,
                        " is smaller than the (dilated) kernel size ", ek));
    int64_t o = (w.ceil_mode ? (num + s - 1) / s : num / s) + 1;
    if (w.ceil_mode && (o - 1) * s >= d.value + pb) --o;
    out.emplace_back(o);
  }
  return out;
}

}  // namespace

Shape infer::conv_shape(InferContext& ctx, int ix, int iw, int ib) {
  const Shape& x = ctx.in_shape(ix);
  const Shape& wt = ctx.in_shape(iw);
  int64_t group = ctx.node().attr_i("group", 1);
  if (group < 1) ctx.error(str_cat("attribute 'group' = ", group, " must be >= 1"));
  std::vector<int64_t> kernel = ctx.node().attr_ints("kernel_shape");
  int64_t nsp = x.rank_known ? x.rank() - 2 : wt.rank_known ? wt.rank() - 2 : static_cast<int64_t>(kernel.size());
  if (!x.rank_known && !wt.rank_known && kernel.empty()) return Shape::unknown();
  if (nsp < 1) ctx.error(str_cat(infer::input_desc(ctx, ix), " must have rank >= 3, got ", x.to_string()));
  if (x.rank_known && wt.rank_known && wt.rank() != x.rank())
    ctx.error(str_cat(infer::input_desc(ctx, iw), " has shape ", wt.to_string(), " but X has shape ", x.to_string(),
                      " (ranks must match)"));
  if (!kernel.empty() && static_cast<int64_t>(kernel.size()) != nsp)
    ctx.error(str_cat("attribute 'kernel_shape' has ", kernel.size(), " values, expected ", nsp));
  if (wt.rank_known) {
    for (int64_t i = 0; i < nsp; ++i) {
      const Dim& d = wt.dims[2 + i];
      if (!kernel.empty() && d.is_static() && d.value != kernel[i])
        ctx.error(str_cat("attribute 'kernel_shape' ", Shape::of(kernel).to_string(), " does not match W's shape ",
                          wt.to_string()));
    }
  }
  Dim m = dim_at(wt, 0);
  if (m.is_static() && m.value % group != 0)
    ctx.error(str_cat("W has ", m.value, " output channels, not divisible by group = ", group));
  Dim c = dim_at(x, 1), cw = dim_at(wt, 1);
  if (c.is_static() && cw.is_static() && c.value != cw.value * group)
    ctx.error(str_cat("X has ", c.value, " channels but W expects ", cw.value, " x group ", group, " = ",
                      cw.value * group));
  if (ib >= 0 && ctx.has_input(ib)) {
    const Shape& b = ctx.in_shape(ib);
    const std::string bdesc = infer::input_desc(ctx, ib);
    if (b.rank_known && b.rank() != 1) ctx.error(bdesc + " must be 1-D, got shape " + b.to_string());
    if (b.rank_known) infer::check_dims_match(ctx, b.dims[0], m, bdesc + " size differs from W's output channels");
  }
  std::vector<Dim> out = {dim_at(x, 0), m};
  if (kernel.empty()) {
    if (!wt.rank_known) {
      for (int64_t i = 0; i < nsp; ++i) out.push_back(Dim());
      return Shape(out);
    }
    for (int64_t i = 0; i < nsp; ++i) {
      if (!wt.dims[2 + i].is_static()) {
        for (int64_t k = 0; k < nsp; ++k) out.push_back(Dim());
        return Shape(out);
      }
      kernel.push_back(wt.dims[2 + i].value);
    }
  }
  Window w = read_window(ctx, kernel, false);
  std::vector<Dim> in(nsp);
  for (int64_t i = 0; i < nsp; ++i) in[i] = dim_at(x, 2 + i);
  for (const Dim& d : window_output(ctx, in, w)) out.push_back(d);
  return Shape(out);
}

namespace {

void infer_conv(InferContext& ctx) {
  DataType t = infer::check_conv_inputs(ctx);
  ctx.set_output(0, t, infer::conv_shape(ctx, 0, 1, 2));
}

InferFn pool(bool is_max) {
  return [is_max](InferContext& ctx) {
    infer::check_arity(ctx, 1, 1, 1, is_max ? 2 : 1);
    infer::check_type(ctx, 0, is_max ? Types::kNumeric : Types::kFloat);
    DataType t = ctx.in_dtype(0);
    const Shape& x = ctx.in_shape(0);
    const Attribute* ks = ctx.node().find_attr("kernel_shape");
    if (!ks) ctx.error("attribute 'kernel_shape' is required");
    std::vector<int64_t> kernel = ctx.node().attr_ints("kernel_shape");
    int64_t nsp = static_cast<int64_t>(kernel.size());
    if (x.rank_known && x.rank() - 2 != nsp)
      ctx.error(str_cat("attribute 'kernel_shape' has ", nsp, " values but X has shape ", x.to_string(),
                        " (", x.rank() - 2, " spatial axes)"));
    if (is_max) {
      int64_t so = ctx.node().attr_i("storage_order", 0);
      if (so != 0 && so != 1) ctx.error(str_cat("attribute 'storage_order' must be 0 or 1, got ", so));
    } else {
      int64_t cip = ctx.node().attr_i("count_include_pad", 0);
      if (cip != 0 && cip != 1) ctx.error(str_cat("attribute 'count_include_pad' must be 0 or 1, got ", cip));
    }
    Window w = read_window(ctx, kernel, true);
    std::vector<Dim> in(nsp);
    for (int64_t i = 0; i < nsp; ++i) in[i] = dim_at(x, 2 + i);
    std::vector<Dim> out = {dim_at(x, 0), dim_at(x, 1)};
    for (const Dim& d : window_output(ctx, in, w)) out.push_back(d);
    ctx.set_output(0, t, Shape(out));
    if (is_max) ctx.set_output(1, DataType::kInt64, Shape(out));
  };
}

void infer_global_avg_pool(InferContext& ctx) {
  infer::check_arity(ctx, 1, 1);
  infer::check_type(ctx, 0, Types::kFloat);
  const Shape& x = ctx.in_shape(0);
  if (!x.rank_known) return ctx.set_output(0, ctx.in_dtype(0), Shape::unknown());
  if (x.rank() < 3) ctx.error("input 0 (X) must have rank >= 3, got shape " + x.to_string());
  std::vector<Dim> out = {x.dims[0], x.dims[1]};
  out.resize(x.dims.size(), Dim(int64_t{1}));
  ctx.set_output(0, ctx.in_dtype(0), Shape(out));
}

// ---- gradient rules -----------------------------------------------------------------------------
std::map<std::string, Attribute> gemm_attrs(bool ta, bool tb, float alpha) {
  std::map<std::string, Attribute> a;
  if (ta) a["transA"] = Attribute(int64_t{1});
  if (tb) a["transB"] = Attribute(int64_t{1});
  if (alpha != 1.0f) a["alpha"] = Attribute(alpha);
  return a;
}

// Y = alpha * op(A) op(B) + beta * C. With A' = op(A), B' = op(B): dA' = alpha dY B'^T and
// dB' = alpha A'^T dY, each written as one Gemm on the stored (possibly transposed) operands.
void grad_gemm(GradContext& c) {
  const Node& n = c.node();
  bool ta = n.attr_i("transA", 0) != 0, tb = n.attr_i("transB", 0) != 0;
  float alpha = n.attr_f("alpha", 1.0f), beta = n.attr_f("beta", 1.0f);
  Value *a = c.input(0), *b = c.input(1), *dy = c.grad_output(0);
  if (c.needs_grad(0))
    c.set_grad_input(0, ta ? c.emit("Gemm", {b, dy}, gemm_attrs(tb, true, alpha))
                           : c.emit("Gemm", {dy, b}, gemm_attrs(false, !tb, alpha)));
  if (c.needs_grad(1))
    c.set_grad_input(1, tb ? c.emit("Gemm", {dy, a}, gemm_attrs(true, ta, alpha))
                           : c.emit("Gemm", {a, dy}, gemm_attrs(!ta, false, alpha)));
  if (c.needs_grad(2)) {
    Value* dc = c.sum_to_shape(dy, c.input(2));
    c.set_grad_input(2, beta == 1.0f ? dc : c.emit("Mul", {dc, c.scalar_like(beta, dc)}));
  }
}

// Swaps the last two axes of a rank-r value.
Value* swap_last(GradContext& c, Value* v, int64_t r) {
  std::vector<int64_t> perm(r);
  for (int64_t i = 0; i < r; ++i) perm[i] = i;
  std::swap(perm[r - 1], perm[r - 2]);
  return c.emit("Transpose", {v}, {{"perm", Attribute(perm)}});
}

// MatMul. A 2-D right operand (a Linear layer's weight) folds A's batch axes into GEMM rows:
// dA = dY B^T and dB = A^T dY as two Gemm on [-1, K] / [-1, N] views. Otherwise batched:
// dA = dY B^T, dB = A^T dY with 1-D operands promoted as numpy does and broadcast batch axes summed.
void grad_matmul(GradContext& c) {
  Value *a = c.input(0), *b = c.input(1), *dy = c.grad_output(0);
  int64_t ra = c.rank_of(a), rb = c.rank_of(b);
  if (rb == 2 && ra >= 2) {
    Value* a2 = ra == 2 ? a : c.emit("Reshape", {a, c.concat_ints({c.ints({-1}), c.dim_of(b, 0)})});
    Value* dy2 = ra == 2 ? dy : c.emit("Reshape", {dy, c.concat_ints({c.ints({-1}), c.dim_of(b, 1)})});
    if (c.needs_grad(0)) c.set_grad_input(0, c.reshape_like(c.emit("Gemm", {dy2, b}, gemm_attrs(false, true, 1)), a));
    if (c.needs_grad(1)) c.set_grad_input(1, c.emit("Gemm", {a2, dy2}, gemm_attrs(true, false, 1)));
    return;
  }
  Value* a1 = ra == 1 ? c.emit("Unsqueeze", {a, c.ints({0})}) : a;
  Value* b1 = rb == 1 ? c.emit("Unsqueeze", {b, c.ints({1})}) : b;
  Value* dy1 = dy;
  if (ra == 1 && rb == 1) dy1 = c.emit("Reshape", {dy, c.ints({1, 1})});
  else if (ra == 1) dy1 = c.emit("Unsqueeze", {dy, c.ints({-2})});
  else if (rb == 1) dy1 = c.emit("Unsqueeze", {dy, c.ints({-1})});
  if (c.needs_grad(0)) {
    Value* da = c.emit("MatMul", {dy1, swap_last(c, b1, std::max<int64_t>(rb, 2))});
    c.set_grad_input(0, c.reshape_like(c.sum_to_shape(da, a1), a));
  }
  if (c.needs_grad(1)) {
    Value* db = c.emit("MatMul", {swap_last(c, a1, std::max<int64_t>(ra, 2)), dy1});
    c.set_grad_input(1, c.reshape_like(c.sum_to_shape(db, b1), b));
  }
}

const std::vector<std::string> kConvAttrs = {"auto_pad", "dilations", "group", "kernel_shape", "pads", "strides"};
const std::vector<std::string> kPoolAttrs = {"auto_pad", "ceil_mode", "count_include_pad", "dilations",
                                             "kernel_shape", "pads", "strides"};

// ConvGrad(dY, X, W) -> dX, dW, dB in one op (im2col + GEMM on the CPU, cuDNN on CUDA).
void grad_conv(GradContext& c) {
  infer::grad_fused(c, "ConvGrad", {c.grad_output(0), c.input(0), c.input(1)}, {0, 1, 2}, kConvAttrs);
}

GradFn pool_grad(std::string op) {
  return [op](GradContext& c) {
    c.set_grad_input(0, c.emit_otter(op, {c.grad_output(0), c.input(0)}, c.forward_attrs(kPoolAttrs)));
  };
}

// GlobalAveragePool: dY spread evenly over each plane.
void grad_global_avg_pool(GradContext& c) {
  Value* x = c.input(0);
  c.set_grad_input(0, c.emit("Mul", {c.expand_like(c.grad_output(0), x), c.numel_ratio(c.output(0), x, x)}));
}

// GlobalMaxPool: dY goes to each plane's maxima, split evenly between ties (as ReduceMax).
void grad_global_max_pool(GradContext& c) {
  Value *x = c.input(0), *y = c.output(0);
  const int64_t rank = c.rank_of(x);
  std::vector<int64_t> spatial;
  for (int64_t a = 2; a < rank; ++a) spatial.push_back(a);
  Value* mask = c.cast(c.emit("Equal", {x, y}), x->dtype());
  Value* count = c.emit("ReduceSum", {mask, c.ints(spatial)}, {{"keepdims", Attribute(int64_t{1})}});
  c.set_grad_input(0, c.emit("Div", {c.emit("Mul", {mask, c.grad_output(0)}), count}));
}

// ---- gradient ops (ai.otter) --------------------------------------------------------------------
void infer_conv_grad(InferContext& ctx) {
  infer::grads_like(3, 4, {1, 2, 2})(ctx);  // dB then takes W's output-channel count
  if (ctx.has_output(2)) ctx.set_output(2, ctx.in_dtype(2), Shape({dim_at(ctx.in_shape(2), 0)}));
  if (ctx.has_input(3)) {  // dW accumulates into this state (grad-accumulation's fusion), in its type
    infer::check_same_type(ctx, 2, 3);
    if (ctx.has_output(1)) ctx.set_output(1, ctx.in_dtype(3), ctx.in_shape(3));
  }
}

}  // namespace

void register_conv_transpose_ops(OpTable& t);  // graph/ops/conv_transpose.cc

void register_matmul_conv_ops(OpTable& t) {
  using P = PrecisionClass;
  auto rule = grad_rule;
  add(t, "MatMul", 13, infer_matmul, P::kLow, false, rule(grad_matmul), "numpy matmul: batched, with 1-D promotion");
  t.mutable_find("", "MatMul", 13)->accumulating_form = AccumulatingForm::kGemmAccumulate;
  add(t, "Gemm", 13, infer_gemm, P::kLow, false, rule(grad_gemm),
      "alpha * op(A) @ op(B) + beta * C, 2-D, transA/transB");
  t.mutable_find("", "Gemm", 13)->accumulating_form = AccumulatingForm::kGemmAccumulate;
  add(t, "Conv", 11, infer_conv, P::kLow, false, rule(grad_conv),
      "N-d convolution with groups, pads, strides, dilations");
  add(t, "MaxPool", 12, pool(true), P::kFollow, false, rule(pool_grad("MaxPoolGrad")),
      "N-d max pooling, optional int64 indices output");
  add(t, "AveragePool", 11, pool(false), P::kFollow, false, rule(pool_grad("AveragePoolGrad")),
      "N-d average pooling (AveragePool 11, 19: dilations)");
  add(t, "GlobalAveragePool", 1, infer_global_avg_pool, P::kFollow, false, rule(grad_global_avg_pool),
      "mean over all spatial axes");
  add(t, "GlobalMaxPool", 1, infer_global_avg_pool, P::kFollow, false, rule(grad_global_max_pool),
      "max over all spatial axes");
  register_conv_transpose_ops(t);
  infer::add_otter_op(t, "ConvGrad", infer_conv_grad, P::kLow,
                      "ConvGrad(dY, X, W, dW_acc?) {Conv's attributes} -> dX?, dW?, dB?: convolution backward "
                      "(data, filter, bias); with dW_acc, dW is that accumulator updated in place (overwritten on "
                      "the first micro-step, added to after)");
  t.mutable_find(kOtterDomain, "ConvGrad", 1)->views = {{1, 3}};
  t.mutable_find(kOtterDomain, "ConvGrad", 1)->accumulating_form = AccumulatingForm::kAccumulatorInput;
  infer::add_otter_op(t, "MaxPoolGrad", infer::grads_like(2, 2, {1}), P::kFollow,
                      "MaxPoolGrad(dY, X) {MaxPool's attributes}: dY routed to each window's (first) maximum");
  infer::add_otter_op(t, "AveragePoolGrad", infer::grads_like(2, 2, {1}), P::kFollow,
                      "AveragePoolGrad(dY, X) {AveragePool's attributes}: dY spread evenly over each window");
}

}  // namespace otter
