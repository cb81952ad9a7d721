// Row sums for the CPU normalisation and loss kernels (kernels/cpu/nn.cc, nn_grad.cc): in double,
// in a fixed order that every ISA variant keeps, and vectorisable.
#pragma once

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "kernels/common/elementwise.h"
#include "kernels/cpu/isa.h"

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

// The sum in double of f(i) over the flat indices i of channel c of an [N, C, spatial] tensor
// (BatchNormalization's layout): lane_sum over each image's `spatial` contiguous elements, the
// images added in order.
template <typename F>
inline double channel_sum(int64_t batch, int64_t channels, int64_t spatial, int64_t c, F&& f) {
  double s = 0;
  for (int64_t n = 0; n < batch; ++n) {
    const int64_t base = (n * channels + c) * spatial;
    s += lane_sum(spatial, [&](int64_t i) { return f(base + i); });
  }
  return s;
}

// The sum in double of e^(x[c * stride] - mx) over c in [0, n), every exponent <= 0 (mx is the
// maximum): the exponentials in T through math::exp_nonpositive, a chunk at a time so that they
// vectorise, added in class order.
template <typename T>
inline double exp_sum(const T* x, int64_t n, int64_t stride, T mx) {
  constexpr int64_t kChunk = 64;
  T e[kChunk];
  double sum = 0;
  for (int64_t c0 = 0; c0 < n; c0 += kChunk) {
    const int64_t m = std::min(kChunk, n - c0);
    isa_dispatch_if<std::is_same_v<T, float>>([&] {
      for (int64_t i = 0; i < m; ++i) e[i] = math::exp_nonpositive(x[(c0 + i) * stride] - mx);
    });
    for (int64_t i = 0; i < m; ++i) sum += static_cast<double>(e[i]);
  }
  return sum;
}

}  // namespace otter::cpu
