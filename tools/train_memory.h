// otter-train's memory flags: --recompute (passes/recompute.h), the budget planner
// (--global-batch, --memory-budget, --explain; runtime/memory_budget.h), and the measured peak of
// live tensors per step (--log-json's peak_bytes) against the planned one.
#pragma once

#include <cstdint>
#include <fstream>
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

// The measured peak of live tensors per step: host tensors on the CPU (counted from the moment the
// session is about to be made, so data sets loaded before are left out), the allocator's peak on CUDA.
class StepPeak {
 public:
  StepPeak();  // records the live bytes before the session
  void begin_step();
  int64_t end_step(const Device& d);  // this step's peak; also kept as the run's peak
  int64_t run_peak() const { return run_peak_; }

 private:
  int64_t baseline_ = 0, run_peak_ = 0;
};

// One JSON object per optimizer step (--log-json), with the step's measured peak_bytes.
class StepLog {
 public:
  explicit StepLog(const std::string& path);
  void write(const StepResult& r, int64_t epoch, double samples_per_s, int64_t peak_bytes);

 private:
  std::ofstream out_;
};

// "memory: planned peak X (N bytes), measured peak Y (M bytes)", the run's last line.
std::string peak_summary(const TrainingSession& s, int64_t measured);

}  // namespace otter
