// otter-train: the training command line (train, eval, grad, predict, kernels).
#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <optional>
#include <set>

#include "graph/export_check.h"
#include "graph/onnx_io.h"
#include "kernels/device.h"
#include "kernels/cpu/blas_core.h"
#include "kernels/cpu/gemm_bf16.h"
#include "kernels/cpu/isa.h"
#include "kernels/kernel.h"
#include "passes/pass_manager.h"
#include "runtime/constant_eval.h"
#include "runtime/dataset.h"
#include "runtime/executor.h"
#include "runtime/initial_values.h"
#include "runtime/gradients.h"
#include "runtime/json.h"
#include "runtime/nonfinite.h"
#include "runtime/npz.h"
#include "runtime/predictor.h"
#include "runtime/training_session.h"
#include "tools/cli.h"
#include "tools/train_flags.h"
#include "tools/train_loop.h"
#include "tools/train_memory.h"

using namespace otter;
using namespace otter::train_cli;

namespace {

const char* kUsage =
    "usage: otter-train COMMAND [options]\n"
    "\n"
    "commands:\n"
    "  train MODEL.onnx --data TRAIN.npz [--eval-data TEST.npz] [--batch-size b] [--accum K]\n"
    "        [--optimizer sgd|momentum|adam|adamw] [--lr LR] [--epochs E | --steps N] [--save DIR] ...\n"
    "          train the model; see 'otter-train train --help' for every option\n"
    "  eval MODEL.onnx --data TEST.npz [--loss ce|mse|model:NAME]\n"
    "          loss and accuracy in eval mode\n"
    "  grad MODEL.onnx --data D.npz --out G.npz [--loss ce|mse|model:NAME] [--batch-size B] [--freeze P]\n"
    "          one forward and backward pass on the first batch: the loss and every parameter gradient\n"
    "  predict MODEL.onnx --data IN.npz --out OUT.npz [--batch-size B] [--device cpu]\n"
    "          run the model (inference) on the arrays named after its inputs\n"
    "  kernels [--format text|tsv]\n"
    "          the CPU loops' ISA variant (OTTER_ISA=baseline|avx2|avx512), then the kernels: op, device, dtypes\n"
    "\n"
    "Run 'otter-train COMMAND --help' for the options of one command.\n";

int cmd_predict(int argc, char** argv) {
  cli::Args args("otter-train predict", {
      {"data", true, "input arrays (.npz), named after the model inputs", "IN.npz"},
      {"out", true, "where to write the outputs (.npz)", "OUT.npz"},
      {"batch-size", true, "feed B samples at a time (default: each array whole)", "B"},
      {"device", true, "auto|cpu|cuda (default auto)", "DEVICE"},
      {"help", false, "show this help"},
  });
  args.parse(argc, argv, 2);
  if (args.has("help")) {
    std::cout << "usage: otter-train predict MODEL.onnx --data IN.npz --out OUT.npz [options]\n\n" << args.help();
    return 0;
  }
  if (args.positional().size() != 1) fail("predict: expected one model file (see otter-train predict --help)");
  if (!args.has("data")) fail("predict: --data IN.npz is required");
  if (!args.has("out")) fail("predict: --out OUT.npz is required");
  std::unique_ptr<Device> cuda;
  Device& device = pick_device(args.get("device", "auto"), cuda);
  Predictor predictor(args.positional()[0], device);
  const int64_t batch = args.get_int("batch-size", 0);
  if (batch < 0) fail("--batch-size must be positive");
  auto out = predictor.run(predictor.inputs_from(read_npz(args.get("data"))), batch);
  write_npz(args.get("out"), out);
  std::cout << "wrote " << out.size() << " output" << (out.size() == 1 ? "" : "s") << " to " << args.get("out") << "\n";
  return 0;
}

// ---- train and eval (flags: tools/train_flags.h) --------------------------------------------------

const char* kTrainUsage =
    "usage: otter-train train MODEL.onnx --data TRAIN.npz [options]\n"
    "\n"
    "Trains MODEL.onnx: each optimizer step takes K micro-batches of b samples (--accum, --batch-size),\n"
    "the last partial global batch of an epoch is dropped, samples are shuffled per epoch unless\n"
    "--no-shuffle. Prints one line per epoch (or per --log-every steps).\n";

// How many parameters the session trains, and which float initializers of the model it leaves
// alone (--freeze, BatchNorm running statistics, initializers that reach no output).
void print_parameter_selection(const std::string& model, const TrainingSession& s) {
  std::set<std::string> trained;
  int64_t values = 0;
  for (const auto& [p, g] : s.graph().gradients) {
    trained.insert(p->name());
    values += p->data().numel();
  }
  std::vector<std::string> frozen;
  const std::unique_ptr<Graph> original = import_onnx_file(model);
  for (const Value* v : original->initializers())
    if (is_float(v->dtype()) && !trained.count(v->name())) frozen.push_back(v->name());
  std::printf("training %zu parameters (%" PRId64 " values); %zu float initializers frozen", trained.size(), values,
              frozen.size());
  for (size_t i = 0; i < frozen.size() && i < 12; ++i) std::printf("%s%s", i ? ", " : ": ", frozen[i].c_str());
  if (frozen.size() > 12) std::printf(", ... (%zu more)", frozen.size() - 12);
  std::printf("\n");
}

// Warns on stderr when the model looks exported for inference rather than training (graph/export_check.h).
void warn_about_export(const std::string& model) {
  const std::string w = folded_batchnorm_warning(*import_onnx_file(model));
  if (!w.empty()) std::fprintf(stderr, "warning: %s: %s\n", model.c_str(), w.c_str());
}

int cmd_train(int argc, char** argv) {
  cli::Args args("otter-train train", train_flags());
  if (!parse_command(args, argc, argv, kTrainUsage)) return 0;
  const std::string model = model_argument(args, "train");
  warn_about_export(model);
  const std::string data_path = required(args, "train", "data", "TRAIN.npz");
  if (args.has("epochs") && args.has("steps")) fail("train: give --epochs or --steps, not both");
  const int64_t epochs = positive(args, "epochs", 1);
  const int64_t steps_flag = args.has("steps") ? positive(args, "steps", 1) : 0;
  const int64_t log_every_flag = args.has("log-every") ? positive(args, "log-every", 1) : 0;
  TrainingOptions opts = read_training_flags(args);
  if (args.has("export-adapters") && !args.has("lora")) fail("train: --export-adapters needs --lora");
  apply_memory_budget(args, model, opts);
  // Under mpirun: N ranks, each taking K*b samples of every global batch of N*K*b (train_loop.h).
  const DistributedInfo dist = join_job(args, opts);
  const bool lead = dist.rank == 0;  // writes the log, checkpoints and exports

  // The schedule's length needs the data: the session is made once the step count is known. The
  // arrays a data set must provide are those of the evaluation graph (model inputs and labels).
  Evaluator probe(model, opts.pipeline.loss, cpu_device());
  const std::vector<const Value*> inputs = probe.data_inputs();
  Dataset train = Dataset::from_npz(data_path, inputs);
  check_global_batch(dist, opts, train.size(), data_path);
  const int64_t global = opts.batch_size * opts.pipeline.accum * dist.size;
  DataLoader loader(train, global, !args.has("no-shuffle"), static_cast<uint64_t>(opts.seed));
  const int64_t per_epoch = loader.batches_per_epoch();
  const int64_t total = steps_flag ? steps_flag : epochs * per_epoch;
  if (opts.pipeline.optimizer.schedule != LrSchedule::kConstant) opts.pipeline.optimizer.total = total;
  if (args.has("print-pipeline")) {
    std::cout << training_pipeline(opts.pipeline) << "\n";
    return 0;
  }
  std::optional<Dataset> eval;
  if (args.has("eval-data")) eval = Dataset::from_npz(args.get("eval-data"), inputs);
  StepLog log(lead ? args.get("log-json") : "");
  StepPeak peak;
  auto session = TrainingSession::create(model, opts);
  if (args.has("resume")) loader.set_state(session->load(args.get("resume")));
  std::printf("training %s on %s: %" PRId64 " samples, %" PRId64 " steps of %" PRId64 " (%sK=%" PRId64 " x b=%" PRId64
              "), %" PRId64 " steps per epoch, device %s\n",
              model.c_str(), data_path.c_str(), train.size(), total, global,
              dist.size > 1
                  ? str_cat("N=", dist.size, " ranks", opts.pipeline.all_reduce.zero ? " (ZeRO-1)" : "", " x ").c_str()
                  : "",
              opts.pipeline.accum, opts.batch_size, per_epoch, session->device().describe().c_str());
  if (session->steps_taken() >= total) std::printf("the checkpoint has already taken %" PRId64 " steps\n", total);
  print_parameter_selection(model, *session);

  TrainLoop loop{total, per_epoch, epochs, global, args.get("save", ""), eval ? &*eval : nullptr};
  loop.dist = dist;
  loop.log_every = log_every_flag ? log_every_flag : steps_flag ? std::max<int64_t>(1, total / 10) : 0;
  NonFiniteMonitor nonfinite(parse_nonfinite_policy(args.get("on-nonfinite", "stop")), *session);
  loop.nonfinite = &nonfinite;
  const auto t_start = std::chrono::steady_clock::now();
  loop.run(*session, loader, log, peak);
  double total_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t_start).count();
  if (eval) {
    EvalResult e = session->evaluate(*eval);
    std::printf("final: eval loss %.4f", e.loss);
    if (e.has_accuracy) std::printf("  eval accuracy %.2f%% (%" PRId64 " samples)", 100 * e.accuracy, e.samples);
    std::printf("\n");
  }
  std::printf("trained %" PRId64 " steps in %.2f s\n", session->steps_taken(), total_s);
  if (nonfinite.faulty_steps()) std::printf("warning: %s\n", nonfinite.summary(session->steps_taken()).c_str());
  std::printf("%s\n", peak_summary(*session, peak.run_peak()).c_str());
  // Every rank takes part (ZeRO-1's sharded masters are gathered whole); rank 0 writes.
  if (args.has("export")) {
    session->export_inference(args.get("export"));
    if (lead) std::printf("wrote %s\n", args.get("export").c_str());
  }
  if (args.has("export-adapters")) {
    const auto adapters = session->adapters();
    if (lead) {
      write_npz(args.get("export-adapters"), adapters);
      std::printf("wrote %zu adapters to %s\n", adapters.size(), args.get("export-adapters").c_str());
    }
  }
  return 0;
}

const char* kEvalUsage =
    "usage: otter-train eval MODEL.onnx --data TEST.npz [options]\n"
    "\n"
    "Loss and accuracy of MODEL.onnx in eval mode (BatchNorm on running statistics, no Dropout).\n";

int cmd_eval(int argc, char** argv) {
  std::vector<cli::FlagSpec> flags = {{"data", true, "evaluation data (.npz)", "TEST.npz"}};
  for (auto& l : loss_flags()) flags.push_back(l);
  flags.push_back({"batch-size", true, "samples per batch (default 256)", "B"});
  flags.push_back({"device", true, "auto|cpu|cuda (default auto)", "DEVICE"});
  flags.push_back({"help", false, "show this help"});
  cli::Args args("otter-train eval", flags);
  if (!parse_command(args, argc, argv, kEvalUsage)) return 0;
  const std::string model = model_argument(args, "eval");
  const std::string data_path = required(args, "eval", "data", "TEST.npz");
  const LossSpec loss = read_loss_flags(args);
  const int64_t batch = positive(args, "batch-size", 256);
  std::unique_ptr<Device> cuda;
  Device& device = pick_device(args.get("device", "auto"), cuda);
  Evaluator ev(model, loss, device);
  Dataset data = Dataset::from_npz(data_path, ev.data_inputs());
  EvalResult r = ev.run(data, batch);
  std::printf("loss %.4f", r.loss);
  if (r.has_accuracy) std::printf("  accuracy %.2f%%", 100 * r.accuracy);
  std::printf("  (%" PRId64 " samples)\n", r.samples);
  return 0;
}

const char* kGradUsage =
    "usage: otter-train grad MODEL.onnx --data D.npz --out G.npz [options]\n"
    "\n"
    "One forward and backward pass (training mode) on the first batch: writes the loss and the\n"
    "gradient of every trainable parameter (frozen ones left out; with --lora only the adapters) as\n"
    "'loss' and 'grad/<initializer>'. The parameters are those train trains: BatchNorm running\n"
    "statistics and initializers that reach no output get no gradient, and BatchNorm uses the\n"
    "batch statistics (as model.train()) unless --batchnorm frozen.\n"
    "The gradients are fp32 and unscaled also with --precision fp16|bf16 (fp16 scales the loss by\n"
    "--init-scale, or --loss-scale VALUE, 65536 by default, for the backward pass and divides it out).\n";

int cmd_grad(int argc, char** argv) {
  std::vector<cli::FlagSpec> flags = {
      {"data", true, "input arrays (.npz) named after the model inputs, and the labels", "D.npz"},
      {"out", true, "where to write 'loss' and 'grad/<parameter>' (.npz)", "G.npz"},
  };
  for (auto& l : loss_flags()) flags.push_back(l);
  flags.push_back({"freeze", true, "give no gradient to parameters matching this glob (comma-separated for several)",
                   "PATTERN"});
  flags.push_back({"batchnorm", true, "train|frozen: BatchNorm as model.train() (default) or on the exported statistics",
                   "MODE"});
  for (auto& f : precision_flags(/*interval=*/false)) flags.push_back(f);
  for (auto& f : pass_switch_flags()) flags.push_back(f);
  for (auto& f : lora_flags()) flags.push_back(f);
  flags.push_back({"seed", true, "seed of the LoRA adapters' A (default 0)", "S"});
  flags.push_back({"batch-size", true, "use the first B samples (default: every sample)", "B"});
  flags.push_back(recompute_flag());
  flags.push_back({"device", true, "auto|cpu|cuda (default auto)", "DEVICE"});
  flags.push_back({"help", false, "show this help"});
  cli::Args args("otter-train grad", flags);
  if (!parse_command(args, argc, argv, kGradUsage)) return 0;
  const std::string model = model_argument(args, "grad");
  warn_about_export(model);
  const std::string data_path = required(args, "grad", "data", "D.npz");
  const std::string out_path = required(args, "grad", "out", "G.npz");
  TrainingPipelineOptions p;
  p.loss = read_loss_flags(args);
  read_precision_flags(args, p);
  read_pass_switch_flags(args, p);
  if (args.has("freeze")) p.freeze = split_commas(args.get("freeze"));
  p.batchnorm.mode = args.get_enum("batchnorm", p.batchnorm.mode);
  TrainingOptions init;
  read_lora_flags(args, args.get_int("seed", 0), p, &init);
  read_recompute_flag(args, p);
  if (p.recompute.policy == RecomputePolicy::kAuto) fail("grad: --recompute auto needs a budget (train --memory-budget)");
  std::unique_ptr<Device> cuda;
  Device& device = pick_device(args.get("device", "auto"), cuda);

  GradientSetup setup;
  setup.init = init.init;
  setup.init_source = init.init_source;

  // The first batch: the first --batch-size samples (every sample without the flag) of the arrays
  // named after the model inputs and labels. The graph is built for that batch size (pinned, as a
  // training session pins it: BatchNorm in training mode needs static shapes).
  const int64_t batch_flag = args.has("batch-size") ? positive(args, "batch-size", 1) : 0;
  Evaluator probe(model, p.loss, cpu_device());
  Dataset data = Dataset::from_npz(data_path, probe.data_inputs());
  setup.batch = batch_flag ? batch_flag : data.size();
  std::map<std::string, Tensor> batch =
      batch_flag ? DataLoader(data, batch_flag, /*shuffle=*/false, /*seed=*/0).next() : data.arrays();
  GradientEvaluator ge(model, p, device, setup);
  auto out = ge.run(batch);
  write_npz(out_path, out);
  const size_t grads = out.size() - 1;
  std::printf("loss %.6g; wrote %zu parameter gradient%s to %s\n", out[0].second.get_as_double(0), grads,
              grads == 1 ? "" : "s", out_path.c_str());
  return 0;
}

int cmd_kernels(int argc, char** argv) {
  cli::Args args("otter-train kernels", {
      {"format", true, "text|tsv (default text)", "FORMAT"},
      {"help", false, "show this help"},
  });
  args.parse(argc, argv, 2);
  if (args.has("help")) {
    std::cout << "usage: otter-train kernels [--format text|tsv]\n\n" << args.help();
    return 0;
  }
  std::string fmt = args.get("format", "text");
  if (fmt != "text" && fmt != "tsv") fail("--format must be text or tsv, got '", fmt, "'");
  std::vector<std::tuple<std::string, std::string, std::string>> rows;
  for (const KernelDef& d : KernelRegistry::instance().all()) {
    std::string op = d.domain.empty() ? d.op_type : d.domain + "." + d.op_type;
    std::string types;
    for (DataType t : d.dtypes) types += (types.empty() ? "" : ",") + std::string(dtype_name(t));
    if (types.empty()) types = "any";
    rows.emplace_back(op, device_name(d.device), types);
  }
  std::sort(rows.begin(), rows.end());
  rows.erase(std::unique(rows.begin(), rows.end()), rows.end());
  if (fmt == "text") {
    std::cout << "cpu loops: " << cpu::describe_isa() << "\n";
    std::cout << "cpu bf16 gemm: " << cpu::describe_bf16_gemm() << "\n";
    std::cout << "cpu fp32 gemm: " << cpu::describe_blas_core() << "\n";
  }
  for (const auto& [op, dev, types] : rows) {
    if (fmt == "tsv") std::cout << op << '\t' << dev << '\t' << types << '\n';
    else {
      std::string o = op;
      o.resize(std::max<size_t>(o.size() + 1, 28), ' ');
      std::string dv = dev;
      dv.resize(6, ' ');
      std::cout << o << dv << types << '\n';
    }
  }
  return 0;
}

int run(int argc, char** argv) {
  if (argc < 2 || std::string(argv[1]) == "--help" || std::string(argv[1]) == "-h" ||
      std::string(argv[1]) == "help") {
    std::cout << kUsage;
    return argc < 2 ? 1 : 0;
  }
  std::string cmd = argv[1];
  if (cmd == "train") return cmd_train(argc, argv);
  if (cmd == "eval") return cmd_eval(argc, argv);
  if (cmd == "grad") return cmd_grad(argc, argv);
  if (cmd == "predict") return cmd_predict(argc, argv);
  if (cmd == "kernels") return cmd_kernels(argc, argv);
  fail("unknown command '", cmd, "' (commands: train, eval, grad, predict, kernels; see otter-train --help)");
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const int rc = run(argc, argv);
    finalize_distributed();
    return rc;
  } catch (const std::exception& e) {
    const DistributedInfo d = distributed_info();
    if (d.size > 1) {
      // One rank's error ends the job: the others would wait for it in the next collective.
      std::cerr << "error (rank " << d.rank << " of " << d.size << "): " << e.what() << "\n";
      abort_distributed(1);
    }
    std::cerr << "error: " << e.what() << "\n";
    return 1;
  }
}
