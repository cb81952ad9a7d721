// cast-elimination: removes Casts that change nothing, merges Casts that duplicate each other, and
// moves or absorbs Casts so that fewer bytes are converted and moved; every rewrite is exact.
//
// `cast-elimination`. Needs nothing; runs on any graph. The training pipeline runs it after
// hoist-weight-casts when the precision is fp16 or bf16 (off with --cast-elimination off). In order:
//   - Reshapes of one value to one shape in one program merge (counter reshapes_merged), so the
//     Casts of the three q/k/v views of one activation merge below;
//   - Casts move across Reshape and Transpose (counter casts_moved): a narrowing Cast that is its
//     movement's only reader moves above it, an exact widening Cast whose only reader is a
//     movement moves below it; the movement then runs on the half type, and a widening Cast that
//     meets a narrowing one leaves a round trip the next step drops (cast_motion.h);
//   - a float32 ai.otter.BiasGelu between a widening Cast of a half X and Casts of its output back
//     to that type reads and writes the half type, its bias float32; BiasGeluGrad reads half dY
//     and X and writes float32 dX (its bias gradient sums it); an Add of a widened half X and a
//     float32 value of X's trailing shape (a Linear bias, or a gradient sum of X's shape) becomes
//     ai.otter.BiasAdd, which writes float32, or the half type where every reader casts the sum
//     back; a ReduceSum of a widened half value becomes ai.otter.ReduceSumF32, which reads the
//     half value (counter casts_fused); the math stays float32;
// then over every Cast node, in order:
//   - a Cast to its input's own type is dropped (counter casts_removed);
//   - Cast(Cast(x, B), C) reads x directly when the first Cast is exact (x's type widens into B
//     without loss: f16/bf16 -> f32 -> f64, i8/u8 -> i32 -> i64, bool -> any): the pair becomes
//     Cast(x, C), or nothing when C is x's own type (f16 -> f32 -> f16). A pair whose first Cast
//     rounds (f32 -> f16 -> f32) changes values and stays (counter casts_removed);
//   - Casts of one value to one type in one program are merged into the first (counter
//     casts_merged).
// A Cast that produces a graph output keeps its name and stays; Casts left without users go.
// `cast-elimination{enabled=false}` does nothing. Does not: fold Casts of constants (canonicalize
// does), touch float64 round trips through float32, or move Casts across other ops.
//
//   before: %a: f32[N] = Cast(%x) {to=1}      (x: f16[N])
//           %b: f16[N] = Cast(%a) {to=10}
//           %y = Relu(%b)
//   after:  %y = Relu(%x)
#pragma once

#include "passes/pass.h"

namespace otter {

struct CastEliminationOptions {
  bool enabled = true;  // false: the pass changes nothing (the training pipeline leaves it out)
  bool operator==(const CastEliminationOptions&) const = default;
  static const OptionTable<CastEliminationOptions>& table();
};

struct CastEliminationStats {
  int64_t casts_removed = 0;
  int64_t casts_merged = 0;
  int64_t casts_moved = 0;
  int64_t reshapes_merged = 0;
  int64_t casts_fused = 0;
};

CastEliminationStats eliminate_casts(Graph& g);

// True when every value of type `from` converts to `to` exactly (so converting back restores it).
bool cast_is_exact(DataType from, DataType to);

class CastEliminationPass : public PassWithOptions<CastEliminationOptions> {
 public:
  std::string name() const override { return "cast-elimination"; }
  std::string summary() const override;
  void run(Graph& g, PassContext& ctx) override;
};

}  // namespace otter
