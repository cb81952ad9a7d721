// The one place every built-in pass and named pipeline is registered.
#include "passes/add_loss.h"
#include "passes/all_reduce.h"
#include "passes/autodiff.h"
#include "passes/canonicalize.h"
#include "passes/cast_elimination.h"
#include "passes/eval_mode.h"
#include "passes/fuse_attention.h"
#include "passes/fold_transpose.h"
#include "passes/fuse_add_layernorm.h"
#include "passes/fuse_bias_gelu.h"
#include "passes/fuse_softmax_ce.h"
#include "passes/grad_accumulation.h"
#include "passes/lora.h"
#include "passes/batchnorm_mode.h"
#include "passes/hoist_weight_casts.h"
#include "passes/loss_scale.h"
#include "passes/memory_plan.h"
#include "passes/mixed_precision.h"
#include "passes/optimizer.h"
#include "passes/pass_manager.h"
#include "passes/pipelines.h"
#include "passes/recompute.h"

namespace otter {

void register_all_passes(PassRegistry& r) {
  // The order in which the training pipeline runs these, and why: passes/pipelines.cc.
  r.add("canonicalize", [] { return std::make_unique<CanonicalizePass>(); });
  r.add("eval-mode", [] { return std::make_unique<EvalModePass>(); });
  r.add("batchnorm-mode", [] { return std::make_unique<BatchNormModePass>(); });
  r.add("lora", [] { return std::make_unique<LoraPass>(); });
  r.add("freeze-unreachable", [] { return std::make_unique<FreezeUnreachablePass>(); });
  r.add("fuse-attention", [] { return std::make_unique<FuseAttentionPass>(); });
  r.add("fuse-bias-gelu", [] { return std::make_unique<FuseBiasGeluPass>(); });
  r.add("fuse-softmax-ce", [] { return std::make_unique<FuseSoftmaxCePass>(); });
  r.add("fuse-add-layernorm", [] { return std::make_unique<FuseAddLayerNormPass>(); });
  r.add("fold-transpose", [] { return std::make_unique<FoldTransposePass>(); });
  r.add("add-loss", [] { return std::make_unique<AddLossPass>(); });
  r.add("mixed-precision", [] { return std::make_unique<MixedPrecisionPass>(); });
  r.add("autodiff", [] { return std::make_unique<AutodiffPass>(); });
  r.add("loss-scale", [] { return std::make_unique<LossScalePass>(); });
  r.add("recompute", [] { return std::make_unique<RecomputePass>(); });
  r.add("grad-accumulation", [] { return std::make_unique<GradAccumulationPass>(); });
  r.add("optimizer", [] { return std::make_unique<OptimizerPass>(); });
  r.add("all-reduce", [] { return std::make_unique<AllReducePass>(); });
  r.add("hoist-weight-casts", [] { return std::make_unique<HoistWeightCastsPass>(); });
  r.add("cast-elimination", [] { return std::make_unique<CastEliminationPass>(); });
  // Last: it plans the final graph's buffers; any later rewrite would invalidate the plan.
  r.add("memory-plan", [] { return std::make_unique<MemoryPlanPass>(); });
  // Named pipelines last: they are built from the passes registered above.
  r.add_alias("default-train", training_pipeline(TrainingPipelineOptions{}, r),
              "the training pipeline of otter-train's defaults (cross-entropy, fp32, K=1, AdamW lr=1e-3)");
}

}  // namespace otter
