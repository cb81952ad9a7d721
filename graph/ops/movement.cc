// Data-movement ops of the default domain: Concat, Split, Slice, Gather, Expand, Tile and Pad, their
// gradient rules, and the scatter-style gradient ops they emit (SliceGrad, GatherGrad, PadGrad).
// The views and shape queries are in graph/ops/shape.cc.
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

Dim merge_dims(InferContext& ctx, const Dim& a, const Dim& b, const std::string& what) {
  if (a.is_static() && b.is_static() && a.value != b.value) ctx.error(str_cat(what, ": ", a.value, " vs ", b.value));
  if (a.is_static()) return a;
  if (b.is_static()) return b;
  return infer::dim_known(a) ? a : b;
}


// ---- Concat, Split, Slice, Gather -----------------------------------------------------------------
void infer_concat(InferContext& ctx) {
  infer::check_arity(ctx, 1, 1 << 20);
  if (!ctx.node().find_attr("axis")) ctx.error("attribute 'axis' is required");
  int64_t axis = ctx.node().attr_i("axis", 0);
  int64_t rank = -1;
  for (int i = 0; i < ctx.num_inputs(); ++i) {
    if (!ctx.has_input(i)) ctx.error(str_cat("input ", i, " is missing (inputs are not optional)"));
    infer::check_same_type(ctx, 0, i);
    const Shape& s = ctx.in_shape(i);
    if (!s.rank_known) continue;
    if (rank >= 0 && s.rank() != rank)
      ctx.error(str_cat(infer::input_desc(ctx, i), " has shape ", s.to_string(), " of rank ", s.rank(),
                        ", other inputs have rank ", rank));
    rank = s.rank();
  }
  DataType t = ctx.in_dtype(0);
  if (rank < 0) return ctx.set_output(0, t, Shape::unknown());
  if (rank == 0) ctx.error("cannot concatenate scalars");
  axis = normalize_axis(ctx, axis, rank);
  std::vector<Dim> out(rank);
  Dim total(int64_t{0});
  for (int i = 0; i < ctx.num_inputs(); ++i) {
    const Shape& s = ctx.in_shape(i);
    if (!s.rank_known) {
      total = Dim();
      continue;
    }
    for (int64_t k = 0; k < rank; ++k) {
      if (k == axis) continue;
      out[k] = i == 0 ? s.dims[k]
                      : merge_dims(ctx, out[k], s.dims[k],
                                   str_cat(infer::input_desc(ctx, i), " differs on axis ", k, " (shape ",
                                           s.to_string(), ")"));
    }
    total = infer::dim_add(total, s.dims[axis]);
  }
  out[axis] = total;
  ctx.set_output(0, t, Shape(out));
  if (rank == 1 && (is_integer(t) || t == DataType::kBool)) {
    std::vector<Dim> data;
    for (int i = 0; i < ctx.num_inputs(); ++i) {
      auto d = infer::sym_data(ctx, i);
      if (!d) return;
      data.insert(data.end(), d->begin(), d->end());
    }
    infer::set_sym(ctx, 0, std::move(data));
  }
}

void infer_split(InferContext& ctx) {
  bool v18 = ctx.node().opset() >= 18;
  infer::check_arity(ctx, 1, 2, 1, 1 << 20);
  infer::check_type(ctx, 1, Types::kInt64);
  check_1d(ctx, 1, "split");
  int n = ctx.num_outputs();
  const Shape& x = ctx.in_shape(0);
  DataType t = ctx.in_dtype(0);
  const Attribute* num_attr = ctx.node().find_attr("num_outputs");
  if (num_attr && !v18) ctx.error("attribute 'num_outputs' needs opset 18 or later");
  if (v18) {
    if (num_attr && ctx.has_input(1)) ctx.error("give either input 'split' or attribute 'num_outputs', not both");
    if (!num_attr && !ctx.has_input(1)) ctx.error("needs input 'split' or attribute 'num_outputs' (opset 18+)");
    if (num_attr && num_attr->i() != n)
      ctx.error(str_cat("attribute 'num_outputs' = ", num_attr->i(), " but the node has ", n, " outputs"));
  }
  if (!x.rank_known) {
    for (int i = 0; i < n; ++i) ctx.set_output(i, t, Shape::unknown());
    return;
  }
  int64_t axis = normalize_axis(ctx, ctx.node().attr_i("axis", 0), x.rank());
  const Dim& d = x.dims[axis];
  std::vector<Dim> sizes;
  if (ctx.has_input(1)) {
    if (auto s = infer::sym_data(ctx, 1)) {
      if (auto c = infer::const_tensor(ctx, 1))
        for (int64_t v : c->to_int64_vector())
          if (v < 0) ctx.error(str_cat("split size ", v, " is negative"));
      sizes = *s;
      if (static_cast<int>(sizes.size()) != n)
        ctx.error(str_cat("input 'split' has ", sizes.size(), " entries but the node has ", n, " outputs"));
      Dim sum(int64_t{0});
      for (const Dim& e : sizes) sum = infer::dim_add(sum, e);
      if (sum.is_static() && d.is_static() && sum.value != d.value)
        ctx.error(str_cat("split sizes add up to ", sum.value, " but axis ", axis, " has size ", d.value));
    } else {
      auto len = infer::static_length(ctx, 1);
      if (len && *len != n) ctx.error(str_cat("input 'split' has ", *len, " entries but the node has ", n, " outputs"));
      sizes.assign(n, Dim());
    }
  } else if (d.is_static()) {
    if (!v18 && d.value % n != 0)
      ctx.error(str_cat("axis ", axis, " of size ", d.value, " does not split evenly into ", n, " outputs"));
    int64_t chunk = (d.value + n - 1) / n;
    int64_t last = d.value - chunk * (n - 1);
    if (last < 0)
      ctx.error(str_cat("axis ", axis, " of size ", d.value, " cannot be split into ", n, " chunks of ", chunk));
    sizes.assign(n, Dim(chunk));
    sizes.back() = Dim(last);
  } else {
    sizes.assign(n, n == 1 ? d : Dim());
  }
  for (int i = 0; i < n; ++i) {
    std::vector<Dim> out = x.dims;
    out[axis] = sizes[i];
    ctx.set_output(i, t, Shape(out));
  }
  if (x.rank() == 1) {
    auto data = infer::sym_data(ctx, 0);
    if (!data) return;
    size_t off = 0;
    for (int i = 0; i < n; ++i) {
      if (!sizes[i].is_static() || off + sizes[i].value > data->size()) return;
      infer::set_sym(ctx, i, std::vector<Dim>(data->begin() + off, data->begin() + off + sizes[i].value));
      off += sizes[i].value;
    }
  }
}

// Resolved [start, end) and step of one sliced axis of static size d (ONNX clamping rules).
struct SliceRange {
  int64_t start, end, step, len;
};

SliceRange slice_range(int64_t start, int64_t end, int64_t step, int64_t d) {
  if (start < 0) start += d;
  if (end < 0) end += d;
  if (step > 0) {
    start = std::clamp<int64_t>(start, 0, d);
    end = std::clamp<int64_t>(end, 0, d);
  } else {
    start = std::clamp<int64_t>(start, 0, d - 1);
    end = std::clamp<int64_t>(end, -1, d - 1);
  }
  int64_t len = step > 0 ? (end - start + step - 1) / step : (start - end + (-step) - 1) / (-step);
  return {start, end, step, std::max<int64_t>(len, 0)};
}

void infer_slice(InferContext& ctx) {
  infer::check_arity(ctx, 3, 5);
  for (int i = 1; i < 5; ++i) {
    infer::check_type(ctx, i, Types::kIndex);
    check_1d(ctx, i, i == 1 ? "starts" : i == 2 ? "ends" : i == 3 ? "axes" : "steps");
  }
  const Shape& x = ctx.in_shape(0);
  DataType t = ctx.in_dtype(0);
  if (!x.rank_known) return ctx.set_output(0, t, Shape::unknown());
  int64_t r = x.rank();
  auto starts = infer::const_ints(ctx, 1);
  auto ends = infer::const_ints(ctx, 2);
  std::optional<std::vector<int64_t>> axes, steps;
  if (ctx.has_input(3)) {
    axes = infer::const_ints(ctx, 3);
  } else {
    auto len = starts ? std::optional<int64_t>(starts->size()) : infer::static_length(ctx, 1);
    if (len) {
      axes.emplace(*len);
      std::iota(axes->begin(), axes->end(), 0);
    }
  }
  if (ctx.has_input(4)) steps = infer::const_ints(ctx, 4);
  else if (axes) steps.emplace(axes->size(), 1);
  // Lengths must agree wherever they are known.
  std::vector<std::pair<const char*, int64_t>> lens;
  for (int i = 1; i < 5; ++i)
    if (auto l = infer::static_length(ctx, i)) lens.emplace_back(i == 1 ? "starts" : i == 2 ? "ends" : i == 3 ? "axes" : "steps", *l);
  for (const auto& [name, l] : lens)
    if (l != lens[0].second)
      ctx.error(str_cat("'", name, "' has ", l, " entries but '", lens[0].first, "' has ", lens[0].second));
  std::vector<Dim> out = x.dims;
  if (!axes) {
    for (Dim& d : out) d = Dim();
    return ctx.set_output(0, t, Shape(out));
  }
  std::vector<int64_t> ax = infer::normalize_axes(ctx, *axes, r);
  if (steps)
    for (int64_t s : *steps)
      if (s == 0) ctx.error("'steps' contains 0");
  // Starts/ends may be symbolic (x[:T] with T from Shape): elements with exact values or dims.
  auto st_e = infer::sym_elems(ctx, 1);
  auto en_e = infer::sym_elems(ctx, 2);
  if (!st_e || !en_e || !steps || st_e->size() != ax.size() || en_e->size() != ax.size()) {
    for (int64_t a : ax) out[a] = Dim();
    return ctx.set_output(0, t, Shape(out));
  }
  constexpr int64_t kBig = std::numeric_limits<int32_t>::max();
  for (size_t k = 0; k < ax.size(); ++k) {
    int64_t a = ax[k], sp = (*steps)[k];
    const infer::SymElem& se = (*st_e)[k];
    const infer::SymElem& ee = (*en_e)[k];
    const Dim& d = x.dims[a];
    if (se.exact && ee.exact && d.is_static()) {
      out[a] = Dim(slice_range(*se.exact, *ee.exact, sp, d.value).len);
      continue;
    }
    bool from_zero = se.exact && *se.exact == 0;
    bool to_end = (ee.exact && *ee.exact >= kBig) || (infer::dim_known(d) && ee.d == d);
    bool full_fwd = sp == 1 && from_zero && to_end;
    bool full_bwd = sp == -1 && se.exact && (*se.exact == -1 || *se.exact >= kBig) && ee.exact && *ee.exact <= -kBig;
    out[a] = full_fwd || full_bwd ? d : Dim();
  }
  ctx.set_output(0, t, Shape(out));
  // Slicing a known 1-D shape vector (shape[2:], shape[:-1], ...).
  if (r == 1 && ax.size() == 1 && starts && ends) {
    auto data = infer::sym_data(ctx, 0);
    if (!data) return;
    SliceRange s = slice_range((*starts)[0], (*ends)[0], (*steps)[0], static_cast<int64_t>(data->size()));
    std::vector<Dim> res;
    for (int64_t i = 0, p = s.start; i < s.len; ++i, p += s.step) res.push_back((*data)[p]);
    infer::set_sym(ctx, 0, std::move(res));
  }
}

void infer_gather(InferContext& ctx) {
  infer::check_arity(ctx, 2, 2);
  infer::check_type(ctx, 1, Types::kIndex);
  const Shape& x = ctx.in_shape(0);
  const Shape& idx = ctx.in_shape(1);
  DataType t = ctx.in_dtype(0);
  if (!x.rank_known) return ctx.set_output(0, t, Shape::unknown());
  if (x.rank() == 0) ctx.error("input 0 (data) is a scalar; Gather needs rank >= 1");
  int64_t axis = normalize_axis(ctx, ctx.node().attr_i("axis", 0), x.rank());
  const Dim& d = x.dims[axis];
  auto indices = infer::const_ints(ctx, 1);
  if (indices && d.is_static())
    for (int64_t i : *indices)
      if (i < -d.value || i >= d.value)
        ctx.error(str_cat("index ", i, " is out of range for axis ", axis, " of size ", d.value));
  if (!idx.rank_known) return ctx.set_output(0, t, Shape::unknown());
  std::vector<Dim> out(x.dims.begin(), x.dims.begin() + axis);
  out.insert(out.end(), idx.dims.begin(), idx.dims.end());
  out.insert(out.end(), x.dims.begin() + axis + 1, x.dims.end());
  ctx.set_output(0, t, Shape(out));
  if (x.rank() == 1 && idx.rank() <= 1 && indices) {
    auto data = infer::sym_data(ctx, 0);
    if (!data) return;
    int64_t n = static_cast<int64_t>(data->size());
    std::vector<Dim> res;
    for (int64_t i : *indices) {
      if (i < -n || i >= n) return;
      res.push_back((*data)[i < 0 ? i + n : i]);
    }
    infer::set_sym(ctx, 0, std::move(res));
  }
}

// ---- Expand, Tile, Pad ----------------------------------------------------------------------------
void infer_expand(InferContext& ctx) {
  infer::check_arity(ctx, 2, 2);
  infer::check_type(ctx, 1, Types::kInt64);
  check_1d(ctx, 1, "shape");
  const Shape& x = ctx.in_shape(0);
  DataType t = ctx.in_dtype(0);
  if (auto c = infer::const_tensor(ctx, 1))
    for (int64_t v : c->to_int64_vector())
      if (v < 0) ctx.error(str_cat("shape entry ", v, " is negative"));
  if (auto target = infer::sym_data(ctx, 1)) {
    return ctx.set_output(0, t, broadcast_shapes(ctx, {x, Shape(*target)}));
  }
  auto len = infer::static_length(ctx, 1);
  if (!len || !x.rank_known) return ctx.set_output(0, t, Shape::unknown());
  int64_t r = std::max(*len, x.rank());
  std::vector<Dim> out(r);
  for (int64_t i = 0; i < x.rank(); ++i) {
    const Dim& d = x.dims[i];
    if (d.is_static() && d.value != 1) out[r - x.rank() + i] = d;  // the target must be 1 or equal there
  }
  ctx.set_output(0, t, Shape(out));
}

void infer_tile(InferContext& ctx) {
  infer::check_arity(ctx, 2, 2);
  infer::check_type(ctx, 1, Types::kInt64);
  check_1d(ctx, 1, "repeats");
  const Shape& x = ctx.in_shape(0);
  DataType t = ctx.in_dtype(0);
  if (!x.rank_known) return ctx.set_output(0, t, Shape::unknown());
  auto len = infer::static_length(ctx, 1);
  if (len && *len != x.rank())
    ctx.error(str_cat("input 1 (repeats) has ", *len, " entries but the input has rank ", x.rank()));
  std::vector<Dim> out(x.rank());
  if (auto reps = infer::const_ints(ctx, 1)) {
    if (static_cast<int64_t>(reps->size()) != x.rank())
      ctx.error(str_cat("input 1 (repeats) has ", reps->size(), " entries but the input has rank ", x.rank()));
    for (int64_t i = 0; i < x.rank(); ++i) {
      if ((*reps)[i] < 0) ctx.error(str_cat("repeat count ", (*reps)[i], " is negative"));
      out[i] = infer::dim_mul(x.dims[i], Dim((*reps)[i]));
    }
  }
  ctx.set_output(0, t, Shape(out));
}

void infer_pad(InferContext& ctx) {
  bool v18 = ctx.node().opset() >= 18;
  infer::check_arity(ctx, 2, v18 ? 4 : 3);
  infer::check_type(ctx, 1, Types::kInt64);
  infer::check_same_type(ctx, 0, 2);
  infer::check_type(ctx, 3, Types::kIndex);
  check_1d(ctx, 1, "pads");
  check_scalar(ctx, 2, "constant_value");
  check_1d(ctx, 3, "axes");
  std::string mode = ctx.node().attr_s("mode", "constant");
  bool wrap_ok = ctx.node().opset() >= 19;
  if (mode != "constant" && mode != "reflect" && mode != "edge" && !(mode == "wrap" && wrap_ok))
    ctx.error(str_cat("attribute 'mode' must be constant, reflect, edge", wrap_ok ? " or wrap" : "", ", got '",
                      mode, "'"));
  const Shape& x = ctx.in_shape(0);
  DataType t = ctx.in_dtype(0);
  if (!x.rank_known) return ctx.set_output(0, t, Shape::unknown());
  int64_t r = x.rank();
  std::optional<std::vector<int64_t>> axes;
  if (ctx.has_input(3)) {
    if (auto a = infer::const_ints(ctx, 3)) axes = infer::normalize_axes(ctx, *a, r);
  } else {
    axes.emplace(r);
    std::iota(axes->begin(), axes->end(), 0);
  }
  std::vector<Dim> out = x.dims;
  auto pads = infer::const_ints(ctx, 1);
  if (!axes) {
    for (Dim& d : out) d = Dim();
    return ctx.set_output(0, t, Shape(out));
  }
  size_t n = axes->size();
  auto len = infer::static_length(ctx, 1);
  if (len && *len != static_cast<int64_t>(2 * n))
    ctx.error(str_cat("input 1 (pads) has ", *len, " entries, expected ", 2 * n, " (2 per padded axis)"));
  if (!pads) {
    for (int64_t a : *axes) out[a] = Dim();
    return ctx.set_output(0, t, Shape(out));
  }
  if (pads->size() != 2 * n)
    ctx.error(str_cat("input 1 (pads) has ", pads->size(), " entries, expected ", 2 * n, " (2 per padded axis)"));
  for (size_t k = 0; k < n; ++k) {
    int64_t a = (*axes)[k];
    int64_t total = (*pads)[k] + (*pads)[k + n];
    out[a] = infer::dim_add(x.dims[a], Dim(total));
    if (!x.dims[a].is_static() && total != 0) out[a] = Dim();
    if (out[a].is_static() && x.dims[a].is_static() && x.dims[a].value + total < 0)
      ctx.error(str_cat("pads ", (*pads)[k], ", ", (*pads)[k + n], " on axis ", a, " of size ", x.dims[a].value,
                        " give a negative size"));
  }
  ctx.set_output(0, t, Shape(out));
}

// ---- gradient rules -----------------------------------------------------------------------------
// Concat: dY split back into the inputs' extents along the axis.
void grad_concat(GradContext& c) {
  int n = c.node().num_inputs();
  if (n == 1) return c.set_grad_input(0, c.grad_output(0));
  int64_t axis = c.node().attr_i("axis", 0);
  if (axis < 0) axis += c.rank_of(c.input(0));
  std::vector<Value*> sizes;
  for (int i = 0; i < n; ++i) sizes.push_back(c.dim_of(c.input(i), axis));
  std::vector<Value*> parts = c.emit_multi("Split", {c.grad_output(0), c.concat_ints(sizes)}, n,
                                           {{"axis", Attribute(axis)}});
  for (int i = 0; i < n; ++i) c.set_grad_input(i, parts[i]);
}

// Split: the outputs' gradients concatenated (zeros for outputs no gradient reached).
void grad_split(GradContext& c) {
  std::vector<Value*> parts;
  for (int i = 0; i < c.node().num_outputs(); ++i) {
    Value* g = c.grad_output(i);
    parts.push_back(g ? g : c.zeros_like(c.output(i)));
  }
  Value* dx = parts.size() == 1 ? parts[0]
                                : c.emit("Concat", parts, {{"axis", Attribute(c.node().attr_i("axis", 0))}});
  c.set_grad_input(0, dx);
}

// Slice: dY scattered into zeros of X's shape (SliceGrad).
void grad_slice(GradContext& c) {
  std::vector<Value*> ins = {c.grad_output(0), c.shape_of(c.input(0))};
  for (int i = 1; i < 5; ++i) ins.push_back(c.input(i));
  c.set_grad_input(0, c.emit_otter("SliceGrad", ins));
}

// Gather: rows of dY added into zeros of X's shape at the indices (GatherGrad, a scatter-add).
void grad_gather(GradContext& c) {
  c.set_grad_input(0, c.emit_otter("GatherGrad", {c.grad_output(0), c.shape_of(c.input(0)), c.input(1)},
                                   c.forward_attrs({"axis"})));
}

void grad_expand(GradContext& c) { c.set_grad_input(0, c.sum_to_shape(c.grad_output(0), c.input(0))); }

// Tile with constant repeats r: dY viewed as [r0, d0, r1, d1, ...] and summed over the r axes.
void grad_tile(GradContext& c) {
  Value* reps_v = c.input(1);
  if (!reps_v->has_data() || reps_v->trainable()) c.unsupported("Tile's repeats must be a constant");
  std::vector<int64_t> reps = reps_v->data().to_int64_vector();
  std::vector<Value*> dims;
  std::vector<int64_t> rep_axes;
  for (size_t i = 0; i < reps.size(); ++i) {
    rep_axes.push_back(static_cast<int64_t>(2 * i));
    dims.push_back(c.ints({reps[i]}));
    dims.push_back(c.dim_of(c.input(0), static_cast<int64_t>(i)));
  }
  Value* split = c.emit("Reshape", {c.grad_output(0), c.concat_ints(dims)});
  Value* sum = c.emit("ReduceSum", {split, c.ints(rep_axes)}, {{"keepdims", Attribute(int64_t{0})}});
  c.set_grad_input(0, c.reshape_like(sum, c.input(0)));
}

// Pad: dY gathered back to X's positions (PadGrad; reflect/edge/wrap add up the copies).
void grad_pad(GradContext& c) {
  if (c.needs_grad(2)) c.unsupported("the constant_value input (2) would need a gradient");
  c.set_grad_input(0, c.emit_otter("PadGrad", {c.grad_output(0), c.shape_of(c.input(0)), c.input(1), c.input(3)},
                                   c.forward_attrs({"mode"})));
}

// ---- gradient ops (ai.otter) --------------------------------------------------------------------
// op(dY, shape, ...) -> dX of dY's type and the shape given by input 1.
InferFn scatter_grad(int min_in, int max_in) {
  return [=](InferContext& ctx) {
    infer::check_arity(ctx, min_in, max_in);
    infer::check_float(ctx, 0);
    infer::check_type(ctx, 1, Types::kInt64);
    check_1d(ctx, 1, "shape");
    for (int i = 2; i < ctx.num_inputs(); ++i) infer::check_type(ctx, i, Types::kIndex);
    DataType t = ctx.in_dtype(0);
    if (auto d = infer::sym_data(ctx, 1)) return ctx.set_output(0, t, Shape(*d));
    auto len = infer::static_length(ctx, 1);
    ctx.set_output(0, t, len ? Shape(std::vector<Dim>(*len)) : Shape::unknown());
  };
}

void register_shape_grad_ops(OpTable& t) {
  using P = PrecisionClass;
  infer::add_otter_op(t, "SliceGrad", scatter_grad(4, 6), P::kFollow,
                      "SliceGrad(dY, shape, starts, ends, axes?, steps?): dY placed where Slice read, zeros "
                      "elsewhere");
  infer::add_otter_op(t, "GatherGrad", scatter_grad(3, 3), P::kFollow,
                      "GatherGrad(dY, shape, indices) {axis}: zeros of `shape` with dY's slices added at the "
                      "indices (scatter-add; embedding gradients)");
  infer::add_otter_op(t, "PadGrad", scatter_grad(3, 4), P::kFollow,
                      "PadGrad(dY, shape, pads, axes?) {mode}: for each input position the sum of dY over the "
                      "output positions that copied it");
}

}  // namespace

void register_data_movement_ops(OpTable& t) {
  using P = PrecisionClass;
  constexpr int kMax = kMaxOnnxOpset;
  auto rule = grad_rule;
  // Since-versions are those of the ONNX schema in force at opset 13; later versions up to 21
  // (noted) widen types or add attributes/inputs that inference reads where present.
  add(t, "Concat", 13, kMax, infer_concat, P::kFollow, false, rule(grad_concat), "joins inputs along 'axis'");
  add(t, "Split", 13, 17, infer_split, P::kFollow, false, rule(grad_split),
      "splits along 'axis' by input 'split' or evenly");
  add(t, "Split", 18, kMax, infer_split, P::kFollow, false, rule(grad_split),
      "splits along 'axis' by input 'split' or into 'num_outputs' chunks (last smaller)");
  add(t, "Slice", 13, kMax, infer_slice, P::kFollow, false, rule(grad_slice),
      "strided slice by starts/ends/axes/steps inputs");
  add(t, "Gather", 13, kMax, infer_gather, P::kFollow, false, rule(grad_gather),
      "takes entries along 'axis' at 'indices'");
  add(t, "Expand", 13, kMax, infer_expand, P::kFollow, false, rule(grad_expand), "broadcasts input to input 'shape'");
  add(t, "Tile", 13, kMax, infer_tile, P::kFollow, false, rule(grad_tile), "repeats the input 'repeats' times per axis");
  add(t, "Pad", 13, kMax, infer_pad, P::kFollow, false, rule(grad_pad),
      "pads by input 'pads' (constant/reflect/edge; axes input 18, wrap 19; Pad 13, 18, 19, 21)");
  register_shape_grad_ops(t);
}

}  // namespace otter
