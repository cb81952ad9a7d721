// otter-train's memory flags (see train_memory.h).
#include "tools/train_memory.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <iostream>

#include "graph/error.h"
#include "graph/tensor.h"
#include "passes/options.h"
#include "runtime/json.h"
#include "runtime/memory_budget.h"

namespace otter {

cli::FlagSpec recompute_flag() {
  return {"recompute", true,
          "none|cheap|layers|auto: recompute activations in the backward pass instead of keeping them "
          "(default none; auto needs --memory-budget)",
          "POLICY"};
}

void read_recompute_flag(const cli::Args& args, TrainingPipelineOptions& p) {
  p.recompute.policy = args.get_enum("recompute", RecomputePolicy::kNone);
}

std::vector<cli::FlagSpec> budget_flags() {
  return {
      {"global-batch", true, "with --memory-budget: samples per optimizer step G; b | G and K = G/b are chosen", "G"},
      {"memory-budget", true, "choose b, K and --recompute so the planned peak fits SIZE (bytes, or 512MiB, 2GiB, ...)",
       "SIZE"},
      {"explain", false, "with --memory-budget: print every candidate (b, K, policy) considered"},
  };
}

namespace {

int64_t read_size(const cli::Args& args, const std::string& flag) {
  ByteSize s;
  std::string err = option_codec::parse(args.get(flag), s);
  if (!err.empty()) fail("--", flag, " ", err, ", got '", args.get(flag), "'");
  if (s.bytes <= 0) fail("--", flag, " must be positive, got '", args.get(flag), "'");
  return s.bytes;
}

}  // namespace

void apply_memory_budget(const cli::Args& args, const std::string& model, TrainingOptions& o) {
  if (!args.has("memory-budget")) {
    if (args.has("global-batch")) fail("--global-batch needs --memory-budget (or give --batch-size and --accum)");
    if (args.has("explain")) fail("--explain needs --memory-budget");
    if (o.pipeline.recompute.policy == RecomputePolicy::kAuto) fail("--recompute auto needs --memory-budget");
    return;
  }
  const bool policy_only = !args.has("global-batch");
  if (policy_only && o.pipeline.recompute.policy != RecomputePolicy::kAuto)
    fail("--memory-budget needs --global-batch G (or --recompute auto to choose only the policy)");
  for (const char* f : {"batch-size", "accum", "recompute"})
    if (!policy_only && args.has(f)) fail("--memory-budget with --global-batch chooses --", f, " itself; leave it out");
  const int64_t g = policy_only ? o.batch_size * o.pipeline.accum : args.get_int("global-batch", 0);
  if (g < 1) fail("--global-batch must be >= 1, got '", args.get("global-batch"), "'");
  const int64_t budget = read_size(args, "memory-budget");
  BudgetPlan plan = plan_budget(model, o, g, budget, policy_only ? o.batch_size : 0);
  if (args.has("explain")) std::printf("%s", explain_budget(plan).c_str());
  if (!plan.chosen) fail(budget_choice_text(plan));
  std::printf("%s\n", budget_choice_text(plan).c_str());
  const BudgetCandidate& c = plan.candidates[*plan.chosen];
  o.batch_size = c.b;
  o.pipeline.accum = c.k;
  o.pipeline.recompute.policy = c.policy;
}

}  // namespace otter
