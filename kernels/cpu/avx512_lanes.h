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

// The features the lane functions use: a subset of both OTTER_TARGET_BF16
// (kernels/cpu/bf16_block_gemm.h) and OTTER_TARGET_AVX512 (kernels/cpu/isa.h), so that functions
// compiled for either can inline them.
#define OTTER_TARGET_LANES "avx512f,avx512bw,avx512vl,avx512dq,avx2,fma"

// GCC 12's shift, conversion and reduction intrinsics pass _mm512_undefined_*() as their unused
// merge source, which -Wmaybe-uninitialized reports wherever they are inlined.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

namespace otter::cpu::lanes {

// The first n lanes (all 16 for n >= 16).
inline __mmask16 first(int64_t n) { return n >= 16 ? __mmask16(0xFFFF) : static_cast<__mmask16>((1u << n) - 1); }

// The sum of the lanes, in _mm512_reduce_add_ps's fixed tree order.
__attribute__((target(OTTER_TARGET_LANES))) inline float sum(__m512 x) { return _mm512_reduce_add_ps(x); }

// The largest of x[0, n), -inf for n = 0; a NaN is passed over (as std::max(m, NaN) keeps m).
__attribute__((target(OTTER_TARGET_LANES))) inline float row_max(const float* x, int64_t n) {
  const __m512 neg_inf = _mm512_set1_ps(-__builtin_inff());
  __m512 m = neg_inf;
  for (int64_t j = 0; j < n; j += 16)  // (a > b ? a : b) with a the new values: a NaN one loses
    m = _mm512_max_ps(_mm512_mask_loadu_ps(neg_inf, first(n - j), x + j), m);
  return _mm512_reduce_max_ps(m);
}

// 16 bf16 values widened (exactly) to float, lanes past k zero.
__attribute__((target(OTTER_TARGET_LANES))) inline __m512 widen_bf16_16(const uint16_t* p, __mmask16 k) {
  const __m256i h =
      k == 0xFFFF ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)) : _mm256_maskz_loadu_epi16(k, p);
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}

// 8 bf16 values widened (exactly) to 8 doubles.
__attribute__((target(OTTER_TARGET_LANES))) inline __m512d widen_bf16_8(const uint16_t* p) {
  const __m256i w = _mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))), 16);
  return _mm512_cvtps_pd(_mm256_castsi256_ps(w));
}

// float_to_bf16 (graph/half.h): round to nearest even, NaN quieted.
__attribute__((target(OTTER_TARGET_LANES))) inline __m256i round_to_bf16(__m512 x) {
  const __m512i u = _mm512_castps_si512(x);
  const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
  __m512i r = _mm512_srli_epi32(_mm512_add_epi32(u, _mm512_add_epi32(_mm512_set1_epi32(0x7fff), lsb)), 16);
  const __mmask16 nan = _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q);
  r = _mm512_mask_or_epi32(r, nan, _mm512_srli_epi32(u, 16), _mm512_set1_epi32(0x40));
  return _mm512_cvtepi32_epi16(r);
}

// p * t + c, rounded twice (a Horner step of the scalar polynomials, compiled without FMA).
__attribute__((target(OTTER_TARGET_LANES))) inline __m512 horner(__m512 p, __m512 t, __m512 c) {
  return _mm512_add_ps(_mm512_mul_ps(p, t), c);
}
__attribute__((target(OTTER_TARGET_LANES))) inline __m512 splat(float v) { return _mm512_set1_ps(v); }
// near ? a : b per lane.
__attribute__((target(OTTER_TARGET_LANES))) inline __m512 pick(__mmask16 near, float a, float b) {
  return _mm512_mask_blend_ps(near, _mm512_set1_ps(b), _mm512_set1_ps(a));
}

// math::erf (kernels/common/elementwise.h): its two polynomials (the erfc one's coefficients chosen
// per lane), the selects by |x|, NaN, and the sign of x.
__attribute__((target(OTTER_TARGET_LANES))) inline __m512 erf(__m512 x) {
  const __m512 sign = _mm512_castsi512_ps(_mm512_set1_epi32(static_cast<int>(0x80000000u)));
  const __m512 ax = _mm512_andnot_ps(sign, x), t = _mm512_mul_ps(ax, ax);
  __m512 pa = splat(8.800168143e-05f);
  pa = horner(pa, t, splat(-8.238220471e-04f));
  pa = horner(pa, t, splat(5.208946764e-03f));
  pa = horner(pa, t, splat(-2.686240152e-02f));
  pa = horner(pa, t, splat(1.128374636e-01f));
  pa = horner(pa, t, splat(-3.761263788e-01f));
  pa = horner(pa, t, splat(1.283791661e-01f));
  const __m512 small = _mm512_add_ps(ax, _mm512_mul_ps(ax, pa));
  const __mmask16 near = _mm512_cmp_ps_mask(ax, splat(2.2f), _CMP_LT_OQ);
  const __m512 u = _mm512_sub_ps(ax, pick(near, 1.5375f, 3.06f));
  __m512 pb = pick(near, 9.656073962e-05f, -1.463499302e-05f);
  pb = horner(pb, u, pick(near, -1.415657345e-03f, -4.487010301e-06f));
  pb = horner(pb, u, pick(near, 1.835831208e-03f, 1.291452645e-04f));
  pb = horner(pb, u, pick(near, 5.267412402e-03f, -3.397990658e-04f));
  pb = horner(pb, u, pick(near, -1.800451055e-02f, 5.858732038e-04f));
  pb = horner(pb, u, pick(near, 1.068221685e-02f, -7.751994999e-04f));
  pb = horner(pb, u, pick(near, 4.698853940e-02f, 7.766834460e-04f));
  pb = horner(pb, u, pick(near, -1.318744570e-01f, -5.724640214e-04f));
  pb = horner(pb, u, pick(near, 1.631693840e-01f, 2.962082799e-04f));
  pb = horner(pb, u, pick(near, -1.061264202e-01f, -9.678942297e-05f));
  pb = horner(pb, u, pick(near, 2.967860922e-02f, 1.508170408e-05f));
  // ax < 0.875 ? small : ax < 3.92 ? 1 - pb : 1; a NaN |x| stays itself.
  __m512 r = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(ax, splat(3.92f), _CMP_LT_OQ), splat(1.0f),
                                  _mm512_sub_ps(splat(1.0f), pb));
  r = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(ax, splat(0.875f), _CMP_LT_OQ), r, small);
  r = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(ax, ax, _CMP_UNORD_Q), r, ax);
  return _mm512_or_ps(_mm512_andnot_ps(sign, r), _mm512_and_ps(sign, x));  // copysign(r, x)
}

// math::exp_nonpositive (kernels/common/elementwise.h): e^z for z <= 0; 0 below -87, NaN stays NaN.
__attribute__((target(OTTER_TARGET_LANES))) inline __m512 exp_nonpositive(__m512 z) {
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
__attribute__((target(OTTER_TARGET_LANES))) inline __m512 exp_nonpositive_fma(__m512 z) {
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
