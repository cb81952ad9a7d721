// recompute pass (see recompute.h): which forward values to recompute, and the clones that do it.
#include "passes/recompute.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include "graph/error.h"
#include "graph/graph_stats.h"
#include "graph/liveness.h"
#include "graph/op_table.h"
#include "passes/memory_plan.h"

namespace otter {

const EnumNames<RecomputePolicy>& enum_names(RecomputePolicy) {
  static const EnumNames<RecomputePolicy> n{{RecomputePolicy::kNone, "none"},
                                            {RecomputePolicy::kCheap, "cheap"},
                                            {RecomputePolicy::kLayers, "layers"},
                                            {RecomputePolicy::kAuto, "auto"}};
  return n;
}

const OptionTable<RecomputeOptions>& RecomputeOptions::table() {
  using S = RecomputeOptions;
  static const OptionTable<S> t{
      option("policy", &S::policy, "what to recompute: none, cheap ops, all but layer boundaries, or auto (budget)")
          .always(),
      option("budget", &S::budget, "auto: bytes the planned micro-step arena must fit in").at_least(0),
  };
  return t;
}

namespace {

bool is_random(const Node& n) {
  const std::string& op = n.op_type();
  // ai.otter.Attention with dropout draws its seed per run (graph/ops/attention.cc).
  if (n.domain() == kOtterDomain) return op == "Attention" && n.attr_f("dropout", 0.f) > 0;
  return op.rfind("Random", 0) == 0 || op == "Bernoulli" || op == "Multinomial";
}

// Contractions and other ops whose cost is not linear in their output: not `cheap`.
bool is_expensive(const Node& n) {
  static const std::set<std::string> ops = {"MatMul",        "Gemm",        "Conv",           "ConvTranspose", "Einsum",
                                            "MatMulInteger", "ConvInteger", "QLinearMatMul",  "QLinearConv",   "LSTM",
                                            "GRU",           "RNN",         "GemmAccumulate", "ConvGrad",
                                            "Attention",     "AttentionGrad"};
  return ops.count(n.op_type()) != 0;
}

bool is_dropout(const Node& n) { return n.domain().empty() && n.op_type() == "Dropout"; }

// Dropout whose training_mode is a constant: recomputable (from the mask when training).
bool dropout_recomputable(const Node& n, const Value* v) {
  if (v != n.output(0) || !n.input(2) || !n.input(2)->has_data()) return false;
  return n.input(2)->data().get_as_double(0) == 0 || n.output(1) != nullptr;
}
bool dropout_training(const Node& n) { return n.input(2)->data().get_as_double(0) != 0; }

// ai.otter.AddLayerNorm with its sum S as an output (fuse-add-layernorm): its Y is recomputed as
// LayerNormalization(S, scale, bias), which the CPU kernels compute with the same row code (the
// same bits), so S, the residual stream, can be the kept layer boundary.
bool is_add_layer_norm_with_sum(const Node& n) {
  return n.domain() == kOtterDomain && n.op_type() == "AddLayerNorm" && n.num_outputs() > 1 && n.output(1);
}

// The values recomputing `v` reads.
std::vector<Value*> needs(const Value* v) {
  const Node& n = *v->producer();
  if (is_dropout(n) && dropout_training(n)) return {n.input(0), n.output(1), n.input(1)};
  if (is_add_layer_norm_with_sum(n) && v == n.output(0)) {
    std::vector<Value*> out = {n.output(1), n.input(2)};
    if (n.num_inputs() > 3 && n.input(3)) out.push_back(n.input(3));
    return out;
  }
  std::vector<Value*> out;
  for (Value* in : n.inputs())
    if (in) out.push_back(in);
  return out;
}

class Planner {
 public:
  Planner(Graph& g) : g_(g) { classify(); }

  // Values the backward graph reads from the forward graph (activations only), in forward order.
  const std::vector<Value*>& saved() const { return saved_; }
  int64_t kept_bytes() const {
    int64_t b = 0;
    for (Value* v : saved_)
      if (!recompute_.count(v) && !fixed(v)) b += value_bytes_or_0(v);
    return b;
  }

  void choose(RecomputePolicy p) {
    std::set<const Value*> boundary;
    int depth = 4;
    if (p == RecomputePolicy::kLayers) {
      boundary = layer_boundaries();
      depth = 1 << 20;
    }
    for (Value* v : saved_) {
      if (boundary.count(v) || fixed(v)) continue;
      std::set<Value*> tentative;
      if (recomputable(v, depth, p == RecomputePolicy::kCheap, boundary, tentative)) {
        recompute_.insert(tentative.begin(), tentative.end());
        recompute_.insert(v);
      }
    }
  }

  // Clones the chosen values' producers into the backward graph; returns the clone count.
  int64_t apply(int64_t* values);

 private:
  static int64_t value_bytes_or_0(const Value* v) { return v->shape().is_static() ? value_bytes(v) : 0; }
  bool forward(const Node* n) const { return fwd_.count(n) != 0; }
  // Alive for the whole backward graph anyway, or not worth a thought: inputs, constants, state,
  // values independent of the inputs, graph outputs and state updates.
  bool fixed(const Value* v) const {
    if (!v->producer() || !act_.count(v) || v->is_graph_output()) return true;
    for (const auto& [s, nv] : g_.state_updates)
      if (nv == v) return true;
    return false;
  }

  bool recomputable(Value* v, int depth, bool cheap_only, const std::set<const Value*>& boundary,
                    std::set<Value*>& tentative) const {
    const Node& n = *v->producer();
    if (!forward(&n) || is_random(n) || (cheap_only && is_expensive(n))) return false;
    if (is_dropout(n) && !dropout_recomputable(n, v)) return false;
    for (Value* u : needs(v)) {
      if (fixed(u) || boundary.count(u) || recompute_.count(u) || tentative.count(u)) continue;
      if (saved_set_.count(u)) continue;  // decided earlier (forward order): kept or recomputed
      if (depth <= 1 || !recomputable(u, depth - 1, cheap_only, boundary, tentative)) return false;
      tentative.insert(u);
    }
    return true;
  }

  void classify();
  std::set<const Value*> layer_boundaries() const;
  template <typename Map>
  Node* clone_node(const Node& n, const std::vector<std::string>& names, Node* before, bool last_cloned,
                   const Map& mapped);

  Graph& g_;
  std::vector<Node*> order_;
  std::map<const Node*, int> pos_;
  std::set<const Node*> fwd_;
  std::set<const Value*> act_;
  std::vector<Value*> saved_;
  std::set<const Value*> saved_set_;
  std::set<Value*> recompute_;
};

// Forward: the micro-step nodes the loss, the state updates and the non-gradient outputs depend on,
// except what depends on the backward seed. Activations: values that depend on a graph input.
void Planner::classify() {
  order_ = g_.node_list();
  for (size_t i = 0; i < order_.size(); ++i) pos_[order_[i]] = static_cast<int>(i);
  std::set<const Value*> from_seed;
  if (g_.loss_seed) from_seed.insert(g_.loss_seed);
  for (Value* in : g_.inputs()) act_.insert(in);
  for (Node* n : order_) {
    bool seeded = false, act = false;
    for (Value* in : n->inputs()) {
      seeded |= in && from_seed.count(in);
      act |= in && act_.count(in);
    }
    for (Value* o : n->outputs()) {
      if (o && seeded) from_seed.insert(o);
      if (o && act) act_.insert(o);
    }
  }
  std::set<const Value*> grads;
  for (const auto& [p, gv] : g_.gradients) grads.insert(gv);
  std::vector<Value*> roots;
  if (g_.has_value(g_.training_facts().loss)) roots.push_back(g_.value(g_.training_facts().loss));
  for (Value* o : g_.outputs())
    if (!grads.count(o)) roots.push_back(o);
  for (const auto& [s, nv] : g_.state_updates) roots.push_back(nv);
  while (!roots.empty()) {
    Value* v = roots.back();
    roots.pop_back();
    Node* n = v->producer();
    if (!n || from_seed.count(v) || n->program() != Program::kMicroStep || !fwd_.insert(n).second) continue;
    for (Value* in : n->inputs())
      if (in) roots.push_back(in);
  }
  for (Node* n : order_) {
    if (!forward(n)) continue;
    for (Value* o : n->outputs()) {
      if (!o || !act_.count(o) || o->kind() != ValueKind::kNode) continue;
      bool read_by_backward = false;
      for (const auto& [u, i] : o->uses()) read_by_backward |= !forward(u) && u->program() == Program::kMicroStep;
      if (read_by_backward) {
        saved_.push_back(o);
        saved_set_.insert(o);
      }
    }
  }
}

// Cuts of the forward graph: after forward node i, the only activation still to be read by a later
// forward node. Residual Adds among them are the layer boundaries; without any, every ~sqrt(n)-th cut.
std::set<const Value*> Planner::layer_boundaries() const {
  std::map<const Value*, int> pending;  // forward reads still to come
  for (Node* n : order_)
    if (forward(n))
      for (Value* in : n->inputs())
        if (in && in->producer() && act_.count(in)) ++pending[in];
  std::set<const Value*> live;
  std::vector<const Value*> cuts;
  for (Node* n : order_) {
    if (!forward(n)) continue;
    for (Value* in : n->inputs())
      if (in && pending.count(in) && --pending[in] == 0) live.erase(in);
    for (Value* o : n->outputs())
      if (o && pending.count(o) && pending.at(o) > 0) live.insert(o);
    // An AddLayerNorm's Y and S alive together count as S alone (Y is recomputed from S).
    std::vector<const Value*> alone;
    for (const Value* v : live) {
      const Node* p = v->producer();
      if (!(p && is_add_layer_norm_with_sum(*p) && v == p->output(0) && live.count(p->output(1)))) alone.push_back(v);
    }
    if (alone.size() == 1) cuts.push_back(alone[0]);
  }
  std::set<const Value*> out;
  for (const Value* c : cuts) {
    const Node* p = c->producer();
    // A residual Add, or the sum that ai.otter.AddLayerNorm (fuse-add-layernorm) outputs for one.
    const bool sum = (p->op_type() == "Add" && p->domain().empty()) ||
                     (p->op_type() == "AddLayerNorm" && p->domain() == kOtterDomain && p->num_outputs() > 1 &&
                      p->output(1) == c);
    if (sum && act_.count(p->input(0)) && act_.count(p->input(1))) out.insert(c);
  }
  if (!out.empty() || cuts.empty()) return out;
  const size_t stride = std::max<size_t>(1, static_cast<size_t>(std::lround(std::sqrt(double(cuts.size())))));
  for (size_t i = stride - 1; i < cuts.size(); i += stride) out.insert(cuts[i]);
  return out;
}

// The recomputing clone of forward node n placed before `before`, its outputs named `names`
// (`last_cloned`: n's last output is recomputed too); `mapped` gives each input's recomputed value.
template <typename Map>
Node* Planner::clone_node(const Node& n, const std::vector<std::string>& names, Node* before, bool last_cloned,
                          const Map& mapped) {
  if (is_dropout(n) && dropout_training(n)) {
    if (!g_.opset_imports.count(kOtterDomain)) g_.opset_imports[kOtterDomain] = 1;
    // x * mask / (1 - ratio), the forward's arithmetic (kernels/common/elementwise_grad.h).
    return g_.add_node("DropoutGrad", {mapped(n.input(0)), n.output(1), n.input(1), n.input(2)}, {names[0]},
                       kOtterDomain, before);
  }
  if (is_add_layer_norm_with_sum(n) && !last_cloned) {  // Y alone, from the kept sum
    std::vector<Value*> ins = {n.output(1), n.input(2)};
    if (n.num_inputs() > 3 && n.input(3)) ins.push_back(n.input(3));
    Node* c = g_.add_node("LayerNormalization", ins, {names[0]}, "", before);
    for (const char* k : {"axis", "epsilon"})
      if (const Attribute* a = n.find_attr(k)) c->set_attr(k, *a);
    if (c->opset() < 17) c->set_opset(17);  // LayerNormalization's first opset
    return c;
  }
  std::vector<Value*> ins;
  for (Value* in : n.inputs()) ins.push_back(mapped(in));
  Node* c = g_.add_node(n.op_type(), ins, names, n.domain(), before);
  for (const auto& [k, a] : n.attrs()) c->set_attr(k, a);
  c->set_opset(n.opset());
  return c;
}

int64_t Planner::apply(int64_t* values) {
  // The values to clone: the saved ones chosen and, transitively, what their recipes read.
  std::set<Value*> to_clone;
  std::vector<Value*> stack;
  for (Value* v : saved_)
    if (recompute_.count(v)) stack.push_back(v);
  while (!stack.empty()) {
    Value* v = stack.back();
    stack.pop_back();
    if (!to_clone.insert(v).second) continue;
    for (Value* u : needs(v))
      if (recompute_.count(u)) stack.push_back(u);
  }
  // Producers in forward order; Dropout in training mode is rebuilt from its mask per value.
  std::vector<Node*> nodes;
  for (Node* n : order_) {
    bool any = false;
    for (Value* o : n->outputs()) any |= o && to_clone.count(o);
    if (any) nodes.push_back(n);
  }
  // Where each clone goes: before the first backward reader of its outputs or of a later clone.
  std::map<const Node*, int> at;
  const int end = static_cast<int>(order_.size());
  for (auto it = nodes.rbegin(); it != nodes.rend(); ++it) {
    int first = end;
    for (Value* o : (*it)->outputs()) {
      if (!o || !to_clone.count(o)) continue;
      for (const auto& [u, i] : o->uses()) {
        if (!forward(u) && u->program() == Program::kMicroStep) first = std::min(first, pos_.at(u));
        if (at.count(u)) first = std::min(first, at.at(u));
      }
    }
    at[*it] = first;
  }
  std::map<Value*, Value*> clone;
  std::set<const Node*> clones;
  for (Node* n : nodes) {
    Node* before = at.at(n) < end ? order_[at.at(n)] : nullptr;
    auto mapped = [&](Value* v) { return v && clone.count(v) ? clone.at(v) : v; };
    std::vector<std::string> names;
    for (Value* o : n->outputs()) names.push_back(o ? g_.unique_name(o->name() + ".recompute") : "");
    Node* c = clone_node(*n, names, before, to_clone.count(n->output(n->num_outputs() - 1)) != 0, mapped);
    c->set_name((n->name().empty() ? names[0] : n->name()) + ".recompute");
    clones.insert(c);
    for (int i = 0; i < c->num_outputs(); ++i) {
      Value* o = c->output(i);
      if (!o) continue;
      o->set_dtype(n->output(i)->dtype());
      o->set_shape(n->output(i)->shape());
      o->set_sym_data(n->output(i)->sym_data());
      clone[n->output(i)] = o;
    }
  }
  // Backward readers read the clones; forward readers keep the originals.
  for (Value* v : to_clone) {
    std::vector<std::pair<Node*, int>> uses = v->uses();
    for (const auto& [u, i] : uses)
      if (!forward(u) && u->program() == Program::kMicroStep && !clones.count(u)) u->set_input(i, clone.at(v));
  }
  *values = static_cast<int64_t>(to_clone.size());
  return static_cast<int64_t>(nodes.size());
}

bool static_micro_step(const Graph& g) {
  for (const Node* n : program_nodes(g, Program::kMicroStep))
    for (const Value* o : n->outputs())
      if (o && !o->shape().is_static()) return false;
  return true;
}

int64_t total_flops(const Graph& g) {
  GraphStats s = compute_graph_stats(g);
  return s.forward_flops < 0 || s.backward_flops < 0 ? -1 : s.forward_flops + s.backward_flops;
}

// One policy on the graph; fills the "after" figures.
void apply_policy(Graph& g, RecomputePolicy p, RecomputeStats& st) {
  Planner pl(g);
  pl.choose(p);
  int64_t values = 0;
  st.recomputed_nodes += pl.apply(&values);
  st.recomputed_values += values;
  Planner after(g);
  st.saved_bytes_after = after.kept_bytes();
}

}  // namespace

int64_t planned_micro_step_arena(Graph& g) {
  if (!static_micro_step(g)) return -1;
  std::map<Program, MemoryPlan> keep = std::move(g.memory_plans);
  plan_memory(g);
  int64_t arena = g.memory_plans.count(Program::kMicroStep) ? g.memory_plans.at(Program::kMicroStep).arena_bytes : 0;
  g.memory_plans = std::move(keep);
  return arena;
}

RecomputeStats recompute(Graph& g, const RecomputeOptions& o) {
  RecomputeStats st;
  {
    Planner before(g);
    st.saved_bytes_before = st.saved_bytes_after = before.kept_bytes();
  }
  const bool sized = static_micro_step(g);
  OTTER_CHECK(sized || o.policy != RecomputePolicy::kAuto,
              "recompute{policy=auto} needs static shapes to plan memory (fix the batch size first, e.g. "
              "otter-opt --batch N)");
  const int64_t flops_before = sized ? total_flops(g) : -1;
  if (sized) {
    st.arena_bytes_before = st.arena_bytes_after = planned_micro_step_arena(g);
    st.peak_bytes_before = compute_graph_stats(g).activation_peak_bytes;
  }
  if (o.policy == RecomputePolicy::kAuto) {
    st.fits = st.arena_bytes_before <= o.budget.bytes;
    for (RecomputePolicy rung : {RecomputePolicy::kCheap, RecomputePolicy::kLayers}) {
      if (st.fits) break;
      apply_policy(g, rung, st);
      st.applied = rung;
      st.arena_bytes_after = planned_micro_step_arena(g);
      st.fits = st.arena_bytes_after <= o.budget.bytes;
    }
  } else if (o.policy != RecomputePolicy::kNone) {
    apply_policy(g, o.policy, st);
    st.applied = o.policy;
    if (sized) st.arena_bytes_after = planned_micro_step_arena(g);
  }
  if (sized) {
    st.peak_bytes_after = compute_graph_stats(g).activation_peak_bytes;
    int64_t after = total_flops(g);
    st.extra_flops = flops_before < 0 || after < 0 ? -1 : after - flops_before;
  }
  return st;
}

std::string RecomputePass::summary() const {
  return "recompute forward activations in the backward graph instead of keeping them (cheap ops, layers, auto)";
}

std::string RecomputePass::unmet_precondition(const Graph& g) const {
  return g.loss_seed ? "" : "the graph has no backward graph: run autodiff first";
}

void RecomputePass::run(Graph& g, PassContext&) {
  RecomputeStats st = recompute(g, opts_);
  set_counters({{"recomputed_nodes", st.recomputed_nodes},
                {"recomputed_values", st.recomputed_values},
                {"saved_bytes_before", st.saved_bytes_before},
                {"saved_bytes_after", st.saved_bytes_after}});
  if (st.arena_bytes_before >= 0) {
    count("arena_bytes_before", st.arena_bytes_before);
    count("arena_bytes_after", st.arena_bytes_after);
    count("peak_bytes_before", st.peak_bytes_before);
    count("peak_bytes_after", st.peak_bytes_after);
    count("extra_flops", st.extra_flops);
  }
  if (opts_.policy == RecomputePolicy::kAuto) {
    count("applied_" + enum_name(st.applied));
    count("fits", st.fits ? 1 : 0);
  }
}

}  // namespace otter
