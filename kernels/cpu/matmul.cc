// CPU kernels for MatMul (numpy semantics, batched, broadcasting) and Gemm, both over BLAS for
// float32 and float64. bfloat16 operands multiply on the CPU's bf16 dot products where it has them
// (kernels/cpu/gemm_bf16.h) into a float32 result that is rounded once; float16 ones are widened
// (kernels/cpu/half.cc).
#include <algorithm>
#include <vector>

#include "kernels/common/gemm_params.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/dispatch.h"
#include "kernels/cpu/gemm.h"
#include "kernels/cpu/gemm_bf16.h"
#include "kernels/cpu/scratch.h"
#include "kernels/cpu/half.h"

namespace otter {
namespace {

using cpu::gemm;

// MatMul: 1-D operands are promoted (A: [K] -> [1,K], B: [K] -> [K,1]) and the added axis is
// dropped from the result; batch axes broadcast as in numpy.
class MatMulKernel : public Kernel {
 public:
  explicit MatMulKernel(const Node&) {}

  void run(KernelContext& ctx) override {
    const params::MatMulShape s = params::resolve_matmul(ctx);
    if (ctx.input(0).dtype() == DataType::kBFloat16) return compute_bf16(ctx, ctx.input(0), ctx.input(1), s);
    OTTER_DISPATCH_FLOAT(ctx.input(0).dtype(), T, [&] { compute<T>(ctx, ctx.input(0), ctx.input(1), s); });
  }

 private:
  // Runs mm(rows, a_off, b_off, y_off) (a GEMM of `rows` rows of A at element a_off, B at b_off,
  // into Y at y_off) for every output matrix: one GEMM when B has no (effective) batch, A's batch
  // folded into M; else one per batch, in parallel across the batch when BLAS would run each one
  // single-threaded anyway.
  template <typename Mm>
  void for_each_gemm(const params::MatMulShape& s, Mm&& mm) {
    const int64_t m = s.m, k = s.k, n = s.n, nbatch = s.nbatch;
    if (num_elements(s.bbatch) == 1) return mm(nbatch * m, 0, 0, 0);
    a_off_ = s.a_offsets();
    b_off_ = s.b_offsets();
    const int64_t mn = m * n;
    if (cpu::gemm_is_small(m, n, k) && nbatch > 1) {
#pragma omp parallel for schedule(static)
      for (int64_t t = 0; t < nbatch; ++t) mm(m, a_off_[t], b_off_[t], t * mn);
    } else {
      for (int64_t t = 0; t < nbatch; ++t) mm(m, a_off_[t], b_off_[t], t * mn);
    }
  }

  // bf16 x bf16 -> float32 sums, rounded once into the bf16 output.
  void compute_bf16(KernelContext& ctx, const Tensor& a, const Tensor& b, const params::MatMulShape& s) {
    if (b.dtype() != DataType::kBFloat16) ctx.error(str_cat("B has type ", b.describe(), ", A ", a.describe()));
    Tensor& y = ctx.allocate_output(0, DataType::kBFloat16, s.out_dims);
    if (s.nbatch == 0 || s.m == 0 || s.n == 0) return;
    const auto* pa = static_cast<const uint16_t*>(a.raw());
    const auto* pb = static_cast<const uint16_t*>(b.raw());
    auto* py = static_cast<uint16_t*>(y.raw());
    for_each_gemm(s, [&](int64_t rows, int64_t ao, int64_t bo, int64_t yo) {
      cpu::gemm_bf16_round(false, false, rows, s.n, s.k, 1.f, pa + ao, s.k, pb + bo, s.n, 0.f, nullptr, s.n, py + yo,
                           s.n);
    });
  }

  template <typename T>
  void compute(KernelContext& ctx, const Tensor& a, const Tensor& b, const params::MatMulShape& s) {
    Tensor& y = ctx.allocate_output(0, DataTypeOf<T>::value, s.out_dims);
    if (s.nbatch == 0 || s.m == 0 || s.n == 0) return;
    const T* pa = a.data<T>();
    const T* pb = b.data<T>();
    T* py = y.data<T>();
    for_each_gemm(s, [&](int64_t rows, int64_t ao, int64_t bo, int64_t yo) {
      gemm<T>(false, false, rows, s.n, s.k, T(1), pa + ao, pb + bo, T(0), py + yo);
    });
  }

  std::vector<int64_t> a_off_, b_off_;
};

// Gemm: Y = alpha * op(A) * op(B) + beta * C, C unidirectionally broadcast to [M, N].
class GemmKernel : public Kernel {
 public:
  explicit GemmKernel(const Node& n) : at_(n) {}

  void run(KernelContext& ctx) override {
    const Tensor& a = ctx.input(0);
    if (a.dtype() == DataType::kBFloat16) return compute_bf16(ctx);
    OTTER_DISPATCH_FLOAT(a.dtype(), T, [&] { compute<T>(ctx); });
  }

 private:
  void compute_bf16(KernelContext& ctx) {
    const Tensor& a = ctx.input(0);
    const Tensor& b = ctx.input(1);
    if (b.dtype() != a.dtype()) ctx.error(str_cat("B has type ", b.describe(), ", A ", a.describe()));
    const params::GemmDims dims = params::gemm_dims(ctx, a, b, at_.trans_a, at_.trans_b);
    const int64_t m = dims.m, n = dims.n, k = dims.k;
    Tensor& y = ctx.allocate_output(0, DataType::kBFloat16, {m, n});
    if (m == 0 || n == 0) return;
    float* py = nullptr;  // gemm_bf16_round's C: beta * C where Gemm has one, else its own buffer
    float gemm_beta = 0.f;
    if (ctx.has_input(2) && at_.beta != 0.f) {
      py = scratch_.get<float>(static_cast<size_t>(m * n));
      const Tensor& c = ctx.input(2);
      const auto [cm, cn] = params::check_gemm_c(ctx, c, a, m, n);
      const Tensor wc = cpu::widen_to_float(c);
      const float* pc = wc.data<float>();
      const int64_t rs = cm == 1 ? 0 : cn, cs = cn == 1 ? 0 : 1;
#pragma omp parallel for schedule(static) if (m * n > 65536)
      for (int64_t i = 0; i < m; ++i)
        for (int64_t j = 0; j < n; ++j) py[i * n + j] = at_.beta * pc[i * rs + j * cs];
      gemm_beta = 1.f;
    }
    cpu::gemm_bf16_round(at_.trans_a, at_.trans_b, m, n, k, at_.alpha, static_cast<const uint16_t*>(a.raw()),
                         at_.trans_a ? m : k, static_cast<const uint16_t*>(b.raw()), at_.trans_b ? k : n, gemm_beta, py,
                         n, static_cast<uint16_t*>(y.raw()), n);
  }
  cpu::Scratch scratch_;  // beta * C, kept between runs

  template <typename T>
  void compute(KernelContext& ctx) {
    const Tensor& a = ctx.input(0);
    const Tensor& b = ctx.input(1);
    if (b.dtype() != a.dtype()) ctx.error(str_cat("B has type ", b.describe(), ", A ", a.describe()));
    const params::GemmDims dims = params::gemm_dims(ctx, a, b, at_.trans_a, at_.trans_b);
    const int64_t m = dims.m, n = dims.n, k = dims.k;
    Tensor& y = ctx.allocate_output(0, DataTypeOf<T>::value, {m, n});
    if (m == 0 || n == 0) return;
    T* py = y.data<T>();
    const T alpha = static_cast<T>(at_.alpha), beta = static_cast<T>(at_.beta);
    T gemm_beta = T(0);
    if (ctx.has_input(2) && beta != T(0)) {
      const Tensor& c = ctx.input(2);
      const auto [cm, cn] = params::check_gemm_c(ctx, c, a, m, n);
      const T* pc = c.data<T>();
      const int64_t rs = cm == 1 ? 0 : cn, cs = cn == 1 ? 0 : 1;
#pragma omp parallel for schedule(static) if (m * n > 65536)
      for (int64_t i = 0; i < m; ++i)
        for (int64_t j = 0; j < n; ++j) py[i * n + j] = beta * pc[i * rs + j * cs];
      gemm_beta = T(1);
    }
    gemm<T>(at_.trans_a, at_.trans_b, m, n, k, alpha, a.data<T>(), b.data<T>(), gemm_beta, py);
  }

  params::GemmAttrs at_;
};

}  // namespace

void register_cpu_matmul_kernels(KernelRegistry& r) {
  // float16 comes through kernels/cpu/half.cc's widening wrapper.
  const std::vector<DataType> kFloats = {DataType::kFloat32, DataType::kFloat64, DataType::kBFloat16};
  r.add({.op_type = "MatMul", .dtypes = kFloats, .create = node_kernel<MatMulKernel>()});
  r.add({.op_type = "Gemm", .dtypes = kFloats, .create = node_kernel<GemmKernel>()});
}

}  // namespace otter
