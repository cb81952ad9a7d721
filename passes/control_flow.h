// Control flow that canonicalize removes (passes/canonicalize.h): an If whose condition is a
// constant becomes the taken branch, inlined; a Loop with a static trip count (see
// loop_static_trip_count in graph/control_flow.h) and a Scan with a static sequence length are
// unrolled: one copy of the body per iteration, the carried values threaded from copy to copy,
// the scan inputs sliced with Gather and each scan output stacked with Unsqueeze + Concat. The
// node's outputs keep their names. What remains runs on the CPU kernels
// (kernels/cpu/control_flow.cc).
//
//   before: %y = Loop(%m, _, %x) {body}    (m = 2; body(i, c, a) -> (c, Mul(a, a)))
//   after:  %a1 = Mul(%x, %x)
//           %y = Mul(%a1, %a1)
#pragma once

#include "graph/ir.h"

namespace otter {

// Unrolling stops at this many iterations (the graph grows by a body per iteration).
constexpr int64_t kMaxUnrolledIterations = 1024;

// Inlines or unrolls node n where it is an If with a constant condition, a Loop with a static
// trip count or a Scan of static length; returns whether it did (n is then removed).
bool inline_control_flow(Graph& g, Node* n);

}  // namespace otter
