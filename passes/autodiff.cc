// autodiff pass (see autodiff.h).
#include "passes/autodiff.h"

#include <algorithm>
#include <set>
#include <sstream>
#include <unordered_map>
#include <unordered_set>

#include "graph/error.h"
#include "graph/gradient.h"
#include "graph/op_table.h"

namespace otter {

bool glob_match(const std::string& p, const std::string& s) {
  size_t pi = 0, si = 0, star = std::string::npos, mark = 0;
  while (si < s.size()) {
    if (pi < p.size() && (p[pi] == '?' || p[pi] == s[si])) { ++pi; ++si; }
    else if (pi < p.size() && p[pi] == '*') { star = pi++; mark = si; }
    else if (star != std::string::npos) { pi = star + 1; si = ++mark; }
    else return false;
  }
  while (pi < p.size() && p[pi] == '*') ++pi;
  return pi == p.size();
}

const OptionTable<AutodiffOptions>& AutodiffOptions::table() {
  using S = AutodiffOptions;
  static const OptionTable<S> t{
      option("loss", &S::loss, "name of the scalar loss value"),
      option("freeze", &S::freeze, "parameter name globs that get no gradient (';'-separated)"),
      option("wrt", &S::wrt, "graph inputs to differentiate as well (';'-separated)"),
  };
  return t;
}

namespace {

// The scalar float loss `opts.loss`; fails naming what is wrong with it.
Value* find_loss(Graph& g, const AutodiffOptions& opts) {
  Value* loss = g.find_value(opts.loss);
  if (!loss) {
    std::string outs;
    for (Value* o : g.outputs()) outs += (outs.empty() ? "" : ", ") + o->name();
    fail("autodiff: no loss value '", opts.loss, "' (graph outputs: ", outs, "); add one with add-loss");
  }
  OTTER_CHECK(is_float(loss->dtype()), "autodiff: loss '", loss->name(), "' is ", dtype_name(loss->dtype()));
  OTTER_CHECK(loss->shape().rank_known && loss->shape().numel() == 1, "autodiff: loss '", loss->name(),
              "' must be a scalar, it is ", loss->shape().to_string());
  if (loss->dtype() != DataType::kFloat64 && loss->dtype() != DataType::kFloat32)
    fail("autodiff: loss '", loss->name(), "' must be float32 or float64 (the loss subgraph runs in fp32)");
  return loss;
}

// What we differentiate with respect to: trainable float parameters not frozen, and `wrt` inputs.
std::vector<Value*> targets_of(Graph& g, const AutodiffOptions& opts) {
  std::vector<Value*> targets;
  for (Value* v : g.initializers()) {
    if (!v->trainable() || !is_float(v->dtype())) continue;
    bool frozen = false;
    for (const auto& pat : opts.freeze) frozen |= glob_match(pat, v->name());
    if (!frozen) targets.push_back(v);
  }
  for (const std::string& name : opts.wrt) {
    Value* v = g.find_value(name);
    OTTER_CHECK(v && v->kind() == ValueKind::kInput, "autodiff: wrt '", name, "' is not a graph input");
    OTTER_CHECK(is_float(v->dtype()), "autodiff: wrt '", name, "' is not a float input");
    targets.push_back(v);
  }
  return targets;
}

// Values that depend on a target (forward sweep).
std::unordered_set<const Value*> requiring_grad(const std::vector<Node*>& nodes, const std::vector<Value*>& targets) {
  std::unordered_set<const Value*> req(targets.begin(), targets.end());
  for (Node* n : nodes) {
    if (OpTable::instance().get(*n).grad_kind == GradKind::kNoGradient) continue;
    bool any = false;
    for (Value* in : n->inputs()) any |= (in && req.count(in));
    if (!any) continue;
    for (Value* o : n->outputs())
      if (o && is_float(o->dtype())) req.insert(o);
  }
  return req;
}

// Nodes the loss depends on through values that require a gradient (backward sweep).
std::unordered_set<const Node*> needed_nodes(const Value* loss, const std::unordered_set<const Value*>& req) {
  std::unordered_set<const Node*> needed;
  std::vector<const Value*> work{loss};
  std::unordered_set<const Value*> seen{loss};
  while (!work.empty()) {
    const Value* v = work.back();
    work.pop_back();
    if (!v->producer() || !req.count(v)) continue;
    if (!needed.insert(v->producer()).second) continue;
    for (Value* in : v->producer()->inputs())
      if (in && req.count(in) && seen.insert(in).second) work.push_back(in);
  }
  return needed;
}

// Control flow is differentiated once canonicalize has inlined it (passes/control_flow.h): what
// would have let it, for the message.
std::string control_flow_hint(const Node& n) {
  if (!n.domain().empty()) return "";
  if (n.op_type() == "If")
    return " (its condition is known only at run time; make it a constant, an initializer or Constant, and run "
           "canonicalize first, which inlines the taken branch)";
  if (n.op_type() == "Loop")
    return " (its trip count is known only at run time; with a constant trip count M and a condition that is "
           "absent or constant true, canonicalize unrolls it)";
  if (n.op_type() == "Scan")
    return " (its sequence length is not static; with static scan-input lengths canonicalize unrolls it)";
  return "";
}

// Every needed node must have a rule: one error listing all that lack one.
void check_rules(const std::vector<Node*>& nodes, const std::unordered_set<const Node*>& needed) {
  std::vector<std::string> missing;
  for (Node* n : nodes) {
    if (!needed.count(n)) continue;
    const OpDef& def = OpTable::instance().get(*n);
    if (def.grad_kind == GradKind::kRule && def.grad) continue;
    std::string hint = control_flow_hint(*n);
    if (hint.empty() && def.grad_kind == GradKind::kNotDifferentiable) hint = " (not differentiable)";
    missing.push_back(n->describe() + hint);
  }
  if (missing.empty()) return;
  std::string msg = str_cat("autodiff: ", missing.size(), " op", missing.size() == 1 ? "" : "s",
                            " on the path from the parameters to the loss have no gradient rule:");
  for (const auto& m : missing) msg += "\n  " + m;
  fail(msg);
}

// The reverse sweep: gradient contributions per value, summed once a value's users are done.
class BackwardSweep {
 public:
  BackwardSweep(Graph& g, Value* seed, const Value* loss) : g_(g), seed_(seed) { contrib_[loss].push_back(seed); }

  void run(const std::vector<Node*>& nodes, const std::unordered_set<const Node*>& needed,
           const std::unordered_set<const Value*>& req) {
    for (auto it = nodes.rbegin(); it != nodes.rend(); ++it) {
      Node* n = *it;
      if (!needed.count(n)) continue;
      std::vector<Value*> gouts;
      bool any = false;
      for (Value* o : n->outputs()) {
        gouts.push_back(o ? finalize(o) : nullptr);
        any |= gouts.back() != nullptr;
      }
      if (!any) continue;
      std::vector<bool> needs;
      for (Value* in : n->inputs()) needs.push_back(in && req.count(in) && is_float(in->dtype()));
      GradContext ctx(g_, *n, gouts, needs);
      OpTable::instance().get(*n).grad(ctx);
      for (int i = 0; i < n->num_inputs(); ++i)
        if (Value* gi = ctx.grad_input(i)) contrib_[n->input(i)].push_back(gi);
    }
  }

  // The summed gradient of v (nullptr when nothing reached it), named `<v>.grad` where fresh.
  Value* finalize(const Value* v) {
    auto it = final_.find(v);
    if (it != final_.end()) return it->second;
    auto c = contrib_.find(v);
    if (c == contrib_.end() || c->second.empty()) return final_[v] = nullptr;
    std::vector<Value*>& parts = c->second;
    Value* sum = parts[0];
    for (size_t k = 1; k < parts.size(); ++k) {
      Node* add = g_.add_node("Add", {sum, parts[k]}, {g_.unique_name(str_cat(v->name(), ".grad.sum", k))});
      infer_node(*add);
      sum = add->output(0);
    }
    std::string want = v->name() + ".grad";
    if (sum->kind() == ValueKind::kNode && sum != seed_ && !is_final_.count(sum) && !g_.has_value(want))
      g_.rename_value(sum, want);
    is_final_.insert(sum);
    return final_[v] = sum;
  }

 private:
  Graph& g_;
  Value* seed_;
  std::unordered_map<const Value*, std::vector<Value*>> contrib_;
  std::unordered_map<const Value*, Value*> final_;
  std::unordered_set<const Value*> is_final_;  // values already the final gradient of some value
};

// One graph output per target: its gradient, a zero constant when the loss does not depend on it;
// graph outputs stay distinct values produced by nodes (an Identity of the seed or a constant).
void add_gradient_outputs(Graph& g, const std::vector<Value*>& targets, BackwardSweep& sweep, Value* seed,
                          AutodiffResult& res) {
  for (Value* p : targets) {
    Value* gp = sweep.finalize(p);
    if (!gp) {
      ++res.zero_grads;
      Tensor z(p->dtype(), p->shape().rank_known && p->shape().is_static() ? p->shape().static_dims()
                                                                           : std::vector<int64_t>{});
      gp = g.add_initializer(g.unique_name(p->name() + ".grad.zero"), z, false);
    }
    if (gp == seed || gp->kind() != ValueKind::kNode) {
      Node* id = g.add_node("Identity", {gp}, {g.unique_name(p->name() + ".grad")});
      infer_node(*id);
      gp = id->output(0);
    }
    g.add_output(gp);
    if (p->kind() == ValueKind::kInitializer) g.gradients.emplace_back(p, gp);
    res.params.push_back(p->name());
    res.grads.push_back(gp->name());
  }
}

}  // namespace

AutodiffResult autodiff(Graph& g, const AutodiffOptions& opts) {
  AutodiffResult res;
  Value* loss = find_loss(g, opts);
  const std::vector<Value*> targets = targets_of(g, opts);
  const std::vector<Node*> nodes = g.node_list();
  const std::unordered_set<const Value*> req = requiring_grad(nodes, targets);
  const std::unordered_set<const Node*> needed = needed_nodes(loss, req);
  check_rules(nodes, needed);

  // The seed 1 (later S/K: passes/backward_seed.h), recorded with the loss.
  const size_t nodes_before = g.nodes().size();
  Tensor one = loss->dtype() == DataType::kFloat64 ? Tensor::scalar<double>(1.0) : Tensor::scalar<float>(1.0f);
  Value* seed = g.add_initializer(g.unique_name(loss->name() + ".grad"), one.reshaped(loss->shape().static_dims()), false);
  g.loss_seed = seed;
  TrainingFacts facts = g.training_facts();
  facts.loss = loss->name();
  g.set_training_facts(facts);

  BackwardSweep sweep(g, seed, loss);
  sweep.run(nodes, needed, req);
  add_gradient_outputs(g, targets, sweep, seed, res);
  res.backward_nodes = static_cast<int64_t>(g.nodes().size() - nodes_before);
  return res;
}

std::string AutodiffPass::summary() const {
  return "build the backward graph from the loss to every trainable parameter";
}

void AutodiffPass::run(Graph& g, PassContext&) {
  AutodiffResult r = autodiff(g, opts_);
  set_counters({{"params", static_cast<int64_t>(r.params.size())},
                {"backward_nodes", r.backward_nodes},
                {"zero_grads", r.zero_grads}});
}

}  // namespace otter
