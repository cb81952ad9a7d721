// Small bf16 block products on VDPBF16PS (bf16_block_gemm.h). The product walks C in tiles of MR
// rows by NV vectors of 16 columns (MR * NV <= 16 float32 accumulators in zmm registers); each
// pair step loads NV vectors of B (the last one masked at C's edge) and broadcasts MR words of A.
#include "kernels/cpu/bf16_block_gemm.h"

#include <algorithm>
#include <cstring>

#include "graph/error.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define OTTER_BF16_BLOCK 1
#else
#define OTTER_BF16_BLOCK 0
#endif

namespace otter::cpu::bf16blk {

#if OTTER_BF16_BLOCK

namespace {

// A word of A, read through memcpy: in-place words alias bf16 storage.
inline u32 word(const u32* p) {
  u32 w;
  std::memcpy(&w, p, sizeof w);
  return w;
}

template <int MR, int NV>
__attribute__((target(OTTER_TARGET_BF16))) void tile(int64_t kp, const u32* a, int64_t sai, int64_t sap,
                                                      const u32* b, int64_t ldb, __mmask16 last, float alpha,
                                                      bool accumulate, float* c, int64_t ldc) {
  __m512 acc[MR][NV];
#pragma GCC unroll 16
  for (int r = 0; r < MR; ++r)
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) acc[r][v] = _mm512_setzero_ps();
  for (int64_t p = 0; p < kp; ++p) {
    __m512bh bv[NV];
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v)
      bv[v] = (__m512bh)(v + 1 < NV ? _mm512_loadu_si512(b + v * 16) : _mm512_maskz_loadu_epi32(last, b + v * 16));
    b += ldb;
#pragma GCC unroll 16
    for (int r = 0; r < MR; ++r) {
      const __m512bh av = (__m512bh)_mm512_set1_epi32(static_cast<int>(word(a + r * sai)));
#pragma GCC unroll 4
      for (int v = 0; v < NV; ++v) acc[r][v] = _mm512_dpbf16_ps(acc[r][v], av, bv[v]);
    }
    a += sap;
  }
  const __m512 va = _mm512_set1_ps(alpha);
#pragma GCC unroll 16
  for (int r = 0; r < MR; ++r) {
    float* row = c + r * ldc;
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) {
      const __mmask16 m = v + 1 < NV ? __mmask16(0xFFFF) : last;
      __m512 x = _mm512_mul_ps(acc[r][v], va);
      if (accumulate) x = _mm512_add_ps(x, _mm512_maskz_loadu_ps(m, row + v * 16));
      _mm512_mask_storeu_ps(row + v * 16, m, x);
    }
  }
}

// All rows of C for one chunk of NV vectors: tiles of 4 rows (16 accumulators at NV = 4), then
// the remaining rows one tile.
template <int NV>
void rows(int64_t m, int64_t kp, const u32* a, int64_t sai, int64_t sap, const u32* b, int64_t ldb, __mmask16 last,
          float alpha, bool accumulate, float* c, int64_t ldc) {
  constexpr int kMR = NV <= 2 ? 8 : 4;
  int64_t i = 0;
  for (; i + kMR <= m; i += kMR) tile<kMR, NV>(kp, a + i * sai, sai, sap, b, ldb, last, alpha, accumulate, c + i * ldc, ldc);
  for (; i < m; ++i) tile<1, NV>(kp, a + i * sai, sai, sap, b, ldb, last, alpha, accumulate, c + i * ldc, ldc);
}

}  // namespace

void gemm(int64_t m, int64_t n, int64_t kp, const u32* a, int64_t sai, int64_t sap, const u32* b, int64_t ldb,
          float alpha, bool accumulate, float* c, int64_t ldc) {
  if (m <= 0 || n <= 0) return;
  for (int64_t j = 0; j < n; j += 64) {
    const int64_t cols = std::min<int64_t>(64, n - j), nv = (cols + 15) / 16, tail = cols - (nv - 1) * 16;
    const __mmask16 last = tail == 16 ? __mmask16(0xFFFF) : __mmask16((1u << tail) - 1);
    switch (nv) {
      case 1: rows<1>(m, kp, a, sai, sap, b + j, ldb, last, alpha, accumulate, c + j, ldc); break;
      case 2: rows<2>(m, kp, a, sai, sap, b + j, ldb, last, alpha, accumulate, c + j, ldc); break;
      case 3: rows<3>(m, kp, a, sai, sap, b + j, ldb, last, alpha, accumulate, c + j, ldc); break;
      default: rows<4>(m, kp, a, sai, sap, b + j, ldb, last, alpha, accumulate, c + j, ldc); break;
    }
  }
}

__attribute__((target(OTTER_TARGET_BF16))) void pairs_down(const u16* x, int64_t ldx, int64_t k, int64_t n, u32* out,
                                                            int64_t ldo) {
  // Two rows of 32 bf16 interleave into 32 words: (r0[c] | r1[c] << 16), c = 0..15 and 16..31.
  alignas(64) static const uint16_t lo_idx[32] = {0, 32, 1, 33, 2, 34, 3, 35, 4, 36, 5, 37, 6, 38, 7, 39,
                                                  8, 40, 9, 41, 10, 42, 11, 43, 12, 44, 13, 45, 14, 46, 15, 47};
  alignas(64) static const uint16_t hi_idx[32] = {16, 48, 17, 49, 18, 50, 19, 51, 20, 52, 21, 53, 22, 54, 23, 55,
                                                  24, 56, 25, 57, 26, 58, 27, 59, 28, 60, 29, 61, 30, 62, 31, 63};
  const __m512i ilo = _mm512_load_si512(lo_idx), ihi = _mm512_load_si512(hi_idx);
  for (int64_t p = 0; p < (k + 1) / 2; ++p) {
    const u16* r0 = x + 2 * p * ldx;
    const bool two = 2 * p + 1 < k;
    u32* o = out + p * ldo;
    int64_t j = 0;
    for (; j + 32 <= n; j += 32) {
      const __m512i x0 = _mm512_loadu_si512(r0 + j);
      const __m512i x1 = two ? _mm512_loadu_si512(r0 + ldx + j) : _mm512_setzero_si512();
      _mm512_storeu_si512(o + j, _mm512_permutex2var_epi16(x0, ilo, x1));
      _mm512_storeu_si512(o + j + 16, _mm512_permutex2var_epi16(x0, ihi, x1));
    }
    if (j < n) {  // the last 1..31 columns: masked loads and stores
      const int64_t rem = n - j;
      const __mmask32 lm = static_cast<__mmask32>((uint64_t{1} << rem) - 1);
      const __m512i x0 = _mm512_maskz_loadu_epi16(lm, r0 + j);
      const __m512i x1 = two ? _mm512_maskz_loadu_epi16(lm, r0 + ldx + j) : _mm512_setzero_si512();
      _mm512_mask_storeu_epi32(o + j, rem >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << rem) - 1),
                               _mm512_permutex2var_epi16(x0, ilo, x1));
      if (rem > 16)
        _mm512_mask_storeu_epi32(o + j + 16, __mmask16((1u << (rem - 16)) - 1), _mm512_permutex2var_epi16(x0, ihi, x1));
    }
  }
}

namespace {

// GCC 12's unpack intrinsics pass _mm512_undefined_epi32() as their unused merge source, which
// -Wmaybe-uninitialized reports once they are inlined here.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
// Transposes the 16 x 16 32-bit words of r[0..15] in registers: r[j] lane i becomes r[i] lane j.
// 128-bit lanes first (words, then word pairs), then the lanes themselves.
__attribute__((target(OTTER_TARGET_BF16))) inline void transpose_16x16(__m512i r[16]) {
  __m512i t[16];
#pragma GCC unroll 8
  for (int i = 0; i < 8; ++i) {
    t[2 * i] = _mm512_unpacklo_epi32(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm512_unpackhi_epi32(r[2 * i], r[2 * i + 1]);
  }
  // r[4g + j], rows 4g..4g+3: lane L holds their words j + 4L.
#pragma GCC unroll 4
  for (int g = 0; g < 4; ++g) {
    r[4 * g] = _mm512_unpacklo_epi64(t[4 * g], t[4 * g + 2]);
    r[4 * g + 1] = _mm512_unpackhi_epi64(t[4 * g], t[4 * g + 2]);
    r[4 * g + 2] = _mm512_unpacklo_epi64(t[4 * g + 1], t[4 * g + 3]);
    r[4 * g + 3] = _mm512_unpackhi_epi64(t[4 * g + 1], t[4 * g + 3]);
  }
  // Word j + 4L of all 16 rows: lane L of the four groups, in group order.
#pragma GCC unroll 4
  for (int j = 0; j < 4; ++j) {
    const __m512i u0 = _mm512_shuffle_i32x4(r[j], r[4 + j], 0x88), u1 = _mm512_shuffle_i32x4(r[j], r[4 + j], 0xdd);
    const __m512i u2 = _mm512_shuffle_i32x4(r[8 + j], r[12 + j], 0x88),
                  u3 = _mm512_shuffle_i32x4(r[8 + j], r[12 + j], 0xdd);
    t[j] = _mm512_shuffle_i32x4(u0, u2, 0x88);
    t[j + 8] = _mm512_shuffle_i32x4(u0, u2, 0xdd);
    t[j + 4] = _mm512_shuffle_i32x4(u1, u3, 0x88);
    t[j + 12] = _mm512_shuffle_i32x4(u1, u3, 0xdd);
  }
#pragma GCC unroll 16
  for (int i = 0; i < 16; ++i) r[i] = t[i];
}

}  // namespace

// The words of x's rows are its bf16 pairs as they lie in memory (little-endian: x[i, 2p] the low
// half), so whole 16 x 16 tiles of words transpose in registers; the rest goes word by word.
__attribute__((target(OTTER_TARGET_BF16))) void pairs_across_transposed(const u16* x, int64_t ldx, int64_t m, int64_t k,
                                                                         u32* out, int64_t ldo) {
  const int64_t kp = (k + 1) / 2, whole = k / 2 / 16 * 16, rows16 = m / 16 * 16;
  for (int64_t i0 = 0; i0 < rows16; i0 += 16) {
    for (int64_t p0 = 0; p0 < whole; p0 += 16) {
      __m512i r[16];
#pragma GCC unroll 16
      for (int i = 0; i < 16; ++i) r[i] = _mm512_loadu_si512(x + (i0 + i) * ldx + 2 * p0);
      transpose_16x16(r);
#pragma GCC unroll 16
      for (int p = 0; p < 16; ++p) _mm512_storeu_si512(out + (p0 + p) * ldo + i0, r[p]);
    }
  }
  // The words past the whole tiles: all rows' from `whole` on, and the rows past rows16 entirely.
  for (int64_t i = 0; i < m; ++i) {
    const u16* row = x + i * ldx;
    for (int64_t p = i < rows16 ? whole : 0; p < k / 2; ++p)
      out[p * ldo + i] = row[2 * p] | static_cast<u32>(row[2 * p + 1]) << 16;
    if (k % 2) out[(kp - 1) * ldo + i] = row[k - 1];
  }
}
#pragma GCC diagnostic pop
#else
// Without x86 intrinsics bf16_gemm_native() is false and no caller gets here.
void gemm(int64_t, int64_t, int64_t, const u32*, int64_t, int64_t, const u32*, int64_t, float, bool, float*, int64_t) {
  fail("bf16 block products need AVX512_BF16 (this build has no x86 intrinsics)");
}
void pairs_down(const u16*, int64_t, int64_t, int64_t, u32*, int64_t) {
  fail("bf16 block products need AVX512_BF16 (this build has no x86 intrinsics)");
}
void pairs_across_transposed(const u16*, int64_t, int64_t, int64_t, u32*, int64_t) {
  fail("bf16 block products need AVX512_BF16 (this build has no x86 intrinsics)");
}
#endif  // OTTER_BF16_BLOCK

const u32* pairs_across(const u16* x, int64_t ldx, int64_t m, int64_t k, u32* buf, int64_t* sai) {
  if (k % 2 == 0 && ldx % 2 == 0 && reinterpret_cast<uintptr_t>(x) % alignof(u32) == 0) {
    *sai = ldx / 2;
    return reinterpret_cast<const u32*>(x);  // read through memcpy (word() above)
  }
  const int64_t kp = (k + 1) / 2;
  for (int64_t i = 0; i < m; ++i) {
    const u16* row = x + i * ldx;
    for (int64_t p = 0; p < kp; ++p)
      buf[i * kp + p] = row[2 * p] | (2 * p + 1 < k ? static_cast<u32>(row[2 * p + 1]) << 16 : 0u);
  }
  *sai = kp;
  return buf;
}

}  // namespace otter::cpu::bf16blk
