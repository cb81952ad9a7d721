// Planned memory of a training graph and the budget planner (see memory_budget.h).
#include "runtime/memory_budget.h"

#include <cstdio>
#include <sstream>

#include "graph/error.h"
#include "graph/graph_stats.h"
#include "graph/liveness.h"

namespace otter {

std::string mib_text(int64_t bytes) {
  char b[32];
  std::snprintf(b, sizeof b, "%.1f MiB", static_cast<double>(bytes) / (1024.0 * 1024.0));
  return b;
}

PlannedMemory planned_memory(const Graph& g) {
  GraphStats s = compute_graph_stats(g);
  OTTER_CHECK(s.unbound.empty() && s.activation_peak_bytes >= 0,
              "memory planning needs static shapes (the batch size fixed)");
  PlannedMemory m;
  m.persistent = resident_param_bytes(s) + s.constants.bytes + s.accumulators.bytes + s.optimizer_state.bytes +
                 s.half_copies.bytes + s.loss_scale.bytes + s.model_state.bytes;
  for (const auto& [p, plan] : g.memory_plans) m.arenas += plan.arena_bytes;
  if (g.memory_plans.empty()) m.arenas = s.activation_peak_bytes;
  for (const Node* n : program_nodes(g, Program::kMicroStep)) {
    ++m.nodes;
    for (const Value* o : n->outputs()) {
      if (!o || !o->shape().is_static()) continue;
      auto it = g.memory_plans.find(Program::kMicroStep);
      bool planned = it != g.memory_plans.end() && it->second.buffers.count(o->name());
      bool state = false;
      for (const auto& [st, u] : g.state_updates) state |= u == o;
      if (!planned && !state && o->is_graph_output()) m.workspace += value_bytes(o);
    }
  }
  m.inputs = s.inputs.bytes;
  m.micro_flops = s.forward_flops + s.backward_flops;
  m.apply_flops = s.apply_flops;
  return m;
}

BudgetPlan plan_budget(const std::string& model_path, const TrainingOptions& base, int64_t g, int64_t budget,
                       int64_t only_b) {
  OTTER_CHECK(g >= 1, "--global-batch must be >= 1, got ", g);
  OTTER_CHECK(budget >= 1, "--memory-budget must be positive, got ", budget);
  BudgetPlan p;
  p.global_batch = g;
  p.budget = budget;
  p.smallest_fit = -1;
  for (int64_t b = g; b >= 1; --b) {
    if (g % b || (only_b > 0 && b != only_b)) continue;
    for (RecomputePolicy policy : {RecomputePolicy::kNone, RecomputePolicy::kCheap, RecomputePolicy::kLayers}) {
      TrainingOptions o = base;
      o.batch_size = b;
      o.pipeline.accum = g / b;
      o.pipeline.recompute = RecomputeOptions{};
      o.pipeline.recompute.policy = policy;
      std::unique_ptr<Graph> graph = build_training_graph(model_path, o);
      PlannedMemory m = planned_memory(*graph);
      BudgetCandidate c;
      c.b = b;
      c.k = g / b;
      c.policy = policy;
      c.planned_bytes = m.total(c.k);
      c.arena_bytes = m.arenas;
      c.cost = static_cast<double>(c.k) * (static_cast<double>(m.micro_flops) + kLaunchFlops * m.nodes) +
               static_cast<double>(m.apply_flops);
      c.fits = c.planned_bytes <= budget;
      if (p.smallest_fit < 0 || c.planned_bytes < p.smallest_fit) p.smallest_fit = c.planned_bytes;
      if (c.fits && (!p.chosen || c.cost < p.candidates[*p.chosen].cost)) p.chosen = p.candidates.size();
      p.candidates.push_back(c);
    }
  }
  return p;
}

std::string explain_budget(const BudgetPlan& p) {
  std::ostringstream os;
  os << "candidates for global batch " << p.global_batch << " within " << mib_text(p.budget)
     << " (planned peak = parameters + constants + gradients + optimizer state + arenas + workspace + inputs):\n";
  char line[160];
  std::snprintf(line, sizeof line, "  %6s %4s %-7s %12s %12s %14s  %s\n", "b", "K", "policy", "planned", "arenas",
                "cost (GFLOP)", "fits");
  os << line;
  for (size_t i = 0; i < p.candidates.size(); ++i) {
    const BudgetCandidate& c = p.candidates[i];
    std::snprintf(line, sizeof line, "  %6lld %4lld %-7s %12s %12s %14.2f  %s%s\n", static_cast<long long>(c.b),
                  static_cast<long long>(c.k), enum_name(c.policy).c_str(), mib_text(c.planned_bytes).c_str(),
                  mib_text(c.arena_bytes).c_str(), c.cost / 1e9, c.fits ? "yes" : "no",
                  p.chosen && *p.chosen == i ? "  <- chosen" : "");
    os << line;
  }
  return os.str();
}

std::string budget_choice_text(const BudgetPlan& p) {
  if (!p.chosen)
    return str_cat("nothing fits in ", mib_text(p.budget), " (", p.budget, " bytes) for global batch ", p.global_batch,
                   ": the smallest planned peak is ", mib_text(p.smallest_fit), " (", p.smallest_fit,
                   " bytes); give --memory-budget ", p.smallest_fit, " or more");
  const BudgetCandidate& c = p.candidates[*p.chosen];
  return str_cat("memory budget ", mib_text(p.budget), ": b=", c.b, " K=", c.k, " recompute=", enum_name(c.policy),
                 ", planned peak ", mib_text(c.planned_bytes), " (", c.planned_bytes, " bytes)");
}

}  // namespace otter
