// cuBLASLt kernels: MatMul (numpy semantics: batched, broadcast batch axes, 1-D promotion), Gemm
// (transA/transB, alpha, beta, C broadcast; a 1-D C with beta 1 is the bias epilogue) and
// ai.otter.GemmAccumulate (beta 0 on the first micro-step, 1 after: fp16/bf16 operands can
// accumulate straight into an fp32 accumulator). All compute in fp32 (CUBLAS_COMPUTE_32F, no
// TF32). Descriptors and the heuristic's algorithm are cached per shape in each node's kernel.
//
// otter's tensors are row-major; cuBLASLt's matrices column-major. Y[m,n] = op(A) op(B) is
// computed as Y^T = op(B)^T op(A)^T: cuBLASLt's first operand is B, its second A, and Y^T is a
// column-major [n, m] matrix with leading dimension n, which is Y's row-major memory.
#include <map>
#include <tuple>

#include "kernels/common/gemm_params.h"
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/cuda_kernels.h"

namespace otter::cuda {
namespace {

cudaDataType_t cuda_type(DataType t) {
  switch (t) {
    case DataType::kFloat32: return CUDA_R_32F;
    case DataType::kFloat16: return CUDA_R_16F;
    case DataType::kBFloat16: return CUDA_R_16BF;
    default: fail(where(), "cuBLASLt GEMM on ", dtype_name(t), " is not supported (f32, f16, bf16)");
  }
}

// Largest power of two (at most 256) dividing the address and every batch stride in bytes.
uint32_t alignment(const void* p, int64_t stride_bytes = 0) {
  uint64_t v = reinterpret_cast<uintptr_t>(p) | static_cast<uint64_t>(stride_bytes) | 256u;
  return static_cast<uint32_t>(v & (~v + 1));
}

// One GEMM (or a strided batch of them) in otter's row-major terms.
struct GemmCall {
  bool trans_a = false, trans_b = false;
  int64_t m = 0, n = 0, k = 0;
  DataType ab = DataType::kFloat32, cd = DataType::kFloat32;  // operand and output types
  const void* a = nullptr;
  const void* b = nullptr;
  const void* c = nullptr;  // read when beta != 0; may be d itself
  void* d = nullptr;
  float alpha = 1.f, beta = 0.f;
  const void* bias = nullptr;  // [n] of type cd, added to every row (the bias epilogue)
  int64_t batch = 1, stride_a = 0, stride_b = 0, stride_d = 0;  // elements
};

// What a cached plan depends on.
struct PlanKey {
  bool ta, tb, bias;
  int64_t m, n, k, batch, sa, sb, sd;
  DataType ab, cd;
  uint32_t align_a, align_b, align_c, align_d, align_bias;
  auto tie() const { return std::tie(ta, tb, bias, m, n, k, batch, sa, sb, sd, ab, cd, align_a, align_b, align_c, align_d, align_bias); }
  bool operator<(const PlanKey& o) const { return tie() < o.tie(); }
};

// Descriptors and algorithm of one shape.
class Plan {
 public:
  Plan(CudaDevice& dev, const GemmCall& g, const PlanKey& key) {
    OTTER_CUBLAS_CHECK(cublasLtMatmulDescCreate(&op_, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    const int32_t op_first = g.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N, op_second = g.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
    OTTER_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(op_, CUBLASLT_MATMUL_DESC_TRANSA, &op_first, sizeof(op_first)));
    OTTER_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(op_, CUBLASLT_MATMUL_DESC_TRANSB, &op_second, sizeof(op_second)));
    if (g.bias) {
      const uint32_t epilogue = CUBLASLT_EPILOGUE_BIAS;
      OTTER_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(op_, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue, sizeof(epilogue)));
      set_bias(g.bias);
    }
    // First operand: B, stored [k, n] (or [n, k] with transB) row-major = column-major [n, k] / [k, n].
    layout(&first_, cuda_type(g.ab), g.trans_b ? g.k : g.n, g.trans_b ? g.n : g.k, g.batch, g.stride_b);
    // Second operand: A, stored [m, k] (or [k, m] with transA).
    layout(&second_, cuda_type(g.ab), g.trans_a ? g.m : g.k, g.trans_a ? g.k : g.m, g.batch, g.stride_a);
    layout(&out_, cuda_type(g.cd), g.n, g.m, g.batch, g.stride_d);
    cublasLtMatmulPreference_t pref = nullptr;
    OTTER_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
    const uint64_t ws = dev.cublaslt_workspace_bytes();
    const uint32_t aligns[4] = {key.align_b, key.align_a, key.align_c, key.align_d};  // first, second, C, D
    const cublasLtMatmulPreferenceAttributes_t attrs[4] = {
        CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
        CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES};
    cublasLtMatmulHeuristicResult_t result{};
    int found = 0;
    cublasStatus_t st = cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws));
    for (int i = 0; i < 4 && st == CUBLAS_STATUS_SUCCESS; ++i)
      st = cublasLtMatmulPreferenceSetAttribute(pref, attrs[i], &aligns[i], sizeof(aligns[i]));
    if (st == CUBLAS_STATUS_SUCCESS)
      st = cublasLtMatmulAlgoGetHeuristic(dev.cublaslt(), op_, first_, second_, out_, out_, pref, 1, &result, &found);
    cublasLtMatmulPreferenceDestroy(pref);
    OTTER_CUBLAS_CHECK(st);
    if (found == 0 || result.state != CUBLAS_STATUS_SUCCESS)
      fail(where(), "cuBLASLt has no algorithm for ", g.trans_a ? "A^T" : "A", " [", g.m, "x", g.k, "] * ",
           g.trans_b ? "B^T" : "B", " [", g.k, "x", g.n, "] in ", dtype_name(g.ab), " -> ", dtype_name(g.cd),
           g.batch > 1 ? str_cat(" (batch ", g.batch, ")") : std::string());
    algo_ = result.algo;
  }
  ~Plan() {
    if (out_) cublasLtMatrixLayoutDestroy(out_);
    if (second_) cublasLtMatrixLayoutDestroy(second_);
    if (first_) cublasLtMatrixLayoutDestroy(first_);
    if (op_) cublasLtMatmulDescDestroy(op_);
  }
  Plan(const Plan&) = delete;
  Plan& operator=(const Plan&) = delete;

  void run(CudaDevice& dev, const GemmCall& g) {
    if (g.bias) set_bias(g.bias);
    const void* c = g.beta != 0.f ? g.c : g.d;
    OTTER_CUBLAS_CHECK(cublasLtMatmul(dev.cublaslt(), op_, &g.alpha, g.b, first_, g.a, second_, &g.beta, c, out_, g.d,
                                      out_, &algo_, dev.cublaslt_workspace(), dev.cublaslt_workspace_bytes(),
                                      dev.cuda_stream()));
  }

 private:
  void set_bias(const void* bias) {
    OTTER_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(op_, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof(bias)));
  }
  static void layout(cublasLtMatrixLayout_t* l, cudaDataType_t t, int64_t rows, int64_t cols, int64_t batch,
                     int64_t stride) {
    OTTER_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(l, t, static_cast<uint64_t>(rows), static_cast<uint64_t>(cols), rows));
    if (batch > 1) {
      const int32_t count = static_cast<int32_t>(batch);
      OTTER_CUBLAS_CHECK(cublasLtMatrixLayoutSetAttribute(*l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof(count)));
      OTTER_CUBLAS_CHECK(cublasLtMatrixLayoutSetAttribute(*l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride,
                                                          sizeof(stride)));
    }
  }

  cublasLtMatmulDesc_t op_ = nullptr;
  cublasLtMatrixLayout_t first_ = nullptr, second_ = nullptr, out_ = nullptr;
  cublasLtMatmulAlgo_t algo_{};
};

// A kernel's GEMMs: plans cached per shape and alignment.
class Gemm {
 public:
  void run(CudaDevice& dev, const GemmCall& g) {
    if (g.m == 0 || g.n == 0 || g.batch == 0) return;
    OTTER_CHECK(g.k > 0, where(), "internal: GEMM with k = 0 reached cuBLASLt");
    const int64_t int_max = std::numeric_limits<int32_t>::max();
    if (g.m > int_max || g.n > int_max || g.k > int_max || g.batch > int_max)
      fail(where(), "GEMM dimensions [", g.m, "x", g.k, "] * [", g.k, "x", g.n, "] (batch ", g.batch,
           ") exceed cuBLASLt's 32-bit sizes");
    const int64_t eab = static_cast<int64_t>(dtype_size(g.ab)), ecd = static_cast<int64_t>(dtype_size(g.cd));
    const PlanKey key{g.trans_a, g.trans_b, g.bias != nullptr, g.m, g.n, g.k, g.batch, g.stride_a, g.stride_b,
                      g.stride_d, g.ab, g.cd, alignment(g.a, g.stride_a * eab), alignment(g.b, g.stride_b * eab),
                      alignment(g.beta != 0.f ? g.c : g.d, g.stride_d * ecd), alignment(g.d, g.stride_d * ecd),
                      g.bias ? alignment(g.bias) : 0u};
    auto it = plans_.find(key);
    if (it == plans_.end()) it = plans_.emplace(key, std::make_unique<Plan>(dev, g, key)).first;
    it->second->run(dev, g);
  }

 private:
  std::map<PlanKey, std::unique_ptr<Plan>> plans_;
};

// ---- helper kernels ----------------------------------------------------------------------------

// y[i] = beta * c[broadcast offset of i] (Gemm's C term before a beta-1 GEMM).
template <typename S>
__global__ void scaled_broadcast_kernel(int64_t n, const S* c, S* y, StridedIndexer<1> ix, float beta) {
  OTTER_GRID_STRIDE(i, n) {
    int64_t off[1];
    ix.offsets(i, off);
    y[i] = store_value<S>(beta * load_value(c[off[0]]));
  }
}

void zero(const KernelContext& ctx, Tensor& t) {
  if (t.nbytes()) OTTER_CUDA_CHECK(cudaMemsetAsync(t.raw(), 0, t.nbytes(), stream_of(ctx)));
}

// ---- MatMul ------------------------------------------------------------------------------------

// 1-D operands are promoted (A: [K] -> [1,K], B: [K] -> [K,1]) and the added axis dropped from the
// result; batch axes broadcast. B without a batch folds A's batch into M (one GEMM); equal batch
// axes are one strided-batch GEMM; other broadcasts run one GEMM per output matrix.
class MatMulKernel : public Kernel {
 public:
  explicit MatMulKernel(const Node&) {}
  void run(KernelContext& ctx) override {
    const params::MatMulShape s = params::resolve_matmul(ctx);
    const Tensor& a = ctx.input(0);
    const Tensor& b = ctx.input(1);
    const int64_t m = s.m, k = s.k, n = s.n, nbatch = s.nbatch;
    Tensor& y = ctx.allocate_output(0, a.dtype(), s.out_dims);
    if (nbatch == 0 || m == 0 || n == 0) return;
    if (k == 0) return zero(ctx, y);
    CudaDevice& dev = device_of(ctx);
    GemmCall g;
    g.m = m;
    g.n = n;
    g.k = k;
    g.ab = g.cd = a.dtype();
    g.a = a.raw();
    g.b = b.raw();
    g.d = y.raw();
    if (num_elements(s.bbatch) == 1) {  // B shared: A's batch folds into M
      g.m = nbatch * m;
      gemm_.run(dev, g);
    } else if (s.abatch == s.bbatch) {  // one strided batch
      g.batch = nbatch;
      g.stride_a = m * k;
      g.stride_b = k * n;
      g.stride_d = m * n;
      gemm_.run(dev, g);
    } else {  // general broadcast: one GEMM per output matrix
      const size_t es = dtype_size(a.dtype());
      const std::vector<int64_t> oa = s.a_offsets(), ob = s.b_offsets();
      for (int64_t t = 0; t < nbatch; ++t) {
        g.a = static_cast<const char*>(a.raw()) + oa[t] * es;
        g.b = static_cast<const char*>(b.raw()) + ob[t] * es;
        g.d = static_cast<char*>(y.raw()) + t * m * n * es;
        gemm_.run(dev, g);
      }
    }
  }

 private:
  Gemm gemm_;
};

// ---- Gemm --------------------------------------------------------------------------------------

// The call D = alpha op(A) op(B) into `d` (of dtype cd): no C, no bias yet.
GemmCall gemm_call(const params::GemmAttrs& at, const params::GemmDims& dims, const Tensor& a, const Tensor& b,
                   DataType cd, Tensor& d) {
  GemmCall g;
  g.trans_a = at.trans_a;
  g.trans_b = at.trans_b;
  g.m = dims.m;
  g.n = dims.n;
  g.k = dims.k;
  g.ab = a.dtype();
  g.cd = cd;
  g.a = a.raw();
  g.b = b.raw();
  g.d = d.raw();
  g.alpha = at.alpha;
  return g;
}

// Y = alpha * op(A) * op(B) + beta * C, C unidirectionally broadcast to [M, N].
class GemmKernel : public Kernel {
 public:
  explicit GemmKernel(const Node& n) : at_(n) {}

  void run(KernelContext& ctx) override {
    const Tensor& a = ctx.input(0);
    const Tensor& b = ctx.input(1);
    if (b.dtype() != a.dtype()) ctx.error(str_cat("B has type ", b.describe(), ", A ", a.describe()));
    const params::GemmDims dims = params::gemm_dims(ctx, a, b, at_.trans_a, at_.trans_b);
    const int64_t m = dims.m, n = dims.n, k = dims.k;
    Tensor& y = ctx.allocate_output(0, a.dtype(), {m, n});
    if (m == 0 || n == 0) return;
    GemmCall g = gemm_call(at_, dims, a, b, a.dtype(), y);
    const bool with_c = ctx.has_input(2) && at_.beta != 0.f;
    if (with_c) {
      const Tensor& c = ctx.input(2);
      const params::GemmC cs = params::check_gemm_c(ctx, c, a, m, n);
      if (cs.cm == 1 && cs.cn == n && at_.beta == 1.f && k > 0) {
        g.bias = c.raw();  // a row vector added to every row: the bias epilogue
      } else {
        write_beta_c(ctx, c, y);
        g.c = y.raw();
        g.beta = 1.f;
      }
    }
    if (k == 0) {
      if (!with_c) zero(ctx, y);
      else if (g.bias) write_beta_c(ctx, ctx.input(2), y);
      return;
    }
    gemm_.run(device_of(ctx), g);
  }

 private:
  void write_beta_c(const KernelContext& ctx, const Tensor& c, Tensor& y) const {
    const auto ix = make_indexer<1>(y.dims(), {broadcast_strides(c.dims(), y.dims())});
    dispatch_float(y.dtype(), [&](auto tag) {
      using S = typename decltype(tag)::type;
      scaled_broadcast_kernel<S><<<grid_for(y.numel()), kBlock, 0, stream_of(ctx)>>>(
          y.numel(), static_cast<const S*>(c.raw()), static_cast<S*>(y.raw()), ix, at_.beta);
      OTTER_CUDA_LAUNCH_CHECK();
    });
  }

  params::GemmAttrs at_;
  Gemm gemm_;
};

// ---- GemmAccumulate ----------------------------------------------------------------------------

// acc (+)= alpha op(a) op(b): beta 0 on the first micro-step (the accumulator is written, never
// zeroed first), 1 after. The output shares acc's buffer. a and b may be f16/bf16 with an f32
// accumulator.
class GemmAccumulateKernel : public Kernel {
 public:
  explicit GemmAccumulateKernel(const Node& n) : at_(n) {}

  void run(KernelContext& ctx) override {
    const Tensor& a = ctx.input(0);
    const Tensor& b = ctx.input(1);
    const Tensor& acc = ctx.input(2);
    if (a.dtype() != b.dtype()) ctx.error(str_cat("operands differ in type: ", a.describe(), " and ", b.describe()));
    if (acc.dtype() != a.dtype() && acc.dtype() != DataType::kFloat32)
      ctx.error(
          str_cat("accumulator ", acc.describe(), " must be f32 or of the operands' type ", dtype_name(a.dtype())));
    const params::GemmDims dims = params::gemm_dims(ctx, a, b, at_.trans_a, at_.trans_b);
    const int64_t m = dims.m, n = dims.n, k = dims.k;
    if (acc.dims() != std::vector<int64_t>{m, n})
      ctx.error(str_cat("shapes ", a.describe(), " x ", b.describe(), " do not fit accumulator ", acc.describe()));
    ctx.alias_output(0, acc, acc.dims());
    Tensor out = acc;
    if (m == 0 || n == 0) return;
    if (k == 0) {
      if (ctx.first_micro_step) zero(ctx, out);
      return;
    }
    GemmCall g = gemm_call(at_, dims, a, b, acc.dtype(), out);
    g.c = out.raw();
    g.beta = ctx.first_micro_step ? 0.f : 1.f;
    gemm_.run(device_of(ctx), g);
  }

 private:
  params::GemmAttrs at_;
  Gemm gemm_;
};

template <typename K>
KernelFactory make() {
  return [](const Node& n) -> std::unique_ptr<Kernel> { return std::make_unique<K>(n); };
}

}  // namespace

KernelFactory matmul_kernel(const std::string& op) {
  if (op == "MatMul") return make<MatMulKernel>();
  if (op == "Gemm") return make<GemmKernel>();
  if (op == "GemmAccumulate") return make<GemmAccumulateKernel>();
  fail("matmul_kernel: no CUDA kernel for ", op);
}

}  // namespace otter::cuda
