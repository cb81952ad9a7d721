// otter-train's flags of train, eval and grad (see train_flags.h).
#include "tools/train_flags.h"

#include <cmath>
#include <cstdlib>
#include <iostream>

#include "runtime/initial_values.h"
#include "tools/train_loop.h"
#include "tools/train_memory.h"

namespace otter::train_cli {

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
double ranged(const cli::Args& args, const std::string& flag, double dflt, double lo, double hi, bool lo_open,
              bool hi_open) {
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
std::vector<cli::FlagSpec> precision_flags(bool interval) {
  std::vector<cli::FlagSpec> f = {
      {"precision", true, "fp32|fp16|bf16 (default fp32): fp16/bf16 run GEMMs and convolutions in half, fp32 master weights",
       "P"},
      {"loss-scale", true, "dynamic|off|VALUE (default dynamic for fp16, off otherwise); VALUE: a fixed scale", "S"},
      {"init-scale", true, "initial dynamic loss scale (default 65536; kept in [1, 2^24])", "S"},
  };
  if (interval) f.push_back({"scale-interval", true, "good steps before the dynamic loss scale doubles (default 2000)", "N"});
  return f;
}

void read_precision_flags(const cli::Args& args, TrainingPipelineOptions& p) {
  p.precision = args.get_enum("precision", p.precision);
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
      recompute_flag(),
  };
  for (auto& b : budget_flags()) rest.push_back(b);
  for (auto& p : precision_flags()) rest.push_back(p);
  for (auto& f : pass_switch_flags()) rest.push_back(f);
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
  for (auto& d : distributed_flags()) f.push_back(d);
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
  read_pass_switch_flags(args, o.pipeline);
  o.pipeline.optimizer = read_optimizer_flags(args);
  if (args.has("freeze")) o.pipeline.freeze = split_commas(args.get("freeze"));
  o.pipeline.batchnorm.mode = args.get_enum("batchnorm", o.pipeline.batchnorm.mode);
  o.batch_size = positive(args, "batch-size", 32);
  o.seed = args.get_int("seed", 0);
  read_lora_flags(args, o.seed, o.pipeline, &o);
  read_recompute_flag(args, o.pipeline);
  o.device = args.get("device", "auto");
  if (o.device != "auto" && o.device != "cpu" && o.device != "cuda")
    fail("--device must be auto, cpu or cuda, got '", o.device, "'");
  return o;
}

}  // namespace otter::train_cli
