// The one place every built-in pass and named pipeline is registered.
#include "passes/add_loss.h"
#include "passes/autodiff.h"
#include "passes/canonicalize.h"
#include "passes/cast_elimination.h"
#include "passes/eval_mode.h"
#include "passes/grad_accumulation.h"
#include "passes/loss_scale.h"
#include "passes/mixed_precision.h"
#include "passes/optimizer.h"
#include "passes/pass_manager.h"

namespace otter {

void register_all_passes(PassRegistry& r) {
  // Order of the training pipeline (see default-train in a later pass): canonicalize first so the
  // later passes see static shapes; the loss before autodiff, which differentiates it.
  r.add("canonicalize", [] { return std::make_unique<CanonicalizePass>(); });
  r.add("eval-mode", [] { return std::make_unique<EvalModePass>(); });
  r.add("add-loss", [] { return std::make_unique<AddLossPass>(); });
  r.add("mixed-precision", [] { return std::make_unique<MixedPrecisionPass>(); });
  r.add("autodiff", [] { return std::make_unique<AutodiffPass>(); });
  r.add("loss-scale", [] { return std::make_unique<LossScalePass>(); });
  r.add("grad-accumulation", [] { return std::make_unique<GradAccumulationPass>(); });
  r.add("optimizer", [] { return std::make_unique<OptimizerPass>(); });
  r.add("cast-elimination", [] { return std::make_unique<CastEliminationPass>(); });
}

}  // namespace otter
