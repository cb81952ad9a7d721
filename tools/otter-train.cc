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

#include "graph/onnx_io.h"
#include "kernels/device.h"
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

using namespace otter;

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
    "          list the registered kernels: op, device, dtypes\n"
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

// ---- train and eval ------------------------------------------------------------------------------

// Flags that say which loss to train or evaluate (train and eval share them).
std::vector<cli::FlagSpec> loss_flags() {
  return {
      {"loss", true, "ce|mse|model:NAME (default ce; model:NAME trains the model's own scalar output NAME)", "LOSS"},
      {"output", true, "model output the loss reads (default: the first output)", "NAME"},
      {"labels", true, "name of the labels array and input (default labels)", "NAME"},
  };
}

LossSpec read_loss_flags(const cli::Args& args) {
  LossSpec loss = LossSpec::parse(args.get("loss", "ce"), "--loss");
  loss.add.output = args.get("output", loss.add.output);
  loss.add.labels = args.get("labels", loss.add.labels);
  return loss;
}

// Parses the command's flags; prints its help and returns false on --help.
bool parse_command(cli::Args& args, int argc, char** argv, const std::string& usage) {
  args.parse(argc, argv, 2);
  if (args.has("help")) {
    std::cout << usage << "\n" << args.help();
    return false;
  }
  return true;
}

const std::string& model_argument(const cli::Args& args, const std::string& cmd) {
  if (args.positional().size() != 1)
    fail(cmd, ": expected one model file, got ", args.positional().size(), " (see otter-train ", cmd, " --help)");
  return args.positional()[0];
}

std::string required(const cli::Args& args, const std::string& cmd, const std::string& flag, const std::string& what) {
  if (!args.has(flag)) fail(cmd, ": --", flag, " ", what, " is required");
  return args.get(flag);
}

// A number flag that must lie in [lo, hi] (hi_open: [lo, hi)).
double ranged(const cli::Args& args, const std::string& flag, double dflt, double lo, double hi, bool lo_open = false,
              bool hi_open = false) {
  double v = args.get_float(flag, dflt);
  bool ok = (lo_open ? v > lo : v >= lo) && (hi_open ? v < hi : v <= hi);
  if (!ok)
    fail("--", flag, " must be in ", lo_open ? "(" : "[", lo, ", ", hi, hi_open ? ")" : "]", ", got ", args.get(flag));
  return v;
}

int64_t positive(const cli::Args& args, const std::string& flag, int64_t dflt) {
  int64_t v = args.get_int(flag, dflt);
  if (v <= 0) fail("--", flag, " must be a positive integer, got ", args.get(flag));
  return v;
}

// Flags of mixed precision and loss scaling (train and grad share them; grad has no interval).
std::vector<cli::FlagSpec> precision_flags(bool interval = true) {
  std::vector<cli::FlagSpec> f = {
      {"precision", true, "fp32|fp16|bf16 (default fp32): fp16/bf16 run GEMMs and convolutions in half, fp32 master weights",
       "P"},
      {"loss-scale", true, "dynamic|off|VALUE (default dynamic for fp16, off otherwise); VALUE: a fixed scale", "S"},
      {"init-scale", true, "initial dynamic loss scale (default 65536; kept in [1, 2^24])", "S"},
      {"fuse-attention", true,
       "on|off (default on): fuse scaled-dot-product attention into ai.otter.Attention (fuse-attention pass)",
       "on|off"},
  };
  if (interval) f.push_back({"scale-interval", true, "good steps before the dynamic loss scale doubles (default 2000)", "N"});
  return f;
}

void read_precision_flags(const cli::Args& args, TrainingPipelineOptions& p) {
  p.precision = args.get_enum("precision", p.precision);
  if (args.has("fuse-attention")) {
    const std::string f = args.get("fuse-attention");
    if (f != "on" && f != "off") fail("--fuse-attention must be on or off, got '", f, "'");
    p.fuse_attention = f == "on";
  }
  LossScaleOptions s = default_loss_scale(p.precision);
  const std::string scale = args.get("loss-scale", "");
  if (scale == "dynamic" || scale == "off") {
    s.mode = scale == "off" ? LossScaleMode::kOff : LossScaleMode::kDynamic;
  } else if (!scale.empty()) {
    char* end = nullptr;
    double v = std::strtod(scale.c_str(), &end);
    if (*end || !(v > 0) || !std::isfinite(v))
      fail("--loss-scale must be dynamic, off or a positive number, got '", scale, "'");
    if (args.has("init-scale")) fail("--init-scale sets the dynamic scale; --loss-scale ", scale, " is a fixed one");
    s.mode = LossScaleMode::kStatic;
    s.init = v;
  }
  for (const char* f : {"init-scale", "scale-interval"})
    if (args.has(f) && s.mode != LossScaleMode::kDynamic)
      fail("--", f, " applies to dynamic loss scaling, which is off (--precision ", enum_name(p.precision),
           scale.empty() ? "" : ", --loss-scale " + scale, ")");
  if (args.has("init-scale")) s.init = ranged(args, "init-scale", s.init, 0, 1e38, /*lo_open=*/true);
  s.interval = positive(args, "scale-interval", s.interval);
  if (!(s == default_loss_scale(p.precision))) p.loss_scale = s;
}

// Flags of LoRA fine-tuning and initial values (train and grad share them).
std::vector<cli::FlagSpec> lora_flags() {
  return {
      {"lora", true,
       "train low-rank adapters instead of the weights: rank=R,alpha=A,targets=GLOB[;GLOB][,dropout=P] "
       "(default rank 8, alpha 16; every other parameter is frozen)",
       "SPEC"},
      {"init", true, "set initializers (weights, or adapters <W>.lora_A|B) from this file before training", "FILE.npz"},
  };
}

void read_lora_flags(const cli::Args& args, int64_t seed, TrainingPipelineOptions& p, TrainingOptions* o) {
  if (args.has("lora")) {
    p.lora = parse_lora_spec(args.get("lora"));
    p.lora.seed = seed;
  }
  if (args.has("init") && o) {
    o->init = read_initial_values(args.get("init"));
    o->init_source = "--init " + args.get("init");
  }
}

std::vector<cli::FlagSpec> train_flags() {
  std::vector<cli::FlagSpec> f = {
      {"data", true, "training data (.npz): arrays named after the model inputs, and labels", "TRAIN.npz"},
      {"eval-data", true, "evaluate on this data after each epoch (or log interval) and at the end", "TEST.npz"},
  };
  for (auto& l : loss_flags()) f.push_back(l);
  std::vector<cli::FlagSpec> rest = {
      {"batch-size", true, "micro-batch b (default 32); a step takes K micro-batches", "B"},
      {"accum", true, "micro-batches per optimizer step, K (default 1): global batch K*b", "K"},
  };
  for (auto& p : precision_flags()) rest.push_back(p);
  std::vector<cli::FlagSpec> more = {
      {"optimizer", true, "sgd|momentum|adam|adamw (default adamw)", "NAME"},
      {"lr", true, "learning rate (default 1e-3)", "LR"},
      {"momentum", true, "SGD momentum (default 0; 0.9 for --optimizer momentum)", "M"},
      {"beta1", true, "Adam beta1 (default 0.9)", "B1"},
      {"beta2", true, "Adam beta2 (default 0.999)", "B2"},
      {"eps", true, "Adam epsilon (default 1e-8)", "EPS"},
      {"weight-decay", true, "weight decay (default 0.01 for adamw, else 0)", "WD"},
      {"clip-norm", true, "clip gradients to this global norm (default off)", "NORM"},
      {"schedule", true, "constant|linear-warmup|cosine (default constant); decays to 0 at the last step", "NAME"},
      {"warmup", true, "linear warm-up steps (default 0)", "STEPS"},
      {"epochs", true, "passes over the training data (default 1)", "E"},
      {"steps", true, "optimizer steps to take (instead of --epochs)", "N"},
      {"log-every", true, "print progress every N steps (default: once per epoch; with --steps, 10 lines)", "N"},
      {"device", true, "auto|cpu|cuda (default auto)", "DEVICE"},
      {"freeze", true, "do not train parameters matching this glob (comma-separated for several)", "PATTERN"},
      {"batchnorm", true, "train|frozen: BatchNorm as model.train() (default) or on the exported statistics", "MODE"},
      {"seed", true, "seed of the shuffle, of Dropout and of the LoRA adapters' A (default 0)", "S"},
      {"no-shuffle", false, "take samples in file order"},
      {"save", true, "write a checkpoint here after each epoch and at the end", "DIR"},
      {"resume", true, "continue from this checkpoint (same model and flags)", "DIR"},
      {"export", true, "write the trained model (ONNX) here at the end (LoRA: adapters merged)", "OUT.onnx"},
      {"export-adapters", true, "write the LoRA adapters (<W>.lora_A, <W>.lora_B) here at the end", "FILE.npz"},
      {"log-json", true, "write one JSON object per optimizer step to FILE", "FILE"},
      {"on-nonfinite", true, "stop|skip: a step with a non-finite loss or gradients stops training (default) or is skipped",
       "P"},
      {"print-pipeline", false, "print the training pass pipeline and exit"},
      {"help", false, "show this help"},
  };
  f.insert(f.end(), rest.begin(), rest.end());
  f.insert(f.end(), more.begin(), more.end());
  for (auto& l : lora_flags()) f.push_back(l);
  return f;
}

OptimizerOptions read_optimizer_flags(const cli::Args& args) {
  OptimizerOptions c;
  c.type = args.get_enum("optimizer", c.type);
  const bool adam = c.type == OptimizerType::kAdam || c.type == OptimizerType::kAdamW;
  for (const char* f : {"beta1", "beta2", "eps"})
    if (!adam && args.has(f)) fail("--", f, " applies to adam and adamw, not to --optimizer ", enum_name(c.type));
  if (adam && args.has("momentum"))
    fail("--momentum applies to sgd and momentum, not to --optimizer ", enum_name(c.type));
  c.lr = ranged(args, "lr", c.lr, 0, 1e6, /*lo_open=*/true);
  c.beta1 = ranged(args, "beta1", c.beta1, 0, 1, false, /*hi_open=*/true);
  c.beta2 = ranged(args, "beta2", c.beta2, 0, 1, false, /*hi_open=*/true);
  c.eps = ranged(args, "eps", c.eps, 0, 1, /*lo_open=*/true);
  if (args.has("momentum")) c.momentum = ranged(args, "momentum", 0, 0, 1, false, /*hi_open=*/true);
  if (args.has("weight-decay")) c.weight_decay = ranged(args, "weight-decay", 0, 0, 1e6);
  c.clip_norm = ranged(args, "clip-norm", 0, 0, 1e30);
  if (args.has("clip-norm") && c.clip_norm == 0) fail("--clip-norm must be positive, got ", args.get("clip-norm"));
  c.schedule = args.get_enum("schedule", c.schedule);
  c.warmup = args.get_int("warmup", 0);
  if (c.warmup < 0) fail("--warmup must be >= 0, got ", c.warmup);
  return c;
}

std::vector<std::string> split_commas(const std::string& s) {
  std::vector<std::string> out;
  std::string cur;
  for (char ch : s + ",") {
    if (ch != ',') { cur += ch; continue; }
    if (!cur.empty()) out.push_back(cur);
    cur.clear();
  }
  return out;
}

TrainingOptions read_training_flags(const cli::Args& args) {
  TrainingOptions o;
  o.pipeline.loss = read_loss_flags(args);
  o.pipeline.accum = positive(args, "accum", 1);
  read_precision_flags(args, o.pipeline);
  o.pipeline.optimizer = read_optimizer_flags(args);
  if (args.has("freeze")) o.pipeline.freeze = split_commas(args.get("freeze"));
  o.batchnorm = args.get("batchnorm", "train");
  if (o.batchnorm != "train" && o.batchnorm != "frozen")
    fail("--batchnorm must be train or frozen, got '", o.batchnorm, "'");
  o.batch_size = positive(args, "batch-size", 32);
  o.seed = args.get_int("seed", 0);
  read_lora_flags(args, o.seed, o.pipeline, &o);
  o.device = args.get("device", "auto");
  if (o.device != "auto" && o.device != "cpu" && o.device != "cuda")
    fail("--device must be auto, cpu or cuda, got '", o.device, "'");
  return o;
}

// One JSON object per optimizer step (--log-json).
class StepLog {
 public:
  explicit StepLog(const std::string& path) {
    if (path.empty()) return;
    out_.open(path, std::ios::trunc);
    if (!out_) fail("--log-json: cannot write '", path, "': ", std::strerror(errno));
  }
  void write(const StepResult& r, int64_t epoch, double samples_per_s) {
    if (!out_.is_open()) return;
    out_ << JsonObject()
                .add("step", r.step)
                .add("epoch", epoch)
                .add("loss", r.loss)
                .add("lr", static_cast<float>(r.lr))  // the float32 values the graph used
                .add("loss_scale", static_cast<float>(r.loss_scale))
                .add("skipped", r.skipped)
                .add("samples_per_s", samples_per_s)
                .str()
         << "\n";
    out_.flush();
  }

 private:
  std::ofstream out_;
};

// Progress between two printed lines.
struct Interval {
  double loss_sum = 0, seconds = 0;
  int64_t steps = 0, samples = 0, skipped = 0;
};

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

// The training loop: steps until `total`, progress lines, per-step JSON, checkpoints at epoch ends.
struct TrainLoop {
  int64_t total, per_epoch, epochs, global;
  std::string save_dir;   // empty: no checkpoints
  const Dataset* eval;    // null: no evaluation
  int64_t log_every = 0;  // 0: one line per epoch
  NonFiniteMonitor* nonfinite = nullptr;

  void run(TrainingSession& s, DataLoader& loader, StepLog& log) const {
    Interval iv;
    while (s.steps_taken() < total) {
      auto batch = loader.next();
      auto t0 = std::chrono::steady_clock::now();
      StepResult r = s.train_step(batch);
      double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      log.write(r, loader.state().epoch, static_cast<double>(global) / std::max(secs, 1e-9));
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
};

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

int cmd_train(int argc, char** argv) {
  cli::Args args("otter-train train", train_flags());
  if (!parse_command(args, argc, argv, kTrainUsage)) return 0;
  const std::string model = model_argument(args, "train");
  const std::string data_path = required(args, "train", "data", "TRAIN.npz");
  if (args.has("epochs") && args.has("steps")) fail("train: give --epochs or --steps, not both");
  const int64_t epochs = positive(args, "epochs", 1);
  const int64_t steps_flag = args.has("steps") ? positive(args, "steps", 1) : 0;
  const int64_t log_every_flag = args.has("log-every") ? positive(args, "log-every", 1) : 0;
  TrainingOptions opts = read_training_flags(args);
  if (args.has("export-adapters") && !args.has("lora")) fail("train: --export-adapters needs --lora");

  // The schedule's length needs the data: the session is made once the step count is known. The
  // arrays a data set must provide are those of the evaluation graph (model inputs and labels).
  Evaluator probe(model, opts.pipeline.loss, cpu_device());
  const std::vector<const Value*> inputs = probe.data_inputs();
  Dataset train = Dataset::from_npz(data_path, inputs);
  const int64_t global = opts.batch_size * opts.pipeline.accum;
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
  StepLog log(args.get("log-json"));
  auto session = TrainingSession::create(model, opts);
  if (args.has("resume")) loader.set_state(session->load(args.get("resume")));
  std::printf("training %s on %s: %" PRId64 " samples, %" PRId64 " steps of %" PRId64 " (K=%" PRId64
              " x b=%" PRId64 "), %" PRId64 " steps per epoch, device %s\n",
              model.c_str(), data_path.c_str(), train.size(), total, global, opts.pipeline.accum, opts.batch_size,
              per_epoch, session->device().describe().c_str());
  if (session->steps_taken() >= total) std::printf("the checkpoint has already taken %" PRId64 " steps\n", total);
  print_parameter_selection(model, *session);

  TrainLoop loop{total, per_epoch, epochs, global, args.get("save"), eval ? &*eval : nullptr};
  loop.log_every = log_every_flag ? log_every_flag : steps_flag ? std::max<int64_t>(1, total / 10) : 0;
  NonFiniteMonitor nonfinite(parse_nonfinite_policy(args.get("on-nonfinite", "stop")), *session);
  loop.nonfinite = &nonfinite;
  const auto t_start = std::chrono::steady_clock::now();
  loop.run(*session, loader, log);
  double total_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t_start).count();
  if (eval) {
    EvalResult e = session->evaluate(*eval);
    std::printf("final: eval loss %.4f", e.loss);
    if (e.has_accuracy) std::printf("  eval accuracy %.2f%% (%" PRId64 " samples)", 100 * e.accuracy, e.samples);
    std::printf("\n");
  }
  std::printf("trained %" PRId64 " steps in %.2f s\n", session->steps_taken(), total_s);
  if (nonfinite.faulty_steps()) std::printf("warning: %s\n", nonfinite.summary(session->steps_taken()).c_str());
  if (args.has("export")) {
    session->export_inference(args.get("export"));
    std::printf("wrote %s\n", args.get("export").c_str());
  }
  if (args.has("export-adapters")) {
    write_npz(args.get("export-adapters"), session->adapters());
    std::printf("wrote %zu adapters to %s\n", session->adapters().size(), args.get("export-adapters").c_str());
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
    "'loss' and 'grad/<initializer>'.\n"
    "The gradients are fp32 and unscaled also with --precision fp16|bf16 (fp16 scales the loss by\n"
    "--init-scale, or --loss-scale VALUE, 65536 by default, for the backward pass and divides it out).\n";

// The first batch of a data file: its first --batch-size samples (every sample without the flag),
// of the arrays named after the graph's inputs (checked against their types and shapes).
std::map<std::string, Tensor> first_batch(const std::vector<const Value*>& inputs, const std::string& path,
                                          const cli::Args& args) {
  const int64_t batch = args.has("batch-size") ? positive(args, "batch-size", 1) : 0;
  Dataset data = Dataset::from_npz(path, inputs);
  if (batch == 0) return data.arrays();
  return DataLoader(data, batch, /*shuffle=*/false, /*seed=*/0).next();
}

int cmd_grad(int argc, char** argv) {
  std::vector<cli::FlagSpec> flags = {
      {"data", true, "input arrays (.npz) named after the model inputs, and the labels", "D.npz"},
      {"out", true, "where to write 'loss' and 'grad/<parameter>' (.npz)", "G.npz"},
  };
  for (auto& l : loss_flags()) flags.push_back(l);
  flags.push_back({"freeze", true, "give no gradient to parameters matching this glob (comma-separated for several)",
                   "PATTERN"});
  for (auto& f : precision_flags(/*interval=*/false)) flags.push_back(f);
  for (auto& f : lora_flags()) flags.push_back(f);
  flags.push_back({"seed", true, "seed of the LoRA adapters' A (default 0)", "S"});
  flags.push_back({"batch-size", true, "use the first B samples (default: every sample)", "B"});
  flags.push_back({"device", true, "auto|cpu|cuda (default auto)", "DEVICE"});
  flags.push_back({"help", false, "show this help"});
  cli::Args args("otter-train grad", flags);
  if (!parse_command(args, argc, argv, kGradUsage)) return 0;
  const std::string model = model_argument(args, "grad");
  const std::string data_path = required(args, "grad", "data", "D.npz");
  const std::string out_path = required(args, "grad", "out", "G.npz");
  TrainingPipelineOptions p;
  p.loss = read_loss_flags(args);
  read_precision_flags(args, p);
  if (args.has("freeze")) p.freeze = split_commas(args.get("freeze"));
  TrainingOptions init;
  read_lora_flags(args, args.get_int("seed", 0), p, &init);
  std::unique_ptr<Device> cuda;
  Device& device = pick_device(args.get("device", "auto"), cuda);

  GradientEvaluator ge(model, p, device, init.init, init.init_source);
  auto out = ge.run(first_batch(ge.data_inputs(), data_path, args));
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
    return run(argc, argv);
  } catch (const std::exception& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 1;
  }
}
