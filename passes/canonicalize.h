// canonicalize: puts an imported graph into the form the later passes expect.
//
// What it does, in one forward sweep over the (topologically ordered) nodes:
//   - Constant nodes become (non-trainable) initializers of the same name;
//   - Shape and Size of a statically shaped value become constants;
//   - a node whose inputs are all constant is evaluated through PassContext::evaluator (the CPU
//     kernels; no second evaluator) and its outputs become constants of the same names;
//   - shape inference is re-run on every node, so Reshapes fed by folded shape arithmetic become
//     static (PyTorch's Shape -> Gather -> Unsqueeze -> Concat -> Reshape chains);
//   - Identity nodes are removed (a graph output keeps its name);
//   - RNN, GRU and LSTM nodes are unrolled over their static sequence length into primitive ops
//     (passes/recurrent.h);
//   - an If with a constant condition becomes its taken branch, and a Loop with a static trip
//     count or a Scan of static length is unrolled (passes/control_flow.h); what they inline is
//     swept again;
//   - dead nodes and unused non-trainable initializers are removed.
// Needs: an evaluator in the PassContext for folding (without one, only the structural rewrites
// run). Does not: fold through parameters or state, fold stochastic ops (Dropout), or fold results
// above 1M elements (they would bloat the model).
//
//   before: %s: i64[2] = Shape(%x)      (x: f32[4,8])        after: const %s: i64[2] = [4,8]
//           %y = Reshape(%x, %s)                                     %y: f32[4,8] = Reshape(%x, %s)
#pragma once

#include "passes/pass.h"

namespace otter {

struct CanonicalizeStats {
  int64_t constants_folded = 0;
  int64_t constant_nodes_lifted = 0;
  int64_t shapes_folded = 0;
  int64_t identities_removed = 0;
  int64_t nodes_removed = 0;
  int64_t initializers_removed = 0;
  int64_t recurrent_unrolled = 0;
  int64_t control_flow_inlined = 0;  // If, Loop and Scan nodes inlined or unrolled
};

// The pass as a free function (tests call it directly).
CanonicalizeStats canonicalize(Graph& g, ConstantEvaluator* evaluator);

class CanonicalizePass : public PassWithOptions<NoOptions> {
 public:
  std::string name() const override { return "canonicalize"; }
  std::string summary() const override;
  void run(Graph& g, PassContext& ctx) override;
};

}  // namespace otter
