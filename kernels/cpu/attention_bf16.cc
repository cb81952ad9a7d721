// bf16 ai.otter.Attention and AttentionGrad on the CPU's bf16 dot products (VDPBF16PS), with the
// blocking of the float32 kernels (kernels/cpu/attention.cc) and the numerics of flash attention
// in bf16 on a GPU: every product takes bf16 operands and sums in float32; the scores, the softmax
// statistics (row maximum, row sum, LSE), dS = P * (dP - rowsum(dY * Y)) and the gradient sums are
// float32; the probabilities P and dS are rounded to bf16 once, where they enter a product (P V,
// P^T dY, dS K, dS^T Q); Y, dQ, dKt and dV are rounded to bf16 once at the end. Where
// bf16_gemm_native() is false (no AVX512_BF16, a lower ISA variant, OTTER_BF16_GEMM=widen) the
// float32 kernel runs on widened inputs instead (kernels/cpu/half.cc).
//
// Operands are pair words (kernels/cpu/bf16_block_gemm.h); per product, with bl.q x bl.k blocks:
//   S = Q Kt:        A = Q rows (in place),     B = Kt's rows paired down d      (per key block)
//   O += P V:        A = bf16(P) rows,          B = V's rows paired down keys    (per key block)
//   dV += P^T dY:    A = bf16(P) paired down queries (transposed access), B = dY paired down queries
//   dP = dY V^T:     A = dY rows (in place),    B = V's rows paired across dv, transposed
//   dQ += dS K:      A = bf16(dS) rows,         B = Kt's rows paired across keys, transposed
//   dKt += Q^T dS:   A = Q paired down queries (transposed access), B = bf16(dS) paired down queries
#include "kernels/cpu/attention_bf16.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "graph/half.h"
#include "kernels/common/elementwise.h"
#include "kernels/cpu/attention_blocks.h"
#include "kernels/cpu/bf16_block_gemm.h"
#include "kernels/cpu/gemm_bf16.h"
#include "kernels/cpu/half.h"
#include "kernels/cpu/lane_sum.h"

namespace otter::attn {
namespace {

namespace blk = cpu::bf16blk;
using blk::u16;
using blk::u32;

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

int64_t pairs(int64_t n) { return (n + 1) / 2; }
int64_t even(int64_t n) { return n + n % 2; }

const u16* bits(const Tensor& t) { return static_cast<const u16*>(t.raw()); }

// A [rows, cols] float32 block rounded into bf16 rows of even length (a zero pads an odd row).
void round_block(const float* x, int64_t ldx, int64_t rows, int64_t cols, u16* y) {
  const int64_t ld = even(cols);
  cpu::isa_dispatch([&] {
    for (int64_t i = 0; i < rows; ++i) {
      for (int64_t j = 0; j < cols; ++j) y[i * ld + j] = float_to_bf16(x[i * ldx + j]);
      if (cols % 2) y[i * ld + cols] = 0;
    }
  });
}

constexpr int kLanes = 16;

// Inside an ISA dispatch: the maximum of row[0, n) over kLanes lanes (max is exact in any order).
inline float row_max(const float* row, int64_t n) {
  float lane[kLanes];
  std::fill(lane, lane + kLanes, kNegInf);
  int64_t j = 0;
  for (; j + kLanes <= n; j += kLanes)
    for (int l = 0; l < kLanes; ++l) lane[l] = std::max(lane[l], row[j + l]);
  for (; j < n; ++j) lane[0] = std::max(lane[0], row[j]);
  float m = kNegInf;
  for (int l = 0; l < kLanes; ++l) m = std::max(m, lane[l]);
  return m;
}

// Inside an ISA dispatch: row[j] = e^(row[j] - shift) for j < n, every exponent <= 0, and their
// float32 sum over kLanes interleaved lanes (a fixed order; one chain of dependent adds would cost
// more than the exponentials).
inline float exp_shift_sum(float* row, int64_t n, float shift) {
  float lane[kLanes] = {};
  int64_t j = 0;
  for (; j + kLanes <= n; j += kLanes)
    for (int l = 0; l < kLanes; ++l) lane[l] += row[j + l] = math::exp_nonpositive(row[j + l] - shift);
  float sum = 0;
  for (int l = 0; l < kLanes; ++l) sum += lane[l];
  for (; j < n; ++j) sum += row[j] = math::exp_nonpositive(row[j] - shift);
  return sum;
}

// Per-thread buffers of the forward pass.
struct ForwardBuffers {
  std::vector<float> sc, acc, m, l;
  std::vector<u16> p16;
  std::vector<u32> kb, vb, qw;
  ForwardBuffers(const AttnShape& s, const Blocks& bl)
      : sc(bl.q * bl.k), acc(bl.q * std::max<int64_t>(s.dv, 1)), m(bl.q), l(bl.q), p16(bl.q * even(bl.k)),
        kb(pairs(s.d) * bl.k), vb(pairs(bl.k) * s.dv), qw(bl.q * pairs(s.d)) {}
};

// One query block of one head: Y rows and LSE entries, by the online softmax (attention.cc).
void forward_block(const AttnShape& s, const Blocks& bl, const MaskView<float>& mv, float scale, const u16* q,
                   const u16* kt, const u16* v, int64_t bh, int64_t q0, u16* y, float* lse, ForwardBuffers& b) {
  const int64_t rows = std::min(bl.q, s.s - q0), kv = s.kv_head(bh), o = mv.off[bh];
  int64_t sai = 0;
  const u32* qw = blk::pairs_across(q + (bh * s.s + q0) * s.d, s.d, rows, s.d, b.qw.data(), &sai);
  const u16* kp = kt + kv * s.d * s.t;
  const u16* vp = v + kv * s.t * s.dv;
  std::fill(b.m.begin(), b.m.end(), kNegInf);
  std::fill(b.l.begin(), b.l.end(), 0.f);
  std::fill(b.acc.begin(), b.acc.begin() + rows * s.dv, 0.f);
  for (int64_t k0 = 0; k0 < s.t; k0 += bl.k) {
    const int64_t cols = std::min(bl.k, s.t - k0);
    if (mv.dead(o, q0, rows, k0, cols)) continue;
    blk::pairs_down(kp + k0, s.t, s.d, cols, b.kb.data(), cols);
    // The scale goes into the product's alpha; the mask then only adds or replaces.
    blk::gemm(rows, cols, pairs(s.d), qw, sai, 1, b.kb.data(), cols, scale, false, b.sc.data(), bl.k);
    if (!mv.clean(o, q0, rows, k0, cols)) mv.apply(b.sc.data(), bl.k, 1.f, o, q0, rows, k0, cols);
    cpu::isa_dispatch([&] {
      for (int64_t i = 0; i < rows; ++i) {
        float* row = b.sc.data() + i * bl.k;
        const float mnew = std::max(b.m[i], row_max(row, cols));
        if (mnew == kNegInf) {  // nothing unmasked in this row yet
          std::fill(row, row + cols, 0.f);
          continue;
        }
        const float corr = math::exp_nonpositive(b.m[i] - mnew);
        b.l[i] = b.l[i] * corr + exp_shift_sum(row, cols, mnew);
        b.m[i] = mnew;
        if (corr != 1.f)
          for (int64_t c = 0; c < s.dv; ++c) b.acc[i * s.dv + c] *= corr;
      }
    });
    round_block(b.sc.data(), bl.k, rows, cols, b.p16.data());
    blk::pairs_down(vp + k0 * s.dv, s.dv, cols, s.dv, b.vb.data(), s.dv);
    blk::gemm(rows, s.dv, pairs(cols), reinterpret_cast<const u32*>(b.p16.data()), pairs(cols), 1, b.vb.data(), s.dv,
              1.f, true, b.acc.data(), s.dv);
  }
  if (lse)
    for (int64_t i = 0; i < rows; ++i) lse[bh * s.s + q0 + i] = b.l[i] > 0.f ? b.m[i] + std::log(b.l[i]) : kNegInf;
  // Y = acc / l, rounded once; a row masked everywhere has no softmax (as Softmax over -inf gives
  // NaN). One ISA dispatch for the block: per row, the call cost as much as the 64 values.
  u16* yb = y + (bh * s.s + q0) * s.dv;
  cpu::isa_dispatch([&] {
    for (int64_t i = 0; i < rows; ++i) {
      const float inv = b.l[i] > 0.f ? 1.f / b.l[i] : std::numeric_limits<float>::quiet_NaN();
      const float* a = b.acc.data() + i * s.dv;
      for (int64_t c = 0; c < s.dv; ++c) yb[i * s.dv + c] = float_to_bf16(a[c] * inv);
    }
  });
}

void forward(KernelContext& ctx, const AttnAttrs& at) {
  const Tensor &q = ctx.input(0), &kt = ctx.input(1), &v = ctx.input(2);
  const AttnShape s = params::attn_shape(ctx, q, kt, v);
  const MaskView<float> mv = mask_view<float>(ctx, at, s, 3);
  u16* y = static_cast<u16*>(ctx.allocate_output(0, q.dtype(), s.y_dims).raw());
  float* lse = ctx.has_output(1) ? ctx.allocate_output(1, DataType::kFloat32, s.lse_dims).data<float>() : nullptr;
  const Blocks bl(s);
  const int64_t nqb = (s.s + bl.q - 1) / bl.q, tasks = s.bh() * nqb;
  const float scale = static_cast<float>(at.scale);
#pragma omp parallel if (tasks > 1 && attention_work(s) >= kParallelAttentionWork)
  {
    ForwardBuffers b(s, bl);
#pragma omp for schedule(dynamic)
    for (int64_t task = 0; task < tasks; ++task)
      forward_block(s, bl, mv, scale, bits(q), bits(kt), bits(v), task / nqb, (task % nqb) * bl.q, y, lse, b);
  }
}

// The pair words of one K/V head the backward pass reads for every query block, and its float32
// gradient sums.
struct HeadBuffers {
  std::vector<u32> kb, kt_t, v_t;  // Kt paired down d; K and V^T as B operands (see the top)
  std::vector<float> dkt, dv;
  HeadBuffers(const AttnShape& s)
      : kb(pairs(s.d) * s.t), kt_t(pairs(s.t) * s.d), v_t(pairs(s.dv) * s.t), dkt(s.d * s.t), dv(s.t * s.dv) {}
};

// Per query head.
struct QueryBuffers {
  std::vector<u32> qd, dyd, qw, dyw;  // Q and dY paired down queries; Q and dY rows packed (odd widths)
  std::vector<float> dq, di;
  QueryBuffers(const AttnShape& s)
      : qd(pairs(s.s) * s.d), dyd(pairs(s.s) * s.dv), qw(s.s * pairs(s.d)), dyw(s.s * pairs(s.dv)), dq(s.s * s.d),
        di(s.s) {}
};

// Per block pair.
struct PairBuffers {
  std::vector<float> p, ds;
  std::vector<u16> p16, ds16;
  std::vector<u32> pd, dsd;  // bf16(P) and bf16(dS) paired down queries
  explicit PairBuffers(const Blocks& bl)
      : p(bl.q * bl.k), ds(bl.q * bl.k), p16(bl.q * even(bl.k)), ds16(bl.q * even(bl.k)), pd(pairs(bl.q) * bl.k),
        dsd(pairs(bl.q) * bl.k) {}
};

struct BackwardArgs {
  const u16 *dy, *q, *kt, *v, *y;
  const float* lse;
  u16 *dq, *dkt, *dv;
};

// The gradients of one query head against one key block and one query block.
void backward_pair(const AttnShape& s, const Blocks& bl, const MaskView<float>& mv, float scale,
                   const BackwardArgs& a, int64_t bh, int64_t q0, int64_t k0, const u32* qw, int64_t qs,
                   const u32* dyw, int64_t dys, HeadBuffers& h, QueryBuffers& qb, PairBuffers& pb) {
  const int64_t rows = std::min(bl.q, s.s - q0), cols = std::min(bl.k, s.t - k0), o = mv.off[bh];
  if (mv.dead(o, q0, rows, k0, cols)) return;
  const int64_t ld16 = even(cols), kpq = pairs(rows), kpk = pairs(cols);
  // P = exp(scale * Q Kt (masked) - LSE), float32.
  const bool clean = mv.clean(o, q0, rows, k0, cols);
  blk::gemm(rows, cols, pairs(s.d), qw + q0 * qs, qs, 1, h.kb.data() + k0, s.t, scale, false, pb.p.data(), bl.k);
  if (!clean) mv.apply(pb.p.data(), bl.k, 1.f, o, q0, rows, k0, cols);
  cpu::isa_dispatch([&] {
    for (int64_t i = 0; i < rows; ++i) {
      const float l = a.lse[bh * s.s + q0 + i];
      float* row = pb.p.data() + i * bl.k;
      for (int64_t j = 0; j < cols; ++j) row[j] = l == kNegInf ? 0.f : math::exp_nonpositive(row[j] - l);
    }
  });
  // dV += bf16(P)^T dY.
  round_block(pb.p.data(), bl.k, rows, cols, pb.p16.data());
  blk::pairs_down(pb.p16.data(), ld16, rows, cols, pb.pd.data(), cols);
  blk::gemm(cols, s.dv, kpq, pb.pd.data(), 1, cols, qb.dyd.data() + (q0 / 2) * s.dv, s.dv, 1.f, true,
            h.dv.data() + k0 * s.dv, s.dv);
  // dS = P * (dY V^T - rowsum(dY * Y)); zero where the mask replaces the score.
  blk::gemm(rows, cols, pairs(s.dv), dyw + q0 * dys, dys, 1, h.v_t.data() + k0, s.t, 1.f, false, pb.ds.data(), bl.k);
  cpu::isa_dispatch([&] {
    for (int64_t i = 0; i < rows; ++i) {
      float* g = pb.ds.data() + i * bl.k;
      const float* pr = pb.p.data() + i * bl.k;
      const float d = qb.di[q0 + i];
      for (int64_t j = 0; j < cols; ++j) g[j] = pr[j] * (g[j] - d);
    }
  });
  if (!clean) mv.zero_replaced(pb.ds.data(), bl.k, o, q0, rows, k0, cols);
  round_block(pb.ds.data(), bl.k, rows, cols, pb.ds16.data());
  // dQ += scale * bf16(dS) K;  dKt += scale * Q^T bf16(dS).
  blk::gemm(rows, s.d, kpk, reinterpret_cast<const u32*>(pb.ds16.data()), ld16 / 2, 1,
            h.kt_t.data() + (k0 / 2) * s.d, s.d, scale, true, qb.dq.data() + q0 * s.d, s.d);
  blk::pairs_down(pb.ds16.data(), ld16, rows, cols, pb.dsd.data(), cols);
  blk::gemm(s.d, cols, kpq, qb.qd.data() + (q0 / 2) * s.d, 1, s.d, pb.dsd.data(), cols, scale, true,
            h.dkt.data() + k0, s.t);
}

// One query head of a K/V head: its packed operands, rowsum(dY * Y), its block pairs, and dQ.
void backward_query_head(const AttnShape& s, const Blocks& bl, const MaskView<float>& mv, float scale,
                         const BackwardArgs& a, int64_t bh, HeadBuffers& h, QueryBuffers& qb, PairBuffers& pb) {
  const u16* qh = a.q + bh * s.s * s.d;
  const u16* dyh = a.dy + bh * s.s * s.dv;
  const u16* yh = a.y + bh * s.s * s.dv;
  blk::pairs_down(qh, s.d, s.s, s.d, qb.qd.data(), s.d);
  blk::pairs_down(dyh, s.dv, s.s, s.dv, qb.dyd.data(), s.dv);
  int64_t qs = 0, dys = 0;
  const u32* qw = blk::pairs_across(qh, s.d, s.s, s.d, qb.qw.data(), &qs);
  const u32* dyw = blk::pairs_across(dyh, s.dv, s.s, s.dv, qb.dyw.data(), &dys);
  for (int64_t i = 0; i < s.s; ++i) {  // rowsum(dY * Y), in double over lane_sum's 8 lanes
    const u16* dyr = dyh + i * s.dv;
    const u16* yr = yh + i * s.dv;
    qb.di[i] = static_cast<float>(cpu::lane_sum(s.dv, [&](int64_t c) {
      return static_cast<double>(bf16_to_float(dyr[c])) * static_cast<double>(bf16_to_float(yr[c]));
    }));
  }
  std::fill(qb.dq.begin(), qb.dq.end(), 0.f);
  for (int64_t k0 = 0; k0 < s.t; k0 += bl.k)
    for (int64_t q0 = 0; q0 < s.s; q0 += bl.q)
      backward_pair(s, bl, mv, scale, a, bh, q0, k0, qw, qs, dyw, dys, h, qb, pb);
  if (a.dq) cpu::round_to_bf16(qb.dq.data(), a.dq + bh * s.s * s.d, s.s * s.d);
}

// u16 storage of a gradient output, or null where the node does not want it.
u16* grad_out(KernelContext& ctx, int i, const Tensor& like) {
  return ctx.has_output(i) ? static_cast<u16*>(ctx.allocate_output(i, like.dtype(), like.dims()).raw()) : nullptr;
}

void backward(KernelContext& ctx, const AttnAttrs& at) {
  const Tensor &dy = ctx.input(0), &q = ctx.input(1), &kt = ctx.input(2), &v = ctx.input(3);
  const Tensor &y = ctx.input(5), &lse = ctx.input(6);
  const AttnShape s = params::attn_shape(ctx, q, kt, v);
  params::check_grad_inputs(ctx, s, q, dy, y, lse);
  const MaskView<float> mv = mask_view<float>(ctx, at, s, 4);
  const BackwardArgs a{bits(dy),          bits(q),           bits(kt),          bits(v), bits(y), lse.data<float>(),
                       grad_out(ctx, 0, q), grad_out(ctx, 1, kt), grad_out(ctx, 2, v)};
  const Blocks bl(s);
  const int64_t group = s.h / s.hk, tasks = s.lead * s.hk;
  const float scale = static_cast<float>(at.scale);
#pragma omp parallel if (tasks > 1 && attention_work(s) >= kParallelAttentionWork)
  {
    HeadBuffers h(s);
    QueryBuffers qb(s);
    PairBuffers pb(bl);
#pragma omp for schedule(dynamic)
    for (int64_t task = 0; task < tasks; ++task) {
      const u16* kth = a.kt + task * s.d * s.t;
      const u16* vh = a.v + task * s.t * s.dv;
      blk::pairs_down(kth, s.t, s.d, s.t, h.kb.data(), s.t);
      blk::pairs_across_transposed(kth, s.t, s.d, s.t, h.kt_t.data(), s.d);
      blk::pairs_across_transposed(vh, s.dv, s.t, s.dv, h.v_t.data(), s.t);
      std::fill(h.dkt.begin(), h.dkt.end(), 0.f);
      std::fill(h.dv.begin(), h.dv.end(), 0.f);
      for (int64_t g = 0; g < group; ++g)
        backward_query_head(s, bl, mv, scale, a, (task / s.hk) * s.h + (task % s.hk) * group + g, h, qb, pb);
      if (a.dkt) cpu::round_to_bf16(h.dkt.data(), a.dkt + task * s.d * s.t, s.d * s.t);
      if (a.dv) cpu::round_to_bf16(h.dv.data(), a.dv + task * s.t * s.dv, s.t * s.dv);
    }
  }
}

// The native kernels where bf16_gemm_native() holds when they run, else the widening kernel.
class Bf16Kernel : public Kernel {
 public:
  Bf16Kernel(const Node& n, bool grad, std::unique_ptr<Kernel> widened)
      : at_(n), grad_(grad), widened_(std::move(widened)) {}
  void run(KernelContext& ctx) override {
    if (!cpu::bf16_gemm_native()) return widened_->run(ctx);
    grad_ ? backward(ctx, at_) : forward(ctx, at_);
  }

 private:
  AttnAttrs at_;
  bool grad_;
  std::unique_ptr<Kernel> widened_;
};

}  // namespace

std::unique_ptr<Kernel> bf16_attention_kernel(const Node& n, bool grad, std::unique_ptr<Kernel> widened) {
  return std::make_unique<Bf16Kernel>(n, grad, std::move(widened));
}

}  // namespace otter::attn
