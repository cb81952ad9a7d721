// float16 / bfloat16 <-> float conversions with round-to-nearest-even, and double -> float rounded
// to odd, usable on host and device. They belong to the IR (graph/tensor.cc reads half tensors,
// passes/mixed_precision.cc rounds constants); the kernels include them through
// kernels/common/half.h, so the layers stay one-way: kernels may include graph/, never the reverse.
#pragma once

#include <cstdint>
#include <cstring>
#include <type_traits>

#if defined(__CUDACC__)
#define OTTER_HD __host__ __device__ __forceinline__
#else
#define OTTER_HD inline
#endif

namespace otter {

// The bits of a float as uint32 and back.
template <typename To, typename From>
OTTER_HD To bit_copy(From v) {
  static_assert(sizeof(To) == sizeof(From) && sizeof(To) == 4, "bit_copy converts float <-> uint32");
#if defined(__CUDA_ARCH__)
  if constexpr (std::is_same_v<To, float>) return __uint_as_float(v);
  else return __float_as_uint(v);
#else
  To out;
  std::memcpy(&out, &v, sizeof(To));
  return out;
#endif
}
OTTER_HD uint32_t float_bits(float f) { return bit_copy<uint32_t>(f); }
OTTER_HD float bits_float(uint32_t u) { return bit_copy<float>(u); }

OTTER_HD float half_to_float(uint16_t h) {
  uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t mant = h & 0x3ffu;
  uint32_t out;
  if (exp == 0) {
    if (mant == 0) {
      out = sign;
    } else {  // subnormal: normalise
      int e = -1;
      do { mant <<= 1; ++e; } while ((mant & 0x400u) == 0);
      mant &= 0x3ffu;
      out = sign | (static_cast<uint32_t>(127 - 15 - e) << 23) | (mant << 13);
    }
  } else if (exp == 0x1f) {
    out = sign | 0x7f800000u | (mant << 13);  // inf / nan
  } else {
    out = sign | ((exp + 127 - 15) << 23) | (mant << 13);
  }
  return bits_float(out);
}

OTTER_HD uint16_t float_to_half(float f) {
  uint32_t u = float_bits(f);
  uint32_t sign = (u >> 16) & 0x8000u;
  uint32_t abs = u & 0x7fffffffu;
  if (abs >= 0x7f800000u) {  // inf or nan
    return static_cast<uint16_t>(sign | 0x7c00u | (abs > 0x7f800000u ? 0x200u : 0u));
  }
  if (abs >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // rounds to inf
  if (abs < 0x38800000u) {  // below the smallest normal half (2^-14): subnormal or zero
    if (abs < 0x33000000u) return static_cast<uint16_t>(sign);  // < 2^-25 rounds to zero
    uint32_t e = abs >> 23;
    uint32_t mant = (abs & 0x7fffffu) | 0x800000u;
    uint32_t shift = 126 - e;  // 14 - (e - 127) + 13 - 1 ... gives the subnormal position
    // value = mant * 2^(e-150); half subnormal unit is 2^-24 -> result = mant >> (126 - e)
    uint32_t res = mant >> shift;
    uint32_t rem = mant & ((1u << shift) - 1);
    uint32_t half_point = 1u << (shift - 1);
    if (rem > half_point || (rem == half_point && (res & 1u))) ++res;
    return static_cast<uint16_t>(sign | res);
  }
  uint32_t res = ((abs >> 13) - ((127 - 15) << 10));
  uint32_t rem = abs & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (res & 1u))) ++res;
  return static_cast<uint16_t>(sign | res);
}

OTTER_HD float bf16_to_float(uint16_t b) { return bits_float(static_cast<uint32_t>(b) << 16); }

OTTER_HD uint16_t float_to_bf16(float f) {
  uint32_t u = float_bits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40u);  // quiet nan
  uint32_t lsb = (u >> 16) & 1u;
  u += 0x7fffu + lsb;
  return static_cast<uint16_t>(u >> 16);
}

// Double to float rounded to odd (truncate, then set the last bit when inexact). Rounding that
// float to half or bfloat16 with round-to-nearest-even then equals rounding the double directly,
// which a plain double -> float -> half chain does not (it can create a false tie).
OTTER_HD float double_to_float_round_odd(double d) {
  float f = static_cast<float>(d);
  if (static_cast<double>(f) == d || !(d == d)) return f;
  uint32_t u = float_bits(f);
  double fa = f < 0 ? -static_cast<double>(f) : static_cast<double>(f);
  double da = d < 0 ? -d : d;
  if (fa > da) u -= 1;  // step back toward zero
  return bits_float(u | 1u);
}

}  // namespace otter
