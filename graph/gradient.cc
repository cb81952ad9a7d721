// GradContext: the builder API of gradient rules.
#include "graph/gradient.h"

#include "graph/error.h"
#include "graph/op_table.h"

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
  OTTER_CHECK(i >= 0 && i < fwd_.num_inputs(), fwd_.describe(), ": gradient rule set input ", i, " out of range");
  if (!needs_grad(i) || !g) return;
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
  if (!domain.empty() && !graph_.opset_imports.count(domain)) graph_.opset_imports[domain] = 1;
  std::vector<std::string> names;
  for (int i = 0; i < num_outputs; ++i) names.push_back(fresh_name());
  Node* n = graph_.add_node(op, inputs, names, domain);
  for (const auto& [k, a] : attrs) n->set_attr(k, a);
  infer_node(*n);
  return n->outputs();
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

Value* GradContext::sum_to_shape(Value* g, Value* like) {
  const Shape& gs = g->shape();
  const Shape& ls = like->shape();
  if (gs == ls && gs.rank_known) {
    bool all_static_or_same = true;
    for (const Dim& d : gs.dims) all_static_or_same &= (d.is_static() || d.is_symbolic());
    if (all_static_or_same) return g;
  }
  if (gs.is_static() && ls.is_static()) {
    auto gd = gs.static_dims(), ld = ls.static_dims();
    OTTER_CHECK(gd.size() >= ld.size(), fwd_.describe(), ": cannot reduce ", gs.to_string(), " to ", ls.to_string());
    size_t off = gd.size() - ld.size();
    std::vector<int64_t> axes;
    for (size_t k = 0; k < gd.size(); ++k) {
      if (k < off) { axes.push_back(static_cast<int64_t>(k)); continue; }
      if (ld[k - off] == 1 && gd[k] != 1) axes.push_back(static_cast<int64_t>(k));
    }
    Value* r = g;
    if (!axes.empty()) r = emit("ReduceSum", {g, ints(axes)}, {{"keepdims", Attribute(int64_t{1})}});
    if (!(r->shape() == ls)) r = emit("Reshape", {r, ints(ld)});
    return r;
  }
  return emit("SumToShape", {g, like}, {}, "ai.otter");
}

}  // namespace otter
