// Helpers shared by the op families' type and shape inference.
#include "graph/ops/infer_util.h"

#include <algorithm>
#include <cctype>
#include <set>

namespace otter::infer {

DimProduct factor(const Dim& d) {
  DimProduct p;
  if (d.is_static()) {
    p.coef = d.value;
    return p;
  }
  if (!d.is_symbolic()) {
    p.known = false;
    return p;
  }
  size_t start = 0;
  const std::string& s = d.symbol;
  while (start <= s.size()) {
    size_t star = s.find('*', start);
    if (star == std::string::npos) star = s.size();
    std::string part = s.substr(start, star - start);
    bool numeric = !part.empty() && part.size() < 18 &&
                   std::all_of(part.begin(), part.end(), [](char c) { return std::isdigit(c); });
    if (numeric) {
      if (__builtin_mul_overflow(p.coef, std::stoll(part), &p.coef)) p.known = false;
    } else if (!part.empty()) {
      p.syms.push_back(part);
    }
    start = star + 1;
  }
  std::sort(p.syms.begin(), p.syms.end());
  return p;
}

Dim make_dim(const DimProduct& p) {
  if (!p.known) return Dim();
  if (p.syms.empty() || p.coef == 0) return Dim(p.coef);
  std::string s = p.coef == 1 ? "" : std::to_string(p.coef);
  for (const std::string& x : p.syms) {
    if (!s.empty()) s += "*";
    s += x;
  }
  return Dim(s);
}

Dim dim_mul(const Dim& a, const Dim& b) {
  DimProduct x = factor(a), y = factor(b);
  if ((x.known && x.coef == 0 && x.syms.empty()) || (y.known && y.coef == 0 && y.syms.empty()))
    return Dim(int64_t{0});
  if (!x.known || !y.known) return Dim();
  DimProduct r;
  if (__builtin_mul_overflow(x.coef, y.coef, &r.coef))
    fail("shape arithmetic overflows int64: ", a.to_string(), " * ", b.to_string());
  r.syms = x.syms;
  r.syms.insert(r.syms.end(), y.syms.begin(), y.syms.end());
  std::sort(r.syms.begin(), r.syms.end());
  return make_dim(r);
}

Dim dim_div(const Dim& a, const Dim& b) {
  DimProduct x = factor(a), y = factor(b);
  if (!x.known || !y.known || y.coef == 0) return Dim();
  if (y.syms.empty() && x.syms.empty()) return Dim(x.coef / y.coef);
  if (x.coef % y.coef != 0) return Dim();
  // y's symbols must be a sub-multiset of x's.
  std::vector<std::string> rest;
  std::set_difference(x.syms.begin(), x.syms.end(), y.syms.begin(), y.syms.end(),
                      std::back_inserter(rest));
  if (rest.size() + y.syms.size() != x.syms.size()) return Dim();
  DimProduct r;
  r.coef = x.coef / y.coef;
  r.syms = rest;
  return make_dim(r);
}

Dim dim_add(const Dim& a, const Dim& b) {
  if (a.is_static() && b.is_static()) return Dim(a.value + b.value);
  if (a.is_static() && a.value == 0) return b;
  if (b.is_static() && b.value == 0) return a;
  return Dim();
}

Dim dim_sub(const Dim& a, const Dim& b) {
  if (a.is_static() && b.is_static()) return Dim(a.value - b.value);
  if (b.is_static() && b.value == 0) return a;
  if (a.is_symbolic() && a == b) return Dim(int64_t{0});
  return Dim();
}

Dim dims_product(const std::vector<Dim>& dims, size_t begin, size_t end) {
  Dim p(int64_t{1});
  for (size_t i = begin; i < end && i < dims.size(); ++i) p = dim_mul(p, dims[i]);
  return p;
}

void check_arity(InferContext& ctx, int min_in, int max_in, int min_out, int max_out) {
  int n = ctx.num_inputs();
  // Trailing omitted optional inputs do not count.
  while (n > 0 && !ctx.has_input(n - 1)) --n;
  if (n < min_in || n > max_in) {
    if (min_in == max_in) ctx.error(str_cat("expects ", min_in, " input", min_in == 1 ? "" : "s", ", got ", n));
    ctx.error(str_cat("expects ", min_in, " to ", max_in, " inputs, got ", n));
  }
  for (int i = 0; i < min_in; ++i)
    if (!ctx.has_input(i)) ctx.error(str_cat("input ", i, " is required but missing"));
  int m = ctx.num_outputs();
  while (m > 0 && !ctx.has_output(m - 1)) --m;
  if (m < min_out || m > max_out) {
    if (min_out == max_out)
      ctx.error(str_cat("expects ", min_out, " output", min_out == 1 ? "" : "s", ", got ", m));
    ctx.error(str_cat("expects ", min_out, " to ", max_out, " outputs, got ", m));
  }
}

std::string input_desc(InferContext& ctx, int i) {
  Value* v = ctx.node().input(i);
  return v ? str_cat("input ", i, " ('", v->name(), "')") : str_cat("input ", i);
}

static bool type_in(DataType t, Types allowed) {
  switch (allowed) {
    case Types::kAny: return true;
    case Types::kFloat: return is_float(t);
    case Types::kSignedNumeric:
      return is_float(t) || t == DataType::kInt64 || t == DataType::kInt32 || t == DataType::kInt8 ||
             t == DataType::kInt16;
    case Types::kNumeric: return is_float(t) || is_integer(t);
    case Types::kInteger: return is_integer(t);
    case Types::kIndex: return t == DataType::kInt64 || t == DataType::kInt32;
    case Types::kInt64: return t == DataType::kInt64;
    case Types::kBool: return t == DataType::kBool;
  }
  return false;
}

static const char* types_name(Types allowed) {
  switch (allowed) {
    case Types::kAny: return "any type";
    case Types::kFloat: return "a float type (f32, f64, f16, bf16)";
    case Types::kSignedNumeric: return "a float or signed integer type";
    case Types::kNumeric: return "a numeric type";
    case Types::kInteger: return "an integer type";
    case Types::kIndex: return "i32 or i64";
    case Types::kInt64: return "i64";
    case Types::kBool: return "bool";
  }
  return "?";
}

void check_type(InferContext& ctx, int i, Types allowed) {
  if (!ctx.has_input(i)) return;
  DataType t = ctx.in_dtype(i);
  if (!dtype_known(t) || type_in(t, allowed)) return;
  ctx.error(str_cat(input_desc(ctx, i), " has type ", dtype_name(t), ", expected ", types_name(allowed)));
}

void check_same_type(InferContext& ctx, int i, int j) {
  if (!ctx.has_input(i) || !ctx.has_input(j)) return;
  DataType a = ctx.in_dtype(i), b = ctx.in_dtype(j);
  if (!dtype_known(a) || !dtype_known(b) || a == b) return;
  ctx.error(str_cat(input_desc(ctx, j), " has type ", dtype_name(b), " but ", input_desc(ctx, i),
                    " has type ", dtype_name(a), " (they must match)"));
}

DataType check_conv_inputs(InferContext& ctx) {
  check_arity(ctx, 2, 3);
  check_type(ctx, 0, Types::kFloat);
  check_same_type(ctx, 0, 1);
  check_same_type(ctx, 0, 2);
  return ctx.in_dtype(0);
}

void unary_grad(InferContext& ctx) {
  check_arity(ctx, 2, 2);
  check_float(ctx, 0);
  check_same_type(ctx, 0, 1);
  same_as_input(ctx, 1);
}

std::optional<Tensor> const_tensor(InferContext& ctx, int i) {
  if (!ctx.has_input(i)) return std::nullopt;
  if (const Tensor* t = ctx.in_const(i)) return *t;
  const Node* p = ctx.node().input(i)->producer();
  if (!p || !p->domain().empty() || p->op_type() != "Constant") return std::nullopt;
  if (const Attribute* a = p->find_attr("value"); a && a->kind() == Attribute::Kind::kTensor) return a->t();
  if (const Attribute* a = p->find_attr("value_int"); a && a->kind() == Attribute::Kind::kInt)
    return Tensor::scalar<int64_t>(a->i());
  if (const Attribute* a = p->find_attr("value_ints"); a && a->kind() == Attribute::Kind::kInts)
    return Tensor::from_vector<int64_t>({static_cast<int64_t>(a->ints().size())}, a->ints());
  if (const Attribute* a = p->find_attr("value_float"); a && a->kind() == Attribute::Kind::kFloat)
    return Tensor::scalar<float>(a->f());
  if (const Attribute* a = p->find_attr("value_floats"); a && a->kind() == Attribute::Kind::kFloats)
    return Tensor::from_vector<float>({static_cast<int64_t>(a->floats().size())}, a->floats());
  return std::nullopt;
}

std::optional<std::vector<int64_t>> const_ints(InferContext& ctx, int i) {
  if (!ctx.has_input(i)) return std::nullopt;
  if (auto t = const_tensor(ctx, i)) {
    if (!is_integer(t->dtype()) && t->dtype() != DataType::kBool)
      ctx.error(str_cat(input_desc(ctx, i), " must be an integer tensor, got ", t->describe()));
    return t->to_int64_vector();
  }
  auto d = sym_data(ctx, i);
  if (!d) return std::nullopt;
  std::vector<int64_t> out;
  for (const Dim& x : *d) {
    if (!x.is_static()) return std::nullopt;
    out.push_back(x.value);
  }
  return out;
}

std::optional<std::vector<double>> const_doubles(InferContext& ctx, int i) {
  if (!ctx.has_input(i)) return std::nullopt;
  auto t = const_tensor(ctx, i);
  if (!t) {
    auto v = const_ints(ctx, i);
    if (!v) return std::nullopt;
    return std::vector<double>(v->begin(), v->end());
  }
  std::vector<double> out;
  for (int64_t k = 0; k < t->numel(); ++k) out.push_back(t->get_as_double(k));
  return out;
}

std::optional<std::vector<Dim>> sym_data(InferContext& ctx, int i) {
  Value* v = ctx.node().input(i);
  if (!v) return std::nullopt;
  if (auto t = const_tensor(ctx, i)) {
    if (!(is_integer(t->dtype()) || t->dtype() == DataType::kBool) || t->rank() > 1 ||
        t->numel() > static_cast<int64_t>(kMaxSymData))
      return std::nullopt;
    std::vector<Dim> out;
    for (int64_t x : t->to_int64_vector()) out.emplace_back(x);
    return out;
  }
  if (v->dtype() == DataType::kBool) return v->sym_data();
  auto d = ctx.in_sym_data(i);
  if (d && d->size() > kMaxSymData) return std::nullopt;
  return d;
}

std::optional<std::vector<SymElem>> sym_elems(InferContext& ctx, int i) {
  if (!ctx.has_input(i)) return std::nullopt;
  std::vector<SymElem> out;
  if (auto t = const_tensor(ctx, i)) {
    if (!(is_integer(t->dtype()) || t->dtype() == DataType::kBool) || t->rank() > 1 ||
        t->numel() > static_cast<int64_t>(kMaxSymData))
      return std::nullopt;
    for (int64_t v : t->to_int64_vector()) out.push_back({v >= 0 ? Dim(v) : Dim(), v});
    return out;
  }
  auto d = sym_data(ctx, i);
  if (!d) return std::nullopt;
  for (const Dim& x : *d) out.push_back({x, x.is_static() ? std::optional<int64_t>(x.value) : std::nullopt});
  return out;
}

std::optional<int64_t> static_length(InferContext& ctx, int i) {
  if (!ctx.has_input(i)) return std::nullopt;
  const Shape& s = ctx.in_shape(i);
  if (!s.rank_known) return std::nullopt;
  if (s.rank() == 0) return 1;
  if (s.rank() != 1 || !s.dims[0].is_static()) return std::nullopt;
  return s.dims[0].value;
}

void set_sym(InferContext& ctx, int i, std::vector<Dim> d) {
  if (d.size() > kMaxSymData) return;
  ctx.set_output_sym_data(i, std::move(d));
}

std::vector<int64_t> normalize_axes(InferContext& ctx, const std::vector<int64_t>& axes, int64_t rank,
                                    const char* what) {
  std::vector<int64_t> out;
  std::set<int64_t> seen;
  for (int64_t a : axes) {
    if (a < -rank || a >= rank)
      ctx.error(str_cat(what, ": axis ", a, " is out of range for rank ", rank));
    int64_t n = a < 0 ? a + rank : a;
    if (!seen.insert(n).second) ctx.error(str_cat(what, ": axis ", a, " is repeated"));
    out.push_back(n);
  }
  return out;
}

void add(OpTable& t, const char* op, int since, int until, InferFn f, PrecisionClass p, bool inplace, GradSpec g,
         const char* summary) {
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

void add(OpTable& t, const char* op, int since, InferFn f, PrecisionClass p, bool inplace, GradSpec g,
         const char* summary) {
  add(t, op, since, kMaxOnnxOpset, std::move(f), p, inplace, std::move(g), summary);
}

void add_otter_op(OpTable& t, const std::string& op, InferFn f, PrecisionClass p, const std::string& summary) {
  OpDef d;
  d.domain = kOtterDomain;
  d.op_type = op;
  d.since_version = 1;
  d.infer = std::move(f);
  d.precision = p;
  d.grad_kind = GradKind::kNotDifferentiable;
  d.summary = summary;
  t.add(std::move(d));
}

void check_1d(InferContext& ctx, int i, const char* what) {
  if (!ctx.has_input(i)) return;
  const Shape& s = ctx.in_shape(i);
  if (s.rank_known && s.rank() != 1)
    ctx.error(str_cat(input_desc(ctx, i), " (", what, ") must be 1-D, got shape ", s.to_string()));
}

void check_scalar(InferContext& ctx, int i, const char* what) {
  if (!ctx.has_input(i)) return;
  const Shape& s = ctx.in_shape(i);
  if (s.rank_known && s.is_static() && s.numel() != 1)
    ctx.error(str_cat(input_desc(ctx, i), " (", what, ") must be a scalar, got shape ", s.to_string()));
}

InferFn unary(Types allowed) {
  return [allowed](InferContext& ctx) {
    check_arity(ctx, 1, 1);
    check_type(ctx, 0, allowed);
    ctx.set_output(0, ctx.in_dtype(0), ctx.in_shape(0));
  };
}

void check_dims_match(InferContext& ctx, const Dim& a, const Dim& b, const std::string& what) {
  if (a.is_static() && b.is_static() && a.value != b.value) ctx.error(str_cat(what, ": ", a.value, " vs ", b.value));
}

Dim dim_at(const Shape& s, int64_t i) {
  if (!s.rank_known || i < 0 || i >= s.rank()) return Dim();
  return s.dims[i];
}

InferFn grads_like(int min_in, int max_in, std::vector<int> like) {
  return [=](InferContext& ctx) {
    check_arity(ctx, min_in, max_in, 1, static_cast<int>(like.size()));
    check_float(ctx, 0);
    check_same_type(ctx, 0, 1);
    for (size_t k = 0; k < like.size(); ++k)
      if (ctx.has_output(static_cast<int>(k))) same_as_input(ctx, like[k], static_cast<int>(k));
  };
}

void grad_fused(GradContext& c, const std::string& op, const std::vector<Value*>& inputs,
                const std::vector<int>& grad_of, const std::vector<std::string>& attrs,
                std::map<std::string, Attribute> extra) {
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

void check_float(InferContext& ctx, int i) { check_type(ctx, i, Types::kFloat); }

void same_as_input(InferContext& ctx, int i, int out) { ctx.set_output(out, ctx.in_dtype(i), ctx.in_shape(i)); }

}  // namespace otter::infer
