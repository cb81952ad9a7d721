// A sum in double whose order is fixed but vectorisable, for the row reductions of the CPU
// normalisation kernels (kernels/cpu/nn.cc, nn_grad.cc).
#pragma once

#include <cstdint>

namespace otter::cpu {

// The sum of f(0) .. f(n-1) in double over 8 interleaved partial sums (element i into sum i % 8,
// then the 8 in order, then the tail): a fixed order, the same for every ISA variant, that the
// compiler can vectorise (one chain of dependent adds would not be).
template <typename F>
inline double lane_sum(int64_t n, F&& f) {
  constexpr int kLanes = 8;
  double lane[kLanes] = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (int l = 0; l < kLanes; ++l) lane[l] += f(i + l);
  double s = 0;
  for (int l = 0; l < kLanes; ++l) s += lane[l];
  for (; i < n; ++i) s += f(i);
  return s;
}

}  // namespace otter::cpu
