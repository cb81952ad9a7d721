// The training pipeline (see pipelines.h).
#include "passes/pipelines.h"

#include <charconv>

#include "graph/error.h"

namespace otter {

namespace {

// Shortest text that reads back as the same double.
std::string number(double v) {
  char buf[32];
  auto r = std::to_chars(buf, buf + sizeof(buf), v);
  return std::string(buf, r.ptr);
}

// Option values are cut at ',', '{' and '}' by the pipeline parser.
std::string option_value(const std::string& what, const std::string& v) {
  OTTER_CHECK(!v.empty() && v.find_first_of(",{}; ") == std::string::npos, what, " '", v,
              "' cannot be written into a pipeline (empty, or has one of , { } ; or a space)");
  return v;
}

void require(const PassRegistry& r, const std::string& pass, const std::string& why) {
  OTTER_CHECK(r.has(pass), "pass '", pass, "' is not registered (", why, " needs it)");
}

std::string add_loss_step(const TrainingPipelineOptions& o) {
  OTTER_CHECK(o.loss == "ce" || o.loss == "mse", "loss must be ce, mse or model:NAME, got '", o.loss, "'");
  std::string s = "add-loss{type=" + o.loss;
  if (!o.output.empty()) s += ",output=" + option_value("output", o.output);
  if (o.labels != "labels") s += ",labels=" + option_value("labels", o.labels);
  return s + "}";
}

std::string autodiff_step(const TrainingPipelineOptions& o, const std::string& loss) {
  std::vector<std::string> opts;
  if (loss != "loss") opts.push_back("loss=" + option_value("loss", loss));
  std::string freeze;
  for (const std::string& f : o.freeze) freeze += (freeze.empty() ? "" : ";") + option_value("freeze pattern", f);
  if (!freeze.empty()) opts.push_back("freeze=" + freeze);
  std::string s = "autodiff";
  for (size_t i = 0; i < opts.size(); ++i) s += (i ? "," : "{") + opts[i];
  return opts.empty() ? s : s + "}";
}

std::string loss_scale_step(const TrainingPipelineOptions& o, const std::string& mode) {
  OTTER_CHECK(o.init_scale > 0, "the initial loss scale must be positive, got ", o.init_scale);
  OTTER_CHECK(o.scale_interval > 0, "the loss-scale interval must be positive, got ", o.scale_interval);
  std::string s = "loss-scale{mode=" + mode + ",init=" + number(o.init_scale);
  if (mode == "dynamic") s += ",interval=" + std::to_string(o.scale_interval);
  return s + "}";
}

// The model's own loss is named: its subgraph stays fp32.
std::string mixed_precision_step(const TrainingPipelineOptions& o) {
  const std::string loss = loss_value_name(o);
  return "mixed-precision{dtype=" + o.precision + (loss == "loss" ? "" : ",loss=" + loss) + "}";
}

std::string optimizer_step(const OptimizerConfig& c) {
  const OptimizerConfig d;
  std::string s = "optimizer{type=" + option_value("optimizer", c.type) + ",lr=" + number(c.lr);
  if (c.beta1 != d.beta1) s += ",beta1=" + number(c.beta1);
  if (c.beta2 != d.beta2) s += ",beta2=" + number(c.beta2);
  if (c.eps != d.eps) s += ",eps=" + number(c.eps);
  if (c.weight_decay >= 0) s += ",weight_decay=" + number(c.weight_decay);
  if (c.momentum >= 0) s += ",momentum=" + number(c.momentum);
  if (c.nesterov) s += ",nesterov=true";
  if (c.clip_norm > 0) s += ",clip_norm=" + number(c.clip_norm);
  if (c.schedule != d.schedule) s += ",schedule=" + option_value("schedule", c.schedule);
  if (c.warmup) s += ",warmup=" + std::to_string(c.warmup);
  if (c.total) s += ",total=" + std::to_string(c.total);
  if (c.min_lr) s += ",min_lr=" + number(c.min_lr);
  return s + "}";
}

}  // namespace

std::string lora_step(const TrainingPipelineOptions& o) {
  const LoraOptions& l = o.lora;
  if (l.targets.empty()) return "";
  std::string targets;
  for (const std::string& t : l.targets) targets += (targets.empty() ? "" : ";") + option_value("lora target", t);
  std::string s = "lora{rank=" + std::to_string(l.rank) + ",alpha=" + number(l.alpha) + ",targets=" + targets;
  if (l.dropout) s += ",dropout=" + number(l.dropout);
  if (l.seed) s += ",seed=" + std::to_string(l.seed);
  return s + "}";
}

std::string loss_scale_mode(const TrainingPipelineOptions& o) {
  if (!o.loss_scale.empty()) return o.loss_scale;
  return o.precision == "fp16" ? "dynamic" : "off";
}

std::string loss_value_name(const TrainingPipelineOptions& o) {
  if (o.loss.rfind("model:", 0) != 0) return "loss";
  OTTER_CHECK(o.loss.size() > 6, "loss 'model:' needs the name of the model's loss output");
  return o.loss.substr(6);
}

std::string gradient_pipeline(const TrainingPipelineOptions& o) {
  std::string text = "canonicalize";
  if (!o.lora.targets.empty()) text += "," + lora_step(o);
  if (o.loss.rfind("model:", 0) != 0) text += "," + add_loss_step(o);
  if (o.precision != "fp32") text += "," + mixed_precision_step(o);
  text += "," + autodiff_step(o, loss_value_name(o));
  // One pass has no scale to adapt: a dynamic scale is its initial value, fixed.
  if (loss_scale_mode(o) != "off") text += "," + loss_scale_step(o, "static");
  return text;
}

std::string eval_pipeline(const TrainingPipelineOptions& o) {
  // eval-mode after canonicalize: while the running statistics are still state, folding cannot
  // bake them into constants, so an evaluator can feed the trained ones by name.
  // The adapters join before eval-mode, which turns their Dropout off.
  std::string text = "canonicalize";
  if (!o.lora.targets.empty()) text += "," + lora_step(o);
  text += ",eval-mode";
  if (o.loss.rfind("model:", 0) != 0) text += "," + add_loss_step(o);
  return text;
}

std::string training_pipeline(const TrainingPipelineOptions& o, const PassRegistry& registry) {
  OTTER_CHECK(o.precision == "fp32" || o.precision == "fp16" || o.precision == "bf16",
              "precision must be fp32, fp16 or bf16, got '", o.precision, "'");
  const std::string scale = loss_scale_mode(o);
  OTTER_CHECK(scale == "dynamic" || scale == "static" || scale == "off",
              "loss scale must be dynamic, static or off, got '", scale, "'");
  OTTER_CHECK(o.accum >= 1, "accumulation steps (K) must be >= 1, got ", o.accum);
  std::vector<std::string> steps;
  // Fold constants and shape arithmetic first: every later pass then sees static shapes and no
  // Constant/Identity nodes, and the backward graph is not built for arithmetic that folds away.
  steps.push_back("canonicalize");
  // Adapters join the forward graph before the loss, mixed precision and autodiff see it: their
  // branches are cast like the rest, and every other parameter is a constant from here on.
  if (!o.lora.targets.empty()) {
    require(registry, "lora", "lora");
    steps.push_back(lora_step(o));
  }
  // The loss joins the forward graph before anything reads the forward graph as a whole: mixed
  // precision must see the loss subgraph (to keep it fp32) and autodiff differentiates it.
  const std::string loss = loss_value_name(o);
  if (o.loss.rfind("model:", 0) != 0) steps.push_back(add_loss_step(o));
  // Casts go into the forward graph before autodiff, so the gradient of each Cast is a Cast back
  // and weight gradients come out in fp32 (docs/mixed-precision.md).
  if (o.precision != "fp32") {
    require(registry, "mixed-precision", "precision " + o.precision);
    // The model's own loss must be named: its subgraph stays fp32.
    steps.push_back(mixed_precision_step(o));
  }
  // The backward graph, seeded with 1: the passes below rewrite the seed (S, then S/K).
  steps.push_back(autodiff_step(o, loss));
  // Scaling multiplies the seed by the state S and makes S state the apply program updates; it
  // needs the seed autodiff made and must come before the seed is divided by K.
  if (scale != "off") {
    require(registry, "loss-scale", "loss scale " + scale);
    steps.push_back(loss_scale_step(o, scale));
  }
  // Accumulators replace the gradient outputs (and fuse into weight-gradient GEMMs): after this the
  // micro-step program is complete and the optimizer reads the accumulators only.
  steps.push_back("grad-accumulation{steps=" + std::to_string(o.accum) + "}");
  // The apply program: finite check, unscale (1/S) and clipping, update, step count; it reads the
  // accumulators, so it comes last of the training passes.
  steps.push_back(optimizer_step(o.optimizer));
  // Cleanup (cast elimination, dead code) runs over both programs once they exist; it belongs to
  // the optimisation passes and joins the pipeline where this build registers it.
  if (registry.has("cleanup")) steps.push_back("cleanup");
  // Buffers are planned on the final graph (the session fixes the batch size first, so shapes are
  // static): any rewrite after this would invalidate the plan.
  if (registry.has("memory-plan")) steps.push_back("memory-plan");
  std::string text;
  for (const std::string& s : steps) text += (text.empty() ? "" : ",") + s;
  return text;
}

}  // namespace otter
