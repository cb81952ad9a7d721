// Memory figures of a training graph and the budget planner: given a global batch G and a memory
// budget, choose the micro-batch b (a divisor of G), K = G / b and the recomputation policy
// (passes/recompute.h) with the best expected throughput whose planned peak fits.
//
// The planned peak of a step is read off the training graph the session would run
// (build_training_graph, runtime/training_session.h), after its memory plan: parameters and other
// constants, gradient accumulators, optimizer state, half copies and loss scale, model state, the
// micro-step and apply arenas (passes/memory_plan.h), the unplanned values of the micro-step program
// (graph outputs such as the logits: workspace) and the global batch's inputs (K micro-batches).
//
// Expected cost of a step (lower is better), a model and not a measurement: the FLOPs of K
// micro-steps (graph/graph_stats.h's estimate, recomputation included) plus the apply program's,
// plus a fixed cost per kernel launch of kLaunchFlops FLOP-equivalents (small micro-batches pay
// it K times). Candidates are tried for every divisor b of G and every policy none, cheap, layers.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "graph/ir.h"
#include "passes/recompute.h"
#include "runtime/training_session.h"

namespace otter {

// Planned bytes of one optimizer step of a training graph (static shapes, memory plan run).
struct PlannedMemory {
  int64_t persistent = 0;   // parameters, constants, accumulators, optimizer state, half copies, model state
  int64_t arenas = 0;       // micro-step + apply arenas
  int64_t workspace = 0;    // unplanned micro-step values (graph outputs, dynamic shapes)
  int64_t inputs = 0;       // one micro-batch's inputs
  int64_t micro_flops = 0;  // forward + backward FLOPs of one micro-step
  int64_t apply_flops = 0;
  int64_t nodes = 0;  // micro-step kernels per micro-step
  int64_t total(int64_t k) const { return persistent + arenas + workspace + k * inputs; }
};
PlannedMemory planned_memory(const Graph& g);

struct BudgetCandidate {
  int64_t b = 0, k = 0;
  RecomputePolicy policy = RecomputePolicy::kNone;
  int64_t planned_bytes = 0;
  int64_t arena_bytes = 0;
  double cost = 0;  // expected cost of a step, in FLOP-equivalents
  bool fits = false;
};

struct BudgetPlan {
  int64_t global_batch = 0, budget = 0;
  std::vector<BudgetCandidate> candidates;  // b descending, then none, cheap, layers
  std::optional<size_t> chosen;             // the fitting candidate of least cost
  int64_t smallest_fit = 0;                 // least planned_bytes over all candidates
};

constexpr double kLaunchFlops = 2e5;

// Plans `base` (its batch size, accum and recompute are replaced) for global batch `g`; `only_b` > 0
// considers that micro-batch only (the policy is then all that is chosen).
BudgetPlan plan_budget(const std::string& model_path, const TrainingOptions& base, int64_t g, int64_t budget,
                       int64_t only_b = 0);
// The table of candidates (--explain), one line each, the chosen one marked.
std::string explain_budget(const BudgetPlan& p);
// "b=16 K=4 policy=layers: planned 300.0 MiB of 512 MiB" or the refusal naming the smallest budget.
std::string budget_choice_text(const BudgetPlan& p);
// "12.5 MiB".
std::string mib_text(int64_t bytes);

}  // namespace otter
