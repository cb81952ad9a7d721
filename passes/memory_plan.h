// memory-plan: places the node-produced values of each program in one arena, so the executor
// allocates nothing per step for them and live buffers never overlap.
//
// For each program (micro-step, apply) in node order: a value's interval runs from the node that
// writes it to the last node that reads it or any view of it (ops whose kernels may return an
// output as a view of an input are declared in the op table, OpDef::views). Where an op may
// compute in place (OpDef::inplace) and its input 0 dies at that node with the output's size, the
// output takes over the input's buffer. The remaining buffers are placed best-fit, largest first,
// at `alignment`-byte offsets, against every buffer whose interval overlaps.
// Needs: static shapes (the training session fixes the batch size first); run it last: any later
// rewrite invalidates the plan (the verifier then reports it).
// Does not: plan graph outputs, state updates, views, or values of dynamic shape (they are
// allocated when produced), nor move nodes to shorten lifetimes.
//
//   before: %h = Gemm(%x, %w1)  %a = Relu(%h)  %logits = Gemm(%a, %w2)
//   after:  plan micro-step: arena 16384 B (free-after-last-use peak 32768 B)
//             %h @0 16384 B [0..1]   %a @0 16384 B [1..2] reuses %h
#pragma once

#include "passes/pass.h"

namespace otter {

struct MemoryPlanStats {
  int64_t planned = 0;       // values placed in an arena
  int64_t inplace = 0;       // of those, buffers taken over from a dying input
  int64_t arena_bytes = 0;   // summed over programs
  int64_t unplanned_peak_bytes = 0;
};

struct MemoryPlanOptions {
  int64_t alignment = 64;  // bytes, a power of two
  bool operator==(const MemoryPlanOptions&) const = default;
  static const OptionTable<MemoryPlanOptions>& table();
};

MemoryPlanStats plan_memory(Graph& g, int64_t alignment = 64);

class MemoryPlanPass : public PassWithOptions<MemoryPlanOptions> {
 public:
  std::string name() const override { return "memory-plan"; }
  std::string summary() const override;
  void run(Graph& g, PassContext& ctx) override;
};

}  // namespace otter
