// otter-train's training loop and data-parallel set-up (see train_loop.h).
#include "tools/train_loop.h"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstring>

#include "passes/options.h"
#include "runtime/json.h"

namespace otter {

namespace {

// Every rank evaluates (its share: the evaluation is a collective); rank 0 alone prints.
void print_progress(const std::string& where, const StepResult& last, const Interval& iv, TrainingSession& s,
                    const Dataset* eval) {
  std::printf("%s  step %" PRId64 "  loss %.4f  lr %.3g  %.0f samples/s", where.c_str(), last.step,
              iv.loss_sum / std::max<int64_t>(iv.steps, 1), last.lr, iv.samples / std::max(iv.seconds, 1e-9));
  if (last.loss_scale != 1) std::printf("  scale %g", last.loss_scale);
  if (iv.skipped) std::printf("  skipped %" PRId64, iv.skipped);
  if (eval) {
    EvalResult e = s.evaluate(*eval);
    std::printf("  eval loss %.4f", e.loss);
    if (e.has_accuracy) std::printf("  eval accuracy %.2f%%", 100 * e.accuracy);
  }
  std::printf("\n");
  std::fflush(stdout);
}

}  // namespace

void TrainLoop::run(TrainingSession& s, DataLoader& loader, StepLog& log, StepPeak& peak) const {
  Interval iv;
  while (s.steps_taken() < total) {
    auto batch = loader.next();  // the global batch: the same on every rank
    peak.begin_step();
    auto t0 = std::chrono::steady_clock::now();
    StepResult r = s.train_step(dist.size > 1 ? rank_shard(batch, dist.rank, dist.size) : batch);
    double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const int64_t step_peak = peak.end_step(s.device());
    log.write(r, loader.state().epoch, static_cast<double>(global) / std::max(secs, 1e-9), step_peak);
    if (nonfinite) nonfinite->observe(r);
    iv.loss_sum += r.loss;
    iv.seconds += secs;
    iv.samples += global;
    iv.skipped += r.skipped;
    ++iv.steps;
    const bool epoch_end = loader.state().position == per_epoch, done = r.step == total;
    if (log_every ? r.step % log_every == 0 || done : epoch_end) {
      std::string where = log_every ? "train" : str_cat("epoch ", loader.state().epoch + 1, "/", epochs);
      print_progress(where, r, iv, s, eval);
      iv = Interval();
    }
    if (!save_dir.empty() && (epoch_end || done)) s.save(save_dir, loader.state());
  }
}

std::vector<cli::FlagSpec> distributed_flags() {
  return {
      {"distributed", true, "auto|mpi|off: join the MPI job mpirun started (auto: when launched by mpirun)", "MODE"},
      {"comm-timeout", true, "seconds a collective may wait for the other ranks before failing (default 300)", "S"},
      {"bucket", true, "bytes of gradients per all-reduce under mpirun (default 25MiB)", "BYTES"},
  };
}

DistributedInfo join_job(const cli::Args& args, TrainingOptions& o) {
  const DistributedMode mode = parse_distributed_mode(args.get("distributed", "auto"));
  const double timeout = args.get_float("comm-timeout", 300);
  if (!(timeout > 0 && timeout <= 1e6)) fail("--comm-timeout must be in (0, 1e6] seconds, got ", args.get("comm-timeout"));
  if (args.has("bucket")) {
    const std::string why = option_codec::parse(args.get("bucket"), o.pipeline.all_reduce.bucket);
    if (!why.empty() || o.pipeline.all_reduce.bucket.bytes <= 0)
      fail("--bucket must be a positive size such as 4MiB, got '", args.get("bucket"), "'", why.empty() ? "" : ": ", why);
  }
  DistributedInfo d = init_distributed(mode, timeout);
  if (d.size > 1) {
    o.pipeline.all_reduce.world = d.size;
    if (d.rank != 0 && !std::freopen("/dev/null", "w", stdout)) fail("rank ", d.rank, ": cannot silence standard output");
  }
  return d;
}

void check_global_batch(const DistributedInfo& d, const TrainingOptions& o, int64_t samples, const std::string& path) {
  if (d.size == 1) return;  // one process: the data loader says so itself
  const int64_t k = o.pipeline.accum, b = o.batch_size, global = d.size * k * b;
  OTTER_CHECK(samples >= global, path, " has ", samples, " samples, fewer than one global batch of N*K*b = ", d.size,
              "*", k, "*", b, " = ", global, " (ranks x --accum x --batch-size)");
}

}  // namespace otter
