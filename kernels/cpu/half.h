// Conversions between the 16-bit float types and float32 for whole tensors, used by the CPU
// kernels that compute half-precision ops in float32 (kernels/cpu/half.cc).
#pragma once

#include <cstdint>

#include "graph/tensor.h"

namespace otter::cpu {

// A float32 copy of a float16/bfloat16 tensor (exact).
Tensor widen_to_float(const Tensor& t);
// The same into `out` (float32, t's dims).
void widen_into(const Tensor& t, Tensor& out);
// Rounds a float32 tensor into a float16/bfloat16 one of the same dims, to nearest even.
void round_into(const Tensor& src, Tensor& dst);

// Runs of n values on the calling thread (callers that split their work into rows run these per
// row): bfloat16 bits widened to float32 (exact), and float32 rounded to bfloat16 bits, to nearest
// even (the values of round_into).
void widen_bf16(const uint16_t* x, float* y, int64_t n);
void round_to_bf16(const float* x, uint16_t* y, int64_t n);

}  // namespace otter::cpu
