// Conversions between the 16-bit float types and float32 for whole tensors, used by the CPU
// kernels that compute half-precision ops in float32 (kernels/cpu/half.cc).
#pragma once

#include "graph/tensor.h"

namespace otter::cpu {

// A float32 copy of a float16/bfloat16 tensor (exact).
Tensor widen_to_float(const Tensor& t);
// The same into `out` (float32, t's dims).
void widen_into(const Tensor& t, Tensor& out);
// Rounds a float32 tensor into a float16/bfloat16 one of the same dims, to nearest even.
void round_into(const Tensor& src, Tensor& dst);

}  // namespace otter::cpu
