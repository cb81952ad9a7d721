// Derivatives of the element-wise activations as host/device functors shared by the CPU and CUDA
// backends: each maps (dY, forward value) to dX, where the forward value is X or Y as its op says
// (ReluGrad, SigmoidGrad and TanhGrad read Y; the others read X). Same conventions as
// elementwise.h: a templated operator() over float or double, half types widened by the caller.
#pragma once

#include "kernels/common/elementwise.h"

namespace otter {

// Relu'(x) from y = max(x, 0): 1 where y > 0 (0 at the kink, as PyTorch).
struct ReluGradOp {
  template <typename T> OTTER_HD T operator()(T dy, T y) const { return y > T(0) ? dy : T(0); }
};
// LeakyRelu'(x): 1 for x >= 0 (the forward's branch), alpha below.
struct LeakyReluGradOp {
  float alpha = 0.01f;
  template <typename T>
  OTTER_HD T operator()(T dy, T x) const { return x >= T(0) ? dy : static_cast<T>(dy * static_cast<T>(alpha)); }
};
// sigmoid' = y (1 - y).
struct SigmoidGradOp {
  template <typename T> OTTER_HD T operator()(T dy, T y) const { return dy * y * (T(1) - y); }
};
// tanh' = 1 - y^2.
struct TanhGradOp {
  template <typename T> OTTER_HD T operator()(T dy, T y) const { return dy * (T(1) - y * y); }
};
// erf'(x) = 2 / sqrt(pi) * exp(-x^2).
struct ErfGradOp {
  template <typename T>
  OTTER_HD T operator()(T dy, T x) const {
    return dy * static_cast<T>(1.1283791670955126) * math::exp_nonpositive(-x * x);
  }
};
// Gelu'(x): exact Phi(x) + x phi(x); tanh form 0.5 (1 + t) + 0.5 x (1 - t^2) k (1 + 3 c x^2) with
// t = tanh(k (x + c x^3)), k = sqrt(2 / pi), c = 0.044715.
struct GeluGradOp {
  bool tanh_approx = false;
  template <typename T>
  OTTER_HD T operator()(T dy, T x) const {
    if (tanh_approx) {
      const T k = static_cast<T>(0.7978845608028654), c = static_cast<T>(0.044715);
      const T t = math::tanh(k * (x + c * x * x * x));
      const T d = static_cast<T>(0.5) * (T(1) + t) +
                  static_cast<T>(0.5) * x * (T(1) - t * t) * k * (T(1) + T(3) * c * x * x);
      return dy * d;
    }
    const T cdf = static_cast<T>(0.5) * (T(1) + math::erf(x * static_cast<T>(0.7071067811865476)));
    const T pdf = static_cast<T>(0.3989422804014327) * math::exp_nonpositive(static_cast<T>(-0.5) * x * x);
    return dy * (cdf + x * pdf);
  }
};
// ai.otter.BiasGeluGrad: Gelu'(x + b) dY, GeluGradOp's exact form at the recomputed pre-activation.
struct BiasGeluGradOp {
  template <typename T> OTTER_HD T operator()(T dy, T x, T b) const { return GeluGradOp{}(dy, x + b); }
};
// softplus' = sigmoid(x).
struct SoftplusGradOp {
  template <typename T> OTTER_HD T operator()(T dy, T x) const { return dy * SigmoidOp{}(x); }
};
// softsign' = 1 / (1 + |x|)^2.
struct SoftsignGradOp {
  template <typename T>
  OTTER_HD T operator()(T dy, T x) const {
    const T d = T(1) + math::abs(x);
    return dy / (d * d);
  }
};
// |x|' = sign(x) (0 at 0, as PyTorch).
struct AbsGradOp {
  template <typename T>
  OTTER_HD T operator()(T dy, T x) const { return x > T(0) ? dy : (x < T(0) ? -dy : T(0)); }
};
// Clip: which of (x, min, max) the forward ClipOp returned, as 0, 1, 2; the gradient goes there.
template <typename T>
struct ClipGradOp {
  T lo, hi;
  OTTER_HD int source(T x) const { return x < lo ? 1 : (x > hi ? 2 : 0); }
};
// Dropout: kept elements scaled by 1 / (1 - ratio).
struct DropoutGradOp {
  template <typename T> OTTER_HD T operator()(T dy, bool keep, T scale) const { return keep ? dy * scale : T(0); }
};

}  // namespace otter
