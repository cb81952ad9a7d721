// Row-major GEMM for CPU kernels: a thin wrapper over OpenBLAS's cblas_sgemm / cblas_dgemm.
#pragma once

#include <cblas.h>

#include <cstdint>
#include <limits>
#include <type_traits>

#include "graph/error.h"

namespace otter::cpu {

// Below this many multiply-adds OpenBLAS runs a GEMM on the calling thread (its own threshold is
// 65536 * 4 for m*n*k); callers may then run independent GEMMs in parallel under OpenMP without
// contending for OpenBLAS's thread pool. Above it, call GEMMs one after another and let BLAS thread.
constexpr int64_t kSerialGemmWork = 262144;
inline bool gemm_is_small(int64_t m, int64_t n, int64_t k) { return m * n * k < kSerialGemmWork; }

namespace detail {
inline blasint blas_int(int64_t v, const char* what) {
  OTTER_CHECK(v >= 0 && v <= std::numeric_limits<blasint>::max(), "gemm: ", what, " = ", v,
              " exceeds the BLAS integer range");
  return static_cast<blasint>(v);
}
}  // namespace detail

// C[m,n] = alpha * op(A)[m,k] * op(B)[k,n] + beta * C, all row-major. op(A) is A ([m,k], leading
// dimension lda >= k) or, with trans_a, A^T of A stored as [k,m] (lda >= m); likewise B. With
// beta == 0 the old contents of C are ignored (NaN in C does not propagate).
template <typename T>
void gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, T alpha, const T* a,
          int64_t lda, const T* b, int64_t ldb, T beta, T* c, int64_t ldc) {
  static_assert(std::is_same_v<T, float> || std::is_same_v<T, double>, "gemm: float or double");
  if (m <= 0 || n <= 0) return;
  if (k <= 0 || alpha == T(0)) {  // nothing to multiply: C = beta * C
    for (int64_t i = 0; i < m; ++i) {
      T* row = c + i * ldc;
      if (beta == T(0)) {
        for (int64_t j = 0; j < n; ++j) row[j] = T(0);
      } else if (beta != T(1)) {
        for (int64_t j = 0; j < n; ++j) row[j] *= beta;
      }
    }
    return;
  }
  const CBLAS_TRANSPOSE ta = trans_a ? CblasTrans : CblasNoTrans;
  const CBLAS_TRANSPOSE tb = trans_b ? CblasTrans : CblasNoTrans;
  const blasint bm = detail::blas_int(m, "m"), bn = detail::blas_int(n, "n"), bk = detail::blas_int(k, "k");
  const blasint blda = detail::blas_int(lda, "lda"), bldb = detail::blas_int(ldb, "ldb"),
                bldc = detail::blas_int(ldc, "ldc");
  if constexpr (std::is_same_v<T, float>) {
    cblas_sgemm(CblasRowMajor, ta, tb, bm, bn, bk, alpha, a, blda, b, bldb, beta, c, bldc);
  } else {
    cblas_dgemm(CblasRowMajor, ta, tb, bm, bn, bk, alpha, a, blda, b, bldb, beta, c, bldc);
  }
}

// Convenience for dense operands: leading dimensions follow from the shapes.
template <typename T>
void gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, T alpha, const T* a,
          const T* b, T beta, T* c) {
  gemm<T>(trans_a, trans_b, m, n, k, alpha, a, trans_a ? m : k, b, trans_b ? k : n, beta, c, n);
}

}  // namespace otter::cpu
