// hoist-weight-casts pass (see hoist_weight_casts.h).
#include "passes/hoist_weight_casts.h"

#include <set>

#include "graph/error.h"
#include "graph/op_table.h"
#include "passes/mixed_precision.h"

namespace otter {

namespace {

// The update ops whose kernels take a half copy of the weight as an optional last input and write
// it as their last output (kernels/common: the fused update-and-round).
bool takes_half_copy(const Node& n) {
  return n.domain() == kOtterDomain && (n.op_type() == "AdamUpdate" || n.op_type() == "SGDUpdate");
}

// The node of the apply program that writes the new value of `p`, or nullptr.
Node* update_of(const Graph& g, Value* p) {
  auto it = g.state_updates.find(p);
  if (it == g.state_updates.end() || !it->second) return nullptr;
  Node* n = it->second->producer();
  return n && n->program() == Program::kApply ? n : nullptr;
}

// Replaces the Casts of `p` to a half type in the micro-step program by one value of the first
// Cast's name: state initialised with the rounded weight, or a constant when `frozen`. nullptr when
// `p` has no such Cast.
Value* hoist(Graph& g, Value* p, bool frozen) {
  std::vector<Node*> casts;
  for (auto [user, idx] : p->uses())
    if (user->domain().empty() && user->op_type() == "Cast" && user->program() == Program::kMicroStep &&
        is_half(user->output(0)->dtype()))
      casts.push_back(user);
  if (casts.empty()) return nullptr;
  const DataType t = casts[0]->output(0)->dtype();
  for (Node* c : casts)
    OTTER_CHECK(c->output(0)->dtype() == t, "hoist-weight-casts: '", p->name(), "' is cast to both ", dtype_name(t),
                " and ", dtype_name(c->output(0)->dtype()));
  Value* first = casts[0]->output(0);
  const std::string name = first->name();
  g.rename_value(first, g.unique_name(name + ".cast"));
  Tensor rounded = convert_float_tensor(p->data(), t);
  Value* copy = frozen ? g.add_initializer(name, rounded, false) : g.add_state(name, rounded);
  for (Node* c : casts) {
    g.replace_all_uses(c->output(0), copy);
    g.remove_node(c);
  }
  return copy;
}

// The update `u` again, with `half` as its last input and `<half>.new` as its last output; the
// outputs keep their names and the state updates follow them.
void write_half_copy(Graph& g, Node* u, Value* half) {
  std::vector<Value*> ins = u->inputs();
  ins.push_back(half);
  std::vector<std::string> names;
  for (Value* o : u->outputs()) {
    names.push_back(o ? o->name() : "");
    if (o) g.rename_value(o, g.unique_name(o->name() + ".old"));
  }
  names.push_back(g.unique_name(half->name() + ".new"));
  Node* n = g.add_node(u->op_type(), ins, names, u->domain(), u);
  n->set_program(Program::kApply);
  for (const auto& [k, a] : u->attrs()) n->set_attr(k, a);
  infer_node(*n);
  for (int i = 0; i < u->num_outputs(); ++i)
    if (u->output(i)) g.replace_all_uses(u->output(i), n->output(i));
  g.remove_node(u);
  g.state_updates[half] = n->output(n->num_outputs() - 1);
}

}  // namespace

std::string hoist_weight_casts_precondition(const Graph& g) {
  for (const auto& [p, acc] : g.gradients) {
    Node* u = update_of(g, p);
    if (!u) return str_cat("parameter '", p->name(), "' has no update in the apply program: run optimizer first");
    if (!takes_half_copy(*u)) return str_cat("the update of '", p->name(), "' (", u->describe(), ") takes no half copy");
  }
  return "";
}

int64_t hoist_weight_casts(Graph& g) {
  std::string unmet = hoist_weight_casts_precondition(g);
  OTTER_CHECK(unmet.empty(), "hoist-weight-casts: ", unmet);
  int64_t copies = 0;
  std::set<const Value*> updated;
  for (const auto& [p, acc] : g.gradients) {
    updated.insert(p);
    if (Value* half = hoist(g, p, /*frozen=*/false)) {
      write_half_copy(g, update_of(g, p), half);
      ++copies;
    }
  }
  // Frozen parameters never change: their half copies become constants.
  for (Value* v : g.initializers())
    if (v->trainable() && !updated.count(v)) copies += hoist(g, v, /*frozen=*/true) != nullptr;
  return copies;
}

std::string HoistWeightCastsPass::summary() const {
  return "make each weight's half copy state that its optimizer update writes (a constant when frozen)";
}

std::string HoistWeightCastsPass::unmet_precondition(const Graph& g) const {
  return hoist_weight_casts_precondition(g);
}

void HoistWeightCastsPass::run(Graph& g, PassContext&) {
  reset_counters();
  count("half_copies", hoist_weight_casts(g));
}

}  // namespace otter
