// otter-train's training loop: steps until the end, progress lines, one JSON object per step
// (--log-json, tools/train_memory.h), checkpoints at epoch ends; and the flags and set-up of a data-parallel run
// (--distributed, --comm-timeout, --bucket), under mpirun: every rank draws the same global batch of
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
#include "tools/train_memory.h"

namespace otter {

// Progress between two printed lines.
struct Interval {
  double loss_sum = 0, seconds = 0;
  int64_t steps = 0, samples = 0, skipped = 0;
};

// The training loop: steps until `total`, progress lines, per-step JSON, checkpoints at epoch ends.
struct TrainLoop {
  int64_t total, per_epoch, epochs, global;
  std::string save_dir;   // empty: no checkpoints
  const Dataset* eval;    // null: no evaluation
  int64_t log_every = 0;  // 0: one line per epoch
  NonFiniteMonitor* nonfinite = nullptr;
  DistributedInfo dist;   // the rank trains on its share of each global batch

  void run(TrainingSession& s, DataLoader& loader, StepLog& log, StepPeak& peak) const;
};

// --distributed, --comm-timeout, --bucket.
std::vector<cli::FlagSpec> distributed_flags();
// Joins the job the flags and the environment describe (runtime/distributed.h) and, with N > 1
// ranks, sets the all-reduce pass's options. On ranks other than 0, standard output goes to
// /dev/null from here on: rank 0 alone prints (errors still reach standard error, with the rank).
DistributedInfo join_job(const cli::Args& args, TrainingOptions& o);
// With N > 1 ranks, fails unless a global batch of N*K*b samples fits the data set at least once.
void check_global_batch(const DistributedInfo& d, const TrainingOptions& o, int64_t samples, const std::string& path);

}  // namespace otter
