// Element-wise arithmetic as host/device functors shared by the CPU and CUDA backends.
//
// Each functor is a small struct with a templated `operator()` over the compute type (float,
// double, or an integer type); half types are widened to float by the caller before they get here.
// Only C math functions with float and double overloads in `otter::math` are used, so the same
// code compiles under nvcc for `__device__`.
#pragma once

#include <math.h>

#include <cstdint>
#include <type_traits>

#include "kernels/common/half.h"

namespace otter {

// ---- a small math shim: one name, a float and a double overload ---------------------------------
namespace math {
#define OTTER_MATH_SHIM(name, float_fn, double_fn)                     \
  OTTER_HD float name(float x) { return ::float_fn(x); }               \
  OTTER_HD double name(double x) { return ::double_fn(x); }
OTTER_MATH_SHIM(exp, expf, exp)
OTTER_MATH_SHIM(log, logf, log)
OTTER_MATH_SHIM(log1p, log1pf, log1p)
OTTER_MATH_SHIM(sqrt, sqrtf, sqrt)
OTTER_MATH_SHIM(abs, fabsf, fabs)
#undef OTTER_MATH_SHIM

// float erf as polynomials of otter's own (fitted to float64 erf by least squares,
// models/fit_erf.py), with no branch and no library call, so a CPU loop of it vectorises (libm's
// erff does not) and the GPU computes the same values. Within 1.5 ulp of the exact erf
// (tests/kernels/math_test.cc checks a sample of every float): |x| < 0.875: x + x P(x^2);
// |x| < 3.92: 1 - erfc(|x|) with erfc a degree-10 polynomial around 1.5375 (|x| < 2.2) or 3.06;
// beyond, 1 (erf(3.92) rounds to 1 in float); the sign of x; NaN stays NaN.
OTTER_HD float erf(float x) {
  const float ax = ::fabsf(x), t = ax * ax;
  float pa = 8.800168143e-05f;
  pa = pa * t - 8.238220471e-04f;
  pa = pa * t + 5.208946764e-03f;
  pa = pa * t - 2.686240152e-02f;
  pa = pa * t + 1.128374636e-01f;
  pa = pa * t - 3.761263788e-01f;
  pa = pa * t + 1.283791661e-01f;
  const float small = ax + ax * pa;
  const bool near = ax < 2.2f;  // the two erfc polynomials, chosen per element
  const float u = ax - (near ? 1.5375f : 3.06f);
  float pb = near ? 9.656073962e-05f : -1.463499302e-05f;
  pb = pb * u + (near ? -1.415657345e-03f : -4.487010301e-06f);
  pb = pb * u + (near ? 1.835831208e-03f : 1.291452645e-04f);
  pb = pb * u + (near ? 5.267412402e-03f : -3.397990658e-04f);
  pb = pb * u + (near ? -1.800451055e-02f : 5.858732038e-04f);
  pb = pb * u + (near ? 1.068221685e-02f : -7.751994999e-04f);
  pb = pb * u + (near ? 4.698853940e-02f : 7.766834460e-04f);
  pb = pb * u + (near ? -1.318744570e-01f : -5.724640214e-04f);
  pb = pb * u + (near ? 1.631693840e-01f : 2.962082799e-04f);
  pb = pb * u + (near ? -1.061264202e-01f : -9.678942297e-05f);
  pb = pb * u + (near ? 2.967860922e-02f : 1.508170408e-05f);
  float r = ax < 0.875f ? small : ax < 3.92f ? 1.0f - pb : 1.0f;
  r = ax == ax ? r : ax;
  return ::copysignf(r, x);
}
OTTER_HD double erf(double x) { return ::erf(x); }

// e^z for float z <= 0 (the Gaussian factors of Erf's and Gelu's derivatives) without a library
// call, so it vectorises: z = n ln2 + r with |r| <= ln2 / 2 (ln2 in two parts), e^r a degree-7
// Taylor polynomial, and 2^n put into the exponent bits. Within 1.5 ulp of exp for z >= -87 (the
// normal range; tests/kernels/math_test.cc); below it 0 (exp is subnormal there), NaN stays NaN.
OTTER_HD float exp_nonpositive(float z) {
  const float zc = z < -87.0f ? -87.0f : z;
  // n = round(zc / ln2) by the 1.5 * 2^23 trick (exact: |zc / ln2| < 2^22).
  const float shifter = 12582912.0f, big = zc * 1.44269504088896341f + shifter;
  const float nf = big - shifter;
  const float r = (zc - nf * 0.693145751953125f) - nf * 1.42860682030941723e-06f;
  float p = 1.0f / 5040.0f;
  p = p * r + 1.0f / 720.0f;
  p = p * r + 1.0f / 120.0f;
  p = p * r + 1.0f / 24.0f;
  p = p * r + 1.0f / 6.0f;
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  const int32_t n = static_cast<int32_t>(float_bits(big) - float_bits(shifter));  // nf as an integer
  const float scale = bits_float(static_cast<uint32_t>(n + 127) << 23);
  const float e = p * scale;
  return z < -87.0f ? 0.0f : z == z ? e : z;
}
OTTER_HD double exp_nonpositive(double z) { return ::exp(z); }
// float tanh without a libm call, so a CPU loop of it vectorises (GPT-2's tanh GELU) and the GPU
// computes the same values: |x| < 0.625, the Taylor series |x| + |x|^3 P(x^2) to x^21; beyond,
// (1 - e) / (1 + e) with e = exp_nonpositive(-2|x|); then the sign of x (tanh(-0) = -0). Within
// 1.6 ulp of the exact tanh (tests/kernels/math_test.cc; glibc's tanhf: 2.2 on the same sample);
// +-1 from |x| = 9.01 on; NaN stays NaN.
OTTER_HD float tanh(float x) {
  const float ax = ::fabsf(x), t = x * x;
  float p = 9.691537956929451e-05f;
  p = p * t - 2.3912911424355248e-04f;
  p = p * t + 5.90027440945586e-04f;
  p = p * t - 1.4558343870513183e-03f;
  p = p * t + 3.592128036572481e-03f;
  p = p * t - 8.863235529902197e-03f;
  p = p * t + 2.1869488536155203e-02f;
  p = p * t - 5.396825396825397e-02f;
  p = p * t + 1.3333333333333333e-01f;
  p = p * t - 3.333333333333333e-01f;
  const float small = ax + ax * t * p;
  const float e = exp_nonpositive(-2.0f * ax);
  const float big = (1.0f - e) / (1.0f + e);
  return ::copysignf(ax < 0.625f ? small : big, x);
}
OTTER_HD double tanh(double x) { return ::tanh(x); }
OTTER_HD float pow(float x, float y) { return ::powf(x, y); }
OTTER_HD double pow(double x, double y) { return ::pow(x, y); }
OTTER_HD float fmod(float x, float y) { return ::fmodf(x, y); }
OTTER_HD double fmod(double x, double y) { return ::fmod(x, y); }
}  // namespace math

template <typename T>
constexpr bool kIsFloatCompute = std::is_floating_point_v<T>;

// ---- binary arithmetic --------------------------------------------------------------------------
struct AddOp {
  template <typename T> OTTER_HD T operator()(T a, T b) const { return static_cast<T>(a + b); }
};
struct SubOp {
  template <typename T> OTTER_HD T operator()(T a, T b) const { return static_cast<T>(a - b); }
};
struct MulOp {
  template <typename T> OTTER_HD T operator()(T a, T b) const { return static_cast<T>(a * b); }
};
// Integer division truncates toward zero (C semantics, as the ONNX spec asks). The caller must
// rule out b == 0 for integers; the most negative value divided by -1 wraps instead of trapping.
struct DivOp {
  template <typename T>
  OTTER_HD T operator()(T a, T b) const {
    if constexpr (std::is_signed_v<T> && !kIsFloatCompute<T>) {
      using U = std::make_unsigned_t<T>;
      if (b == static_cast<T>(-1)) return static_cast<T>(U(0) - static_cast<U>(a));
    }
    return static_cast<T>(a / b);
  }
};
// Integer power by squaring; a negative exponent gives 0 except for bases 1 and -1.
struct PowOp {
  template <typename T>
  OTTER_HD T operator()(T a, T b) const {
    if constexpr (kIsFloatCompute<T>) {
      // Squaring (RMSNorm's x^2, variances) as one correctly rounded multiply and the first power
      // (the derivative of a square) as x: pow(x, 2) is x*x and pow(x, 1) is x exactly, whatever
      // the library's pow rounds, for every x including inf and NaN. A float cube (GPT-2's GELU)
      // is the double product rounded once: x*x is exact in double, so only the second product
      // and the final rounding round (as correctly rounded as powf, and no libm call).
      if constexpr (std::is_same_v<T, float>)
        if (b == 3.0f) return static_cast<float>(static_cast<double>(a) * a * a);
      return b == T(2) ? a * a : b == T(1) ? a : math::pow(a, b);
    } else {
      if constexpr (std::is_signed_v<T>) {
        if (b < 0) {
          if (a == 1) return 1;
          if (a == -1) return (b % 2 == 0) ? T(1) : T(-1);
          return 0;
        }
      }
      using U = std::make_unsigned_t<T>;
      U result = 1, base = static_cast<U>(a);
      auto e = static_cast<std::make_unsigned_t<T>>(b);
      while (e) {
        if (e & 1u) result = static_cast<U>(result * base);
        base = static_cast<U>(base * base);
        e >>= 1;
      }
      return static_cast<T>(result);
    }
  }
};
// Min and Max propagate NaN (as numpy's minimum/maximum).
struct MaxOp {
  template <typename T> OTTER_HD T operator()(T a, T b) const { return (a > b || a != a) ? a : b; }
};
struct MinOp {
  template <typename T> OTTER_HD T operator()(T a, T b) const { return (a < b || a != a) ? a : b; }
};

// Mod: with kFmod the remainder takes the dividend's sign (C fmod; floats need it), otherwise the
// divisor's (Python's %, integers only). An integer divisor of 0 gives 0 here: the CPU kernel
// refuses it first, and a device kernel must not trap.
template <bool kFmod>
struct ModOp {
  template <typename T>
  OTTER_HD T operator()(T a, T b) const {
    if constexpr (kIsFloatCompute<T>) {
      return math::fmod(a, b);
    } else {
      if (b == 0) return 0;
      if constexpr (std::is_signed_v<T>) {
        if (b == static_cast<T>(-1)) return 0;  // the most negative value % -1 would trap
      }
      T r = static_cast<T>(a % b);
      if constexpr (!kFmod && std::is_signed_v<T>) {
        if (r != 0 && ((r < 0) != (b < 0))) r = static_cast<T>(r + b);
      }
      return r;
    }
  }
};
// BitShift of unsigned integers; a shift by the type's width or more gives 0.
template <bool kLeft>
struct BitShiftOp {
  template <typename T>
  OTTER_HD T operator()(T a, T b) const {
    if (b >= static_cast<T>(8 * sizeof(T))) return 0;
    return static_cast<T>(kLeft ? a << b : a >> b);
  }
};
// BitwiseAnd / Or / Xor / Not of integers (two's complement bits of the storage type).
struct BitwiseAndOp {
  template <typename T> OTTER_HD T operator()(T a, T b) const { return static_cast<T>(a & b); }
};
struct BitwiseOrOp {
  template <typename T> OTTER_HD T operator()(T a, T b) const { return static_cast<T>(a | b); }
};
struct BitwiseXorOp {
  template <typename T> OTTER_HD T operator()(T a, T b) const { return static_cast<T>(a ^ b); }
};
struct BitwiseNotOp {
  template <typename T> OTTER_HD T operator()(T a) const { return static_cast<T>(~a); }
};

// ---- comparisons and logic (bool results) -------------------------------------------------------
struct EqualOp {
  template <typename T> OTTER_HD bool operator()(T a, T b) const { return a == b; }
};
struct LessOp {
  template <typename T> OTTER_HD bool operator()(T a, T b) const { return a < b; }
};
// x * s (Mean's division by the input count, as a multiplication by 1/n in the compute type).
struct ScaleOp {
  float s;
  template <typename T> OTTER_HD T operator()(T a) const { return static_cast<T>(a * static_cast<T>(s)); }
};
struct LessOrEqualOp {
  template <typename T> OTTER_HD bool operator()(T a, T b) const { return a <= b; }
};
struct GreaterOp {
  template <typename T> OTTER_HD bool operator()(T a, T b) const { return a > b; }
};
struct GreaterOrEqualOp {
  template <typename T> OTTER_HD bool operator()(T a, T b) const { return a >= b; }
};
struct AndOp {
  OTTER_HD bool operator()(bool a, bool b) const { return a && b; }
};
struct OrOp {
  OTTER_HD bool operator()(bool a, bool b) const { return a || b; }
};
struct XorOp {
  OTTER_HD bool operator()(bool a, bool b) const { return a != b; }
};
struct NotOp {
  OTTER_HD bool operator()(bool a) const { return !a; }
};

// ---- unary math ---------------------------------------------------------------------------------
struct NegOp {
  template <typename T> OTTER_HD T operator()(T a) const { return static_cast<T>(-a); }
};
struct AbsOp {
  template <typename T>
  OTTER_HD T operator()(T a) const {
    if constexpr (kIsFloatCompute<T>) return math::abs(a);
    else if constexpr (std::is_unsigned_v<T>) return a;
    else return a < 0 ? static_cast<T>(-a) : a;
  }
};
struct SqrtOp {
  template <typename T> OTTER_HD T operator()(T a) const { return math::sqrt(a); }
};
struct ReciprocalOp {
  template <typename T> OTTER_HD T operator()(T a) const { return T(1) / a; }
};
struct ExpOp {
  template <typename T> OTTER_HD T operator()(T a) const { return math::exp(a); }
};
struct LogOp {
  template <typename T> OTTER_HD T operator()(T a) const { return math::log(a); }
};
struct ErfOp {
  template <typename T> OTTER_HD T operator()(T a) const { return math::erf(a); }
};
struct TanhOp {
  template <typename T> OTTER_HD T operator()(T a) const { return math::tanh(a); }
};
// Stable for large |x| (never evaluates exp of a large positive number): e = e^(-|a|) through
// exp_nonpositive, then 1 / (1 + e) or e / (1 + e): no overflow on either
// side, selects instead of branches, no libm call for float, so the loop vectorises (LLaMA's SiLU).
// Within about 2.5 ulp of the exact sigmoid for float; 0 below a = -87 (where it is subnormal).
struct SigmoidOp {
  template <typename T>
  OTTER_HD T operator()(T a) const {
    const bool pos = a >= T(0);
    const T e = math::exp_nonpositive(pos ? -a : a);
    return (pos ? T(1) : e) / (T(1) + e);
  }
};
struct ReluOp {
  template <typename T> OTTER_HD T operator()(T a) const { return a > T(0) ? a : T(0); }
};
struct LeakyReluOp {
  float alpha = 0.01f;
  template <typename T>
  OTTER_HD T operator()(T a) const { return a >= T(0) ? a : static_cast<T>(a * static_cast<T>(alpha)); }
};
// Gelu: x * Phi(x) with the exact erf form, or the tanh approximation.
struct GeluOp {
  bool tanh_approx = false;
  template <typename T>
  OTTER_HD T operator()(T x) const {
    if (tanh_approx) {
      const T k = static_cast<T>(0.7978845608028654);  // sqrt(2 / pi)
      T inner = k * (x + static_cast<T>(0.044715) * x * x * x);
      return static_cast<T>(0.5) * x * (T(1) + math::tanh(inner));
    }
    return static_cast<T>(0.5) * x * (T(1) + math::erf(x * static_cast<T>(0.7071067811865476)));
  }
};
// ai.otter.BiasGelu: the exact Gelu of the pre-activation x + b (b the bias element of x's column).
struct BiasGeluOp {
  template <typename T> OTTER_HD T operator()(T x, T b) const { return GeluOp{}(x + b); }
};
// log(1 + e^x) = max(x, 0) + log1p(e^-|x|): no overflow for large x.
struct SoftplusOp {
  template <typename T>
  OTTER_HD T operator()(T x) const {
    T m = x > T(0) ? x : T(0);
    return m + math::log1p(math::exp(-math::abs(x)));
  }
};
// x / (1 + |x|).
struct SoftsignOp {
  template <typename T>
  OTTER_HD T operator()(T x) const { return x / (T(1) + math::abs(x)); }
};
// Clip to [lo, hi]; NaN stays NaN.
template <typename T>
struct ClipOp {
  T lo, hi;
  OTTER_HD T operator()(T x) const { return x < lo ? lo : (x > hi ? hi : x); }
};

// ---- conversions --------------------------------------------------------------------------------
// Float to integer conversion truncating toward zero; NaN gives 0 and out-of-range values saturate
// (C leaves both undefined; this keeps Cast from invoking undefined behaviour).
template <typename To, typename From>
OTTER_HD To convert_value(From v) {
  if constexpr (std::is_same_v<To, bool>) {
    return v != From(0);
  } else if constexpr (std::is_floating_point_v<From> && std::is_integral_v<To>) {
    using U = std::make_unsigned_t<To>;
    constexpr To hi = std::is_signed_v<To> ? static_cast<To>(static_cast<U>(~U(0)) >> 1)
                                           : static_cast<To>(~U(0));
    constexpr To lo = std::is_signed_v<To> ? static_cast<To>(-hi - 1) : To(0);
    if (!(v == v)) return To(0);
    double d = static_cast<double>(v);
    if (d <= static_cast<double>(lo)) return lo;
    if (d >= static_cast<double>(hi)) return hi;
    return static_cast<To>(v);
  } else {
    return static_cast<To>(v);
  }
}

}  // namespace otter
