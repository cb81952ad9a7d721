// bfloat16 GEMM (gemm_bf16.h). The native path is a GotoBLAS-style blocked GEMM around one
// register-blocked micro-kernel:
//
//   for each column panel jc of NC columns of C
//     for each depth block pc of KC (k pairs of op(A) and op(B) interleaved, see below)
//       pack op(B)[pc, jc] into strips of NR = 32 columns          (shared by the threads)
//       each thread takes an equal share of the rows (or, with few rows, of the (row block,
//       group of strips) pairs), and for each row block ic of MC rows in it
//         pack op(A)[ic, pc] into strips of MR = 12 rows         (per thread, stays in L2)
//         for each B strip (64 KiB at KC = 1024, in L2), for each A strip:
//           C[12 x 32] (+)= alpha * sum over the block's k pairs   (24 zmm accumulators)
//
// KC = 1024 keeps the weight-gradient GEMMs of 1024 tokens (gpt_large at batch 8) in one depth
// block, so C is written once instead of read and written again: 1-2% of the bf16 step over
// KC = 512, whose 32 KiB strips stayed in L1 (the micro-kernel's two B loads per 24 dot products
// are cheap from L2).
//
// VDPBF16PS multiplies 16 pairs of bf16 from each operand and adds both products into 16 float32
// lanes, so the packed operands hold each k pair next to each other: a 32-bit word is
// (op(X)[., 2p] | op(X)[., 2p+1] << 16). An A strip is [k pairs][12 rows] of such words (each one
// broadcast to all lanes), a B strip [k pairs][32 columns] (two zmm loads). An odd k pads the last
// pair with a zero; rows and columns past the edge are packed as zeros and not stored.
#include "kernels/cpu/gemm_bf16.h"

#include <omp.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#if defined(__x86_64__) && defined(__GNUC__)
#include <cpuid.h>
#include <immintrin.h>
#define OTTER_HAVE_BF16_KERNEL 1
#else
#define OTTER_HAVE_BF16_KERNEL 0
#endif

#include "graph/error.h"
#include "kernels/cpu/avx512_lanes.h"
#include "kernels/cpu/bf16_block_gemm.h"
#include "kernels/cpu/gemm.h"
#include "kernels/cpu/half.h"
#include "kernels/cpu/isa.h"
#include "kernels/cpu/scratch.h"

namespace otter::cpu {

namespace {

using u16 = uint16_t;
using u32 = uint32_t;

constexpr int kMR = 12;       // rows of a micro-tile
constexpr int kNR = 32;       // columns of a micro-tile: two zmm
constexpr int64_t kKC = 1024;  // depth of a block (512 k pairs)
constexpr int64_t kMC = 96;   // rows of a packed A block (8 strips)
constexpr int64_t kNC = 2048; // columns of a packed B panel

bool cpu_has_avx512_bf16() {
#if OTTER_HAVE_BF16_KERNEL
  static const bool yes = [] {
    unsigned a = 0, b = 0, c = 0, d = 0;
    // CPUID.(EAX=7, ECX=1):EAX bit 5 is AVX512_BF16; best_isa() has checked AVX-512 and its OS state.
    if (!__get_cpuid_count(7, 1, &a, &b, &c, &d)) return false;
    return (a & (1u << 5)) != 0 && best_isa() == Isa::kAvx512;
  }();
  return yes;
#else
  return false;
#endif
}

bool widen_from_environment() {
  const char* env = std::getenv("OTTER_BF16_GEMM");
  if (!env || !*env || std::string(env) == "auto") return false;
  if (std::string(env) == "widen") return true;
  fail("OTTER_BF16_GEMM: unknown value '", env, "' (auto or widen)");
}

// -1: not read yet; 0: auto; 1: widen.
std::atomic<int> g_widen{-1};

bool widen_forced() {
  int v = g_widen.load(std::memory_order_relaxed);
  if (v < 0) {
    v = widen_from_environment() ? 1 : 0;
    g_widen.store(v, std::memory_order_relaxed);
  }
  return v == 1;
}

#if OTTER_HAVE_BF16_KERNEL

// Zeroes columns [from, ld) of the kp rows of a packed strip (rows or columns past an edge).
void zero_tail(u32* o, int64_t kp, int64_t ld, int64_t from) {
  if (from < ld)
    for (int64_t p = 0; p < kp; ++p) std::fill(o + p * ld + from, o + (p + 1) * ld, 0u);
}

// The strips of a transposed A block: op(A)[i, kk] = a[kk * lda + i], so two rows of a interleave
// into each strip's words. One k pair at a time for all strips: the pair of rows is read from
// memory once and stays in L1 while the strips take their 12 columns (strip by strip, the block's
// 96-column rows were fetched once per strip).
__attribute__((target(OTTER_TARGET_BF16))) void pack_a_transposed(const u16* a, int64_t lda, int64_t rows,
                                                                  int64_t kc, u32* out) {
  alignas(64) static const uint16_t lo_idx[32] = {0, 32, 1, 33, 2, 34, 3, 35, 4, 36, 5, 37, 6, 38, 7, 39,
                                                  8, 40, 9, 41, 10, 42, 11, 43, 12, 44, 13, 45, 14, 46, 15, 47};
  const __m512i ilo = _mm512_load_si512(lo_idx);
  const int64_t kp = (kc + 1) / 2, strips = (rows + kMR - 1) / kMR;
  for (int64_t p = 0; p < kp; ++p) {
    const u16* r0 = a + 2 * p * lda;
    const bool two = 2 * p + 1 < kc;
    for (int64_t s = 0; s < strips; ++s) {
      const int64_t rn = std::min<int64_t>(kMR, rows - s * kMR);
      const __mmask32 lm = static_cast<__mmask32>((uint64_t{1} << rn) - 1);
      const __m512i x0 = _mm512_maskz_loadu_epi16(lm, r0 + s * kMR);
      const __m512i x1 = two ? _mm512_maskz_loadu_epi16(lm, r0 + lda + s * kMR) : _mm512_setzero_si512();
      // All 12 words, zero past rn (the masked loads zeroed those columns).
      _mm512_mask_storeu_epi32(out + (s * kp + p) * kMR, __mmask16((1u << kMR) - 1),
                               _mm512_permutex2var_epi16(x0, ilo, x1));
    }
  }
}

// op(A)[i0 + r, p0 + kk] for the rows of one block, packed strip by strip: strip s holds rows
// [s*MR, s*MR + MR) as [kp][MR] words (bf16_block_gemm.h's pair words); rows past `rows` are zero.
void pack_a(const u16* a, int64_t lda, bool ta, int64_t i0, int64_t rows, int64_t p0, int64_t kc, u32* out) {
  if (ta) {
    pack_a_transposed(a + p0 * lda + i0, lda, rows, kc, out);
    return;
  }
  const int64_t kp = (kc + 1) / 2;
  for (int64_t s = 0; s < rows; s += kMR) {
    u32* o = out + (s / kMR) * kp * kMR;
    const int64_t rn = std::min<int64_t>(kMR, rows - s);
    // a row's k pairs are consecutive words
    bf16blk::pairs_across_transposed(a + (i0 + s) * lda + p0, lda, rn, kc, o, kMR);
    zero_tail(o, kp, kMR, rn);
  }
}

// op(B)[p0 + kk, j0 + c] for one strip of NR columns (cols <= NR valid) as [kp][NR] words.
void pack_b_strip(const u16* b, int64_t ldb, bool tb, int64_t p0, int64_t kc, int64_t j0, int64_t cols, u32* o) {
  if (!tb)  // two rows of op(B) interleave into words
    bf16blk::pairs_down(b + p0 * ldb + j0, ldb, kc, cols, o, kNR);
  else  // op(B)[kk, j] = b[j * ldb + kk]: a column's k pairs are consecutive words of its row of b
    bf16blk::pairs_across_transposed(b + j0 * ldb + p0, ldb, cols, kc, o, kNR);
  zero_tail(o, (kc + 1) / 2, kNR, cols);
}

// C[rows x cols] = alpha * A_strip B_strip + cbeta * C (cbeta == 0: C not read), rows <= MR, cols <= NR;
// with y, the sums go rounded to bf16 into y (row stride ldy) instead of into C. The A strip is
// packed ([kp][MR] words), or with kDirect MR rows of op(A) itself, whose k pairs already are
// words: row r's pair p at ap[r * sai + p], read through memcpy (the words alias bf16 storage).
template <bool kDirect>
__attribute__((target(OTTER_TARGET_BF16))) void micro_kernel(int64_t kp, const u32* ap, int64_t sai, const u32* bp,
                                                              float* c, int64_t ldc, int rows, int cols, float alpha,
                                                              float cbeta, u16* y, int64_t ldy, bool stream) {
  __m512 acc[kMR][2];
#pragma GCC unroll 12
  for (int r = 0; r < kMR; ++r) acc[r][0] = acc[r][1] = _mm512_setzero_ps();
  for (int64_t p = 0; p < kp; ++p) {
    const __m512bh b0 = (__m512bh)_mm512_loadu_si512(bp);
    const __m512bh b1 = (__m512bh)_mm512_loadu_si512(bp + 16);
    bp += kNR;
#pragma GCC unroll 12
    for (int r = 0; r < kMR; ++r) {
      u32 w;
      if constexpr (kDirect) std::memcpy(&w, ap + r * sai, sizeof w);
      else w = ap[r];
      const __m512bh av = (__m512bh)_mm512_set1_epi32(static_cast<int>(w));
      acc[r][0] = _mm512_dpbf16_ps(acc[r][0], av, b0);
      acc[r][1] = _mm512_dpbf16_ps(acc[r][1], av, b1);
    }
    ap += kDirect ? 1 : kMR;
  }
  const __mmask16 m0 = cols >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << cols) - 1);
  const __mmask16 m1 = cols >= 32 ? __mmask16(0xFFFF) : cols > 16 ? __mmask16((1u << (cols - 16)) - 1) : __mmask16(0);
  const __m512 va = _mm512_set1_ps(alpha), vb = _mm512_set1_ps(cbeta);
#pragma GCC unroll 12
  for (int r = 0; r < kMR; ++r) {
    if (r >= rows) break;
    float* row = c + r * ldc;
    __m512 x0 = _mm512_mul_ps(acc[r][0], va), x1 = _mm512_mul_ps(acc[r][1], va);
    if (cbeta != 0.f) {
      x0 = _mm512_add_ps(x0, _mm512_mul_ps(vb, _mm512_maskz_loadu_ps(m0, row)));
      x1 = _mm512_add_ps(x1, _mm512_mul_ps(vb, _mm512_maskz_loadu_ps(m1, row + 16)));
    }
    if (y) {
      u16* yrow = y + r * ldy;
      _mm256_mask_storeu_epi16(yrow, m0, lanes::round_to_bf16(x0));
      _mm256_mask_storeu_epi16(yrow + 16, m1, lanes::round_to_bf16(x1));
      continue;
    }
    if (stream) {  // whole 64-byte-aligned rows past the caches (see gemm_bf16_native)
      _mm512_stream_ps(row, x0);
      _mm512_stream_ps(row + 16, x1);
      continue;
    }
    _mm512_mask_storeu_ps(row, m0, x0);
    _mm512_mask_storeu_ps(row + 16, m1, x1);
  }
}

// With y, the last depth block writes the rounded result to y instead of C (see gemm_bf16_round).
void gemm_bf16_native(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const u16* a, int64_t lda,
                      const u16* b, int64_t ldb, float beta, float* c, int64_t ldc, u16* y, int64_t ldy,
                      bool read_later) {
  const int threads = gemm_is_small(m, n, k) ? 1 : omp_get_max_threads();
  // A C read only much later (gemm_bf16.h), of 512 KiB or more, that is only written (beta 0, one
  // depth block, no rounded copy) goes past the caches with streaming stores: no read for ownership
  // of its lines, and no cache set thrashed by rows 4 KiB apart. On gpt_large's fc1 weight
  // gradient (256 x 1024) that took 2.80-3.00 ms a step down to 2.47-2.53 (4 calls, 3 profiled
  // runs each); the 1024 x 256 one did not change.
  const bool stream_c = read_later && c && !y && beta == 0.f && k <= kKC && m * n >= (int64_t{1} << 17) &&
                        ldc % 16 == 0 && reinterpret_cast<uintptr_t>(c) % 64 == 0;
  const int64_t kp_max = (std::min(kKC, k) + 1) / 2;
  // Packing buffers kept per thread between calls: allocating (and zeroing) the B panel, up to
  // 4 MiB at KC = 1024, on every call cost a tenth of a mid-sized GEMM. Every word read is packed first.
  static thread_local Scratch bpack_buf, apack_buf;
  u32* const bpack = bpack_buf.get<u32>(static_cast<size_t>(kp_max * ((std::min(kNC, n) + kNR - 1) / kNR) * kNR));
  for (int64_t jc = 0; jc < n; jc += kNC) {
    const int64_t nc = std::min(kNC, n - jc), strips = (nc + kNR - 1) / kNR;
    for (int64_t pc = 0; pc < k; pc += kKC) {
      const int64_t kc = std::min(kKC, k - pc), kp = (kc + 1) / 2;
      const float cbeta = pc == 0 ? beta : 1.f;
      u16* const yblock = y && pc + kc >= k ? y : nullptr;  // the last depth block rounds into y
      const int64_t mblocks = (m + kMC - 1) / kMC, row_strips = (m + kMR - 1) / kMR;
      // Enough rows for every thread: each takes an equal share of the row strips (contiguous,
      // the same share in every depth block), packed MC rows at a time. 96-row blocks dealt out
      // whole left one thread idle for a block in eleven at m = 1024 on two threads.
      const bool split_rows = row_strips >= 4 * static_cast<int64_t>(threads);
      // Else split the column strips into groups, for tasks enough.
      const int64_t groups = std::clamp<int64_t>((2 * threads + mblocks - 1) / mblocks, 1, strips);
      const int64_t per_group = (strips + groups - 1) / groups;
      // op(A) row-major with whole k pairs in the block (even kc, even lda, word-aligned) and whole
      // strips is read in place: its k pairs already are the words the micro-kernel broadcasts,
      // and the 12 rows of a strip stay in L1 across the B strips. Else the block is packed.
      const bool a_words = !ta && kc % 2 == 0 && lda % 2 == 0 && reinterpret_cast<uintptr_t>(a) % alignof(u32) == 0;
      auto block = [&](int64_t i0, int64_t mc, int64_t s_begin, int64_t s_end, u32* apack) {
        const bool direct = a_words && mc % kMR == 0;
        if (!direct) pack_a(a, lda, ta, i0, mc, pc, kc, apack);
        for (int64_t s = s_begin; s < s_end; ++s) {
          const int cols = static_cast<int>(std::min<int64_t>(kNR, nc - s * kNR));
          const u32* bs = bpack + s * kp * kNR;
          for (int64_t ir = 0; ir < mc; ir += kMR) {
            float* cs = c ? c + (i0 + ir) * ldc + jc + s * kNR : nullptr;  // null: y only (gemm_bf16_round)
            u16* ys = yblock ? yblock + (i0 + ir) * ldy + jc + s * kNR : nullptr;
            const int rows = static_cast<int>(std::min<int64_t>(kMR, mc - ir));
            if (direct)
              micro_kernel<true>(kp, reinterpret_cast<const u32*>(a + (i0 + ir) * lda + pc), lda / 2, bs, cs, ldc,
                                 rows, cols, alpha, cbeta, ys, ldy, stream_c && cols == kNR);
            else
              micro_kernel<false>(kp, apack + (ir / kMR) * kp * kMR, kMR, bs, cs, ldc, rows, cols, alpha, cbeta, ys,
                                  ldy, stream_c && cols == kNR);
          }
        }
      };
#pragma omp parallel num_threads(threads)
      {
#pragma omp for schedule(static)
        for (int64_t s = 0; s < strips; ++s)
          pack_b_strip(b, ldb, tb, pc, kc, jc + s * kNR, std::min<int64_t>(kNR, nc - s * kNR), bpack + s * kp * kNR);
        u32* const apack = apack_buf.get<u32>(static_cast<size_t>(kMC * kp));
        if (split_rows) {
          const int64_t t = omp_get_thread_num(), nt = omp_get_num_threads();
          const int64_t s_end = row_strips * (t + 1) / nt;
          for (int64_t sb = row_strips * t / nt; sb < s_end; sb += kMC / kMR) {
            const int64_t i0 = sb * kMR;
            block(i0, std::min({(s_end - sb) * kMR, kMC, m - i0}), 0, strips, apack);
          }
        } else {
#pragma omp for collapse(2) schedule(static)
          for (int64_t mb = 0; mb < mblocks; ++mb)
            for (int64_t g = 0; g < groups; ++g)
              block(mb * kMC, std::min(kMC, m - mb * kMC), g * per_group, std::min(strips, (g + 1) * per_group),
                    apack);
        }
        if (stream_c) _mm_sfence();  // this thread's streamed rows are visible before the region ends
      }
    }
  }
}
#endif

}  // namespace

bool bf16_gemm_native() { return !widen_forced() && cpu_has_avx512_bf16() && active_isa() == Isa::kAvx512; }

bool bf16_gemm_available() { return cpu_has_avx512_bf16(); }

void set_bf16_gemm_widened(bool widen) { g_widen.store(widen ? 1 : 0, std::memory_order_relaxed); }

std::string describe_bf16_gemm() {
  if (bf16_gemm_native()) return "avx512_bf16 dot products (VDPBF16PS), fp32 accumulation";
  std::string why = !cpu_has_avx512_bf16()             ? "this CPU has no avx512_bf16"
                    : active_isa() != Isa::kAvx512 ? "the active ISA variant is not avx512"
                                                       : "OTTER_BF16_GEMM=widen";
  return "widened to fp32 for sgemm (" + why + ")";
}

void gemm_bf16_widened(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const u16* a, int64_t lda,
                       const u16* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  // The stored matrices: A is [m, k] (ta: [k, m]) with row stride lda, likewise B.
  const int64_t ar = ta ? k : m, ac = ta ? m : k, br = tb ? n : k, bc = tb ? k : n;
  std::vector<float> wa(static_cast<size_t>(ar * ac)), wb(static_cast<size_t>(br * bc));
#pragma omp parallel for schedule(static) if (ar * ac > 65536)
  for (int64_t i = 0; i < ar; ++i) widen_bf16(a + i * lda, wa.data() + i * ac, ac);
#pragma omp parallel for schedule(static) if (br * bc > 65536)
  for (int64_t i = 0; i < br; ++i) widen_bf16(b + i * ldb, wb.data() + i * bc, bc);
  gemm<float>(ta, tb, m, n, k, alpha, wa.data(), ac, wb.data(), bc, beta, c, ldc);
}

void gemm_bf16(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const u16* a, int64_t lda,
               const u16* b, int64_t ldb, float beta, float* c, int64_t ldc, bool read_later) {
  if (m <= 0 || n <= 0) return;
  if (k <= 0 || alpha == 0.f || !bf16_gemm_native()) {
    gemm_bf16_widened(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    return;
  }
#if OTTER_HAVE_BF16_KERNEL
  gemm_bf16_native(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, nullptr, 0, read_later);
#endif
}

void gemm_bf16_round(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const u16* a, int64_t lda,
                     const u16* b, int64_t ldb, float beta, float* c, int64_t ldc, u16* y, int64_t ldy) {
  if (m <= 0 || n <= 0) return;
  OTTER_CHECK(c || beta == 0.f, "gemm_bf16_round: beta != 0 reads C, and C is null");
  const bool native = k > 0 && alpha != 0.f && bf16_gemm_native();
  // The float32 sums where the caller keeps none and the product needs them (several depth blocks,
  // or the widening path): the calling thread's buffer, shared by every product it runs.
  static thread_local Scratch own;
  if (!c && (!native || k > kKC)) {
    c = own.get<float>(static_cast<size_t>(m * n));
    ldc = n;
  }
  if (!native) {
    gemm_bf16_widened(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
#pragma omp parallel for schedule(static) if (m * n > 65536)
    for (int64_t i = 0; i < m; ++i) round_to_bf16(c + i * ldc, y + i * ldy, n);
    return;
  }
#if OTTER_HAVE_BF16_KERNEL
  gemm_bf16_native(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, y, ldy, false);
#endif
}

}  // namespace otter::cpu
