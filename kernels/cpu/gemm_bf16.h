// bfloat16 GEMM with float32 accumulation on the CPU's bf16 dot-product units (AVX512_BF16's
// VDPBF16PS), or, where the CPU lacks them, by widening the operands to float32 for OpenBLAS's sgemm.
// Both compute the same contract as a GPU's bf16 GEMM with a 32F compute type: the bf16 products
// are exact in float32, sums accumulate in float32, and the float32 result is rounded once by the
// caller. They differ only in summation order (and VDPBF16PS treats bf16 subnormals, below 1.2e-38,
// as zero). docs/performance.md, "bf16 on bf16 units", has the blocking and the measurements.
#pragma once

#include <cstdint>
#include <string>

namespace otter::cpu {

// Whether gemm_bf16 runs on the bf16 dot products: the CPU has AVX512_BF16, the active ISA variant
// (isa.h) is avx512, and OTTER_BF16_GEMM is not "widen" (which forces the widening path).
bool bf16_gemm_native();
// Whether this CPU has the bf16 dot products at all (whatever OTTER_ISA and OTTER_BF16_GEMM say).
bool bf16_gemm_available();
// Forces (true) or stops forcing (false) the widening path, overriding OTTER_BF16_GEMM (for tests
// that compare the two paths, or that need the widening path's exact summation order).
void set_bf16_gemm_widened(bool widen);
// "avx512_bf16 dot products (VDPBF16PS)" or why the widening path runs, for otter-train kernels.
std::string describe_bf16_gemm();

// C[m,n] = alpha * op(A)[m,k] op(B)[k,n] + beta * C: A and B bfloat16 (their bits), C float32, all
// row-major with leading dimensions as in gemm() (gemm.h). With beta == 0, C's old contents are not
// read. Runs on the bf16 units where bf16_gemm_native(), else as gemm_bf16_widened.
// `read_later`: C is read again only much later (a weight gradient, read at the optimizer step), so
// the native path may write a large C (512 KiB or more, beta 0, k <= 1024, 64-byte-aligned rows)
// with streaming stores past the caches; the values are the same.
void gemm_bf16(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const uint16_t* a,
               int64_t lda, const uint16_t* b, int64_t ldb, float beta, float* c, int64_t ldc, bool read_later = false);

// Y[m,n] = bf16(alpha * op(A) op(B) + beta * C), rounded once (float_to_bf16, graph/half.h) from
// the same float32 sums gemm_bf16 makes: bit for bit gemm_bf16 into C followed by rounding C. C
// (float32, [m, ldc]) is read when beta != 0 and holds partial sums when k spans several depth
// blocks; on the native path with k <= 1024 and beta == 0 it is not touched. C may be null when
// beta == 0: the function then keeps the sums it needs in a buffer of the calling thread. Y's row
// stride is ldy.
void gemm_bf16_round(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const uint16_t* a,
                     int64_t lda, const uint16_t* b, int64_t ldb, float beta, float* c, int64_t ldc, uint16_t* y,
                     int64_t ldy);

// The same product by widening op(A) and op(B) to float32 and calling sgemm.
void gemm_bf16_widened(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const uint16_t* a,
                       int64_t lda, const uint16_t* b, int64_t ldb, float beta, float* c, int64_t ldc);

}  // namespace otter::cpu
