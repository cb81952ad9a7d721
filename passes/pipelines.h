// The training pipeline as one function of its options: the pass text that turns an inference
// model into a training graph (micro-step and apply programs), so that it can be printed
// (`otter-train train --print-pipeline`), replayed (`otter-opt --passes '...'`) and reordered in
// one place. The options are the passes' own option structs (passes/options.h); the text is
// printed from them. The named pipeline `default-train` is this function of the default options.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "passes/add_loss.h"
#include "passes/batchnorm_mode.h"
#include "passes/fuse_attention.h"
#include "passes/cast_elimination.h"
#include "passes/fold_transpose.h"
#include "passes/fuse_add_layernorm.h"
#include "passes/fuse_bias_gelu.h"
#include "passes/fuse_softmax_ce.h"
#include "passes/all_reduce.h"
#include "passes/lora.h"
#include "passes/loss_scale.h"
#include "passes/mixed_precision.h"
#include "passes/optimizer.h"
#include "passes/pass_manager.h"
#include "passes/recompute.h"

namespace otter {

// Which loss a pipeline trains: the one add-loss appends (ce or mse on `add.output` against
// `add.labels`), or the model's own scalar output (`model:NAME`). Written as the --loss flag is,
// and parsed from it once.
struct LossSpec {
  AddLossOptions add;        // used when model_output is empty
  std::string model_output;  // model:NAME: the model already outputs its scalar loss NAME
  // "ce" | "mse" | "model:NAME"; fails with "<what> must be ce, mse or model:NAME, got '...'".
  static LossSpec parse(const std::string& text, const std::string& what = "loss");
  std::string text() const;  // back to ce | mse | model:NAME
  bool from_model() const { return !model_output.empty(); }
  // The loss value's name: NAME for model:NAME, else add-loss's ("loss").
  const std::string& value_name() const { return from_model() ? model_output : add.loss; }
  bool operator==(const LossSpec&) const = default;
};

struct TrainingPipelineOptions {
  LossSpec loss;                               // add-loss, or the model's own loss
  Precision precision = Precision::kFp32;      // mixed-precision when fp16 or bf16
  std::optional<LossScaleOptions> loss_scale;  // unset: default_loss_scale(precision)
  int64_t accum = 1;                           // K: micro-batches per optimizer step (grad-accumulation)
  OptimizerOptions optimizer;
  GlobList freeze;  // parameter name globs that are not trained (autodiff)
  BatchNormModeOptions batchnorm;  // BatchNorm as model.train() or on frozen statistics (batchnorm-mode)
  LoraOptions lora;  // low-rank adapters (lora pass): on when lora.targets is not empty
  FuseAttentionOptions fuse_attention;  // fused attention (fuse-attention pass): on unless enabled=false
  // Fused bias + GELU (fuse-bias-gelu pass): on unless enabled=false. Less activation memory and,
  // with the vectorised erf, a faster step on the CPU (docs/performance.md, "fuse-bias-gelu").
  FuseBiasGeluOptions fuse_bias_gelu;
  // A model's own NegativeLogLikelihoodLoss of LogSoftmax (or of Log(Softmax)) as one
  // SoftmaxCrossEntropyLoss (fuse-softmax-ce pass): on unless enabled=false. The [N,C]
  // log-probabilities are no longer kept for the backward pass.
  FuseSoftmaxCeOptions fuse_softmax_ce;
  // Residual Add + LayerNormalization fused (fuse-add-layernorm pass): on unless enabled=false. One
  // pass over the residual stream instead of two (docs/performance.md, "Residual Add + LayerNorm fusion").
  FuseAddLayerNormOptions fuse_add_layernorm;
  // Linear layers' weight Transposes folded into Gemm {transB=1} (fold-transpose pass): on unless
  // enabled=false. No Transpose of a weight or of its gradient in the step.
  FoldTransposeOptions fold_transpose;
  // Casts moved, merged and taken into BiasGelu after the half copies are hoisted
  // (cast-elimination pass): with fp16/bf16, on unless enabled=false. Exact: the same bits.
  CastEliminationOptions cast_elimination;
  RecomputeOptions recompute;  // activation recomputation (recompute pass): on unless policy none
  AllReduceOptions all_reduce;  // data parallelism (all-reduce pass): on when all_reduce.world > 1
  bool operator==(const TrainingPipelineOptions&) const = default;
};

// The lora pass text of the options ("" when LoRA is off).
std::string lora_step(const TrainingPipelineOptions& o);

// The loss scaling a precision trains with unless asked otherwise: dynamic for fp16 (its narrow
// exponent range flushes small gradients), off for fp32 and bf16. The one place the default is made.
LossScaleOptions default_loss_scale(Precision p);
// The loss scaling the options ask for: `o.loss_scale`, else the precision's default.
LossScaleOptions loss_scale_options(const TrainingPipelineOptions& o);

// The pipeline text, for example
//   canonicalize,add-loss{type=ce},autodiff,grad-accumulation{steps=4},optimizer{type=adamw,lr=0.001}
// Fails when an option is out of range or the pipeline needs a pass `registry` does not have.
std::string training_pipeline(const TrainingPipelineOptions& o,
                              const PassRegistry& registry = PassRegistry::instance());

// The pipeline up to the backward graph (canonicalize, the loss, mixed precision when asked,
// autodiff with the freeze globs, a fixed loss scale when scaling is on): a graph whose outputs are
// the loss and every trainable parameter's gradient (times the scale S), as `otter-train grad` runs
// it. No accumulation or optimizer.
std::string gradient_pipeline(const TrainingPipelineOptions& o);

// The evaluation pipeline over the original model: canonicalize, eval-mode (BatchNorm on running
// statistics, no Dropout), and the same loss as training (none for model:NAME).
std::string eval_pipeline(const TrainingPipelineOptions& o);

}  // namespace otter
