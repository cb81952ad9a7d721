// otter-train's memory flags: --recompute (passes/recompute.h) and the budget planner
// (--global-batch, --memory-budget, --explain; runtime/memory_budget.h). The measured peak per step
// is recorded by the training loop (tools/train_loop.h: StepPeak, StepLog).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "runtime/training_session.h"
#include "tools/cli.h"

namespace otter {

// --recompute, for train and grad.
cli::FlagSpec recompute_flag();
void read_recompute_flag(const cli::Args& args, TrainingPipelineOptions& p);

// --global-batch, --memory-budget, --explain (train only).
std::vector<cli::FlagSpec> budget_flags();
// With --memory-budget: plans b, K and the policy for --global-batch (or, with --recompute auto
// and no --global-batch, only the policy for the given b and K), prints the choice (and the table
// with --explain), and sets them in `o`; fails naming the smallest budget that fits when nothing
// does. Without it: checks that --global-batch, --explain and --recompute auto are not given alone.
void apply_memory_budget(const cli::Args& args, const std::string& model, TrainingOptions& o);

}  // namespace otter
