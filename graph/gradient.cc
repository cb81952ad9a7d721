// GradContext: the builder API of gradient rules.
#include "graph/gradient.h"

#include <optional>

#include "graph/error.h"
#include "graph/op_table.h"
#include "graph/ops/infer_util.h"

namespace otter {

GradContext::GradContext(Graph& g, Node& fwd, std::vector<Value*> grad_outputs, std::vector<bool> needs_grad)
    : graph_(g), fwd_(fwd), grad_outputs_(std::move(grad_outputs)), needs_grad_(std::move(needs_grad)),
      grad_inputs_(fwd.num_inputs(), nullptr) {}

Value* GradContext::grad_output(int i) const {
  return i < static_cast<int>(grad_outputs_.size()) ? grad_outputs_[i] : nullptr;
}

bool GradContext::needs_grad(int i) const {
  return i < static_cast<int>(needs_grad_.size()) && needs_grad_[i];
}

void GradContext::set_grad_input(int i, Value* g) {
  if (!g) return;
  OTTER_CHECK(i >= 0 && i < fwd_.num_inputs(), fwd_.describe(), ": gradient rule set input ", i, " out of range");
  if (!needs_grad(i)) return;
  Value* in = fwd_.input(i);
  OTTER_CHECK(g->dtype() == in->dtype(), fwd_.describe(), ": gradient of input '", in->name(), "' is ",
              dtype_name(g->dtype()), ", expected ", dtype_name(in->dtype()));
  const Shape& a = g->shape();
  const Shape& b = in->shape();
  bool ok = !a.rank_known || !b.rank_known || a.rank() == b.rank();
  for (int64_t k = 0; ok && a.rank_known && b.rank_known && k < a.rank(); ++k)
    ok = !(a.dims[k].is_static() && b.dims[k].is_static()) || a.dims[k].value == b.dims[k].value;
  OTTER_CHECK(ok, fwd_.describe(), ": gradient of input '", in->name(), "' has shape ", a.to_string(),
              ", expected ", b.to_string());
  grad_inputs_[i] = g;
}

Value* GradContext::grad_input(int i) const {
  return i < static_cast<int>(grad_inputs_.size()) ? grad_inputs_[i] : nullptr;
}

std::string GradContext::fresh_name() {
  std::string base;
  for (Value* o : fwd_.outputs())
    if (o) { base = o->name(); break; }
  if (base.empty()) base = fwd_.name().empty() ? fwd_.op_type() : fwd_.name();
  while (true) {
    std::string n = str_cat(base, ".bwd", counter_++);
    if (!graph_.has_value(n)) return n;
  }
}

std::vector<Value*> GradContext::emit_multi(const std::string& op, const std::vector<Value*>& inputs,
                                            int num_outputs, const std::map<std::string, Attribute>& attrs,
                                            const std::string& domain) {
  return emit_some(op, inputs, std::vector<bool>(num_outputs, true), attrs, domain);
}

std::vector<Value*> GradContext::emit_some(const std::string& op, const std::vector<Value*>& inputs,
                                           const std::vector<bool>& want,
                                           const std::map<std::string, Attribute>& attrs, const std::string& domain) {
  if (!domain.empty() && !graph_.opset_imports.count(domain)) graph_.opset_imports[domain] = 1;
  size_t n = want.size();
  while (n > 0 && !want[n - 1]) --n;
  OTTER_CHECK(n > 0, fwd_.describe(), ": gradient rule emits ", op, " without outputs");
  std::vector<std::string> names;
  for (size_t i = 0; i < n; ++i) names.push_back(want[i] ? fresh_name() : std::string());
  std::vector<Value*> ins = inputs;  // omitted trailing optional inputs are dropped
  while (!ins.empty() && !ins.back()) ins.pop_back();
  Node* node = graph_.add_node(op, ins, names, domain);
  for (const auto& [k, a] : attrs) node->set_attr(k, a);
  infer_node(*node);
  std::vector<Value*> out = node->outputs();
  out.resize(want.size(), nullptr);
  return out;
}

Value* GradContext::emit(const std::string& op, const std::vector<Value*>& inputs,
                         const std::map<std::string, Attribute>& attrs, const std::string& domain) {
  return emit_multi(op, inputs, 1, attrs, domain)[0];
}

Value* GradContext::constant(Tensor t) { return graph_.add_initializer(fresh_name(), std::move(t), false); }

Value* GradContext::scalar_like(double v, const Value* like) {
  switch (like->dtype()) {
    case DataType::kFloat64: return constant(Tensor::scalar<double>(v));
    case DataType::kFloat32: return constant(Tensor::scalar<float>(static_cast<float>(v)));
    default: {
      Value* f = constant(Tensor::scalar<float>(static_cast<float>(v)));
      return cast(f, like->dtype());
    }
  }
}

Value* GradContext::ints(const std::vector<int64_t>& v) {
  return constant(Tensor::from_vector<int64_t>({static_cast<int64_t>(v.size())}, v));
}

Value* GradContext::shape_of(Value* v) {
  if (v->shape().is_static()) {
    auto d = v->shape().static_dims();
    return ints(d);
  }
  return emit("Shape", {v});
}

Value* GradContext::cast(Value* v, DataType t) {
  if (v->dtype() == t) return v;
  return emit("Cast", {v}, {{"to", Attribute(int64_t{dtype_to_onnx(t)})}});
}

namespace {

bool dim_known(const Dim& d) { return d.is_static() || d.is_symbolic(); }

// The axes of g to sum so that it takes like's shape, when the shapes decide them: leading extra
// axes, and axes where like has a static 1 (a symbol there might be 1 too: summing a size-1 axis is
// harmless). Undecided (nullopt) where like's dim is not 1 and differs from g's or is unknown.
std::optional<std::vector<int64_t>> reduce_axes(const Shape& gs, const Shape& ls) {
  if (!gs.rank_known || !ls.rank_known || gs.rank() < ls.rank()) return std::nullopt;
  size_t off = gs.dims.size() - ls.dims.size();
  std::vector<int64_t> axes;
  for (size_t k = 0; k < gs.dims.size(); ++k) {
    const Dim& gd = gs.dims[k];
    if (k < off) { axes.push_back(static_cast<int64_t>(k)); continue; }
    const Dim& ld = ls.dims[k - off];
    if (ld.is_static() && ld.value == 1) {
      if (!(gd.is_static() && gd.value == 1)) axes.push_back(static_cast<int64_t>(k));
      continue;
    }
    if (!(dim_known(ld) && ld == gd)) return std::nullopt;
  }
  return axes;
}

}  // namespace

Value* GradContext::sum_to_shape(Value* g, Value* like) {
  const Shape& gs = g->shape();
  const Shape& ls = like->shape();
  auto axes = reduce_axes(gs, ls);
  if (!axes) return emit("SumToShape", {g, like}, {}, kOtterDomain);
  if (axes->empty()) return reshape_like(g, like);
  // Only leading axes (a bias): keepdims=0 gives like's shape directly.
  int64_t leading = gs.rank() - ls.rank();
  bool drop = axes->back() < leading;
  Value* r = emit("ReduceSum", {g, ints(*axes)}, {{"keepdims", Attribute(int64_t{drop ? 0 : 1})}});
  return reshape_like(r, like);
}

Value* GradContext::reshape_like(Value* g, Value* like) {
  const Shape& a = g->shape();
  const Shape& b = like->shape();
  bool same = a.rank_known && a == b;
  for (const Dim& d : a.dims) same &= d.is_static() || d.is_symbolic();
  return same ? g : emit("Reshape", {g, shape_of(like)});
}

Value* GradContext::expand_like(Value* g, Value* like) { return emit("Expand", {g, shape_of(like)}); }

Value* GradContext::zeros_like(Value* v) {
  Tensor zero(v->dtype(), {1});
  return emit("ConstantOfShape", {shape_of(v)}, {{"value", Attribute(zero)}});
}

Value* GradContext::dim_of(Value* v, int64_t axis) {
  const Shape& s = v->shape();
  if (s.rank_known && axis >= 0 && axis < s.rank() && s.dims[axis].is_static()) return ints({s.dims[axis].value});
  return emit("Gather", {emit("Shape", {v}), ints({axis})}, {{"axis", Attribute(int64_t{0})}});
}

Value* GradContext::concat_ints(const std::vector<Value*>& parts) {
  std::vector<int64_t> all;
  bool constant = true;
  for (Value* p : parts) {
    constant &= p->kind() == ValueKind::kInitializer && !p->trainable() && p->has_data();
    if (!constant) break;
    for (int64_t x : p->data().to_int64_vector()) all.push_back(x);
  }
  if (constant) {
    for (Value* p : parts)  // the pieces folded into one constant are not needed any more
      if (p->uses().empty() && !p->is_graph_output()) graph_.remove_value(p);
    return ints(all);
  }
  if (parts.size() == 1) return parts[0];
  return emit("Concat", parts, {{"axis", Attribute(int64_t{0})}});
}

Value* GradContext::numel_ratio(Value* num, Value* den, const Value* like) {
  int64_t a = num->shape().numel(), b = den->shape().numel();
  if (a >= 0 && b > 0) return scalar_like(static_cast<double>(a) / static_cast<double>(b), like);
  // Symbols that cancel ([N,4,1,1] over [N,4,4,4]) leave a static quotient.
  if (num->shape().rank_known && den->shape().rank_known) {
    Dim q = infer::dim_div(infer::dims_product(den->shape().dims), infer::dims_product(num->shape().dims));
    if (q.is_static() && q.value > 0) return scalar_like(1.0 / static_cast<double>(q.value), like);
  }
  return emit("Div", {cast(emit("Size", {num}), like->dtype()), cast(emit("Size", {den}), like->dtype())});
}

int64_t GradContext::rank_of(const Value* v) const {
  if (!v->shape().rank_known) unsupported(str_cat("the rank of '", v->name(), "' is unknown"));
  return v->shape().rank();
}

std::map<std::string, Attribute> GradContext::forward_attrs(const std::vector<std::string>& names) const {
  std::map<std::string, Attribute> out;
  for (const std::string& k : names)
    if (const Attribute* a = fwd_.find_attr(k)) out[k] = *a;
  return out;
}

void GradContext::unsupported(const std::string& why) const {
  fail(fwd_.describe(), ": cannot differentiate: ", why);
}

}  // namespace otter
