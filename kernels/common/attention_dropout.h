// Dropout inside ai.otter.Attention (graph/ops/attention.cc): which probabilities are dropped is a
// pure function of the seed and the probability's flat index over [..., H, S, T], so that the
// backward pass and the CUDA kernels regenerate the forward's mask without storing it, in any
// block order. Element e's bits are the e-th output of SplitMix64 (Steele, Lea and Flood, "Fast
// splittable pseudorandom number generators", OOPSLA 2014) seeded with `seed`; e is kept when the
// upper 32 bits are >= ratio * 2^32, as the Dropout kernels decide (kernels/cpu/nn.cc), and a kept
// probability is scaled by 1 / (1 - ratio).
#pragma once

#include <cmath>
#include <cstdint>

#include "graph/half.h"

namespace otter::attn {

OTTER_HD uint32_t dropout_bits(uint64_t seed, uint64_t e) {
  uint64_t z = seed + (e + 1) * 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return static_cast<uint32_t>((z ^ (z >> 31)) >> 32);
}

struct Dropout {
  uint64_t seed = 0;
  uint64_t threshold = 0;  // ratio * 2^32; 0: nothing dropped
  float scale = 1;         // 1 / (1 - ratio)
  OTTER_HD bool on() const { return threshold != 0; }
  // The factor of probability e: 0 (dropped) or `scale`.
  OTTER_HD float factor(uint64_t e) const { return dropout_bits(seed, e) >= threshold ? scale : 0.f; }
};

inline Dropout make_dropout(double ratio, uint64_t seed) {
  Dropout d;
  if (!(ratio > 0)) return d;
  d.seed = seed;
  d.threshold = static_cast<uint64_t>(std::ldexp(ratio, 32));
  d.scale = static_cast<float>(1.0 / (1.0 - ratio));
  return d;
}

}  // namespace otter::attn
