// Host/device functors of the math op families (graph/ops/math.cc), shared by the CPU kernels
// (kernels/cpu/math.cc) and the CUDA kernels (kernels/cuda/math.cu), so the CPU tests check the GPU
// arithmetic: trigonometric and hyperbolic functions, rounding, Sign, IsNaN / IsInf, the
// activations HardSigmoid ... Shrink and PRelu, and each differentiable op's derivative.
//
// Conventions are those of kernels/common/elementwise.h: a templated operator() over the compute
// type (float or double; Sign and Shrink also integers), half types widened by the caller. A
// derivative functor maps (dY, X) to dX; all read the forward input X.
#pragma once

#include <type_traits>

#include "kernels/common/elementwise.h"

namespace otter {

// ---- more of the math shim (one name, a float and a double overload) ----------------------------
namespace math {
OTTER_HD float sin(float x) { return ::sinf(x); }
OTTER_HD double sin(double x) { return ::sin(x); }
OTTER_HD float cos(float x) { return ::cosf(x); }
OTTER_HD double cos(double x) { return ::cos(x); }
OTTER_HD float tan(float x) { return ::tanf(x); }
OTTER_HD double tan(double x) { return ::tan(x); }
OTTER_HD float asin(float x) { return ::asinf(x); }
OTTER_HD double asin(double x) { return ::asin(x); }
OTTER_HD float acos(float x) { return ::acosf(x); }
OTTER_HD double acos(double x) { return ::acos(x); }
OTTER_HD float atan(float x) { return ::atanf(x); }
OTTER_HD double atan(double x) { return ::atan(x); }
OTTER_HD float sinh(float x) { return ::sinhf(x); }
OTTER_HD double sinh(double x) { return ::sinh(x); }
OTTER_HD float cosh(float x) { return ::coshf(x); }
OTTER_HD double cosh(double x) { return ::cosh(x); }
OTTER_HD float asinh(float x) { return ::asinhf(x); }
OTTER_HD double asinh(double x) { return ::asinh(x); }
OTTER_HD float acosh(float x) { return ::acoshf(x); }
OTTER_HD double acosh(double x) { return ::acosh(x); }
OTTER_HD float atanh(float x) { return ::atanhf(x); }
OTTER_HD double atanh(double x) { return ::atanh(x); }
OTTER_HD float ceil(float x) { return ::ceilf(x); }
OTTER_HD double ceil(double x) { return ::ceil(x); }
OTTER_HD float floor(float x) { return ::floorf(x); }
OTTER_HD double floor(double x) { return ::floor(x); }
// Round half to even (the default rounding mode; neither the CPU nor the GPU code changes it).
OTTER_HD float rint(float x) { return ::rintf(x); }
OTTER_HD double rint(double x) { return ::rint(x); }
OTTER_HD float expm1(float x) { return ::expm1f(x); }
OTTER_HD double expm1(double x) { return ::expm1(x); }
}  // namespace math

// ---- trigonometric and hyperbolic functions, and their derivatives ------------------------------
// OTTER_MATH_UNARY(Name, expr in a): a functor NameOp computing expr.
#define OTTER_MATH_UNARY(Name, expr)   \
  struct Name##Op {                    \
    template <typename T>              \
    OTTER_HD T operator()(T a) const { \
      return expr;                     \
    }                                  \
  };
// OTTER_MATH_GRAD(Name, expr in dy and x): a functor NameGradOp computing expr.
#define OTTER_MATH_GRAD(Name, expr)          \
  struct Name##GradOp {                      \
    template <typename T>                    \
    OTTER_HD T operator()(T dy, T x) const { \
      return expr;                           \
    }                                        \
  };

OTTER_MATH_UNARY(Sin, math::sin(a))
OTTER_MATH_UNARY(Cos, math::cos(a))
OTTER_MATH_UNARY(Tan, math::tan(a))
OTTER_MATH_UNARY(Asin, math::asin(a))
OTTER_MATH_UNARY(Acos, math::acos(a))
OTTER_MATH_UNARY(Atan, math::atan(a))
OTTER_MATH_UNARY(Sinh, math::sinh(a))
OTTER_MATH_UNARY(Cosh, math::cosh(a))
OTTER_MATH_UNARY(Asinh, math::asinh(a))
OTTER_MATH_UNARY(Acosh, math::acosh(a))
OTTER_MATH_UNARY(Atanh, math::atanh(a))
OTTER_MATH_UNARY(Ceil, math::ceil(a))
OTTER_MATH_UNARY(Floor, math::floor(a))
OTTER_MATH_UNARY(Round, math::rint(a))

OTTER_MATH_GRAD(Sin, dy* math::cos(x))
OTTER_MATH_GRAD(Cos, -dy* math::sin(x))
OTTER_MATH_GRAD(Tan, dy / (math::cos(x) * math::cos(x)))
OTTER_MATH_GRAD(Asin, dy / math::sqrt(T(1) - x * x))
OTTER_MATH_GRAD(Acos, -dy / math::sqrt(T(1) - x * x))
OTTER_MATH_GRAD(Atan, dy / (T(1) + x * x))
OTTER_MATH_GRAD(Sinh, dy* math::cosh(x))
OTTER_MATH_GRAD(Cosh, dy* math::sinh(x))
OTTER_MATH_GRAD(Asinh, dy / math::sqrt(x * x + T(1)))
OTTER_MATH_GRAD(Acosh, dy / math::sqrt(x * x - T(1)))
OTTER_MATH_GRAD(Atanh, dy / (T(1) - x * x))

#undef OTTER_MATH_UNARY
#undef OTTER_MATH_GRAD

// Sign: -1, 0 or 1 (NaN stays NaN); unsigned types give 0 or 1.
struct SignOp {
  template <typename T>
  OTTER_HD T operator()(T a) const {
    if constexpr (std::is_unsigned_v<T>)
      return a > T(0) ? T(1) : T(0);
    else
      return a > T(0) ? T(1) : (a < T(0) ? T(-1) : a);
  }
};

// ---- float classification (bool results) --------------------------------------------------------
struct IsNaNOp {
  template <typename T>
  OTTER_HD bool operator()(T a) const {
    return a != a;
  }
};
struct IsInfOp {
  bool positive = true, negative = true;
  template <typename T>
  OTTER_HD bool operator()(T a) const {
    if (math::abs(a) != static_cast<T>(INFINITY)) return false;
    return a > T(0) ? positive : negative;
  }
};

// ---- activations with attributes ----------------------------------------------------------------
// HardSigmoid: max(0, min(1, alpha x + beta)); the derivative is alpha strictly inside (0, 1).
struct HardSigmoidOp {
  float alpha = 0.2f, beta = 0.5f;
  template <typename T>
  OTTER_HD T operator()(T x) const {
    const T v = static_cast<T>(alpha) * x + static_cast<T>(beta);
    return v < T(0) ? T(0) : (v > T(1) ? T(1) : v);
  }
};
struct HardSigmoidGradOp {
  float alpha = 0.2f, beta = 0.5f;
  template <typename T>
  OTTER_HD T operator()(T dy, T x) const {
    const T v = static_cast<T>(alpha) * x + static_cast<T>(beta);
    return v > T(0) && v < T(1) ? dy * static_cast<T>(alpha) : T(0);
  }
};
// HardSwish: x * HardSigmoid(x) with alpha 1/6, beta 1/2. Derivative as PyTorch's: 0 below -3,
// x / 3 + 1/2 on [-3, 3], 1 above.
struct HardSwishOp {
  template <typename T>
  OTTER_HD T operator()(T x) const {
    const T v = x / T(6) + static_cast<T>(0.5);
    return x * (v < T(0) ? T(0) : (v > T(1) ? T(1) : v));
  }
};
struct HardSwishGradOp {
  template <typename T>
  OTTER_HD T operator()(T dy, T x) const {
    if (x < T(-3)) return T(0);
    return x <= T(3) ? dy * (x / T(3) + static_cast<T>(0.5)) : dy;
  }
};
// Elu: x for x > 0, alpha (e^x - 1) below; derivative alpha e^x at and below 0 (as PyTorch).
struct EluOp {
  float alpha = 1.f;
  template <typename T>
  OTTER_HD T operator()(T x) const {
    return x > T(0) ? x : static_cast<T>(alpha) * math::expm1(x);
  }
};
struct EluGradOp {
  float alpha = 1.f;
  template <typename T>
  OTTER_HD T operator()(T dy, T x) const {
    return x > T(0) ? dy : dy * static_cast<T>(alpha) * math::exp(x);
  }
};
// Selu: gamma * Elu_alpha(x).
struct SeluOp {
  float alpha = 1.67326319217681884765625f, gamma = 1.05070102214813232421875f;
  template <typename T>
  OTTER_HD T operator()(T x) const {
    return static_cast<T>(gamma) * EluOp{alpha}(x);
  }
};
struct SeluGradOp {
  float alpha = 1.67326319217681884765625f, gamma = 1.05070102214813232421875f;
  template <typename T>
  OTTER_HD T operator()(T dy, T x) const {
    return static_cast<T>(gamma) * EluGradOp{alpha}(dy, x);
  }
};
// Celu: max(0, x) + min(0, alpha (e^(x / alpha) - 1)); alpha is nonzero (inference checks).
struct CeluOp {
  float alpha = 1.f;
  template <typename T>
  OTTER_HD T operator()(T x) const {
    const T a = static_cast<T>(alpha);
    return x > T(0) ? x : a * math::expm1(x / a);
  }
};
struct CeluGradOp {
  float alpha = 1.f;
  template <typename T>
  OTTER_HD T operator()(T dy, T x) const {
    return x > T(0) ? dy : dy * math::exp(x / static_cast<T>(alpha));
  }
};
// ThresholdedRelu: x where x > alpha, else 0.
struct ThresholdedReluOp {
  float alpha = 1.f;
  template <typename T>
  OTTER_HD T operator()(T x) const {
    return x > static_cast<T>(alpha) ? x : T(0);
  }
};
struct ThresholdedReluGradOp {
  float alpha = 1.f;
  template <typename T>
  OTTER_HD T operator()(T dy, T x) const {
    return x > static_cast<T>(alpha) ? dy : T(0);
  }
};
// Mish: x tanh(softplus(x)); derivative tanh(sp) + x sigmoid(x) (1 - tanh(sp)^2).
struct MishOp {
  template <typename T>
  OTTER_HD T operator()(T x) const {
    return x * math::tanh(SoftplusOp{}(x));
  }
};
struct MishGradOp {
  template <typename T>
  OTTER_HD T operator()(T dy, T x) const {
    const T t = math::tanh(SoftplusOp{}(x));
    return dy * (t + x * SigmoidOp{}(x) * (T(1) - t * t));
  }
};
// Shrink: x + bias below -lambd, x - bias above lambd, else 0 (integers compare and add in
// double, then convert back); the derivative passes dY where |x| > lambd.
struct ShrinkOp {
  float lambd = 0.5f, bias = 0.f;
  template <typename T>
  OTTER_HD T operator()(T x) const {
    using C = std::conditional_t<std::is_floating_point_v<T>, T, double>;
    const C v = static_cast<C>(x), l = static_cast<C>(lambd), b = static_cast<C>(bias);
    return static_cast<T>(v < -l ? v + b : (v > l ? v - b : C(0)));
  }
};
struct ShrinkGradOp {
  float lambd = 0.5f;
  template <typename T>
  OTTER_HD T operator()(T dy, T x) const {
    const T l = static_cast<T>(lambd);
    return x < -l || x > l ? dy : T(0);
  }
};
// PRelu: x for x >= 0, slope * x below (slope broadcast onto x by the caller).
struct PReluOp {
  template <typename T>
  OTTER_HD T operator()(T x, T slope) const {
    if constexpr (std::is_unsigned_v<T>)
      return x;
    else
      return x < T(0) ? static_cast<T>(slope * x) : x;
  }
};

}  // namespace otter
