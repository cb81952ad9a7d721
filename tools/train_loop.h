// otter-train's training loop: steps until the end, progress lines, one JSON object per step
// (--log-json) with its measured peak of live tensors, checkpoints at epoch ends; and the flags and set-up of a data-parallel run
// (--distributed, --comm-timeout, --bucket, --zero), under mpirun: every rank draws the same global batch of
// N*K*b samples and trains on its own K*b of them; rank 0 alone prints, logs, checkpoints and exports.
#pragma once

#include <fstream>
#include <string>
#include <vector>

#include "runtime/dataset.h"
#include "runtime/distributed.h"
#include "runtime/nonfinite.h"
#include "runtime/training_session.h"
#include "tools/cli.h"

namespace otter {

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

// Progress between two printed lines.
struct Interval {
  double loss_sum = 0, seconds = 0;
  int64_t steps = 0, samples = 0, skipped = 0;
};

// The training loop: steps until `total`, progress lines, per-step JSON, checkpoints at epoch ends.
struct TrainLoop {
  int64_t total, per_epoch, epochs, global;
  std::string save_dir;   // empty: no checkpoints (every rank saves; rank 0 writes)
  const Dataset* eval;    // null: no evaluation
  int64_t log_every = 0;  // 0: one line per epoch
  NonFiniteMonitor* nonfinite = nullptr;
  DistributedInfo dist;   // the rank trains on its share of each global batch

  void run(TrainingSession& s, DataLoader& loader, StepLog& log, StepPeak& peak) const;
};

// --distributed, --comm-timeout, --bucket, --zero.
std::vector<cli::FlagSpec> distributed_flags();
// Joins the job the flags and the environment describe (runtime/distributed.h) and, with N > 1
// ranks, sets the all-reduce pass's options. On ranks other than 0, standard output goes to
// /dev/null from here on: rank 0 alone prints (errors still reach standard error, with the rank).
DistributedInfo join_job(const cli::Args& args, TrainingOptions& o);
// With N > 1 ranks, fails unless a global batch of N*K*b samples fits the data set at least once.
void check_global_batch(const DistributedInfo& d, const TrainingOptions& o, int64_t samples, const std::string& path);

}  // namespace otter
