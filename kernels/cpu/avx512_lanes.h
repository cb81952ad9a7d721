// Scalar functions of kernels/common/ and graph/half.h on 16 float lanes of AVX-512, for the
// kernels that only run where AVX-512 (and AVX512_BF16) is active: the bf16 GEMM
// (kernels/cpu/gemm_bf16.cc) and the bf16 attention (kernels/cpu/attention_bf16.cc). Each one but
// exp_nonpositive_fma does the scalar function's operations in the scalar function's order
// (separate multiplies and adds, as the scalar code is compiled without FMA contraction), so every
// lane has the scalar result's bits; tests/kernels/math_test.cc checks that on a sample of every
// float.
#pragma once

#include <cstdint>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

#include "kernels/cpu/bf16_block_gemm.h"  // OTTER_TARGET_BF16

// GCC 12's shift, conversion and reduction intrinsics pass _mm512_undefined_*() as their unused
// merge source, which -Wmaybe-uninitialized reports wherever they are inlined.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

namespace otter::cpu::lanes {

// The first n lanes (all 16 for n >= 16).
inline __mmask16 first(int64_t n) { return n >= 16 ? __mmask16(0xFFFF) : static_cast<__mmask16>((1u << n) - 1); }

// The sum of the lanes, in _mm512_reduce_add_ps's fixed tree order.
__attribute__((target(OTTER_TARGET_BF16))) inline float sum(__m512 x) { return _mm512_reduce_add_ps(x); }

// The largest of x[0, n), -inf for n = 0; a NaN is passed over (as std::max(m, NaN) keeps m).
__attribute__((target(OTTER_TARGET_BF16))) inline float row_max(const float* x, int64_t n) {
  const __m512 neg_inf = _mm512_set1_ps(-__builtin_inff());
  __m512 m = neg_inf;
  for (int64_t j = 0; j < n; j += 16)  // (a > b ? a : b) with a the new values: a NaN one loses
    m = _mm512_max_ps(_mm512_mask_loadu_ps(neg_inf, first(n - j), x + j), m);
  return _mm512_reduce_max_ps(m);
}

// 8 bf16 values widened (exactly) to 8 doubles.
__attribute__((target(OTTER_TARGET_BF16))) inline __m512d widen_bf16_8(const uint16_t* p) {
  const __m256i w = _mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))), 16);
  return _mm512_cvtps_pd(_mm256_castsi256_ps(w));
}

// float_to_bf16 (graph/half.h): round to nearest even, NaN quieted.
__attribute__((target(OTTER_TARGET_BF16))) inline __m256i round_to_bf16(__m512 x) {
  const __m512i u = _mm512_castps_si512(x);
  const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
  __m512i r = _mm512_srli_epi32(_mm512_add_epi32(u, _mm512_add_epi32(_mm512_set1_epi32(0x7fff), lsb)), 16);
  const __mmask16 nan = _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q);
  r = _mm512_mask_or_epi32(r, nan, _mm512_srli_epi32(u, 16), _mm512_set1_epi32(0x40));
  return _mm512_cvtepi32_epi16(r);
}

// math::exp_nonpositive (kernels/common/elementwise.h): e^z for z <= 0; 0 below -87, NaN stays NaN.
__attribute__((target(OTTER_TARGET_BF16))) inline __m512 exp_nonpositive(__m512 z) {
  const __m512 lo = _mm512_set1_ps(-87.0f), shifter = _mm512_set1_ps(12582912.0f);
  const __mmask16 under = _mm512_cmp_ps_mask(z, lo, _CMP_LT_OQ);
  const __m512 zc = _mm512_mask_blend_ps(under, z, lo);
  const __m512 big = _mm512_add_ps(_mm512_mul_ps(zc, _mm512_set1_ps(1.44269504088896341f)), shifter);
  const __m512 nf = _mm512_sub_ps(big, shifter);
  const __m512 r = _mm512_sub_ps(_mm512_sub_ps(zc, _mm512_mul_ps(nf, _mm512_set1_ps(0.693145751953125f))),
                                 _mm512_mul_ps(nf, _mm512_set1_ps(1.42860682030941723e-06f)));
  __m512 p = _mm512_set1_ps(1.0f / 5040.0f);
  p = _mm512_add_ps(_mm512_mul_ps(p, r), _mm512_set1_ps(1.0f / 720.0f));
  p = _mm512_add_ps(_mm512_mul_ps(p, r), _mm512_set1_ps(1.0f / 120.0f));
  p = _mm512_add_ps(_mm512_mul_ps(p, r), _mm512_set1_ps(1.0f / 24.0f));
  p = _mm512_add_ps(_mm512_mul_ps(p, r), _mm512_set1_ps(1.0f / 6.0f));
  p = _mm512_add_ps(_mm512_mul_ps(p, r), _mm512_set1_ps(0.5f));
  p = _mm512_add_ps(_mm512_mul_ps(p, r), _mm512_set1_ps(1.0f));
  p = _mm512_add_ps(_mm512_mul_ps(p, r), _mm512_set1_ps(1.0f));
  // 2^n in the exponent bits: n = bits(big) - bits(shifter).
  const __m512i n = _mm512_sub_epi32(_mm512_castps_si512(big), _mm512_castps_si512(shifter));
  const __m512 scale = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_add_epi32(n, _mm512_set1_epi32(127)), 23));
  const __m512 e = _mm512_mul_ps(p, scale);
  const __mmask16 number = _mm512_cmp_ps_mask(z, z, _CMP_ORD_Q);
  return _mm512_maskz_mov_ps(static_cast<__mmask16>(~under), _mm512_mask_blend_ps(number, z, e));
}

// exp_nonpositive's polynomial with fused multiply-adds (its range reduction and Horner steps each
// rounded once): not the scalar function's bits, but as close to e^z (tests/kernels/math_test.cc
// checks 1.5 ulp on [-87, 0]) in 9 fewer operations. For kernels whose results no scalar or GPU
// kernel must reproduce bit for bit (the bf16 attention's softmax).
__attribute__((target(OTTER_TARGET_BF16))) inline __m512 exp_nonpositive_fma(__m512 z) {
  const __m512 lo = _mm512_set1_ps(-87.0f), shifter = _mm512_set1_ps(12582912.0f);
  const __mmask16 under = _mm512_cmp_ps_mask(z, lo, _CMP_LT_OQ);
  const __m512 zc = _mm512_mask_blend_ps(under, z, lo);
  const __m512 big = _mm512_fmadd_ps(zc, _mm512_set1_ps(1.44269504088896341f), shifter);
  const __m512 nf = _mm512_sub_ps(big, shifter);
  const __m512 r = _mm512_fnmadd_ps(nf, _mm512_set1_ps(1.42860682030941723e-06f),
                                    _mm512_fnmadd_ps(nf, _mm512_set1_ps(0.693145751953125f), zc));
  __m512 p = _mm512_set1_ps(1.0f / 5040.0f);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 720.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 120.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 24.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 6.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(0.5f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
  const __m512i n = _mm512_sub_epi32(_mm512_castps_si512(big), _mm512_castps_si512(shifter));
  const __m512 scale = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_add_epi32(n, _mm512_set1_epi32(127)), 23));
  const __m512 e = _mm512_mul_ps(p, scale);
  const __mmask16 number = _mm512_cmp_ps_mask(z, z, _CMP_ORD_Q);
  return _mm512_maskz_mov_ps(static_cast<__mmask16>(~under), _mm512_mask_blend_ps(number, z, e));
}

}  // namespace otter::cpu::lanes

#pragma GCC diagnostic pop

#endif
