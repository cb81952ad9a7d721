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

namespace {

std::vector<std::string> split_list(const std::string& s) {
  std::vector<std::string> out;
  std::string cur;
  for (char c : s) {
    if (c == ';' || c == ',') { if (!cur.empty()) out.push_back(cur); cur.clear(); }
    else cur += c;
  }
  if (!cur.empty()) out.push_back(cur);
  return out;
}

}  // namespace

AutodiffResult autodiff(Graph& g, const AutodiffOptions& opts) {
  AutodiffResult res;
  Value* loss = g.find_value(opts.loss);
  if (!loss) {
    std::string outs;
    for (Value* o : g.outputs()) outs += (outs.empty() ? "" : ", ") + o->name();
    fail("autodiff: no loss value '", opts.loss, "' (graph outputs: ", outs, "); add one with add-loss");
  }
  OTTER_CHECK(is_float(loss->dtype()), "autodiff: loss '", loss->name(), "' is ", dtype_name(loss->dtype()));
  OTTER_CHECK(loss->shape().rank_known && loss->shape().numel() == 1, "autodiff: loss '", loss->name(),
              "' must be a scalar, it is ", loss->shape().to_string());

  // 1. What we differentiate with respect to.
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

  // 2. Values that depend on a target (forward), and nodes the loss depends on (backward).
  std::unordered_set<const Value*> requires_grad(targets.begin(), targets.end());
  const OpTable& table = OpTable::instance();
  std::vector<Node*> nodes = g.node_list();
  for (Node* n : nodes) {
    const OpDef& def = table.get(*n);
    if (def.grad_kind == GradKind::kNoGradient) continue;
    bool any = false;
    for (Value* in : n->inputs()) any |= (in && requires_grad.count(in));
    if (!any) continue;
    for (Value* o : n->outputs())
      if (o && is_float(o->dtype())) requires_grad.insert(o);
  }
  std::unordered_set<const Node*> needed;
  {
    std::vector<const Value*> work{loss};
    std::unordered_set<const Value*> seen{loss};
    while (!work.empty()) {
      const Value* v = work.back();
      work.pop_back();
      if (!v->producer() || !requires_grad.count(v)) continue;
      if (!needed.insert(v->producer()).second) continue;
      for (Value* in : v->producer()->inputs())
        if (in && requires_grad.count(in) && seen.insert(in).second) work.push_back(in);
    }
  }

  // 3. Every needed node must have a rule.
  std::vector<std::string> missing;
  for (Node* n : nodes) {
    if (!needed.count(n)) continue;
    const OpDef& def = table.get(*n);
    if (def.grad_kind == GradKind::kRule && def.grad) continue;
    missing.push_back(str_cat(n->describe(), def.grad_kind == GradKind::kNotDifferentiable ? " (not differentiable)" : ""));
  }
  if (!missing.empty()) {
    std::string msg = str_cat("autodiff: ", missing.size(), " op", missing.size() == 1 ? "" : "s",
                              " on the path from the parameters to the loss have no gradient rule:");
    for (const auto& m : missing) msg += "\n  " + m;
    fail(msg);
  }

  // 4. Reverse sweep.
  std::unordered_map<const Value*, std::vector<Value*>> contrib;
  std::unordered_map<const Value*, Value*> final_grad;
  size_t nodes_before = g.nodes().size();
  Tensor one = loss->dtype() == DataType::kFloat64 ? Tensor::scalar<double>(1.0) : Tensor::scalar<float>(1.0f);
  if (loss->dtype() != DataType::kFloat64 && loss->dtype() != DataType::kFloat32)
    fail("autodiff: loss '", loss->name(), "' must be float32 or float64 (the loss subgraph runs in fp32)");
  Value* seed = g.add_initializer(g.unique_name(loss->name() + ".grad"), one.reshaped(loss->shape().static_dims()), false);
  contrib[loss].push_back(seed);
  g.loss_seed = seed;

  std::unordered_set<const Value*> is_final;  // values already the final gradient of some value
  auto finalize = [&](const Value* v) -> Value* {
    auto it = final_grad.find(v);
    if (it != final_grad.end()) return it->second;
    auto c = contrib.find(v);
    if (c == contrib.end() || c->second.empty()) return final_grad[v] = nullptr;
    std::vector<Value*>& parts = c->second;
    Value* sum = parts[0];
    for (size_t k = 1; k < parts.size(); ++k) {
      std::string name = g.unique_name(str_cat(v->name(), ".grad.sum", k));
      Node* add = g.add_node("Add", {sum, parts[k]}, {name});
      infer_node(*add);
      sum = add->output(0);
    }
    // Give the final gradient its forward-derived name where it is a fresh backward value.
    std::string want = v->name() + ".grad";
    if (sum->kind() == ValueKind::kNode && sum != seed && !is_final.count(sum) && !g.has_value(want))
      g.rename_value(sum, want);
    is_final.insert(sum);
    return final_grad[v] = sum;
  };

  for (auto it = nodes.rbegin(); it != nodes.rend(); ++it) {
    Node* n = *it;
    if (!needed.count(n)) continue;
    std::vector<Value*> gouts;
    bool any = false;
    for (Value* o : n->outputs()) {
      Value* go = o ? finalize(o) : nullptr;
      gouts.push_back(go);
      any |= go != nullptr;
    }
    if (!any) continue;
    std::vector<bool> needs;
    for (Value* in : n->inputs()) needs.push_back(in && requires_grad.count(in) && is_float(in->dtype()));
    GradContext ctx(g, *n, gouts, needs);
    table.get(*n).grad(ctx);
    for (int i = 0; i < n->num_inputs(); ++i)
      if (Value* gi = ctx.grad_input(i)) contrib[n->input(i)].push_back(gi);
  }

  // 5. One output per target.
  for (Value* p : targets) {
    Value* gp = finalize(p);
    if (!gp) {
      ++res.zero_grads;
      std::string name = g.unique_name(p->name() + ".grad.zero");
      Tensor z(p->dtype(), p->shape().rank_known && p->shape().is_static() ? p->shape().static_dims() : std::vector<int64_t>{});
      gp = g.add_initializer(name, z, false);
    }
    if (gp == seed || gp->kind() != ValueKind::kNode) {
      // Keep graph outputs distinct values produced by nodes (the seed or a zero constant).
      std::string name = g.unique_name(p->name() + ".grad");
      Node* id = g.add_node("Identity", {gp}, {name});
      infer_node(*id);
      gp = id->output(0);
    }
    g.add_output(gp);
    if (p->kind() == ValueKind::kInitializer) g.gradients.emplace_back(p, gp);
    res.params.push_back(p->name());
    res.grads.push_back(gp->name());
  }
  res.backward_nodes = static_cast<int64_t>(g.nodes().size() - nodes_before);
  return res;
}

std::string AutodiffPass::summary() const {
  return "build the backward graph from the loss to every trainable parameter";
}

std::vector<PassOption> AutodiffPass::options() const {
  return {
      {"loss", PassOption::Type::kString, "loss", "name of the scalar loss value", {}},
      {"freeze", PassOption::Type::kString, "", "parameter name globs that get no gradient (';'-separated)", {}},
      {"wrt", PassOption::Type::kString, "", "graph inputs to differentiate as well (';'-separated)", {}},
  };
}

void AutodiffPass::run(Graph& g, PassContext&) {
  reset_counters();
  AutodiffOptions o;
  o.loss = opts_.get_string("loss", "loss");
  o.freeze = split_list(opts_.get_string("freeze", ""));
  o.wrt = split_list(opts_.get_string("wrt", ""));
  AutodiffResult r = autodiff(g, o);
  count("params", static_cast<int64_t>(r.params.size()));
  count("backward_nodes", r.backward_nodes);
  count("zero_grads", r.zero_grads);
}

}  // namespace otter
