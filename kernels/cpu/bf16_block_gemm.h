// Small bf16 products for kernels that block their own work (kernels/cpu/attention_bf16.cc): one
// call multiplies blocks of a few dozen rows on the calling thread with VDPBF16PS (AVX512_BF16),
// float32 accumulation, no threads and no allocation. The caller packs its operands as pair
// words: VDPBF16PS multiplies the two bf16 halves of 32-bit words lane by lane, so a word holds
// elements 2p and 2p+1 of the summed axis (low half first), and an odd length pads the last
// word's high half with zero. The packing helpers also pack the blocked GEMM's B strips
// (kernels/cpu/gemm_bf16.cc).
//
// Only for CPUs where bf16_gemm_native() (kernels/cpu/gemm_bf16.h) is true; the functions are
// compiled for AVX-512 and must not be called elsewhere.
#pragma once

#include <cstdint>

// The target attribute of the functions that run VDPBF16PS (here and in kernels/cpu/gemm_bf16.cc).
#define OTTER_TARGET_BF16 "avx512f,avx512bw,avx512vl,avx512dq,avx512bf16,avx2,fma"

namespace otter::cpu::bf16blk {

using u16 = uint16_t;
using u32 = uint32_t;

// C[m, n] = alpha * sum over p < kp of A(i, p) * B(p, j) (+ C where accumulate), where
// A(i, p) = a[i * sai + p * sap] and B(p, j) = b[p * ldb + j] are pair words, C float32 with row
// stride ldc. Any m, n >= 0.
void gemm(int64_t m, int64_t n, int64_t kp, const u32* a, int64_t sai, int64_t sap, const u32* b, int64_t ldb,
          float alpha, bool accumulate, float* c, int64_t ldc);

// Pairs down the rows of a bf16 matrix x [k, n] (row stride ldx): out[p * ldo + j] =
// x[2p, j] | x[2p + 1, j] << 16 for p < (k + 1) / 2, j < n.
void pairs_down(const u16* x, int64_t ldx, int64_t k, int64_t n, u32* out, int64_t ldo);

// Pairs along the rows of x [m, k] (row stride ldx), transposed: out[p * ldo + i] =
// x[i, 2p] | x[i, 2p + 1] << 16 for i < m, p < (k + 1) / 2.
void pairs_across_transposed(const u16* x, int64_t ldx, int64_t m, int64_t k, u32* out, int64_t ldo);

// Pairs along the rows of x [m, k] (row stride ldx), in place where k and ldx are even (x itself,
// row stride ldx / 2 words), else packed into buf (row stride (k + 1) / 2). Returns the words and
// sets *sai to their row stride.
const u32* pairs_across(const u16* x, int64_t ldx, int64_t m, int64_t k, u32* buf, int64_t* sai);

}  // namespace otter::cpu::bf16blk
