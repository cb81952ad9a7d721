// The rewrites of cast-elimination (passes/cast_elimination.h) that move Casts or take them into
// their neighbours, each exact: the graph computes the same bits before and after.
#pragma once

#include <cstdint>

#include "graph/ir.h"

namespace otter {

// Values the graph holds on to by name or role (outputs, the loss seed, state updates, gradients):
// they keep their producer.
bool is_pinned_value(const Graph& g, const Value* v);

// Merges Reshapes of one value to one shape (the same shape value, or constants with the same
// contents) in one program into the first: Casts of the reshaped value then merge too. Returns how
// many went.
int64_t merge_duplicate_reshapes(Graph& g);

// Moves Casts across Reshape and Transpose so the data movement runs on the narrower type:
//   Cast(M(y), to=narrow)     -> M(Cast(y, narrow))     where the Cast is M's only reader;
//   M(Cast(x, to=wide))       -> Cast(M(x), wide)       where M is the Cast's only reader and the
//                                                       Cast is exact (f16/bf16 -> f32).
// A widening Cast moved down to a narrowing one leaves an exact round trip (bf16 -> f32 -> bf16),
// which eliminate_casts then drops. Values the graph holds by name (outputs, gradients, state
// updates) stay where they are. Returns how many Casts moved.
int64_t move_casts(Graph& g);

// Takes the Casts around a float32 ai.otter.BiasGelu or bias Add of a half value into one op (the
// bias stays float32; graph/ops/elementwise.cc):
//   Cast(BiasGelu(Cast(x, f32), b), half)  -> BiasGelu(x, b): half   (every reader of Y casts it
//                                                                   back to x's type)
//   BiasGeluGrad(Cast(dy, f32), Cast(x, f32), b) -> BiasGeluGrad(dy, x, b): f32 (dy, x one half type)
//   Add(b, Cast(x, f32))                   -> BiasAdd(x, b) {to=f32}, or BiasAdd(x, b): half where
//                                             every reader casts the sum back (b of x's trailing
//                                             shape: a Linear bias, or a whole float32 tensor such
//                                             as a gradient sum; the sum of x's shape)
//   ReduceSum(Cast(x, f32), axes)          -> ReduceSumF32(x, axes)   (a bias gradient's sum)
// The kernels widen x and dy exactly, compute in float32 as before, and round once. (BiasAdd adds
// x + b where the Add may have had b + x: the same bits, but for which NaN payload survives when
// both operands are NaN.)
// Returns how many nodes changed.
int64_t fuse_casts(Graph& g);

}  // namespace otter
