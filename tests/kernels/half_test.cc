// Tests of the float16 / bfloat16 conversions in graph/half.h (kernels/common/half.h forwards):
// exhaustive round trips, an independent value formula, round-to-nearest-even ties, subnormals and overflow.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>

#include "kernels/common/elementwise.h"
#include "kernels/common/half.h"

namespace otter {
namespace {

bool half_is_nan(uint16_t h) { return (h & 0x7c00u) == 0x7c00u && (h & 0x3ffu) != 0; }
bool bf16_is_nan(uint16_t b) { return (b & 0x7f80u) == 0x7f80u && (b & 0x7fu) != 0; }

// The value of a half from its fields, computed with ldexp (independent of the bit tricks).
double half_value(uint16_t h) {
  int s = h >> 15, e = (h >> 10) & 0x1f, m = h & 0x3ff;
  double v = e == 0 ? std::ldexp(m, -24) : std::ldexp(1024 + m, e - 25);
  if (e == 0x1f) v = m ? std::numeric_limits<double>::quiet_NaN() : std::numeric_limits<double>::infinity();
  return s ? -v : v;
}

TEST(HalfTest, ExhaustiveRoundTripAndValue) {
  int checked = 0;
  for (uint32_t i = 0; i < 65536; ++i) {
    uint16_t h = static_cast<uint16_t>(i);
    float f = half_to_float(h);
    if (half_is_nan(h)) {
      EXPECT_TRUE(std::isnan(f)) << std::hex << i;
      EXPECT_TRUE(half_is_nan(float_to_half(f))) << std::hex << i;
      continue;
    }
    ASSERT_EQ(static_cast<double>(f), half_value(h)) << std::hex << i;
    ASSERT_EQ(float_to_half(f), h) << std::hex << i;
    ++checked;
  }
  EXPECT_EQ(checked, 65536 - 2 * 1023);
}

TEST(HalfTest, Bf16ExhaustiveRoundTrip) {
  for (uint32_t i = 0; i < 65536; ++i) {
    uint16_t b = static_cast<uint16_t>(i);
    float f = bf16_to_float(b);
    if (bf16_is_nan(b)) {
      EXPECT_TRUE(std::isnan(f));
      EXPECT_TRUE(bf16_is_nan(float_to_bf16(f)));
      continue;
    }
    uint32_t bits;
    std::memcpy(&bits, &f, 4);
    ASSERT_EQ(bits, static_cast<uint32_t>(b) << 16) << std::hex << i;
    ASSERT_EQ(float_to_bf16(f), b) << std::hex << i;
  }
}

TEST(HalfTest, TiesToEven) {
  EXPECT_EQ(float_to_half(1.0f + std::ldexp(1.0f, -11)), 0x3c00);      // tie between 1 and 1+2^-10: even (1)
  EXPECT_EQ(float_to_half(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3c02);  // tie between ...01 and ...10: even
  EXPECT_EQ(float_to_half(1.0f + std::ldexp(1.0f, -11) + std::ldexp(1.0f, -20)), 0x3c01);  // above the tie
  EXPECT_EQ(float_to_half(1.0f + std::ldexp(1.0f, -11) - std::ldexp(1.0f, -20)), 0x3c00);  // below
  EXPECT_EQ(float_to_half(-(1.0f + 3 * std::ldexp(1.0f, -11))), 0xbc02);
  EXPECT_EQ(float_to_half(2049.0f), float_to_half(2048.0f));  // 2049 is a tie at spacing 2
  EXPECT_EQ(half_to_float(float_to_half(2051.0f)), 2052.0f);
  // bfloat16: 8 significant bits.
  EXPECT_EQ(float_to_bf16(1.0f + std::ldexp(1.0f, -8)), 0x3f80);
  EXPECT_EQ(float_to_bf16(1.0f + 3 * std::ldexp(1.0f, -8)), 0x3f82);
  EXPECT_EQ(float_to_bf16(1.0f + std::ldexp(1.0f, -8) + std::ldexp(1.0f, -20)), 0x3f81);
}

TEST(HalfTest, Subnormals) {
  EXPECT_EQ(float_to_half(std::ldexp(1.0f, -24)), 0x0001);        // smallest subnormal
  EXPECT_EQ(float_to_half(std::ldexp(1.0f, -25)), 0x0000);        // tie with 0: even
  EXPECT_EQ(float_to_half(std::ldexp(1.5f, -25)), 0x0001);
  EXPECT_EQ(float_to_half(std::ldexp(3.0f, -25)), 0x0002);        // tie between 1 and 2 units: even
  EXPECT_EQ(float_to_half(std::ldexp(5.0f, -25)), 0x0002);        // tie between 2 and 3 units: even
  EXPECT_EQ(float_to_half(std::ldexp(1023.0f, -24)), 0x03ff);     // largest subnormal
  EXPECT_EQ(float_to_half(std::ldexp(1023.5f, -24)), 0x0400);     // tie rounds up into the normals
  EXPECT_EQ(float_to_half(std::ldexp(1.0f, -14)), 0x0400);        // smallest normal
  EXPECT_EQ(float_to_half(std::ldexp(1.0f, -30)), 0x0000);
  EXPECT_EQ(float_to_half(-std::ldexp(1.0f, -30)), 0x8000);
  EXPECT_EQ(half_to_float(0x0001), std::ldexp(1.0f, -24));
  EXPECT_EQ(half_to_float(0x8200), -std::ldexp(512.0f, -24));
  // bf16 keeps float's exponent range: float subnormals stay representable.
  EXPECT_EQ(bf16_to_float(float_to_bf16(std::ldexp(1.0f, -130))), std::ldexp(1.0f, -130));
}

TEST(HalfTest, OverflowAndSpecials) {
  EXPECT_EQ(float_to_half(65504.0f), 0x7bff);  // largest finite half
  EXPECT_EQ(float_to_half(65519.0f), 0x7bff);  // below the tie with 65536
  EXPECT_EQ(float_to_half(65520.0f), 0x7c00);  // tie: even is infinity
  EXPECT_EQ(float_to_half(1e10f), 0x7c00);
  EXPECT_EQ(float_to_half(-1e10f), 0xfc00);
  EXPECT_EQ(float_to_half(std::numeric_limits<float>::infinity()), 0x7c00);
  EXPECT_EQ(float_to_half(-std::numeric_limits<float>::infinity()), 0xfc00);
  EXPECT_TRUE(half_is_nan(float_to_half(std::numeric_limits<float>::quiet_NaN())));
  EXPECT_EQ(float_to_half(-0.0f), 0x8000);
  EXPECT_EQ(float_to_bf16(std::numeric_limits<float>::max()), 0x7f80);  // rounds to infinity
  EXPECT_EQ(float_to_bf16(-std::numeric_limits<float>::infinity()), 0xff80);
  EXPECT_TRUE(bf16_is_nan(float_to_bf16(std::numeric_limits<float>::quiet_NaN())));
  EXPECT_TRUE(std::isinf(half_to_float(0x7c00)));
}

// For random floats across the half range the result must be a nearest half, with ties to even.
TEST(HalfTest, RandomFloatsRoundToNearest) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> mant(1.0f, 2.0f);
  std::uniform_int_distribution<int> ex(-26, 14);
  for (int t = 0; t < 200000; ++t) {
    float f = std::ldexp(mant(rng), ex(rng));
    if (t % 2) f = -f;
    uint16_t h = float_to_half(f);
    double err = std::abs(half_value(h) - f);
    uint16_t mag = h & 0x7fff;
    for (int d : {-1, 1}) {
      int nb = mag + d;
      if (nb < 0 || nb > 0x7bff) continue;
      uint16_t other = static_cast<uint16_t>((h & 0x8000) | nb);
      double oerr = std::abs(half_value(other) - f);
      ASSERT_LE(err, oerr) << f;
      if (err == oerr) {
        ASSERT_EQ(h & 1, 0) << "tie not rounded to even for " << f;
      }
    }
  }
}

// A double just above a half tie must not be rounded twice into the tie (double -> float -> half).
TEST(HalfTest, DoubleRoundsOnceThroughRoundToOdd) {
  double d = 1.0 + std::ldexp(1.0, -11) + std::ldexp(1.0, -40);
  EXPECT_EQ(float_to_half(static_cast<float>(d)), 0x3c00);  // the naive chain gets it wrong
  EXPECT_EQ(float_to_half(double_to_float_round_odd(d)), 0x3c01);
  double below = 1.0 + std::ldexp(1.0, -11) - std::ldexp(1.0, -40);
  EXPECT_EQ(float_to_half(double_to_float_round_odd(below)), 0x3c00);
  EXPECT_EQ(float_to_half(double_to_float_round_odd(1.0 + std::ldexp(1.0, -11))), 0x3c00);  // exact tie
  double bd = 1.0 + std::ldexp(1.0, -8) + std::ldexp(1.0, -30);
  EXPECT_EQ(float_to_bf16(static_cast<float>(bd)), 0x3f80);  // naive chain: false tie
  EXPECT_EQ(float_to_bf16(double_to_float_round_odd(bd)), 0x3f81);
  EXPECT_EQ(double_to_float_round_odd(0.5), 0.5f);
  EXPECT_EQ(float_to_half(double_to_float_round_odd(1e300)), 0x7c00);
  EXPECT_EQ(float_to_half(double_to_float_round_odd(-1e-300)), 0x8000);
}

}  // namespace
}  // namespace otter
