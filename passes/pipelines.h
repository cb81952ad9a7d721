// The training pipeline as one function of its options: the pass text that turns an inference
// model into a training graph (micro-step and apply programs), so that it can be printed
// (`otter-train train --print-pipeline`), replayed (`otter-opt --passes '...'`) and reordered in
// one place. The named pipeline `default-train` is this function of the default options.
#pragma once

#include <string>
#include <vector>

#include "passes/lora.h"
#include "passes/optimizer.h"
#include "passes/pass_manager.h"

namespace otter {

struct TrainingPipelineOptions {
  // ---- the loss (add-loss) --------------------------------------------------------------------
  std::string loss = "ce";       // ce | mse | model:NAME (the model already outputs a scalar loss NAME)
  std::string output;            // model output the loss reads (empty: the first graph output)
  std::string labels = "labels";  // name of the labels input
  // ---- mixed precision (mixed-precision, loss-scale): passes of their own issue ---------------
  std::string precision = "fp32";  // fp32 | fp16 | bf16
  std::string loss_scale;          // dynamic | static | off; empty: dynamic for fp16, else off
  double init_scale = 65536;       // initial (dynamic) or fixed (static) loss scale
  int64_t scale_interval = 2000;   // good steps before a dynamic scale grows
  // ---- the optimizer step ---------------------------------------------------------------------
  int64_t accum = 1;  // micro-batches per optimizer step (K)
  OptimizerConfig optimizer;
  std::vector<std::string> freeze;  // parameter name globs that are not trained
  // ---- low-rank adapters (lora): on when lora.targets is not empty ---------------------------
  LoraOptions lora;
};

// The lora pass text of the options ("" when LoRA is off).
std::string lora_step(const TrainingPipelineOptions& o);

// The loss-scale mode the options ask for ("off" when none).
std::string loss_scale_mode(const TrainingPipelineOptions& o);

// The pipeline text, for example
//   canonicalize,add-loss{type=ce},autodiff,grad-accumulation{steps=4},optimizer{type=adamw,lr=0.001}
// Fails when the options are inconsistent or ask for a pass `registry` does not have.
std::string training_pipeline(const TrainingPipelineOptions& o,
                              const PassRegistry& registry = PassRegistry::instance());

// The pipeline up to the backward graph (canonicalize, the loss, mixed precision when asked,
// autodiff with the freeze globs, a fixed loss scale when scaling is on): a graph whose outputs are
// the loss and every trainable parameter's gradient (times the scale S), as `otter-train grad` runs
// it. No accumulation or optimizer.
std::string gradient_pipeline(const TrainingPipelineOptions& o);
// The name of the loss value the pipelines train: NAME for model:NAME, else "loss" (add-loss's).
std::string loss_value_name(const TrainingPipelineOptions& o);

// The evaluation pipeline over the original model: canonicalize, eval-mode (BatchNorm on running
// statistics, no Dropout), and the same loss as training (none for model:NAME).
std::string eval_pipeline(const TrainingPipelineOptions& o);

}  // namespace otter
