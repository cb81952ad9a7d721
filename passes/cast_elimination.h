// cast-elimination: removes Casts that change nothing and merges Casts that duplicate each other.
//
// `cast-elimination`. Needs nothing; runs on any graph (after mixed-precision, or in the cleanup
// at the end of the training pipeline). Over every Cast node, in order:
//   - a Cast to its input's own type is dropped (counter casts_removed);
//   - Cast(Cast(x, B), C) reads x directly when the first Cast is exact (x's type widens into B
//     without loss: f16/bf16 -> f32 -> f64, i8/u8 -> i32 -> i64, bool -> any): the pair becomes
//     Cast(x, C), or nothing when C is x's own type (f16 -> f32 -> f16). A pair whose first Cast
//     rounds (f32 -> f16 -> f32) changes values and stays (counter casts_removed);
//   - Casts of one value to one type in one program are merged into the first (counter
//     casts_merged).
// A Cast that produces a graph output keeps its name and stays; Casts left without users go.
// Does not: move Casts, fold Casts of constants (canonicalize does), or touch float64 round trips
// through float32.
//
//   before: %a: f32[N] = Cast(%x) {to=1}      (x: f16[N])
//           %b: f16[N] = Cast(%a) {to=10}
//           %y = Relu(%b)
//   after:  %y = Relu(%x)
#pragma once

#include "passes/pass.h"

namespace otter {

struct CastEliminationStats {
  int64_t casts_removed = 0;
  int64_t casts_merged = 0;
};

CastEliminationStats eliminate_casts(Graph& g);

// True when every value of type `from` converts to `to` exactly (so converting back restores it).
bool cast_is_exact(DataType from, DataType to);

class CastEliminationPass : public PassWithOptions<NoOptions> {
 public:
  std::string name() const override { return "cast-elimination"; }
  std::string summary() const override;
  void run(Graph& g, PassContext& ctx) override;
};

}  // namespace otter
