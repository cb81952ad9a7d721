// Neural-network ops of the default domain: MatMul/Gemm, convolution and pooling (full window
// arithmetic with pads, strides, dilations, auto_pad and ceil_mode), normalisations, softmaxes,
// Dropout and the two loss ops.
#include <algorithm>

#include "graph/gradient.h"
#include "graph/op_table.h"
#include "graph/ops/infer_util.h"

namespace otter {
namespace {

using infer::Types;

// A static dim pair that disagrees is an error; symbols are trusted to agree.
void check_dims_match(InferContext& ctx, const Dim& a, const Dim& b, const std::string& what) {
  if (a.is_static() && b.is_static() && a.value != b.value)
    ctx.error(str_cat(what, ": ", a.value, " vs ", b.value));
}

Dim dim_at(const Shape& s, int64_t i) {
  if (!s.rank_known || i < 0 || i >= s.rank()) return Dim();
  return s.dims[i];
}

// ---- MatMul / Gemm ------------------------------------------------------------------------------
void infer_matmul(InferContext& ctx) {
  infer::check_arity(ctx, 2, 2);
  infer::check_type(ctx, 0, Types::kNumeric);
  infer::check_same_type(ctx, 0, 1);
  DataType t = ctx.in_dtype(0);
  const Shape& a = ctx.in_shape(0);
  const Shape& b = ctx.in_shape(1);
  if (!a.rank_known || !b.rank_known) return ctx.set_output(0, t, Shape::unknown());
  for (int i = 0; i < 2; ++i)
    if (ctx.in_shape(i).rank() == 0) ctx.error(infer::input_desc(ctx, i) + " is a scalar; MatMul needs rank >= 1");
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
  ctx.set_output(0, t, Shape(out));
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

void infer_conv(InferContext& ctx) {
  infer::check_arity(ctx, 2, 3);
  infer::check_type(ctx, 0, Types::kFloat);
  infer::check_same_type(ctx, 0, 1);
  infer::check_same_type(ctx, 0, 2);
  DataType t = ctx.in_dtype(0);
  const Shape& x = ctx.in_shape(0);
  const Shape& wt = ctx.in_shape(1);
  int64_t group = ctx.node().attr_i("group", 1);
  if (group < 1) ctx.error(str_cat("attribute 'group' = ", group, " must be >= 1"));
  std::vector<int64_t> kernel = ctx.node().attr_ints("kernel_shape");
  int64_t nsp = x.rank_known ? x.rank() - 2 : wt.rank_known ? wt.rank() - 2 : static_cast<int64_t>(kernel.size());
  if (!x.rank_known && !wt.rank_known && kernel.empty()) return ctx.set_output(0, t, Shape::unknown());
  if (nsp < 1) ctx.error(str_cat("input 0 (X) must have rank >= 3, got ", x.to_string()));
  if (x.rank_known && wt.rank_known && wt.rank() != x.rank())
    ctx.error(str_cat("input 1 (W) has shape ", wt.to_string(), " but X has shape ", x.to_string(),
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
  if (ctx.has_input(2)) {
    const Shape& b = ctx.in_shape(2);
    if (b.rank_known && b.rank() != 1) ctx.error("input 2 (B) must be 1-D, got shape " + b.to_string());
    if (b.rank_known) check_dims_match(ctx, b.dims[0], m, "input 2 (B) size differs from W's output channels");
  }
  std::vector<Dim> out = {dim_at(x, 0), m};
  if (kernel.empty()) {
    if (!wt.rank_known) {
      for (int64_t i = 0; i < nsp; ++i) out.push_back(Dim());
      return ctx.set_output(0, t, Shape(out));
    }
    for (int64_t i = 0; i < nsp; ++i) {
      if (!wt.dims[2 + i].is_static()) {
        for (int64_t k = 0; k < nsp; ++k) out.push_back(Dim());
        return ctx.set_output(0, t, Shape(out));
      }
      kernel.push_back(wt.dims[2 + i].value);
    }
  }
  Window w = read_window(ctx, kernel, false);
  std::vector<Dim> in(nsp);
  for (int64_t i = 0; i < nsp; ++i) in[i] = dim_at(x, 2 + i);
  for (const Dim& d : window_output(ctx, in, w)) out.push_back(d);
  ctx.set_output(0, t, Shape(out));
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

// ---- normalisation ------------------------------------------------------------------------------
void infer_batch_norm(InferContext& ctx) {
  bool v14 = ctx.node().opset() >= 14;
  infer::check_arity(ctx, 5, 5, 1, v14 ? 3 : 5);
  infer::check_type(ctx, 0, Types::kFloat);
  for (int i = 1; i < 5; ++i) infer::check_type(ctx, i, Types::kFloat);
  const Shape& x = ctx.in_shape(0);
  if (x.rank_known && x.rank() < 2) ctx.error("input 0 (X) must have rank >= 2, got shape " + x.to_string());
  Dim c = dim_at(x, 1);
  static const char* kNames[] = {"X", "scale", "B", "input_mean", "input_var"};
  for (int i = 1; i < 5; ++i) {
    const Shape& s = ctx.in_shape(i);
    if (!s.rank_known) continue;
    if (s.rank() != 1) ctx.error(str_cat("input ", i, " (", kNames[i], ") must be 1-D, got shape ", s.to_string()));
    check_dims_match(ctx, s.dims[0], c, str_cat("input ", i, " (", kNames[i], ") size differs from X's channels"));
  }
  bool stats_out = ctx.has_output(1) || ctx.has_output(2);
  if (v14) {
    bool training = ctx.node().attr_i("training_mode", 0) != 0;
    if (stats_out && !training)
      ctx.error("outputs running_mean/running_var are only produced with training_mode=1");
  }
  ctx.set_output(0, ctx.in_dtype(0), x);
  DataType st = ctx.in_dtype(3);
  for (int i = 1; i < ctx.num_outputs(); ++i) ctx.set_output(i, st, Shape({c}));
}

void infer_layer_norm(InferContext& ctx) {
  infer::check_arity(ctx, 2, 3, 1, 3);
  infer::check_type(ctx, 0, Types::kFloat);
  infer::check_same_type(ctx, 0, 1);
  infer::check_same_type(ctx, 0, 2);
  int64_t stash = ctx.node().attr_i("stash_type", 1);
  DataType st = dtype_from_onnx(static_cast<int>(stash));
  if (!is_float(st)) ctx.error(str_cat("attribute 'stash_type' = ", stash, " is not a float type"));
  const Shape& x = ctx.in_shape(0);
  ctx.set_output(0, ctx.in_dtype(0), x);
  if (!x.rank_known) {
    ctx.set_output(1, st, Shape::unknown());
    ctx.set_output(2, st, Shape::unknown());
    return;
  }
  int64_t axis = normalize_axis(ctx, ctx.node().attr_i("axis", -1), x.rank());
  for (int i = 1; i <= 2; ++i) {
    if (!ctx.has_input(i)) continue;
    const Shape& s = ctx.in_shape(i);
    if (!s.rank_known) continue;
    if (s.rank() > x.rank() - axis)
      ctx.error(str_cat(infer::input_desc(ctx, i), " of shape ", s.to_string(), " does not broadcast to X",
                        x.to_string(), "'s normalised axes from ", axis));
    for (int64_t k = 0; k < s.rank(); ++k) {
      const Dim& d = s.dims[s.rank() - 1 - k];
      const Dim& o = x.dims[x.rank() - 1 - k];
      if (d.is_static() && d.value != 1 && o.is_static() && d.value != o.value)
        ctx.error(str_cat(infer::input_desc(ctx, i), " of shape ", s.to_string(), " does not broadcast to X",
                          x.to_string(), "'s normalised axes from ", axis));
    }
  }
  std::vector<Dim> stat(x.dims.begin(), x.dims.begin() + axis);
  stat.resize(x.dims.size(), Dim(int64_t{1}));
  ctx.set_output(1, st, Shape(stat));
  ctx.set_output(2, st, Shape(stat));
}

void infer_softmax(InferContext& ctx) {
  infer::check_arity(ctx, 1, 1);
  infer::check_type(ctx, 0, Types::kFloat);
  const Shape& x = ctx.in_shape(0);
  if (x.rank_known) normalize_axis(ctx, ctx.node().attr_i("axis", -1), x.rank());
  ctx.set_output(0, ctx.in_dtype(0), x);
}

void infer_dropout(InferContext& ctx) {
  infer::check_arity(ctx, 1, 3, 1, 2);
  infer::check_type(ctx, 0, Types::kFloat);
  infer::check_type(ctx, 1, Types::kFloat);
  infer::check_type(ctx, 2, Types::kBool);
  for (int i = 1; i <= 2; ++i) {
    if (!ctx.has_input(i)) continue;
    const Shape& s = ctx.in_shape(i);
    if (s.rank_known && s.is_static() && s.numel() != 1)
      ctx.error(str_cat(infer::input_desc(ctx, i), " (", i == 1 ? "ratio" : "training_mode",
                        ") must be a scalar, got shape ", s.to_string()));
  }
  if (auto r = infer::const_doubles(ctx, 1))
    if (!r->empty() && ((*r)[0] < 0 || (*r)[0] >= 1))
      ctx.error(str_cat("ratio ", (*r)[0], " must be in [0, 1)"));
  ctx.set_output(0, ctx.in_dtype(0), ctx.in_shape(0));
  ctx.set_output(1, DataType::kBool, ctx.in_shape(0));
}

// SoftmaxCrossEntropyLoss (sce) and NegativeLogLikelihoodLoss: scores/input [N,C,d1..], labels
// [N,d1..], optional weights [C].
InferFn loss(bool sce) {
  return [sce](InferContext& ctx) {
    infer::check_arity(ctx, 2, 3, 1, sce ? 2 : 1);
    infer::check_type(ctx, 0, Types::kFloat);
    infer::check_type(ctx, 1, Types::kIndex);
    infer::check_same_type(ctx, 0, 2);
    std::string red = ctx.node().attr_s("reduction", "mean");
    if (red != "none" && red != "mean" && red != "sum")
      ctx.error("attribute 'reduction' must be none, mean or sum, got '" + red + "'");
    if (const Attribute* ii = ctx.node().find_attr("ignore_index"); ii && ii->kind() != Attribute::Kind::kInt)
      ctx.error("attribute 'ignore_index' must be an int");
    const Shape& x = ctx.in_shape(0);
    const Shape& y = ctx.in_shape(1);
    if (x.rank_known && x.rank() < 2) ctx.error("input 0 (scores) must have rank >= 2, got shape " + x.to_string());
    if (x.rank_known && y.rank_known) {
      if (y.rank() != x.rank() - 1)
        ctx.error(str_cat("input 1 (labels) has shape ", y.to_string(), " but scores have shape ", x.to_string(),
                          " (labels must be scores' shape without axis 1)"));
      for (int64_t i = 0; i < y.rank(); ++i)
        check_dims_match(ctx, y.dims[i], x.dims[i == 0 ? 0 : i + 1],
                         str_cat("input 1 (labels) shape ", y.to_string(), " does not match scores ", x.to_string()));
    }
    if (ctx.has_input(2)) {
      const Shape& w = ctx.in_shape(2);
      if (w.rank_known && w.rank() != 1) ctx.error("input 2 (weights) must be 1-D, got shape " + w.to_string());
      if (w.rank_known) check_dims_match(ctx, w.dims[0], dim_at(x, 1), "input 2 (weights) size differs from classes");
    }
    DataType t = ctx.in_dtype(0);
    if (red != "none") {
      ctx.set_output(0, t, Shape());
    } else if (y.rank_known) {
      // Prefer the labels' dims, falling back on the scores' where the labels' are unknown.
      std::vector<Dim> d = y.dims;
      for (int64_t i = 0; i < y.rank(); ++i)
        if (!infer::dim_known(d[i])) d[i] = dim_at(x, i == 0 ? 0 : i + 1);
      ctx.set_output(0, t, Shape(d));
    } else if (x.rank_known) {
      std::vector<Dim> d = x.dims;
      d.erase(d.begin() + 1);
      ctx.set_output(0, t, Shape(d));
    } else {
      ctx.set_output(0, t, Shape::unknown());
    }
    if (sce) ctx.set_output(1, t, x);
  };
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

// One fused backward op for several inputs: `op`(inputs) with an output per wanted gradient.
void grad_fused(GradContext& c, const std::string& op, const std::vector<Value*>& inputs,
                const std::vector<int>& grad_of, const std::vector<std::string>& attrs,
                std::map<std::string, Attribute> extra = {}) {
  std::vector<bool> want;
  bool any = false;
  for (int i : grad_of) {
    want.push_back(i >= 0 && c.node().has_input(i) && c.needs_grad(i));
    any |= want.back();
  }
  if (!any) return;
  auto a = c.forward_attrs(attrs);
  a.insert(extra.begin(), extra.end());
  std::vector<Value*> g = c.emit_some(op, inputs, want, a, kOtterDomain);
  for (size_t k = 0; k < grad_of.size(); ++k)
    if (g[k]) c.set_grad_input(grad_of[k], g[k]);
}

const std::vector<std::string> kConvAttrs = {"auto_pad", "dilations", "group", "kernel_shape", "pads", "strides"};
const std::vector<std::string> kPoolAttrs = {"auto_pad", "ceil_mode", "count_include_pad", "dilations",
                                             "kernel_shape", "pads", "strides"};

// ConvGrad(dY, X, W) -> dX, dW, dB in one op (im2col + GEMM on the CPU, cuDNN on CUDA).
void grad_conv(GradContext& c) {
  grad_fused(c, "ConvGrad", {c.grad_output(0), c.input(0), c.input(1)}, {0, 1, 2}, kConvAttrs);
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

bool batch_norm_training(const Node& n) {
  if (n.opset() >= 14) return n.attr_i("training_mode", 0) != 0;
  for (int i = 1; i < n.num_outputs(); ++i)
    if (n.output(i)) return true;
  return false;
}

// BatchNormalizationGrad(dY, X, scale, mean, var) -> dX, dScale, dB (and, in inference mode only,
// dMean, dVar). In training mode the batch statistics are recomputed from X and differentiated
// through; the running statistics (outputs 1, 2) are state updates and carry no gradient.
void grad_batch_norm(GradContext& c) {
  if (!c.grad_output(0)) return;
  bool training = batch_norm_training(c.node());
  std::vector<int> grads = {0, 1, 2, training ? -1 : 3, training ? -1 : 4};
  std::vector<Value*> ins = {c.grad_output(0), c.input(0), c.input(1), c.input(3), c.input(4)};
  grad_fused(c, "BatchNormalizationGrad", ins, grads, {"epsilon"},
             {{"training_mode", Attribute(int64_t{training})}});
}

// LayerNormalizationGrad(dY, X, scale) -> dX, dScale, dB; the last two over the normalised shape,
// summed back to the shapes of Scale and B where those broadcast.
void grad_layer_norm(GradContext& c) {
  if (c.grad_output(1) || c.grad_output(2))
    c.unsupported("a gradient reaches LayerNormalization's Mean or InvStdDev output");
  Value* dy = c.grad_output(0);
  std::vector<bool> want = {c.needs_grad(0), c.needs_grad(1), c.node().has_input(2) && c.needs_grad(2)};
  if (!dy || std::none_of(want.begin(), want.end(), [](bool w) { return w; })) return;
  std::vector<Value*> g =
      c.emit_some("LayerNormalizationGrad", {dy, c.input(0), c.input(1)}, want, c.forward_attrs({"axis", "epsilon"}),
                  kOtterDomain);
  for (int i = 0; i < 3; ++i)
    if (g[i]) c.set_grad_input(i, i == 0 ? g[0] : c.sum_to_shape(g[i], c.input(i)));
}

GradFn softmax_grad(std::string op) {
  return [op](GradContext& c) {
    c.set_grad_input(0, c.emit_otter(op, {c.grad_output(0), c.output(0)}, c.forward_attrs({"axis"})));
  };
}

// The constant contents of a bool scalar input, when it is a constant.
std::optional<bool> const_bool(const Value* v) {
  if (!v || v->kind() != ValueKind::kInitializer || v->trainable() || !v->has_data()) return std::nullopt;
  return v->data().get_as_double(0) != 0;
}

// Dropout: the forward's mask selects the kept elements (scaled by 1/(1-ratio)); without
// training_mode (or with a constant false) Dropout is the identity.
void grad_dropout(GradContext& c) {
  Value* dy = c.grad_output(0);
  if (!dy) return;
  Value* training = c.input(2);
  if (!training || const_bool(training) == false) return c.set_grad_input(0, dy);
  if (!c.output(1))
    c.unsupported("training-mode Dropout without its mask output: the backward pass needs the mask the "
                  "forward pass drew (export Dropout with both outputs)");
  c.set_grad_input(0, c.emit_otter("DropoutGrad", {dy, c.output(1), c.input(1), training}));
}

// The fused loss gradient op `op`(dL, scores, labels, weights?) -> dScores?, dWeights?.
std::vector<Value*> loss_grad(GradContext& c, const std::string& op) {
  std::vector<bool> want = {c.needs_grad(0), c.node().has_input(2) && c.needs_grad(2)};
  Value* dl = c.grad_output(0);
  if (!dl || (!want[0] && !want[1])) return {nullptr, nullptr};
  return c.emit_some(op, {dl, c.input(0), c.input(1), c.input(2)}, want,
                     c.forward_attrs({"reduction", "ignore_index"}), kOtterDomain);
}

// SoftmaxCrossEntropyLoss: SoftmaxCrossEntropyLossGrad computes (softmax - onehot) * weight / norm
// in one pass (and the class weights' gradient when they need one); a gradient reaching the
// log_prob output adds through LogSoftmaxGrad. Labels carry no gradient.
void grad_sce(GradContext& c) {
  std::vector<Value*> g = loss_grad(c, "SoftmaxCrossEntropyLossGrad");
  Value* total = g[0];
  if (Value* dlp = c.grad_output(1); dlp && c.needs_grad(0)) {
    Value* t = c.emit_otter("LogSoftmaxGrad", {dlp, c.output(1)}, {{"axis", Attribute(int64_t{1})}});
    total = total ? c.emit("Add", {total, t}) : t;
  }
  c.set_grad_input(0, total);
  c.set_grad_input(2, g[1]);
}

void grad_nll(GradContext& c) {
  std::vector<Value*> g = loss_grad(c, "NegativeLogLikelihoodLossGrad");
  c.set_grad_input(0, g[0]);
  c.set_grad_input(2, g[1]);
}

// ---- gradient ops (ai.otter) --------------------------------------------------------------------
// Outputs k take the dtype and shape of inputs `like[k]` (a fused op's gradients).
InferFn grads_like(int min_in, int max_in, std::vector<int> like) {
  return [=](InferContext& ctx) {
    infer::check_arity(ctx, min_in, max_in, 1, static_cast<int>(like.size()));
    infer::check_float(ctx, 0);
    infer::check_same_type(ctx, 0, 1);
    for (size_t k = 0; k < like.size(); ++k)
      if (ctx.has_output(static_cast<int>(k))) infer::same_as_input(ctx, like[k], static_cast<int>(k));
  };
}

void infer_conv_grad(InferContext& ctx) {
  grads_like(3, 4, {1, 2, 2})(ctx);  // dB then takes W's output-channel count
  if (ctx.has_output(2)) ctx.set_output(2, ctx.in_dtype(2), Shape({dim_at(ctx.in_shape(2), 0)}));
  if (ctx.has_input(3)) {  // dW accumulates into this state (grad-accumulation's fusion), in its type
    infer::check_same_type(ctx, 2, 3);
    if (ctx.has_output(1)) ctx.set_output(1, ctx.in_dtype(3), ctx.in_shape(3));
  }
}

void infer_layer_norm_grad(InferContext& ctx) {
  grads_like(3, 3, {1, 2, 2})(ctx);  // dScale, dB then take the normalised shape
  const Shape& x = ctx.in_shape(1);
  for (int i = 1; i <= 2; ++i) {
    if (!ctx.has_output(i)) continue;
    if (!x.rank_known) {
      ctx.set_output(i, ctx.in_dtype(2), Shape::unknown());
      continue;
    }
    int64_t axis = normalize_axis(ctx, ctx.node().attr_i("axis", -1), x.rank());
    ctx.set_output(i, ctx.in_dtype(2), Shape(std::vector<Dim>(x.dims.begin() + axis, x.dims.end())));
  }
}

void infer_batch_norm_grad(InferContext& ctx) {
  grads_like(5, 5, {1, 2, 2, 3, 4})(ctx);
}

void infer_softmax_grad(InferContext& ctx) {
  grads_like(2, 2, {1})(ctx);
  const Shape& y = ctx.in_shape(1);
  if (y.rank_known) normalize_axis(ctx, ctx.node().attr_i("axis", -1), y.rank());
}

void infer_loss_grad(InferContext& ctx) {
  infer::check_arity(ctx, 3, 4, 1, 2);
  infer::check_float(ctx, 0);
  infer::check_same_type(ctx, 0, 1);
  infer::check_type(ctx, 2, Types::kIndex);
  infer::check_same_type(ctx, 0, 3);
  if (ctx.has_output(0)) infer::same_as_input(ctx, 1, 0);
  if (ctx.has_output(1)) {
    if (!ctx.has_input(3)) ctx.error("output 1 (dWeights) needs input 3 (weights)");
    infer::same_as_input(ctx, 3, 1);
  }
}

void register_nn_grad_ops(OpTable& t) {
  using P = PrecisionClass;
  infer::add_otter_op(t, "ConvGrad", infer_conv_grad, P::kLow,
                      "ConvGrad(dY, X, W, dW_acc?) {Conv's attributes} -> dX?, dW?, dB?: convolution backward "
                      "(data, filter, bias); with dW_acc, dW is that accumulator updated in place (overwritten on "
                      "the first micro-step, added to after)");
  t.mutable_find(kOtterDomain, "ConvGrad", 1)->views = {{1, 3}};
  t.mutable_find(kOtterDomain, "ConvGrad", 1)->accumulating_form = AccumulatingForm::kAccumulatorInput;
  infer::add_otter_op(t, "MaxPoolGrad", grads_like(2, 2, {1}), P::kFollow,
                      "MaxPoolGrad(dY, X) {MaxPool's attributes}: dY routed to each window's (first) maximum");
  infer::add_otter_op(t, "AveragePoolGrad", grads_like(2, 2, {1}), P::kFollow,
                      "AveragePoolGrad(dY, X) {AveragePool's attributes}: dY spread evenly over each window");
  infer::add_otter_op(t, "BatchNormalizationGrad", infer_batch_norm_grad, P::kFp32,
                      "BatchNormalizationGrad(dY, X, scale, mean, var) {epsilon, training_mode} -> dX?, dScale?, "
                      "dB?, dMean?, dVar?");
  infer::add_otter_op(t, "LayerNormalizationGrad", infer_layer_norm_grad, P::kFp32,
                      "LayerNormalizationGrad(dY, X, scale) {axis, epsilon} -> dX?, dScale?, dB? (the last two "
                      "over the normalised shape)");
  infer::add_otter_op(t, "SoftmaxGrad", infer_softmax_grad, P::kFp32,
                      "SoftmaxGrad(dY, Y) {axis}: Y * (dY - sum(dY * Y, axis))");
  infer::add_otter_op(t, "LogSoftmaxGrad", infer_softmax_grad, P::kFp32,
                      "LogSoftmaxGrad(dY, Y) {axis}: dY - exp(Y) * sum(dY, axis)");
  infer::add_otter_op(t, "SoftmaxCrossEntropyLossGrad", infer_loss_grad, P::kFp32,
                      "SoftmaxCrossEntropyLossGrad(dL, scores, labels, weights?) {reduction, ignore_index} -> "
                      "dScores?, dWeights?: (softmax(scores) - onehot(labels)) * weight * dL / norm");
  infer::add_otter_op(t, "NegativeLogLikelihoodLossGrad", infer_loss_grad, P::kFp32,
                      "NegativeLogLikelihoodLossGrad(dL, input, labels, weights?) {reduction, ignore_index} -> "
                      "dInput?, dWeights?: -weight * dL / norm at each label, 0 elsewhere");
  // A column's sum is read before any of its dX is written: dX may take over dY's buffer.
  for (const char* op : {"SoftmaxGrad", "LogSoftmaxGrad"}) t.mutable_find(kOtterDomain, op, 1)->inplace = true;
}

void add(OpTable& t, const char* op, int since, int until, InferFn f, PrecisionClass p, bool inplace,
         GradSpec g, const char* summary) {
  t.add({.domain = "",
         .op_type = op,
         .since_version = since,
         .until_version = until,
         .infer = std::move(f),
         .precision = p,
         .inplace = inplace,
         .grad_kind = g.kind,
         .grad = std::move(g.fn),
         .summary = summary});
}

}  // namespace

void register_nn_ops(OpTable& t) {
  using P = PrecisionClass;
  constexpr int kMax = kMaxOnnxOpset;
  auto rule = grad_rule;
  // Since-versions are those of the ONNX schema in force at opset 13; the later versions noted
  // only widen types or add attributes that inference reads where present.
  add(t, "MatMul", 13, kMax, infer_matmul, P::kLow, false, rule(grad_matmul),
      "numpy matmul: batched, with 1-D promotion");
  t.mutable_find("", "MatMul", 13)->accumulating_form = AccumulatingForm::kGemmAccumulate;
  add(t, "Gemm", 13, kMax, infer_gemm, P::kLow, false, rule(grad_gemm),
      "alpha * op(A) @ op(B) + beta * C, 2-D, transA/transB");
  t.mutable_find("", "Gemm", 13)->accumulating_form = AccumulatingForm::kGemmAccumulate;
  add(t, "Conv", 11, kMax, infer_conv, P::kLow, false, rule(grad_conv),
      "N-d convolution with groups, pads, strides, dilations");
  add(t, "MaxPool", 12, kMax, pool(true), P::kFollow, false, rule(pool_grad("MaxPoolGrad")),
      "N-d max pooling, optional int64 indices output");
  add(t, "AveragePool", 11, kMax, pool(false), P::kFollow, false, rule(pool_grad("AveragePoolGrad")),
      "N-d average pooling (AveragePool 11, 19: dilations)");
  add(t, "GlobalAveragePool", 1, kMax, infer_global_avg_pool, P::kFollow, false, rule(grad_global_avg_pool),
      "mean over all spatial axes");
  add(t, "GlobalMaxPool", 1, kMax, infer_global_avg_pool, P::kFollow, false, rule(grad_global_max_pool),
      "max over all spatial axes");
  // BatchNormalization 9 (outputs mean, var, saved_mean, saved_var in training), 14 (training_mode
  // attribute, outputs running_mean/running_var), 15 (separate scale/stat types).
  add(t, "BatchNormalization", 9, kMax, infer_batch_norm, P::kFollow, false, rule(grad_batch_norm),
      "per-channel normalisation with running statistics");
  add(t, "LayerNormalization", 17, kMax, infer_layer_norm, P::kFp32, false, rule(grad_layer_norm),
      "normalisation over the axes from 'axis', optional mean/inv_std_dev outputs");
  add(t, "Softmax", 13, kMax, infer_softmax, P::kFp32, false, rule(softmax_grad("SoftmaxGrad")),
      "softmax along 'axis' (default -1)");
  add(t, "LogSoftmax", 13, kMax, infer_softmax, P::kFp32, false, rule(softmax_grad("LogSoftmaxGrad")),
      "log of softmax along 'axis' (default -1)");
  add(t, "Dropout", 13, kMax, infer_dropout, P::kFollow, true, rule(grad_dropout),
      "random zeroing with scaling; bool mask output");
  add(t, "SoftmaxCrossEntropyLoss", 13, kMax, loss(true), P::kFp32, false, rule(grad_sce),
      "cross entropy of softmax(scores) and labels, reduction none/mean/sum, optional log_prob");
  add(t, "NegativeLogLikelihoodLoss", 13, kMax, loss(false), P::kFp32, false, rule(grad_nll),
      "negative log likelihood of log-probabilities and targets, reduction none/mean/sum");
  // Only X shares the output's type: the parameters, statistics and ratio have type variables of
  // their own (T1, T2), so a half X keeps fp32 scale, bias and running statistics.
  for (const char* op : {"BatchNormalization", "Dropout"}) t.mutable_find("", op, kMax)->precision_inputs = {0};
  // Inference-mode Dropout returns its input as is.
  t.mutable_find("", "Dropout", kMax)->views = {{0, 0}};
  register_nn_grad_ops(t);
}

}  // namespace otter
