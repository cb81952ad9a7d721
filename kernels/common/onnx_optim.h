// Per-element updates of the ONNX training-preview optimizers (domain ai.onnx.preview.training,
// opset 1: Adagrad, Adam, Momentum), shared by the CPU and CUDA backends. Their formulas differ
// from torch.optim's (kernels/common/optim.h): the L2 term is `norm_coefficient * X` added to the
// gradient, epsilon is added after the square root, and the step-dependent factors are scalars the
// caller computes once per node (see docs/ops.md).
#pragma once

#include <cmath>

#include "kernels/common/half.h"

namespace otter {

// Adagrad: r = R / (1 + T * decay_factor) (computed by the caller);
//   g' = norm_coefficient * x + g;  h += g'^2;  x -= r * g' / (sqrt(h) + epsilon).
struct OnnxAdagradParams {
  double r, norm_coefficient, epsilon;
};
template <typename T>
OTTER_HD void onnx_adagrad_element(T& x, T g, T& h, const OnnxAdagradParams& p) {
  const T gr = static_cast<T>(p.norm_coefficient) * x + g;
  using std::sqrt;
  h = h + gr * gr;
  x = x - static_cast<T>(p.r) * gr / (sqrt(h) + static_cast<T>(p.epsilon));
}

// Adam: r = T > 0 ? R * sqrt(1 - beta^T) / (1 - alpha^T) : R (computed by the caller);
//   g' = norm_coefficient * x + g;  v = alpha v + (1 - alpha) g';  h = beta h + (1 - beta) g'^2;
//   x = (1 - norm_coefficient_post) * (x - r * v / (sqrt(h) + epsilon)).
struct OnnxAdamParams {
  double r, alpha, beta, epsilon, norm_coefficient, norm_coefficient_post;
};
template <typename T>
OTTER_HD void onnx_adam_element(T& x, T g, T& v, T& h, const OnnxAdamParams& p) {
  const T gr = static_cast<T>(p.norm_coefficient) * x + g;
  const T a = static_cast<T>(p.alpha), b = static_cast<T>(p.beta);
  v = a * v + (T(1) - a) * gr;
  h = b * h + (T(1) - b) * gr * gr;
  using std::sqrt;
  const T moved = x - static_cast<T>(p.r) * (v / (sqrt(h) + static_cast<T>(p.epsilon)));
  x = (T(1) - static_cast<T>(p.norm_coefficient_post)) * moved;
}

// Momentum: beta' = T > 0 ? beta : 1 (computed by the caller);
//   g' = norm_coefficient * x + g;  v = alpha v + beta' g';
//   standard: x -= R * v;  nesterov: x -= R * (g' + alpha v).
struct OnnxMomentumParams {
  double r, alpha, beta, norm_coefficient;
  bool nesterov;
};
template <typename T>
OTTER_HD void onnx_momentum_element(T& x, T g, T& v, const OnnxMomentumParams& p) {
  const T gr = static_cast<T>(p.norm_coefficient) * x + g;
  const T a = static_cast<T>(p.alpha);
  v = a * v + static_cast<T>(p.beta) * gr;
  x = x - static_cast<T>(p.r) * (p.nesterov ? gr + a * v : v);
}

}  // namespace otter
