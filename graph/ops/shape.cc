// Shape and data-movement ops of the default domain (Reshape, Transpose, Concat, Slice, Gather,
// Shape, ...), with propagation of symbolic shape data so exported shape arithmetic keeps dims.
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

using infer::Types;

void check_1d(InferContext& ctx, int i, const char* what) {
  if (!ctx.has_input(i)) return;
  const Shape& s = ctx.in_shape(i);
  if (s.rank_known && s.rank() != 1)
    ctx.error(str_cat(infer::input_desc(ctx, i), " (", what, ") must be 1-D, got shape ", s.to_string()));
}

void check_scalar(InferContext& ctx, int i, const char* what) {
  if (!ctx.has_input(i)) return;
  const Shape& s = ctx.in_shape(i);
  if (s.rank_known && s.is_static() && s.numel() != 1)
    ctx.error(str_cat(infer::input_desc(ctx, i), " (", what, ") must be a scalar, got shape ", s.to_string()));
}

// Output 0 keeps input 0's symbolic data (same elements in the same order).
void pass_sym(InferContext& ctx) {
  Value* out = ctx.node().output(0);
  if (!out || !out->shape().rank_known || out->shape().rank() > 1) return;
  if (auto d = infer::sym_data(ctx, 0)) {
    int64_t n = out->shape().numel();
    if (n < 0 || n == static_cast<int64_t>(d->size())) infer::set_sym(ctx, 0, *d);
  }
}

Dim merge_dims(InferContext& ctx, const Dim& a, const Dim& b, const std::string& what) {
  if (a.is_static() && b.is_static() && a.value != b.value) ctx.error(str_cat(what, ": ", a.value, " vs ", b.value));
  if (a.is_static()) return a;
  if (b.is_static()) return b;
  return infer::dim_known(a) ? a : b;
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

void grad_trilu(GradContext& c) {
  c.set_grad_input(0, c.emit("Trilu", {c.grad_output(0), c.input(1)}, c.forward_attrs({"upper"})));
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
  add(t, "Identity", 13, kMax, infer_identity, P::kFollow, true, rule(grad_identity),
      "returns its input (Identity 13, 14, 16, 19, 21)");
  add(t, "Trilu", 14, kMax, infer_trilu, P::kFollow, false, rule(grad_trilu),
      "upper or lower triangle of the last two axes");
  add(t, "Shape", 13, kMax, infer_shape, P::kNone, false, kNoGrad,
      "the input's shape as int64 (start/end from 15; Shape 13, 15, 19, 21)");
  add(t, "Size", 13, kMax, infer_size, P::kNone, false, kNoGrad, "the input's element count as int64 scalar");
  add(t, "ConstantOfShape", 9, kMax, infer_constant_of_shape, P::kNone, false, kNoGrad,
      "tensor of input shape filled with 'value' (ConstantOfShape 9, 20, 21)");
  add(t, "Constant", 13, kMax, infer_constant, P::kNone, false, kNoGrad,
      "a constant from value/value_float(s)/value_int(s) (Constant 13, 19, 21)");
  add(t, "Range", 11, kMax, infer_range, P::kNone, false, kNoGrad, "start, start+delta, ... below limit");
  // Their kernels return output 0 as a view of input 0 (no copy).
  for (const char* op : {"Reshape", "Flatten", "Squeeze", "Unsqueeze", "Identity"})
    t.mutable_find("", op, kMax)->views = {{0, 0}};
  register_shape_grad_ops(t);
}

}  // namespace otter
