// otter-train's training loop and data-parallel set-up (see train_loop.h).
#include "tools/train_loop.h"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstring>

#include "graph/tensor.h"
#include "passes/options.h"
#include "runtime/json.h"
#include "runtime/memory_budget.h"

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
    // Every rank saves (ZeRO-1 gathers the optimizer-state shards); rank 0 alone writes.
    if (!save_dir.empty() && (epoch_end || done)) s.save(save_dir, loader.state());
  }
}

std::vector<cli::FlagSpec> distributed_flags() {
  return {
      {"distributed", true, "auto|mpi|off: join the MPI job mpirun started (auto: when launched by mpirun)", "MODE"},
      {"comm-timeout", true, "seconds a collective may wait for the other ranks before failing (default 300)", "S"},
      {"bucket", true, "bytes of gradients per all-reduce under mpirun (default 25MiB)", "BYTES"},
      {"zero", true,
       "0|1: ZeRO stage under mpirun; 1: reduce-scatter, each rank keeps 1/N of the optimizer state "
       "(default 0; no effect in one process)",
       "STAGE"},
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
  if (args.has("zero")) {
    const std::string z = args.get("zero");
    if (z != "0" && z != "1") fail("--zero must be 0 or 1, got '", z, "'");
    o.pipeline.all_reduce.zero = z == "1";
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

StepPeak::StepPeak() : baseline_(host_live_bytes()) {}

void StepPeak::begin_step() { reset_host_peak_bytes(); }

int64_t StepPeak::end_step(const Device& d) {
  const int64_t peak =
      d.type() == DeviceType::kCpu ? host_peak_bytes() - baseline_ : static_cast<int64_t>(d.peak_bytes());
  run_peak_ = std::max(run_peak_, peak);
  return peak;
}

StepLog::StepLog(const std::string& path) {
  if (path.empty()) return;
  out_.open(path, std::ios::trunc);
  if (!out_) fail("--log-json: cannot write '", path, "': ", std::strerror(errno));
}

void StepLog::write(const StepResult& r, int64_t epoch, double samples_per_s, int64_t peak_bytes) {
  if (!out_.is_open()) return;
  out_ << JsonObject()
              .add("step", r.step)
              .add("epoch", epoch)
              .add("loss", r.loss)
              .add("lr", static_cast<float>(r.lr))  // the float32 values the graph used
              .add("loss_scale", static_cast<float>(r.loss_scale))
              .add("skipped", r.skipped)
              .add("samples_per_s", samples_per_s)
              .add("peak_bytes", peak_bytes)
              .str()
       << "\n";
  out_.flush();
}

std::string peak_summary(const TrainingSession& s, int64_t measured) {
  const int64_t planned = planned_memory(s.graph()).total(s.accumulation_steps());
  return str_cat("memory: planned peak ", mib_text(planned), " (", planned, " bytes), measured peak ",
                 mib_text(measured), " (", measured, " bytes)");
}

}  // namespace otter
