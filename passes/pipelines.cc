// The training pipeline (see pipelines.h).
#include "passes/pipelines.h"

#include "graph/error.h"
#include "passes/autodiff.h"
#include "passes/grad_accumulation.h"

namespace otter {

namespace {

void require(const PassRegistry& r, const std::string& pass, const std::string& why) {
  OTTER_CHECK(r.has(pass), "pass '", pass, "' is not registered (", why, " needs it)");
}

std::string autodiff_step(const TrainingPipelineOptions& o) {
  AutodiffOptions a;
  a.loss = o.loss.value_name();
  a.freeze = o.freeze;
  return pass_text("autodiff", a);
}

// The model's own loss is named: its subgraph stays fp32.
std::string mixed_precision_step(const TrainingPipelineOptions& o) {
  MixedPrecisionOptions m;
  m.dtype = o.precision;
  if (o.loss.from_model()) m.loss = o.loss.model_output;
  return pass_text("mixed-precision", m);
}

}  // namespace

std::string lora_step(const TrainingPipelineOptions& o) {
  return o.lora.targets.empty() ? "" : pass_text("lora", o.lora);
}

LossSpec LossSpec::parse(const std::string& text, const std::string& what) {
  LossSpec s;
  if (text.rfind("model:", 0) == 0 && text.size() > 6) {
    s.model_output = text.substr(6);
    return s;
  }
  if (auto t = enum_names(LossType{}).find(text)) {
    s.add.type = *t;
    return s;
  }
  fail(what, " must be ce, mse or model:NAME, got '", text, "'");
}

std::string LossSpec::text() const { return from_model() ? "model:" + model_output : enum_name(add.type); }

LossScaleOptions default_loss_scale(Precision p) {
  LossScaleOptions s;
  s.mode = p == Precision::kFp16 ? LossScaleMode::kDynamic : LossScaleMode::kOff;
  return s;
}

LossScaleOptions loss_scale_options(const TrainingPipelineOptions& o) {
  return o.loss_scale.value_or(default_loss_scale(o.precision));
}

std::string gradient_pipeline(const TrainingPipelineOptions& o) {
  // The head of training_pipeline(): the same parameter selection as a training session.
  std::string text = pass_text("batchnorm-mode", o.batchnorm) + ",canonicalize";
  if (!o.lora.targets.empty()) text += "," + lora_step(o);
  text += ",freeze-unreachable";
  if (o.fuse_attention.enabled) text += "," + pass_text("fuse-attention", o.fuse_attention);
  if (o.fuse_bias_gelu.enabled) text += "," + pass_text("fuse-bias-gelu", o.fuse_bias_gelu);
  if (o.fuse_softmax_ce.enabled) text += "," + pass_text("fuse-softmax-ce", o.fuse_softmax_ce);
  if (o.fuse_add_layernorm.enabled) text += "," + pass_text("fuse-add-layernorm", o.fuse_add_layernorm);
  if (o.fold_transpose.enabled) text += "," + pass_text("fold-transpose", o.fold_transpose);
  if (!o.loss.from_model()) text += "," + pass_text("add-loss", o.loss.add);
  if (o.precision != Precision::kFp32) text += "," + mixed_precision_step(o);
  text += "," + autodiff_step(o);
  // One pass has no scale to adapt: a dynamic scale is its initial value, fixed.
  LossScaleOptions scale = loss_scale_options(o);
  if (scale.mode != LossScaleMode::kOff) {
    LossScaleOptions fixed;
    fixed.mode = LossScaleMode::kStatic;
    fixed.init = scale.init;
    text += "," + pass_text("loss-scale", fixed);
  }
  if (o.recompute.policy != RecomputePolicy::kNone) text += "," + pass_text("recompute", o.recompute);
  return text;
}

std::string eval_pipeline(const TrainingPipelineOptions& o) {
  // eval-mode after canonicalize: while the running statistics are still state, folding cannot
  // bake them into constants, so an evaluator can feed the trained ones by name.
  // The adapters join before eval-mode, which turns their Dropout off.
  std::string text = "canonicalize";
  if (!o.lora.targets.empty()) text += "," + lora_step(o);
  text += ",eval-mode";
  if (!o.loss.from_model()) text += "," + pass_text("add-loss", o.loss.add);
  return text;
}

namespace {

// The forward-graph rewrites of training_pipeline(), each an optimisation left out where not
// registered.
void forward_rewrites(const TrainingPipelineOptions& o, const PassRegistry& registry, std::vector<std::string>& steps) {
  // Attention fuses in the forward graph: mixed precision casts the fused op as one GEMM-like op,
  // autodiff differentiates it (ai.otter.AttentionGrad recomputes the probabilities per block
  // instead of keeping them) and recompute sees one contraction to keep, not a Softmax to redo.
  // After lora (its targets are the q/k/v projections, which fusion leaves alone) and after
  // freeze-unreachable (it reads the exported ops). An optimisation: left out where not registered.
  if (o.fuse_attention.enabled && registry.has("fuse-attention"))
    steps.push_back(pass_text("fuse-attention", o.fuse_attention));
  // The bias Add and the exported GELU chain become one BiasGelu the same way, in the forward graph
  // for the same reasons (its gradient recomputes the pre-activation instead of keeping five
  // intermediates). It touches no Softmax or MatMul, so the order against fuse-attention is free.
  if (o.fuse_bias_gelu.enabled && registry.has("fuse-bias-gelu"))
    steps.push_back(pass_text("fuse-bias-gelu", o.fuse_bias_gelu));
  // A loss the model carries (NegativeLogLikelihoodLoss of LogSoftmax) becomes SoftmaxCrossEntropyLoss
  // in the forward graph, before add-loss (which appends its own, already fused) and before mixed
  // precision (which keeps the loss subgraph fp32) and autodiff (whose SoftmaxCrossEntropyLossGrad
  // recomputes the softmax instead of keeping the log-probabilities). It touches no MatMul, GELU
  // chain or attention Softmax (the class axis of a loss), so the order against the fusions is free.
  if (o.fuse_softmax_ce.enabled && registry.has("fuse-softmax-ce"))
    steps.push_back(pass_text("fuse-softmax-ce", o.fuse_softmax_ce));
  // The residual Add and the LayerNormalization reading it become one AddLayerNorm, in the forward
  // graph too: mixed precision casts it as LayerNormalization (FP32), autodiff gives it one
  // LayerNormalizationGrad that adds the sum's other gradient in its loop. It reads no GELU chain,
  // MatMul or Softmax, so the order against the other fusions is free.
  if (o.fuse_add_layernorm.enabled && registry.has("fuse-add-layernorm"))
    steps.push_back(pass_text("fuse-add-layernorm", o.fuse_add_layernorm));
  // Weight Transposes fold into Gemm {transB=1} in the forward graph, so autodiff emits no
  // Transpose for the weight gradients either. After lora (which reads MatMul through Transpose)
  // and the fusions (which read MatMuls of rank 4); left out where not registered.
  if (o.fold_transpose.enabled && registry.has("fold-transpose"))
    steps.push_back(pass_text("fold-transpose", o.fold_transpose));
}

}  // namespace

std::string training_pipeline(const TrainingPipelineOptions& o, const PassRegistry& registry) {
  const LossScaleOptions scale = loss_scale_options(o);
  std::vector<std::string> steps;
  // Running statistics become state (or constants) before canonicalize could fold them.
  steps.push_back(pass_text("batchnorm-mode", o.batchnorm));
  // Fold constants and shape arithmetic first: every later pass then sees static shapes and no
  // Constant/Identity nodes, and the backward graph is not built for arithmetic that folds away.
  steps.push_back("canonicalize");
  // Adapters join the forward graph before the loss, mixed precision and autodiff see it: their
  // branches are cast like the rest, and every other parameter is a constant from here on.
  if (!o.lora.targets.empty()) {
    require(registry, "lora", "lora");
    steps.push_back(lora_step(o));
  }
  // Once the adapters are connected, parameters no differentiable path takes to an output freeze.
  steps.push_back("freeze-unreachable");
  forward_rewrites(o, registry, steps);
  // The loss joins the forward graph before anything reads the forward graph as a whole: mixed
  // precision must see the loss subgraph (to keep it fp32) and autodiff differentiates it.
  if (!o.loss.from_model()) steps.push_back(pass_text("add-loss", o.loss.add));
  // Casts go into the forward graph before autodiff, so the gradient of each Cast is a Cast back
  // and weight gradients come out in fp32 (docs/mixed-precision.md).
  if (o.precision != Precision::kFp32) {
    require(registry, "mixed-precision", "precision " + enum_name(o.precision));
    steps.push_back(mixed_precision_step(o));
  }
  // The backward graph, seeded with 1: the seed becomes S/K once loss-scale records S and
  // grad-accumulation records K (passes/backward_seed.h).
  steps.push_back(autodiff_step(o));
  // Scaling makes S state the apply program updates; before or after accumulation alike.
  if (scale.mode != LossScaleMode::kOff) {
    require(registry, "loss-scale", "loss scale " + enum_name(scale.mode));
    steps.push_back(pass_text("loss-scale", scale));
  }
  // Recomputation rewrites the backward graph's reads of forward values, before accumulation fuses
  // the weight-gradient GEMMs (a GEMM reading a recomputed activation fuses the same way).
  if (o.recompute.policy != RecomputePolicy::kNone) {
    require(registry, "recompute", "recompute " + enum_name(o.recompute.policy));
    steps.push_back(pass_text("recompute", o.recompute));
  }
  // Accumulators replace the gradient outputs (and fuse into weight-gradient GEMMs): after this the
  // micro-step program is complete and the optimizer reads the accumulators only.
  GradAccumulationOptions accumulation;
  accumulation.steps = o.accum;
  steps.push_back(pass_text("grad-accumulation", accumulation));
  // The apply program: finite check, unscale (1/S) and clipping, update, step count; it reads the
  // accumulators, so it comes last of the training passes.
  steps.push_back(pass_text("optimizer", o.optimizer));
  // Mixed precision: the weights' half copies become state the updates write, once per step.
  if (o.precision != Precision::kFp32) {
    require(registry, "hoist-weight-casts", "precision " + enum_name(o.precision));
    steps.push_back("hoist-weight-casts");
    // The Casts mixed-precision left around data movement and BiasGelu, and the duplicates and
    // round trips autodiff made, go (exact: the same bits, fewer bytes converted and moved).
    if (o.cast_elimination.enabled && registry.has("cast-elimination"))
      steps.push_back(pass_text("cast-elimination", o.cast_elimination));
  }
  // Data parallelism: the accumulators are averaged across ranks before the apply program reads them,
  // so the finite check, clipping and the update see the same gradients on every rank. After the
  // half copies are hoisted, so that zero=1 shards each update with its half copy.
  if (o.all_reduce.world > 1) {
    require(registry, "all-reduce", "data parallelism");
    steps.push_back(pass_text("all-reduce", o.all_reduce));
  }
  // Buffers are planned on the final graph (the session fixes the batch size first, so shapes are
  // static): any rewrite after this would invalidate the plan.
  if (registry.has("memory-plan")) steps.push_back("memory-plan");
  std::string text;
  for (const std::string& s : steps) text += (text.empty() ? "" : ",") + s;
  return text;
}

}  // namespace otter
