// LRN (local response normalization across channels) and its gradient, one element at a time, for
// the CPU and CUDA backends. X's channel c at a fixed (n, spatial) position is x[c * stride]:
//   S_c = bias + alpha / size * sum of x_i^2 over i in [c - floor((size-1)/2), c + ceil((size-1)/2)]
//         (clipped to [0, C)),   y_c = x_c * S_c^-beta;
//   dx_j = dy_j S_j^-beta - (2 alpha beta / size) x_j * sum over c whose window holds j of
//          dy_c x_c S_c^(-beta-1).
#pragma once

#include <cmath>
#include <cstdint>

#include "kernels/common/half.h"

namespace otter {

struct LrnParams {
  float alpha, beta, bias;
  int64_t size;
};

// S_c, accumulated in A.
template <typename A, typename T>
OTTER_HD A lrn_scale(const T* x, int64_t C, int64_t stride, int64_t c, const LrnParams& p) {
  const int64_t lo = c - (p.size - 1) / 2 < 0 ? 0 : c - (p.size - 1) / 2;
  const int64_t hi = c + p.size / 2 > C - 1 ? C - 1 : c + p.size / 2;
  A sum = 0;
  for (int64_t i = lo; i <= hi; ++i) {
    const A v = static_cast<A>(x[i * stride]);
    sum += v * v;
  }
  return static_cast<A>(p.bias) + static_cast<A>(p.alpha) / static_cast<A>(p.size) * sum;
}

template <typename A, typename T>
OTTER_HD A lrn_element(const T* x, int64_t C, int64_t stride, int64_t c, const LrnParams& p) {
  using std::pow;
  return static_cast<A>(x[c * stride]) * pow(lrn_scale<A>(x, C, stride, c, p), -static_cast<A>(p.beta));
}

// dx_j; the windows holding j are those of channels [j - ceil((size-1)/2), j + floor((size-1)/2)].
template <typename A, typename T>
OTTER_HD A lrn_grad_element(const T* dy, const T* x, int64_t C, int64_t stride, int64_t j, const LrnParams& p) {
  using std::pow;
  const A beta = static_cast<A>(p.beta);
  const int64_t lo = j - p.size / 2 < 0 ? 0 : j - p.size / 2;
  const int64_t hi = j + (p.size - 1) / 2 > C - 1 ? C - 1 : j + (p.size - 1) / 2;
  A cross = 0;
  for (int64_t c = lo; c <= hi; ++c) {
    const A s = lrn_scale<A>(x, C, stride, c, p);
    cross += static_cast<A>(dy[c * stride]) * static_cast<A>(x[c * stride]) * pow(s, -beta - 1);
  }
  const A xj = static_cast<A>(x[j * stride]);
  return static_cast<A>(dy[j * stride]) * pow(lrn_scale<A>(x, C, stride, j, p), -beta) -
         A(2) * static_cast<A>(p.alpha) * beta / static_cast<A>(p.size) * xj * cross;
}

}  // namespace otter
