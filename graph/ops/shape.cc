// Views and shape queries of the default domain: Reshape, Flatten, Transpose, Squeeze, Unsqueeze,
// Identity, Shape, Size, ConstantOfShape, Constant, Range and Trilu, with propagation of symbolic
// shape data so exported shape arithmetic keeps dims. The data-movement ops (Concat, Slice, Pad,
// ...) are in graph/ops/movement.cc.
#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <set>

#include "graph/gradient.h"
#include "graph/op_table.h"
#include "graph/ops/infer_util.h"

namespace otter {
namespace {

using infer::add;
using infer::check_1d;
using infer::check_scalar;
using infer::Types;

// Output 0 keeps input 0's symbolic data (same elements in the same order).
void pass_sym(InferContext& ctx) {
  Value* out = ctx.node().output(0);
  if (!out || !out->shape().rank_known || out->shape().rank() > 1) return;
  if (auto d = infer::sym_data(ctx, 0)) {
    int64_t n = out->shape().numel();
    if (n < 0 || n == static_cast<int64_t>(d->size())) infer::set_sym(ctx, 0, *d);
  }
}

// ---- Reshape, Flatten, Transpose, Squeeze, Unsqueeze ---------------------------------------------
void infer_reshape(InferContext& ctx) {
  infer::check_arity(ctx, 2, 2);
  infer::check_type(ctx, 1, Types::kInt64);
  check_1d(ctx, 1, "shape");
  DataType t = ctx.in_dtype(0);
  const Shape& x = ctx.in_shape(0);
  bool allowzero = ctx.node().opset() >= 14 && ctx.node().attr_i("allowzero", 0) != 0;
  enum Kind { kValue, kInfer, kUnknown };
  std::vector<std::pair<Kind, Dim>> target;
  if (auto c = infer::const_tensor(ctx, 1)) {
    for (int64_t v : c->to_int64_vector()) {
      if (v < -1) ctx.error(str_cat("shape entry ", v, " is invalid (entries must be >= -1)"));
      target.emplace_back(v == -1 ? kInfer : kValue, v == -1 ? Dim() : Dim(v));
    }
  } else if (auto d = infer::sym_data(ctx, 1)) {
    for (const Dim& e : *d) target.emplace_back(infer::dim_known(e) ? kValue : kUnknown, e);
  } else {
    auto len = infer::static_length(ctx, 1);
    if (!len) return ctx.set_output(0, t, Shape::unknown());
    return ctx.set_output(0, t, Shape(std::vector<Dim>(*len)));
  }
  int n_infer = 0;
  bool has_zero = false;
  for (const auto& [k, d] : target) {
    n_infer += k == kInfer;
    has_zero |= k == kValue && d.is_static() && d.value == 0;
  }
  if (n_infer > 1) ctx.error("shape has more than one -1 entry");
  if (allowzero && has_zero && n_infer) ctx.error("shape has both 0 and -1 entries with allowzero=1");
  std::vector<Dim> out;
  std::vector<size_t> unresolved;
  for (size_t i = 0; i < target.size(); ++i) {
    auto [k, d] = target[i];
    if (k == kValue && d.is_static() && d.value == 0 && !allowzero) {
      if (x.rank_known && static_cast<int64_t>(i) >= x.rank())
        ctx.error(str_cat("shape entry 0 at position ", i, " copies a dimension the input ", x.to_string(),
                          " does not have"));
      out.push_back(x.rank_known ? x.dims[i] : Dim());
      if (!infer::dim_known(out.back())) unresolved.push_back(i);
    } else if (k == kValue) {
      out.push_back(d);
    } else {
      out.push_back(Dim());
      unresolved.push_back(i);
    }
  }
  // The element count fixes one unresolved entry (a -1, or an unknown one: whatever it holds at
  // run time, the count must match).
  if (x.rank_known) {
    Dim in_numel = infer::dims_product(x.dims);
    std::vector<Dim> known;
    for (size_t i = 0; i < out.size(); ++i)
      if (std::find(unresolved.begin(), unresolved.end(), i) == unresolved.end()) known.push_back(out[i]);
    Dim rest = infer::dims_product(known);
    if (unresolved.size() == 1 && !(rest.is_static() && rest.value == 0)) {
      if (in_numel.is_static() && rest.is_static() && in_numel.value % rest.value != 0)
        ctx.error(str_cat("cannot reshape ", x.to_string(), " (", in_numel.value, " elements) to ",
                          Shape(out).to_string(), ": ", in_numel.value, " is not a multiple of ", rest.value));
      out[unresolved[0]] = infer::dim_div(in_numel, rest);
    } else if (unresolved.empty() && in_numel.is_static() && rest.is_static() && in_numel.value != rest.value) {
      ctx.error(str_cat("cannot reshape ", x.to_string(), " (", in_numel.value, " elements) to ",
                        Shape(out).to_string(), " (", rest.value, " elements)"));
    }
  }
  ctx.set_output(0, t, Shape(out));
  pass_sym(ctx);
}

void infer_flatten(InferContext& ctx) {
  infer::check_arity(ctx, 1, 1);
  const Shape& x = ctx.in_shape(0);
  DataType t = ctx.in_dtype(0);
  int64_t axis = ctx.node().attr_i("axis", 1);
  if (!x.rank_known) return ctx.set_output(0, t, Shape({Dim(), Dim()}));
  int64_t r = x.rank();
  if (axis < -r || axis > r) ctx.error(str_cat("axis ", axis, " is out of range for rank ", r, " (Flatten allows [-r, r])"));
  if (axis < 0) axis += r;
  ctx.set_output(0, t, Shape({infer::dims_product(x.dims, 0, axis), infer::dims_product(x.dims, axis, r)}));
}

void infer_transpose(InferContext& ctx) {
  infer::check_arity(ctx, 1, 1);
  const Shape& x = ctx.in_shape(0);
  DataType t = ctx.in_dtype(0);
  const Attribute* pa = ctx.node().find_attr("perm");
  std::vector<int64_t> perm = ctx.node().attr_ints("perm");
  if (!x.rank_known) {
    if (!pa) return ctx.set_output(0, t, Shape::unknown());
    return ctx.set_output(0, t, Shape(std::vector<Dim>(perm.size())));
  }
  int64_t r = x.rank();
  if (!pa) {
    perm.resize(r);
    std::iota(perm.rbegin(), perm.rend(), 0);
  }
  if (static_cast<int64_t>(perm.size()) != r)
    ctx.error(str_cat("attribute 'perm' has ", perm.size(), " entries but the input has rank ", r));
  std::vector<bool> seen(r, false);
  std::vector<Dim> out;
  for (int64_t p : perm) {
    if (p < 0 || p >= r || seen[p]) ctx.error(str_cat("attribute 'perm' ", Shape::of(perm).to_string(),
                                                      " is not a permutation of 0..", r - 1));
    seen[p] = true;
    out.push_back(x.dims[p]);
  }
  ctx.set_output(0, t, Shape(out));
}

void infer_squeeze(InferContext& ctx) {
  infer::check_arity(ctx, 1, 2);
  infer::check_type(ctx, 1, Types::kInt64);
  check_1d(ctx, 1, "axes");
  const Shape& x = ctx.in_shape(0);
  DataType t = ctx.in_dtype(0);
  if (!x.rank_known) return ctx.set_output(0, t, Shape::unknown());
  std::vector<Dim> out;
  if (ctx.has_input(1)) {
    auto axes = infer::const_ints(ctx, 1);
    if (!axes) {
      auto len = infer::static_length(ctx, 1);
      if (!len) return ctx.set_output(0, t, Shape::unknown());
      if (*len > x.rank()) ctx.error(str_cat("cannot squeeze ", *len, " axes of a rank-", x.rank(), " tensor"));
      return ctx.set_output(0, t, Shape(std::vector<Dim>(x.rank() - *len)));
    }
    std::vector<int64_t> ax = infer::normalize_axes(ctx, *axes, x.rank());
    for (int64_t a : ax)
      if (x.dims[a].is_static() && x.dims[a].value != 1)
        ctx.error(str_cat("cannot squeeze axis ", a, " of size ", x.dims[a].value, " (input ", x.to_string(), ")"));
    for (int64_t i = 0; i < x.rank(); ++i)
      if (std::find(ax.begin(), ax.end(), i) == ax.end()) out.push_back(x.dims[i]);
  } else {
    // Without axes every size-1 axis goes; a non-static dim might be 1, so the rank is unknown.
    for (const Dim& d : x.dims) {
      if (!d.is_static()) return ctx.set_output(0, t, Shape::unknown());
      if (d.value != 1) out.push_back(d);
    }
  }
  ctx.set_output(0, t, Shape(out));
  pass_sym(ctx);
}

void infer_unsqueeze(InferContext& ctx) {
  infer::check_arity(ctx, 2, 2);
  infer::check_type(ctx, 1, Types::kInt64);
  check_1d(ctx, 1, "axes");
  const Shape& x = ctx.in_shape(0);
  DataType t = ctx.in_dtype(0);
  auto axes = infer::const_ints(ctx, 1);
  if (!x.rank_known) return ctx.set_output(0, t, Shape::unknown());
  if (!axes) {
    auto len = infer::static_length(ctx, 1);
    if (!len) return ctx.set_output(0, t, Shape::unknown());
    return ctx.set_output(0, t, Shape(std::vector<Dim>(x.rank() + *len)));
  }
  int64_t r = x.rank() + static_cast<int64_t>(axes->size());
  std::vector<int64_t> ax = infer::normalize_axes(ctx, *axes, r);
  std::vector<Dim> out;
  size_t next = 0;
  for (int64_t i = 0; i < r; ++i) {
    if (std::find(ax.begin(), ax.end(), i) != ax.end()) out.emplace_back(int64_t{1});
    else out.push_back(x.dims[next++]);
  }
  ctx.set_output(0, t, Shape(out));
  pass_sym(ctx);
}

// ---- Shape, Size, constants, Range ------------------------------------------------------------------
void infer_shape(InferContext& ctx) {
  infer::check_arity(ctx, 1, 1);
  const Shape& x = ctx.in_shape(0);
  bool has_range = ctx.node().has_attr("start") || ctx.node().has_attr("end");
  if (has_range && ctx.node().opset() < 15) ctx.error("attributes 'start'/'end' need opset 15 or later");
  if (!x.rank_known) return ctx.set_output(0, DataType::kInt64, Shape({Dim()}));
  int64_t r = x.rank();
  int64_t start = ctx.node().attr_i("start", 0);
  int64_t end = ctx.node().attr_i("end", r);
  if (start < 0) start += r;
  if (end < 0) end += r;
  start = std::clamp<int64_t>(start, 0, r);
  end = std::clamp<int64_t>(end, 0, r);
  int64_t len = std::max<int64_t>(end - start, 0);
  ctx.set_output(0, DataType::kInt64, Shape({Dim(len)}));
  infer::set_sym(ctx, 0, std::vector<Dim>(x.dims.begin() + start, x.dims.begin() + start + len));
}

void infer_size(InferContext& ctx) {
  infer::check_arity(ctx, 1, 1);
  const Shape& x = ctx.in_shape(0);
  ctx.set_output(0, DataType::kInt64, Shape());
  if (x.rank_known) infer::set_sym(ctx, 0, {infer::dims_product(x.dims)});
}

// Symbolic data of a small integer tensor.
void set_tensor_sym(InferContext& ctx, const Tensor& v) {
  if (!is_integer(v.dtype()) && v.dtype() != DataType::kBool) return;
  if (v.rank() > 1 || v.numel() > static_cast<int64_t>(infer::kMaxSymData)) return;
  std::vector<Dim> d;
  for (int64_t x : v.to_int64_vector()) d.emplace_back(x);
  infer::set_sym(ctx, 0, std::move(d));
}

void infer_constant_of_shape(InferContext& ctx) {
  infer::check_arity(ctx, 1, 1);
  infer::check_type(ctx, 0, Types::kInt64);
  check_1d(ctx, 0, "input");
  DataType t = DataType::kFloat32;
  const Attribute* va = ctx.node().find_attr("value");
  if (va) {
    if (va->kind() != Attribute::Kind::kTensor) ctx.error("attribute 'value' must be a tensor");
    if (va->t().numel() != 1)
      ctx.error(str_cat("attribute 'value' must hold exactly one element, got ", va->t().describe()));
    t = va->t().dtype();
  }
  if (auto c = infer::const_tensor(ctx, 0))
    for (int64_t v : c->to_int64_vector())
      if (v < 0) ctx.error(str_cat("shape entry ", v, " is negative"));
  auto target = infer::sym_data(ctx, 0);
  if (!target) {
    auto len = infer::static_length(ctx, 0);
    ctx.set_output(0, t, len ? Shape(std::vector<Dim>(*len)) : Shape::unknown());
    return;
  }
  Shape out(*target);
  ctx.set_output(0, t, out);
  if ((is_integer(t) || t == DataType::kBool) && out.rank() <= 1 && out.is_static() &&
      out.numel() <= static_cast<int64_t>(infer::kMaxSymData)) {
    int64_t v = va ? va->t().to_int64_vector()[0] : 0;
    infer::set_sym(ctx, 0, std::vector<Dim>(out.numel(), Dim(v)));
  }
}

void infer_constant(InferContext& ctx) {
  infer::check_arity(ctx, 0, 0);
  static const char* kKeys[] = {"value", "value_float", "value_floats", "value_int", "value_ints",
                                "value_string", "value_strings", "sparse_value"};
  std::vector<std::string> present;
  for (const char* k : kKeys)
    if (ctx.node().has_attr(k)) present.push_back(k);
  if (present.size() != 1)
    ctx.error(str_cat("needs exactly one of the attributes value, value_float, value_floats, value_int, value_ints; got ",
                      present.size()));
  const std::string& k = present[0];
  const Attribute& a = *ctx.node().find_attr(k);
  auto want = [&](Attribute::Kind kind, const char* what) {
    if (a.kind() != kind) ctx.error(str_cat("attribute '", k, "' must be ", what));
  };
  if (k == "value") {
    want(Attribute::Kind::kTensor, "a tensor");
    ctx.set_output(0, a.t().dtype(), Shape::of(a.t().dims()));
    set_tensor_sym(ctx, a.t());
  } else if (k == "value_float") {
    want(Attribute::Kind::kFloat, "a float");
    ctx.set_output(0, DataType::kFloat32, Shape());
  } else if (k == "value_floats") {
    want(Attribute::Kind::kFloats, "a list of floats");
    ctx.set_output(0, DataType::kFloat32, Shape({Dim(static_cast<int64_t>(a.floats().size()))}));
  } else if (k == "value_int") {
    want(Attribute::Kind::kInt, "an int");
    ctx.set_output(0, DataType::kInt64, Shape());
    infer::set_sym(ctx, 0, {Dim(a.i())});
  } else if (k == "value_ints") {
    want(Attribute::Kind::kInts, "a list of ints");
    ctx.set_output(0, DataType::kInt64, Shape({Dim(static_cast<int64_t>(a.ints().size()))}));
    std::vector<Dim> d(a.ints().begin(), a.ints().end());
    infer::set_sym(ctx, 0, std::move(d));
  } else {
    ctx.error("attribute '" + k + "' is not supported (string and sparse constants)");
  }
}

void infer_range(InferContext& ctx) {
  infer::check_arity(ctx, 3, 3);
  infer::check_type(ctx, 0, Types::kNumeric);
  infer::check_same_type(ctx, 0, 1);
  infer::check_same_type(ctx, 0, 2);
  check_scalar(ctx, 0, "start");
  check_scalar(ctx, 1, "limit");
  check_scalar(ctx, 2, "delta");
  DataType t = ctx.in_dtype(0);
  auto s = infer::const_doubles(ctx, 0), l = infer::const_doubles(ctx, 1), d = infer::const_doubles(ctx, 2);
  if (d && !d->empty() && (*d)[0] == 0) ctx.error("delta is 0");
  if (s && l && d && !s->empty() && !l->empty() && !d->empty()) {
    double n = std::ceil(((*l)[0] - (*s)[0]) / (*d)[0]);
    int64_t len = std::max<int64_t>(0, static_cast<int64_t>(n));
    ctx.set_output(0, t, Shape({Dim(len)}));
    if (is_integer(t) && len <= static_cast<int64_t>(infer::kMaxSymData)) {
      std::vector<Dim> v;
      for (int64_t i = 0; i < len; ++i)
        v.emplace_back(static_cast<int64_t>((*s)[0]) + i * static_cast<int64_t>((*d)[0]));
      infer::set_sym(ctx, 0, std::move(v));
    }
    return;
  }
  // Range(start, N, 1) over symbolic bounds has N - start elements (arange(seq_len) in exports).
  auto ss = infer::sym_data(ctx, 0), ls = infer::sym_data(ctx, 1), ds = infer::sym_data(ctx, 2);
  Dim len;
  if (ss && ls && ds && ss->size() == 1 && ls->size() == 1 && ds->size() == 1 && (*ds)[0] == Dim(int64_t{1}))
    len = infer::dim_sub((*ls)[0], (*ss)[0]);
  ctx.set_output(0, t, Shape({len}));
}

void infer_trilu(InferContext& ctx) {
  infer::check_arity(ctx, 1, 2);
  infer::check_type(ctx, 1, Types::kInt64);
  check_scalar(ctx, 1, "k");
  const Shape& x = ctx.in_shape(0);
  if (x.rank_known && x.rank() < 2) ctx.error("input 0 must have rank >= 2, got shape " + x.to_string());
  ctx.set_output(0, ctx.in_dtype(0), x);
}

void infer_identity(InferContext& ctx) {
  infer::check_arity(ctx, 1, 1);
  ctx.set_output(0, ctx.in_dtype(0), ctx.in_shape(0));
  pass_sym(ctx);
}

// ---- gradient rules -----------------------------------------------------------------------------
// Views (Reshape, Flatten, Squeeze, Unsqueeze): the gradient is dY reshaped back.
void grad_view(GradContext& c) { c.set_grad_input(0, c.reshape_like(c.grad_output(0), c.input(0))); }
void grad_identity(GradContext& c) { c.set_grad_input(0, c.grad_output(0)); }

void grad_transpose(GradContext& c) {
  int64_t r = c.rank_of(c.input(0));
  std::vector<int64_t> perm = c.node().attr_ints("perm");
  if (perm.empty())
    for (int64_t i = r - 1; i >= 0; --i) perm.push_back(i);
  std::vector<int64_t> inv(r);
  for (int64_t i = 0; i < r; ++i) inv[perm[i]] = i;
  c.set_grad_input(0, c.emit("Transpose", {c.grad_output(0)}, {{"perm", Attribute(inv)}}));
}

void grad_trilu(GradContext& c) {
  c.set_grad_input(0, c.emit("Trilu", {c.grad_output(0), c.input(1)}, c.forward_attrs({"upper"})));
}

}  // namespace

void register_shape_ops(OpTable& t) {
  using P = PrecisionClass;
  constexpr int kMax = kMaxOnnxOpset;
  auto rule = grad_rule;
  const GradSpec kNoGrad = no_gradient();
  // Since-versions are those of the ONNX schema in force at opset 13; later versions up to 21
  // (noted) widen types or add attributes/inputs that inference reads where present.
  add(t, "Reshape", 13, kMax, infer_reshape, P::kFollow, false, rule(grad_view),
      "new shape from input 'shape' (0 copies, -1 infers; allowzero from 14; Reshape 13, 14, 19, 21)");
  add(t, "Flatten", 13, kMax, infer_flatten, P::kFollow, false, rule(grad_view),
      "2-D view split at 'axis' (Flatten 13, 21)");
  add(t, "Transpose", 13, kMax, infer_transpose, P::kFollow, false, rule(grad_transpose),
      "permutes axes by 'perm' (default reverse; Transpose 13, 21)");
  add(t, "Squeeze", 13, kMax, infer_squeeze, P::kFollow, false, rule(grad_view),
      "removes size-1 axes given by input 'axes' (Squeeze 13, 21)");
  add(t, "Unsqueeze", 13, kMax, infer_unsqueeze, P::kFollow, false, rule(grad_view),
      "inserts size-1 axes given by input 'axes' (Unsqueeze 13, 21)");
  add(t, "Identity", 13, kMax, infer_identity, P::kFollow, true, rule(grad_identity),
      "returns its input (Identity 13, 14, 16, 19, 21)");
  add(t, "Shape", 13, kMax, infer_shape, P::kNone, false, kNoGrad,
      "the input's shape as int64 (start/end from 15; Shape 13, 15, 19, 21)");
  add(t, "Size", 13, kMax, infer_size, P::kNone, false, kNoGrad, "the input's element count as int64 scalar");
  add(t, "ConstantOfShape", 9, kMax, infer_constant_of_shape, P::kNone, false, kNoGrad,
      "tensor of input shape filled with 'value' (ConstantOfShape 9, 20, 21)");
  add(t, "Constant", 13, kMax, infer_constant, P::kNone, false, kNoGrad,
      "a constant from value/value_float(s)/value_int(s) (Constant 13, 19, 21)");
  add(t, "Range", 11, kMax, infer_range, P::kNone, false, kNoGrad, "start, start+delta, ... below limit");
  add(t, "Trilu", 14, kMax, infer_trilu, P::kFollow, false, rule(grad_trilu),
      "upper or lower triangle of the last two axes");
  // Their kernels return output 0 as a view of input 0 (no copy).
  for (const char* op : {"Reshape", "Flatten", "Squeeze", "Unsqueeze", "Identity"})
    t.mutable_find("", op, kMax)->views = {{0, 0}};
  register_data_movement_ops(t);
}

}  // namespace otter
