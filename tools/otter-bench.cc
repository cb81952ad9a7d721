// otter-bench: train-step time and peak memory of a model, optionally side by side with PyTorch
// eager on the same weights, batches, optimizer, precision and thread count (one invocation, so
// both run on the same machine at the same time of day; compare the ratio, not the milliseconds).
// Under `mpirun -np N` each rank times its data-parallel steps and rank 0 reports the communication
// share; `--ranks N` runs that job itself against one process with the same global batch (bench_dp.h).
#include <omp.h>
#include <sys/resource.h>
#include <sys/wait.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <limits>
#include <optional>
#include <sstream>
#include <unistd.h>

#include "graph/error.h"
#include "graph/graph_stats.h"
#include "kernels/cpu/blas_core.h"
#include "runtime/distributed.h"
#include "runtime/json.h"
#include "runtime/memory_budget.h"
#include "runtime/npz.h"
#include "runtime/training_session.h"
#include "tools/bench_dp.h"
#include "tools/bench_models.h"
#include "tools/cli.h"
#include "tools/pass_switches.h"
#include "tools/peak_flops.h"

extern "C" void openblas_set_num_threads(int);

using namespace otter;
namespace fs = std::filesystem;

namespace {

const char* kUsage =
    "usage: otter-bench MODEL [options]\n"
    "\n"
    "Times optimizer steps of MODEL (median and spread over --steps steps after --warmup) and reports\n"
    "peak memory. MODEL is a path to an .onnx file or one of the benchmark models: mlp, cnn, gpt,\n"
    "resnet18, gpt_large (models/bench/README.md), or 'all'; or zoo:NAME, the zoo transformer\n"
    "models/zoo/NAME/NAME_op17.onnx (bert, distilbert, roberta, gpt2, llama), or 'zoo' for all five.\n"
    "Batches are seeded random inputs and labels (floats in [0, 1), token ids in [0, the embedding's\n"
    "rows), masks of ones, labels in [0, classes)); with --vs-torch the same batches train the PyTorch\n"
    "module the model was exported from (models/bench/torch_bench.py) in the same invocation and the\n"
    "ratio is printed; --vs-ort also takes zoo and .onnx models (ONNX Runtime Training then trains\n"
    "otter's own parameter list; PyTorch is not run for them). Under mpirun -np N (or with --ranks N)\n"
    "the step is data-parallel and the communication share is reported.\n"
    "\n"
    "options:\n";

struct Timing {
  double median = 0, min = 0, max = 0;
};

Timing summarize(std::vector<double> ms) {
  std::sort(ms.begin(), ms.end());
  size_t n = ms.size();
  double median = n % 2 ? ms[n / 2] : 0.5 * (ms[n / 2 - 1] + ms[n / 2]);
  return {median, ms.front(), ms.back()};
}

int64_t peak_rss_bytes() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<int64_t>(u.ru_maxrss) * 1024;
}

// One framework's figures.
struct Result {
  std::string framework, device;
  Timing ms;
  int64_t peak_bytes = 0, peak_rss_bytes = 0;
  // otter: the micro-step arena (planned activations) and the largest transient allocation on top of
  // what was live when the timed steps began; activations measured = arena + transient.
  int64_t arena_bytes = 0, transient_bytes = 0;
  double final_loss = 0;
  std::optional<GraphStats> plan;  // otter's training graph: its planned memory by role
  int64_t flops_per_step = -1;     // otter's FLOP estimate of one optimizer step (-1: unknown)
  double comm_ms = 0;              // data-parallel: per step inside collectives (bench_dp.h)
  std::vector<std::string> params;  // otter: the trainable parameters (TrainingSession::parameter_names)
};

struct Settings {
  int64_t batch, accum, steps, warmup, threads;
  std::string precision, optimizer, device;
  double lr;
  bool profile = false;
  PeakFlops peak;    // the machine's GEMM peak for this precision and thread count (cpu only)
  LoraOptions lora;  // fine-tune adapters when lora.targets is set
  RecomputePolicy recompute = RecomputePolicy::kNone;
  int64_t ranks = 1, zero = 0;  // the data-parallel job this process is a rank of (mpirun), ZeRO stage
  // The pass switches (--fuse-attention, --fuse-bias-gelu, --fuse-add-layernorm, --fold-transpose on|off,
  // tools/pass_switches.h); every other field the defaults the runs start from.
  TrainingPipelineOptions pipeline;
};

// Planned memory of a training graph by role (graph/graph_stats.h): parameters (trainable and
// frozen), other constants, gradient accumulators, optimizer state, half copies and loss scale,
// and the activations (the micro-step arena where memory-plan ran, else the liveness peak).
void print_plan(const GraphStats& g, int64_t measured) {
  const int64_t acts = g.memory_plans.empty() ? g.activation_peak_bytes : g.memory_plans[0].arena_bytes;
  const int64_t other = g.constants.bytes - g.frozen_params.bytes;
  const int64_t total = resident_param_bytes(g) + g.constants.bytes + g.accumulators.bytes + g.optimizer_state.bytes +
                        g.half_copies.bytes + g.loss_scale.bytes + g.model_state.bytes + acts;
  auto kib = [](int64_t b) { return str_cat(b / 1024, " KiB"); };
  std::printf("  memory planned %s: parameters trainable %s + frozen %s, other constants %s, gradients %s, "
              "optimizer state %s, half copies %s, activations %s; measured peak %s\n",
              kib(total).c_str(), kib(g.trainable_params.bytes).c_str(), kib(g.frozen_params.bytes).c_str(),
              kib(other).c_str(), kib(g.accumulators.bytes).c_str(), kib(g.optimizer_state.bytes).c_str(),
              kib(g.half_copies.bytes + g.loss_scale.bytes).c_str(), kib(acts).c_str(), kib(measured).c_str());
  const int64_t all = g.trainable_params.elements + g.frozen_params.elements;
  std::printf("  trainable parameters: %lld of %lld (%.2f%%)\n", static_cast<long long>(g.trainable_params.elements),
              static_cast<long long>(all), all ? 100.0 * g.trainable_params.elements / all : 0.0);
}

// The timed steps' kernel time by op type, largest first (--profile).
void print_profile(const OpProfile& prof, int64_t steps, double step_ms) {
  std::vector<std::pair<std::string, OpProfile::Entry>> rows(prof.by_op.begin(), prof.by_op.end());
  std::sort(rows.begin(), rows.end(), [](const auto& a, const auto& b) { return a.second.ms > b.second.ms; });
  double total = 0;
  for (const auto& r : rows) total += r.second.ms;
  std::printf("  kernel time per step by op (%.2f ms of %.2f ms/step in kernels):\n", total / steps, step_ms);
  for (const auto& [op, e] : rows) {
    if (e.ms / total < 0.005) break;
    std::printf("    %-28s %8.3f ms  %5.1f%%  %5lld calls\n", op.c_str(), e.ms / steps, 100 * e.ms / total,
                static_cast<long long>(e.calls / steps));
  }
}

// FLOPs of one optimizer step from the graph statistics (graph/graph_stats.h): accum micro-steps of
// forward and backward at the micro-batch, then the apply program; -1 where a part is unknown.
int64_t step_flops(const Graph& g, const Settings& st) {
  DimBindings b;
  for (const Value* v : g.inputs())
    if (v->shape().rank_known && v->shape().rank() > 0 && v->shape().dims[0].is_symbolic())
      b[v->shape().dims[0].symbol] = st.batch;
  GraphStats s = compute_graph_stats(g, b);
  if (s.forward_flops < 0 || s.backward_flops < 0 || s.apply_flops < 0) return -1;
  return (s.forward_flops + s.backward_flops) * st.accum + s.apply_flops;
}

Result bench_otter(const BenchModel& m, const Settings& st, const std::string& data_path) {
  TrainingOptions o;
  o.batch_size = st.batch;
  o.pipeline = st.pipeline;
  o.pipeline.accum = st.accum;
  o.pipeline.precision = parse_enum<Precision>(st.precision, "precision");
  o.pipeline.optimizer.type = parse_enum<OptimizerType>(st.optimizer, "optimizer");
  o.pipeline.optimizer.lr = st.lr;
  o.pipeline.lora = st.lora;
  o.pipeline.recompute.policy = st.recompute;
  o.device = st.device;
  if (st.ranks > 1) o.pipeline.all_reduce = {st.ranks, o.pipeline.all_reduce.bucket, st.zero};
  auto session = TrainingSession::create(m.path, o);
  const int64_t per_step = session->global_batch();
  // Four distinct global batches, cycled (each rank its own).
  auto data = random_samples(*session, per_step * 4, 1 + static_cast<uint64_t>(distributed_info().rank));
  write_npz(data_path, std::vector<std::pair<std::string, Tensor>>(data.begin(), data.end()));
  reset_host_peak_bytes();
  const int64_t live_before = host_live_bytes();
  std::vector<double> ms;
  Result r{"otter", session->device().describe()};
  OpProfile::global().enabled = st.profile;
  OpProfile::global().reset();
  double comm_before = 0;
  for (int64_t s = 0; s < st.warmup + st.steps; ++s) {
    if (s == st.warmup) comm_before = comm_seconds();
    auto batch = rows(data, (s % 4) * per_step, per_step);
    auto t0 = std::chrono::steady_clock::now();
    r.final_loss = session->train_step(batch).loss;  // returns after the step's metrics reached the host
    auto t1 = std::chrono::steady_clock::now();
    if (s >= st.warmup) ms.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
    if (st.profile && s + 1 == st.warmup) OpProfile::global().reset();
  }
  r.ms = summarize(ms);
  r.comm_ms = 1000 * (comm_seconds() - comm_before) / static_cast<double>(st.steps);
  r.peak_bytes = static_cast<int64_t>(session->device().peak_bytes());
  r.peak_rss_bytes = peak_rss_bytes();
  r.plan = compute_graph_stats(session->graph());
  const auto& plans = session->graph().memory_plans;
  r.arena_bytes = plans.count(Program::kMicroStep) ? plans.at(Program::kMicroStep).arena_bytes : 0;
  if (session->device().type() == DeviceType::kCpu) r.transient_bytes = host_peak_bytes() - live_before;
  r.flops_per_step = step_flops(session->graph(), st);
  r.params = session->parameter_names();
  return r;
}

// Runs a Python benchmark script that prints one JSON object in torch_bench.py's fields.
Result run_python_bench(const std::string& cmd, const std::string& side) {
  const std::string out = run_child(cmd, "the " + side + " side");
  auto j = parse_flat_json(out, side + " output");
  auto num = [&](const char* k) { return std::stod(j.at(k)); };
  Result r{j.at("framework"), j.at("device")};
  r.ms = {num("ms_per_step"), num("ms_min"), num("ms_max")};
  r.peak_bytes = static_cast<int64_t>(num("peak_bytes"));
  r.peak_rss_bytes = static_cast<int64_t>(num("peak_rss_bytes"));
  r.final_loss = num("final_loss");
  return r;
}

Result bench_torch(const BenchModel& m, const Settings& st, const std::string& data_path, const std::string& root) {
  std::ostringstream cmd;
  cmd << "/usr/bin/python3 '" << root << "/models/bench/torch_bench.py' --model " << m.name << " --data '" << data_path
      << "' --batch " << st.batch << " --accum " << st.accum << " --steps " << st.steps << " --warmup " << st.warmup
      << " --threads " << st.threads << " --optimizer " << st.optimizer << " --lr " << st.lr << " --precision "
      << st.precision << " --device " << st.device;
  return run_python_bench(cmd.str(), "PyTorch");
}

// ONNX Runtime Training (models/bench/ort_bench.py) from the virtual environment that
// scripts/ort-venv.sh makes (and prints the python of). It trains the PyTorch module's parameters
// for a benchmark model, else the parameters in `params_path` (otter's, one name a line).
Result bench_ort(const BenchModel& m, const Settings& st, const std::string& data_path, const std::string& python,
                 const std::string& root, const std::string& params_path) {
  std::ostringstream cmd;
  cmd << "'" << python << "' '" << root << "/models/bench/ort_bench.py' ";
  if (m.torch) cmd << "--model " << m.name;
  else cmd << "--params '" << params_path << "'";
  cmd << " --onnx '" << m.path << "' --data '" << data_path << "' --batch " << st.batch << " --steps " << st.steps
      << " --warmup " << st.warmup << " --threads " << st.threads << " --lr " << st.lr;
  return run_python_bench(cmd.str(), "ONNX Runtime");
}

void print_row(const Result& r, bool with_plan = false) {
  std::printf("  %-16s %9.2f ms/step (min %.2f, max %.2f)  peak %s, process RSS %s\n", r.framework.c_str(),
              r.ms.median, r.ms.min, r.ms.max, mib_text(r.peak_bytes).c_str(), mib_text(r.peak_rss_bytes).c_str());
  if (r.plan && with_plan) print_plan(*r.plan, r.peak_bytes);
}

// --vs-recompute: the same model without recomputation, and the ratios of the activation peaks
// (planned: the micro-step arena; measured: arena + transient allocations) and of the step times.
void print_recompute_comparison(const BenchModel& m, const Settings& st, const std::string& data, const Result& mine) {
  Settings none = st;
  none.recompute = RecomputePolicy::kNone;
  Result base = bench_otter(m, none, data);
  auto line = [](const char* what, const Result& r) {
    std::printf("  %-18s %9.2f ms/step (min %.2f, max %.2f)  activations planned %s, measured %s  (peak %s, process "
                "RSS %s)\n", what, r.ms.median, r.ms.min, r.ms.max, mib_text(r.arena_bytes).c_str(), mib_text(r.arena_bytes + r.transient_bytes).c_str(),
                mib_text(r.peak_bytes).c_str(), mib_text(r.peak_rss_bytes).c_str());
  };
  line(("recompute " + enum_name(st.recompute)).c_str(), mine);
  line("recompute none", base);
  auto ratio = [](int64_t a, int64_t b) { return b > 0 ? static_cast<double>(a) / static_cast<double>(b) : 0.0; };
  std::printf("  none / %s activation peak: planned %.2fx, measured %.2fx; step time %s / none %.2fx\n",
              enum_name(st.recompute).c_str(), ratio(base.arena_bytes, mine.arena_bytes),
              ratio(base.arena_bytes + base.transient_bytes, mine.arena_bytes + mine.transient_bytes),
              enum_name(st.recompute).c_str(), mine.ms.median / base.ms.median);
}

// Achieved FLOP/s of a step and its fraction of the peak (NaN where either is unknown).
std::pair<double, double> achieved(const Result& r, const PeakFlops& peak) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  if (r.flops_per_step < 0 || r.ms.median <= 0) return {nan, nan};
  const double rate = static_cast<double>(r.flops_per_step) / (r.ms.median * 1e-3);
  return {rate, peak.flops > 0 ? rate / peak.flops : nan};
}

void print_compute(const Result& r, const PeakFlops& peak) {
  auto [rate, fraction] = achieved(r, peak);
  if (r.flops_per_step < 0) {
    std::printf("  compute: FLOPs per step unknown (a size the statistics cannot bind)\n");
    return;
  }
  std::printf("  compute: %.3f GFLOP/step, %.1f GFLOP/s", r.flops_per_step * 1e-9, rate * 1e-9);
  if (peak.flops > 0)
    std::printf(", %.1f%% of the peak %.1f GFLOP/s (%s)\n", 100 * fraction, peak.flops * 1e-9, peak.how.c_str());
  else
    std::printf("; peak not measured: %s\n", peak.unavailable.c_str());
}

std::string json_line(const BenchModel& m, const Settings& st, const Result& mine, const Result* torch) {
  JsonObject j;
  j.add("model", m.name).add("device", mine.device).add("precision", st.precision).add("batch", st.batch);
  j.add("accum", st.accum).add("threads", st.threads).add("steps", st.steps).add("optimizer", st.optimizer);
  j.add("ms_per_step", mine.ms.median).add("ms_min", mine.ms.min).add("ms_max", mine.ms.max);
  j.add("peak_bytes", mine.peak_bytes).add("peak_rss_bytes", mine.peak_rss_bytes).add("final_loss", mine.final_loss);
  if (st.ranks > 1) {
    j.add("ranks", st.ranks).add("zero", st.zero).add("comm_ms_per_step", mine.comm_ms);
    j.add("optimizer_state_bytes", mine.plan ? mine.plan->optimizer_state.bytes : 0);
    j.add("master_shard_bytes", mine.plan ? mine.plan->master_shards.bytes : 0);
    j.add("weight_bytes", mine.plan ? resident_param_bytes(*mine.plan) : 0);
  }
  auto [rate, fraction] = achieved(mine, st.peak);
  j.add("flops_per_step", mine.flops_per_step).add("achieved_flops", rate);
  j.add("peak_flops", st.peak.flops > 0 ? st.peak.flops : std::numeric_limits<double>::quiet_NaN());
  j.add("peak_fraction", fraction);
  if (torch) {
    j.add("torch", torch->framework).add("torch_ms_per_step", torch->ms.median).add("torch_ms_min", torch->ms.min);
    j.add("torch_ms_max", torch->ms.max).add("torch_peak_bytes", torch->peak_bytes);
    j.add("torch_peak_rss_bytes", torch->peak_rss_bytes).add("torch_final_loss", torch->final_loss);
    j.add("ratio", mine.ms.median / torch->ms.median);
  }
  return j.str();
}

// One model: otter (and PyTorch with --vs-torch), printed as text or one JSON line.
void bench_one(const BenchModel& m, const Settings& st, const cli::Args& args, const std::string& root,
               const std::string& data) {
  Result mine = bench_otter(m, st, data);
  std::optional<Result> theirs;
  if (args.has("vs-torch")) theirs = bench_torch(m, st, data, root);
  if (args.has("json")) {
    std::cout << json_line(m, st, mine, theirs ? &*theirs : nullptr) << std::endl;
    return;
  }
  std::printf("%s (batch %lld, accum %lld, %s, %s, %lld threads)\n", m.name.c_str(), static_cast<long long>(st.batch),
              static_cast<long long>(st.accum), st.precision.c_str(), st.optimizer.c_str(),
              static_cast<long long>(st.threads));
  if (!st.lora.targets.empty()) {
    TrainingPipelineOptions p;
    p.lora = st.lora;
    std::printf("  LoRA: %s\n", lora_step(p).c_str());
  }
  print_row(mine, !st.lora.targets.empty());
  if (st.ranks > 1)
    std::printf("  %lld ranks%s: communication %.2f ms/step (%.1f%% of the step), optimizer state per rank %s, "
                "fp32 master shards per rank %s\n",
                static_cast<long long>(st.ranks), st.zero ? " (zero 1)" : "", mine.comm_ms,
                100 * mine.comm_ms / mine.ms.median, mib_text(mine.plan->optimizer_state.bytes).c_str(),
                mib_text(mine.plan->master_shards.bytes).c_str());
  print_compute(mine, st.peak);
  if (args.has("vs-full")) {
    Settings full = st;
    full.lora = LoraOptions();
    full.precision = "fp32";
    std::printf("  full fine-tuning, fp32:\n");
    print_row(bench_otter(m, full, data), true);
  }
  if (args.has("vs-recompute")) print_recompute_comparison(m, st, data, mine);
  if (st.profile) print_profile(OpProfile::global(), st.steps, mine.ms.median);
  if (theirs) {
    print_row(*theirs);
    std::printf("  otter / torch step time: %.2f\n", mine.ms.median / theirs->ms.median);
  }
  std::fflush(stdout);
}

// The python of ONNX Runtime Training's virtual environment (made on first use).
std::string ort_python(const std::string& root) {
  const std::string cmd = "'" + root + "/scripts/ort-venv.sh'";
  std::string out = run_child(cmd, "--vs-ort: making ONNX Runtime Training's environment");
  while (!out.empty() && (out.back() == '\n' || out.back() == ' ')) out.pop_back();
  return out.substr(out.find_last_of('\n') + 1);
}

double median_of(std::vector<double> v) { return summarize(std::move(v)).median; }

// Writes one name a line.
void write_lines(const std::string& path, const std::vector<std::string>& lines) {
  std::ofstream f(path);
  for (const std::string& l : lines) f << l << "\n";
  OTTER_CHECK(f.good(), "otter-bench: cannot write ", path);
}

std::string ms_list(const std::vector<double>& v, const char* fmt = "%.3g") {
  std::string out;
  char buf[32];
  for (double x : v) {
    std::snprintf(buf, sizeof buf, fmt, x);
    if (!out.empty()) out += " ";
    out += buf;
  }
  return out;
}

// --vs-ort: otter, PyTorch eager and ONNX Runtime Training on the same batches, `rounds` alternated
// rounds per model; each framework's figure is the median over rounds of its median step time.
// PyTorch runs for the benchmark models only (BenchModel::torch); ONNX Runtime trains the PyTorch
// module's parameters there and otter's own parameter list for the others.
void three_way(const std::vector<BenchModel>& models, Settings st, const cli::Args& args, const std::string& root,
               const fs::path& tmp) {
  OTTER_CHECK(st.device == "cpu" && st.precision == "fp32" && st.optimizer == "adamw" && st.accum == 1 &&
                  st.lora.targets.empty(),
              "otter-bench: --vs-ort compares fp32 AdamW steps on the cpu without --accum or --lora");
  const int64_t rounds = args.get_int("rounds", 3);
  OTTER_CHECK(rounds >= 1, "otter-bench: --rounds must be >= 1");
  const std::string python = ort_python(root);
  if (!args.has("json"))
    std::printf("| model | batch | otter ms | PyTorch ms | ORT ms | otter / PyTorch | otter / ORT | otter peak RSS | "
                "ORT peak RSS |\n| --- | --- | --- | --- | --- | --- | --- | --- | --- |\n");
  std::vector<std::string> per_round, no_torch;
  for (const BenchModel& m : models) {
    st.batch = args.get_int("batch", m.batch);
    const std::string stem = m.name.substr(m.name.find(':') + 1);
    const std::string data = (tmp / (stem + ".npz")).string(), params = (tmp / (stem + ".params")).string();
    std::vector<double> o, t, r, ratio;
    Result mine, torch, ort;
    for (int64_t i = 0; i < rounds; ++i) {
      // The order alternates (otter first in rounds 1, 3, ..., ONNX Runtime first in 2, 4, ...): on a
      // shared machine whichever runs first in a round can meet a slower phase. ORT needs otter's
      // parameter list, written in round 1.
      const bool ort_first = i % 2 == 1;
      if (ort_first) ort = bench_ort(m, st, data, python, root, params);
      mine = bench_otter(m, st, data);
      o.push_back(mine.ms.median);
      if (m.torch) {
        torch = bench_torch(m, st, data, root);
        t.push_back(torch.ms.median);
      } else {
        write_lines(params, mine.params);
      }
      if (!ort_first) ort = bench_ort(m, st, data, python, root, params);
      r.push_back(ort.ms.median);
      ratio.push_back(o.back() / r.back());
    }
    const double om = median_of(o), tm = m.torch ? median_of(t) : 0, rm = median_of(r);
    if (!m.torch) no_torch.push_back(m.name);
    if (args.has("json")) {
      JsonObject j;
      j.add("model", m.name).add("batch", st.batch).add("threads", st.threads).add("rounds", rounds);
      j.add("otter_ms", om).add("ort_ms", rm).add("ort", ort.framework);
      if (m.torch) j.add("torch_ms", tm).add("otter_over_torch", om / tm);
      j.add("otter_over_ort", om / rm).add("trained_parameters", static_cast<int64_t>(mine.params.size()));
      j.add("otter_ms_rounds", ms_list(o)).add("ort_ms_rounds", ms_list(r)).add("otter_over_ort_rounds", ms_list(ratio));
      j.add("otter_peak_rss_bytes", mine.peak_rss_bytes).add("ort_peak_rss_bytes", ort.peak_rss_bytes);
      std::cout << j.str() << std::endl;
      continue;
    }
    char torch_ms[32] = "-", torch_ratio[32] = "-";
    if (m.torch) {
      std::snprintf(torch_ms, sizeof torch_ms, "%.3g", tm);
      std::snprintf(torch_ratio, sizeof torch_ratio, "%.3g", om / tm);
    }
    std::printf("| %s | %lld | %.3g | %s | %.3g | %s | %.3g | %s | %s |\n", m.name.c_str(),
                static_cast<long long>(st.batch), om, torch_ms, rm, torch_ratio, om / rm,
                mib_text(mine.peak_rss_bytes).c_str(), mib_text(ort.peak_rss_bytes).c_str());
    per_round.push_back(str_cat("  ", m.name, ": otter ms ", ms_list(o), "; ORT ms ", ms_list(r), "; otter / ORT ",
                                ms_list(ratio, "%.2f")));
    std::fflush(stdout);
  }
  if (args.has("json")) return;
  std::printf("\nper round (%lld alternated rounds, otter first in odd ones and ORT in even ones, each a median of "
              "%lld steps):\n",
              static_cast<long long>(rounds), static_cast<long long>(st.steps));
  for (const std::string& l : per_round) std::printf("%s\n", l.c_str());
  if (!no_torch.empty()) {
    std::string names;
    for (const std::string& n : no_torch) {
      if (!names.empty()) names += ", ";
      names += n;
    }
    std::printf("PyTorch is not run for %s: models/bench/torch_bench.py builds the benchmark models' modules only (the "
                "zoo's, models/zoo/zoo_models.py, need the transformers environment of models/zoo/setup_venv.sh); "
                "ONNX Runtime trains otter's trainable parameters there, the other initializers frozen.\n",
                names.c_str());
  }
}

// otter-bench's flags.
std::vector<cli::FlagSpec> bench_flags() {
  std::vector<cli::FlagSpec> flags = {
      {"batch", true, "micro-batch b (default per model: mlp 64, cnn 64, gpt 32, resnet18 16, gpt_large 8; a file's "
                      "fixed batch, else 32)", "B"},
      {"accum", true, "micro-batches per optimizer step K (default 1)", "K"},
      {"precision", true, "fp32|fp16|bf16 (default fp32)", "P"},
      {"optimizer", true, "sgd|momentum|adam|adamw (default adamw)", "OPT"},
      {"loss", true, "ce|mse|model:NAME (default ce; model:NAME trains the model's own scalar output NAME)", "LOSS"},
      {"lr", true, "learning rate (default 1e-3)", "LR"},
      {"steps", true, "timed optimizer steps (default 20)", "N"},
      {"warmup", true, "untimed steps first (default 3)", "W"},
      {"device", true, "cpu|cuda (default cpu)", "DEV"},
      {"threads", true, "CPU threads for otter and PyTorch (default: OpenMP's)", "T"},
      {"vs-torch", false, "also run PyTorch eager on the same batches and print the ratio"},
      {"vs-ort", false, "a table of otter, PyTorch eager (benchmark models only) and ONNX Runtime Training "
       "(scripts/ort-venv.sh), medians of --rounds alternated rounds"},
      {"rounds", true, "with --vs-ort: alternated rounds per model (default 3; otter runs first in odd rounds, ORT in even ones)", "R"},
      {"json", false, "print one JSON object per model (otter, torch, ratio)"},
      {"profile", false, "also time otter's kernels by op type over the timed steps (slower on cuda)"},
      {"lora", true, "fine-tune low-rank adapters only: rank=R,alpha=A,targets=GLOB[;GLOB] (as otter-train --lora)",
       "SPEC"},
      {"vs-full", false, "with --lora: also full fp32 fine-tuning of every parameter, for the memory it needs"},
      {"recompute", true, "none|cheap|layers: recompute activations in the backward pass (passes/recompute.h)", "P"},
      {"vs-recompute", false, "with --recompute: also run without recomputation and print the ratios"},
      {"ranks", true, "also run the step data-parallel on N ranks (mpirun on this machine) against one process "
                      "with the same global batch (--accum N*K)", "N"},
      {"zero", true, "0|1: ZeRO stage of the data-parallel step (default 0)", "STAGE"},
  };
  for (auto& f : train_cli::pass_switch_flags()) flags.push_back(f);
  flags.push_back({"peak-size", true, "n of the n^3 GEMM that measures the machine's peak (default 2048; 0: skip)",
                   "N"});
  flags.push_back({"help", false, "show this help"});
  return flags;
}

// The run's settings from the flags (every model shares them but the batch).
Settings read_settings(const cli::Args& args, int64_t ranks) {
  Settings st{0, args.get_int("accum", 1), args.get_int("steps", 20), args.get_int("warmup", 3), omp_get_max_threads(),
              args.get("precision", "fp32"), args.get("optimizer", "adamw"), args.get("device", "cpu"),
              args.get_float("lr", 1e-3)};
  st.profile = args.has("profile");
  st.ranks = ranks;
  st.zero = args.get_int("zero", 0);
  OTTER_CHECK(st.zero == 0 || st.zero == 1, "otter-bench: --zero must be 0 or 1");
  if (args.has("lora")) st.lora = parse_lora_spec(args.get("lora"));
  st.recompute = args.get_enum("recompute", RecomputePolicy::kNone);
  train_cli::read_pass_switch_flags(args, st.pipeline);
  st.pipeline.loss = LossSpec::parse(args.get("loss", "ce"), "--loss");
  OTTER_CHECK(st.recompute != RecomputePolicy::kAuto, "otter-bench: --recompute auto needs a budget; use otter-train");
  OTTER_CHECK(!args.has("vs-recompute") || st.recompute != RecomputePolicy::kNone,
              "otter-bench: --vs-recompute compares against --recompute cheap|layers; give both");
  OTTER_CHECK(!args.has("vs-full") || args.has("lora"), "otter-bench: --vs-full compares against --lora; give both");
  OTTER_CHECK(!args.has("lora") || !args.has("vs-torch"), "otter-bench: --vs-torch has no LoRA counterpart");
  OTTER_CHECK(st.steps >= 1 && st.warmup >= 0 && st.accum >= 1, "otter-bench: --steps and --accum must be >= 1, ",
              "--warmup >= 0");
  OTTER_CHECK(st.device == "cpu" || st.device == "cuda", "otter-bench: --device must be cpu or cuda, got '", st.device, "'");
  // After the checks (it takes a while), in a child process (its matrices would count in our peak RSS).
  st.peak = measure_peak_in_child(st.device, st.precision, args.get_int("peak-size", 2048), omp_get_max_threads());
  return st;
}

// --ranks N: the bench as a job of N ranks under mpirun against one process with the same global batch.
void run_ranks(const BenchModel& m, const Settings& st, int64_t ranks, const std::string& data, int argc, char** argv) {
  const DpFigures job = run_under_mpirun(ranks, argc, argv);
  Settings one = st;
  one.accum = st.accum * ranks;
  const Result r = bench_otter(m, one, data);
  print_dp_comparison(str_cat(m.name, " (batch ", st.batch, ", global batch ", st.batch * one.accum, ", ", st.precision,
                              ", ", st.optimizer, ", ", st.threads, " threads per process)"),
                      ranks, st.accum, st.zero != 0,
                      {r.ms.median, r.ms.min, r.ms.max, 0, r.plan->optimizer_state.bytes, resident_param_bytes(*r.plan)},
                      job);
}

int run(int argc, char** argv) {
  cli::Args args("otter-bench", bench_flags());
  args.parse(argc, argv, 1);
  if (args.has("help") || args.positional().empty()) {
    std::cout << kUsage << args.help();
    return args.has("help") ? 0 : 1;
  }
  OTTER_CHECK(args.positional().size() == 1, "otter-bench: expected one MODEL (see otter-bench --help)");
  if (args.has("threads")) {
    int t = static_cast<int>(args.get_int("threads", 1));
    OTTER_CHECK(t >= 1, "otter-bench: --threads must be >= 1");
    omp_set_num_threads(t);
  }
  openblas_set_num_threads(omp_get_max_threads());
  const std::string root = OTTER_SOURCE_DIR;
  const std::vector<BenchModel> models = models_to_run(args.positional()[0], root, args.has("vs-torch"));
  // Under mpirun: one rank of a data-parallel job; rank 0 alone prints.
  const DistributedInfo dist = init_distributed(DistributedMode::kAuto, 300);
  if (dist.rank != 0 && !std::freopen("/dev/null", "w", stdout)) fail("rank ", dist.rank, ": cannot silence stdout");
  const int64_t ranks = args.get_int("ranks", 1);
  OTTER_CHECK(ranks >= 1 && (ranks == 1 || (dist.size == 1 && models.size() == 1)),
              "otter-bench: --ranks takes N >= 1, one model, and is not itself run under mpirun");
  Settings st = read_settings(args, dist.size);
  if (st.device == "cpu") {
    // Which fp32 GEMM kernels run: an OPENBLAS_CORETYPE holding OpenBLAS below the CPU halves the
    // GEMM rate where the CPU has 512-bit FMA units (kernels/cpu/blas_core.h).
    if (!args.has("json")) std::printf("cpu fp32 gemm: %s\n", cpu::describe_blas_core().c_str());
    else if (cpu::blas_core_below_cpu())
      std::fprintf(stderr, "otter-bench: note: %s\n", cpu::describe_blas_core().c_str());
  }
  const fs::path tmp = fs::temp_directory_path() / ("otter-bench-" + std::to_string(getpid()));
  fs::create_directories(tmp);
  struct RemoveOnExit {  // also when a model fails
    fs::path dir;
    ~RemoveOnExit() {
      std::error_code ec;
      fs::remove_all(dir, ec);
    }
  } cleanup{tmp};
  if (args.has("vs-ort")) {
    three_way(models, st, args, root, tmp);
    return 0;
  }
  for (const BenchModel& m : models) {
    st.batch = args.get_int("batch", m.batch);
    const std::string data = (tmp / (m.name + ".npz")).string();
    if (ranks > 1) run_ranks(m, st, ranks, data, argc, argv);
    else bench_one(m, st, args, root, data);
  }
  finalize_distributed();
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (otter::serve_peak_request()) return 0;
  return otter::rank_guarded_main(run, argc, argv);
}
