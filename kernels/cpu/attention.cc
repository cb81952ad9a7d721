// CPU kernels of ai.otter.Attention and ai.otter.AttentionGrad (graph/ops/attention.cc), blocked
// in the manner of flash attention: the [S, T] score matrix of a head is never held whole.
//
// Forward: each task takes a block of query rows of one head and walks the key blocks, keeping
// only the running row maximum m, the running sum l of exp(score - m) and the unnormalised
// output; a new block rescales both by exp(m_old - m_new) (the online softmax). The output is
// acc / l and LSE = m + log(l), kept for the backward pass instead of the probabilities.
// Backward: each task takes one K/V head (and the query heads that read it, so grouped-query
// gradients add up without races) and recomputes P = exp(score - LSE) block by block:
//   dV += P^T dY,  dP = dY V^T,  dS = P * (dP - rowsum(dY * Y)),
//   dQ += scale * dS K,  dK += scale * dS^T Q   (masked-out replaced scores get dS = 0).
// Blocks whose scores the mask sets to -inf everywhere (the causal upper triangle) are skipped.
// The GEMMs are OpenBLAS calls small enough to run on the calling thread (kernels/cpu/gemm.h), so
// the tasks run in parallel under OpenMP. float32 and float64; bf16 runs on the bf16 dot products
// (attention_bf16.cc), float16 widens (kernels/cpu/half.cc).
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <type_traits>
#include <vector>

#include "graph/op_table.h"
#include "kernels/common/attention_dropout.h"
#include "kernels/common/attention_params.h"
#include "kernels/common/elementwise.h"
#include "kernels/cpu/attention_bf16.h"
#include "kernels/cpu/attention_blocks.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/dispatch.h"
#include "kernels/cpu/gemm.h"
#include "kernels/cpu/isa.h"
#include "kernels/cpu/lane_sum.h"

namespace otter {
namespace {

using cpu::gemm;

using attn::Blocks;
using attn::MaskView;
using params::AttnAttrs;
using params::AttnShape;
using params::MaskMode;

// The dropout seed in input i: one int64 (Attention's input 4, AttentionGrad's input 7).
uint64_t seed_input(const KernelContext& ctx, int i) {
  const Tensor& t = ctx.input(i);
  if (t.dtype() != DataType::kInt64 || t.numel() != 1) ctx.error("seed must be one int64, got " + t.describe());
  return static_cast<uint64_t>(t.data<int64_t>()[0]);
}

// One query block of one head: Y rows and LSE entries (the online softmax).
template <typename T>
void forward_block(const AttnShape& s, const Blocks& bl, const MaskView<T>& mv, const attn::Dropout& dr, T scale,
                   const T* q, const T* kt, const T* v, int64_t bh, int64_t q0, T* y, T* lse, std::vector<T>& sc,
                   std::vector<T>& acc) {
  const int64_t rows = std::min(bl.q, s.s - q0), kv = s.kv_head(bh), o = mv.off[bh];
  const T* qp = q + (bh * s.s + q0) * s.d;
  const T* kp = kt + kv * s.d * s.t;
  const T* vp = v + kv * s.t * s.dv;
  constexpr T kNegInf = -std::numeric_limits<T>::infinity();
  std::vector<T> m(rows, kNegInf), l(rows, T(0));
  std::fill(acc.begin(), acc.begin() + rows * s.dv, T(0));
  for (int64_t k0 = 0; k0 < s.t; k0 += bl.k) {
    const int64_t cols = std::min(bl.k, s.t - k0);
    if (mv.dead(o, q0, rows, k0, cols)) continue;
    gemm<T>(false, false, rows, cols, s.d, T(1), qp, s.d, kp + k0, s.t, T(0), sc.data(), bl.k);
    mv.apply(sc.data(), bl.k, scale, o, q0, rows, k0, cols);
    for (int64_t i = 0; i < rows; ++i) {
      T* row = sc.data() + i * bl.k;
      const T mnew = std::max(m[i], *std::max_element(row, row + cols));
      if (mnew == kNegInf) {  // nothing unmasked in this row yet
        std::fill(row, row + cols, T(0));
        continue;
      }
      // Every exponent is <= 0 (mnew is the row's maximum): exp_nonpositive, which vectorises.
      const T corr = math::exp_nonpositive(m[i] - mnew);
      cpu::isa_dispatch_if<std::is_same_v<T, float>>([&] {
        for (int64_t j = 0; j < cols; ++j) row[j] = math::exp_nonpositive(row[j] - mnew);
      });
      T sum = 0;
      for (int64_t j = 0; j < cols; ++j) sum += row[j];
      l[i] = l[i] * corr + sum;
      m[i] = mnew;
      if (dr.on()) {  // the sum is over the undropped probabilities, the product with V over the kept
        const uint64_t e = static_cast<uint64_t>((bh * s.s + q0 + i) * s.t + k0);
        for (int64_t j = 0; j < cols; ++j) row[j] *= static_cast<T>(dr.factor(e + j));
      }
      if (corr != T(1))
        for (int64_t c = 0; c < s.dv; ++c) acc[i * s.dv + c] *= corr;
    }
    gemm<T>(false, false, rows, s.dv, cols, T(1), sc.data(), bl.k, vp + k0 * s.dv, s.dv, T(1), acc.data(), s.dv);
  }
  for (int64_t i = 0; i < rows; ++i) {
    T* yr = y + (bh * s.s + q0 + i) * s.dv;
    // A row masked everywhere has no softmax (as Softmax over -inf gives NaN).
    const T inv = l[i] > T(0) ? T(1) / l[i] : std::numeric_limits<T>::quiet_NaN();
    for (int64_t c = 0; c < s.dv; ++c) yr[c] = acc[i * s.dv + c] * inv;
    if (lse) lse[bh * s.s + q0 + i] = l[i] > T(0) ? m[i] + std::log(l[i]) : kNegInf;
  }
}

class AttentionKernel : public Kernel {
 public:
  explicit AttentionKernel(const Node& n) : at_(n) {}
  void run(KernelContext& ctx) override {
    OTTER_DISPATCH_FLOAT(ctx.input(0).dtype(), T, [&] { compute<T>(ctx); });
  }

 private:
  template <typename T>
  void compute(KernelContext& ctx) {
    const Tensor &q = ctx.input(0), &kt = ctx.input(1), &v = ctx.input(2);
    const AttnShape s = params::attn_shape(ctx, q, kt, v);
    const MaskView<T> mv = attn::mask_view<T>(ctx, at_, s, 3);
    T* y = ctx.allocate_output(0, q.dtype(), s.y_dims).template data<T>();
    T* lse = ctx.has_output(1) ? ctx.allocate_output(1, q.dtype(), s.lse_dims).template data<T>() : nullptr;
    const attn::Dropout dr = dropout(ctx);
    const Blocks bl(s);
    const int64_t nqb = (s.s + bl.q - 1) / bl.q, tasks = s.bh() * nqb;
    const T scale = static_cast<T>(at_.scale);
#pragma omp parallel if (tasks > 1 && attn::attention_work(s) >= attn::kParallelAttentionWork)
    {
      std::vector<T> sc(bl.q * bl.k), acc(bl.q * std::max<int64_t>(s.dv, 1));
#pragma omp for schedule(dynamic)
      for (int64_t task = 0; task < tasks; ++task)
        forward_block<T>(s, bl, mv, dr, scale, q.data<T>(), kt.data<T>(), v.data<T>(), task / nqb, (task % nqb) * bl.q,
                         y, lse, sc, acc);
    }
  }

  // The dropout of this run: its seed from input 4, else drawn from the training generator (the
  // node's own, seeded 0, without one); output 2 returns it for AttentionGrad.
  attn::Dropout dropout(KernelContext& ctx) {
    uint64_t seed = 0;
    if (ctx.has_input(4))
      seed = seed_input(ctx, 4);
    else if (at_.dropout > 0)
      seed = ctx.rng ? (*ctx.rng)() : own_();
    if (ctx.has_output(2)) ctx.allocate_output(2, DataType::kInt64, {}).data<int64_t>()[0] = static_cast<int64_t>(seed);
    return attn::make_dropout(at_.dropout, seed);
  }

  AttnAttrs at_;
  std::mt19937_64 own_{0};
};

// Buffers and pointers of one backward call.
template <typename T>
struct BackwardArgs {
  const T *dy, *q, *kt, *v, *y, *lse;
  T *dq, *dkt, *dv;
  T* dsc = nullptr;  // dScores [bh, S, T], where wanted (zero where a block is skipped)
  attn::Dropout dr = {};
};

// The gradients of one query head against one key block and one query block (see the top).
// With dropout, pd holds P with the forward's dropped entries zeroed and the kept ones scaled
// (what multiplied V), and dP = dY V^T takes the same factors: dS = P * (factor * dP - rowsum(dY * Y)).
template <typename T>
void backward_pair(const AttnShape& s, const Blocks& bl, const MaskView<T>& mv, T scale, const BackwardArgs<T>& a,
                   int64_t bh, int64_t kv, int64_t q0, int64_t k0, const T* di, std::vector<T>& p, std::vector<T>& ds,
                   std::vector<T>& pd) {
  const int64_t rows = std::min(bl.q, s.s - q0), cols = std::min(bl.k, s.t - k0), o = mv.off[bh];
  if (mv.dead(o, q0, rows, k0, cols)) return;
  const T* qp = a.q + (bh * s.s + q0) * s.d;
  const T* dyp = a.dy + (bh * s.s + q0) * s.dv;
  const T* kp = a.kt + kv * s.d * s.t + k0;
  const T* vp = a.v + (kv * s.t + k0) * s.dv;
  gemm<T>(false, false, rows, cols, s.d, T(1), qp, s.d, kp, s.t, T(0), p.data(), bl.k);
  mv.apply(p.data(), bl.k, scale, o, q0, rows, k0, cols);
  // score - LSE <= 0 (LSE >= the row's maximum). One ISA dispatch for the block, not one per row.
  cpu::isa_dispatch_if<std::is_same_v<T, float>>([&] {
    for (int64_t i = 0; i < rows; ++i) {
      const T l = a.lse[bh * s.s + q0 + i];
      T* row = p.data() + i * bl.k;
      for (int64_t j = 0; j < cols; ++j)
        row[j] = l == -std::numeric_limits<T>::infinity() ? T(0) : math::exp_nonpositive(row[j] - l);
    }
  });
  const uint64_t e0 = static_cast<uint64_t>((bh * s.s + q0) * s.t + k0);
  if (a.dr.on())
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t j = 0; j < cols; ++j)
        pd[i * bl.k + j] = p[i * bl.k + j] * static_cast<T>(a.dr.factor(e0 + i * s.t + j));
  const T* pv = a.dr.on() ? pd.data() : p.data();
  gemm<T>(true, false, cols, s.dv, rows, T(1), pv, bl.k, dyp, s.dv, T(1), a.dv + (kv * s.t + k0) * s.dv, s.dv);
  gemm<T>(false, true, rows, cols, s.dv, T(1), dyp, s.dv, vp, s.dv, T(0), ds.data(), bl.k);
  if (a.dr.on())
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t j = 0; j < cols; ++j) ds[i * bl.k + j] *= static_cast<T>(a.dr.factor(e0 + i * s.t + j));
  cpu::isa_dispatch_if<std::is_same_v<T, float>>([&] {
    for (int64_t i = 0; i < rows; ++i) {
      T* g = ds.data() + i * bl.k;
      const T* pr = p.data() + i * bl.k;
      const T d = di[q0 + i];
      for (int64_t j = 0; j < cols; ++j) g[j] = pr[j] * (g[j] - d);
    }
  });
  mv.zero_replaced(ds.data(), bl.k, o, q0, rows, k0, cols);  // a replaced score does not depend on Q, K
  if (a.dsc)
    for (int64_t i = 0; i < rows; ++i) std::copy_n(ds.data() + i * bl.k, cols, a.dsc + (bh * s.s + q0 + i) * s.t + k0);
  gemm<T>(false, true, rows, s.d, cols, scale, ds.data(), bl.k, kp, s.t, T(1), a.dq + (bh * s.s + q0) * s.d, s.d);
  gemm<T>(true, false, s.d, cols, rows, scale, qp, s.d, ds.data(), bl.k, T(1), a.dkt + kv * s.d * s.t + k0, s.t);
}

class AttentionGradKernel : public Kernel {
 public:
  explicit AttentionGradKernel(const Node& n) : at_(n) {}
  void run(KernelContext& ctx) override {
    OTTER_DISPATCH_FLOAT(ctx.input(1).dtype(), T, [&] { compute<T>(ctx); });
  }

 private:
  template <typename T>
  T* grad_out(KernelContext& ctx, int i, const Tensor& like, Tensor& spare) {
    Tensor& t = ctx.has_output(i) ? ctx.allocate_output(i, like.dtype(), like.dims())
                                  : (spare = Tensor(like.dtype(), like.dims()));
    std::fill(t.data<T>(), t.data<T>() + t.numel(), T(0));
    return t.data<T>();
  }

  // The forward's dropout: its seed is input 7 (graph/ops/attention.cc requires it with dropout).
  attn::Dropout dropout(KernelContext& ctx) const {
    if (!(at_.dropout > 0)) return {};
    if (!ctx.has_input(7)) ctx.error("dropout needs input 7 (the forward's Seed)");
    return attn::make_dropout(at_.dropout, seed_input(ctx, 7));
  }

  // Output 3, dScores [..., H, S, T] zeroed, where wanted: only for an additive mask of Q's type.
  template <typename T>
  T* scores_grad(KernelContext& ctx, const AttnShape& s, const Tensor& q) {
    if (!ctx.has_output(3)) return nullptr;
    if (at_.mode != MaskMode::kAdd || !ctx.has_input(4) || ctx.input(4).dtype() != q.dtype())
      ctx.error("output 3 (dScores) needs an additive mask of Q's type " + q.describe());
    std::vector<int64_t> dims = s.y_dims;
    dims.back() = s.t;
    Tensor& t = ctx.allocate_output(3, q.dtype(), dims);
    std::fill(t.data<T>(), t.data<T>() + t.numel(), T(0));
    return t.data<T>();
  }

  template <typename T>
  void compute(KernelContext& ctx) {
    const Tensor &dy = ctx.input(0), &q = ctx.input(1), &kt = ctx.input(2), &v = ctx.input(3);
    const Tensor &y = ctx.input(5), &lse = ctx.input(6);
    const AttnShape s = params::attn_shape(ctx, q, kt, v);
    params::check_grad_inputs(ctx, s, q, dy, y, lse);  // attn_shape checked Kt's and V's types
    const MaskView<T> mv = attn::mask_view<T>(ctx, at_, s, 4);
    Tensor spare[3];
    BackwardArgs<T> a{dy.data<T>(),
                      q.data<T>(),
                      kt.data<T>(),
                      v.data<T>(),
                      y.data<T>(),
                      lse.data<T>(),
                      grad_out<T>(ctx, 0, q, spare[0]),
                      grad_out<T>(ctx, 1, kt, spare[1]),
                      grad_out<T>(ctx, 2, v, spare[2])};
    a.dsc = scores_grad<T>(ctx, s, q);
    a.dr = dropout(ctx);
    const Blocks bl(s);
    const int64_t group = s.h / s.hk, tasks = s.lead * s.hk;
    const T scale = static_cast<T>(at_.scale);
#pragma omp parallel if (tasks > 1 && attn::attention_work(s) >= attn::kParallelAttentionWork)
    {
      std::vector<T> p(bl.q * bl.k), ds(bl.q * bl.k), di(s.s), pd(a.dr.on() ? bl.q * bl.k : 0);
#pragma omp for schedule(dynamic)
      for (int64_t task = 0; task < tasks; ++task) {
        for (int64_t g = 0; g < group; ++g) {
          const int64_t bh = (task / s.hk) * s.h + (task % s.hk) * group + g;
          cpu::isa_dispatch_if<std::is_same_v<T, float>>([&] {
            for (int64_t i = 0; i < s.s; ++i) {  // rowsum(dY * Y), in double over lane_sum's 8 lanes
              const T* dyr = a.dy + (bh * s.s + i) * s.dv;
              const T* yr = a.y + (bh * s.s + i) * s.dv;
              di[i] = static_cast<T>(cpu::lane_sum(
                  s.dv, [&](int64_t c) { return static_cast<double>(dyr[c]) * static_cast<double>(yr[c]); }));
            }
          });
          for (int64_t k0 = 0; k0 < s.t; k0 += bl.k)
            for (int64_t q0 = 0; q0 < s.s; q0 += bl.q)
              backward_pair<T>(s, bl, mv, scale, a, bh, task, q0, k0, di.data(), p, ds, pd);
        }
      }
    }
  }
  AttnAttrs at_;
};

}  // namespace

void register_cpu_attention_kernels(KernelRegistry& r) {
  const std::vector<DataType> kFloats = {DataType::kFloat32, DataType::kFloat64};
  r.add({.domain = kOtterDomain, .op_type = "Attention", .dtypes = kFloats, .create = node_kernel<AttentionKernel>()});
  r.add({.domain = kOtterDomain,
         .op_type = "AttentionGrad",
         .dtypes = kFloats,
         .create = node_kernel<AttentionGradKernel>()});
  // bf16 on the bf16 dot products (attention_bf16.cc), falling back to these kernels widened.
  r.add({.domain = kOtterDomain, .op_type = "Attention", .dtypes = {DataType::kBFloat16}, .create = [](const Node& n) {
           return attn::bf16_attention_kernel(n, false, half_via_float_kernel(std::make_unique<AttentionKernel>(n)));
         }});
  r.add({.domain = kOtterDomain,
         .op_type = "AttentionGrad",
         .dtypes = {DataType::kBFloat16},
         .create = [](const Node& n) {
           return attn::bf16_attention_kernel(n, true, half_via_float_kernel(std::make_unique<AttentionGradKernel>(n)));
         }});
}

}  // namespace otter
