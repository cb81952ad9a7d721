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
#include "kernels/cpu/avx512_lanes.h"
#include "kernels/cpu/bf16_block_gemm.h"
#include "kernels/cpu/gemm_bf16.h"
#include "kernels/cpu/half.h"

namespace otter::attn {
namespace {

namespace blk = cpu::bf16blk;
using blk::u16;
using blk::u32;

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

#if defined(__x86_64__) && defined(__GNUC__)
#define OTTER_BF16_ATTENTION 1

int64_t pairs(int64_t n) { return (n + 1) / 2; }
int64_t even(int64_t n) { return n + n % 2; }

const u16* bits(const Tensor& t) { return static_cast<const u16*>(t.raw()); }

// The row loops below run only where bf16_gemm_native() holds, so they are written for AVX-512
// (kernels/cpu/avx512_lanes.h: bf16 rounding bit for bit as the scalar function, 16 lanes at a
// time; the probabilities' exp with fused multiply-adds, within 0.9 ulp: on gpt_large's shapes the
// forward kernel took 9% less time than with the scalar polynomial's lanes, the backward 5% less).

// One float32 row x[0, n) rounded into bf16 y, padded with a zero to even length. In line on the
// lanes: for rows this short, cpu::round_to_bf16's ISA dispatch per call cost the backward 3-4%.
__attribute__((target(OTTER_TARGET_BF16))) void round_row(const float* x, int64_t n, u16* y) {
  for (int64_t j = 0; j < n; j += 16) {
    const __mmask16 k = cpu::lanes::first(n - j);
    _mm256_mask_storeu_epi16(y + j, k, cpu::lanes::round_to_bf16(_mm512_maskz_loadu_ps(k, x + j)));
  }
  if (n % 2) y[n] = 0;
}

// sum over c < n of double(a[c]) * double(b[c]) for bf16 a and b, in lane_sum's order
// (kernels/cpu/lane_sum.h: element c into partial sum c % 8, the 8 in order, then the tail), so
// the result has lane_sum's bits.
__attribute__((target(OTTER_TARGET_BF16))) double dot_bf16_f64(const u16* a, const u16* b, int64_t n) {
  __m512d acc = _mm512_setzero_pd();
  int64_t c = 0;
  for (; c + 8 <= n; c += 8)
    acc = _mm512_add_pd(acc, _mm512_mul_pd(cpu::lanes::widen_bf16_8(a + c), cpu::lanes::widen_bf16_8(b + c)));
  alignas(64) double lane[8];
  _mm512_store_pd(lane, acc);
  double s = 0;
  for (int l = 0; l < 8; ++l) s += lane[l];
  for (; c < n; ++c) s += static_cast<double>(bf16_to_float(a[c])) * static_cast<double>(bf16_to_float(b[c]));
  return s;
}

// A [rows, cols] float32 block rounded into bf16 rows of even length (a zero pads an odd row).
void round_block(const float* x, int64_t ldx, int64_t rows, int64_t cols, u16* y) {
  for (int64_t i = 0; i < rows; ++i) round_row(x + i * ldx, cols, y + i * even(cols));
}

// One row of a forward block's scores sc[0, n) into its online softmax: the running maximum m and
// sum l take the row, and P = e^(score - m) goes rounded to bf16 into p (zero-padded to even n).
// Returns the factor e^(m_before - m) that the row's output sums take (1: unchanged). A NaN score
// is passed over by the maximum. The sum is a fixed tree of 16 lanes.
__attribute__((target(OTTER_TARGET_BF16))) float softmax_row(const float* sc, int64_t n, float& m, float& l, u16* p) {
  const float mnew = std::max(m, cpu::lanes::row_max(sc, n));
  if (mnew == kNegInf) {  // nothing unmasked in this row yet: it adds nothing
    std::fill(p, p + even(n), u16{0});
    return 1.f;
  }
  // e^(m - mnew): exactly 1 or 0 at the two common ends, without the scalar polynomial.
  const float corr = m == mnew ? 1.f : m == kNegInf ? 0.f : math::exp_nonpositive(m - mnew);
  const __m512 shift = _mm512_set1_ps(mnew);
  __m512 sum = _mm512_setzero_ps();
  for (int64_t j = 0; j < n; j += 16) {
    const __mmask16 k = cpu::lanes::first(n - j);
    const __m512 e = cpu::lanes::exp_nonpositive_fma(_mm512_sub_ps(_mm512_maskz_loadu_ps(k, sc + j), shift));
    sum = _mm512_mask_add_ps(sum, k, sum, e);
    _mm256_mask_storeu_epi16(p + j, k, cpu::lanes::round_to_bf16(e));
  }
  if (n % 2) p[n] = 0;
  l = l * corr + cpu::lanes::sum(sum);
  m = mnew;
  return corr;
}

// The softmax of a forward block's rows (row stride ldk), P into p16 (row stride even(cols)); the
// output sums acc (row stride dv) take each row's correction.
__attribute__((target(OTTER_TARGET_BF16))) void softmax_rows(const float* sc, int64_t ldk, int64_t rows, int64_t cols,
                                                              float* m, float* l, u16* p16, float* acc, int64_t dv) {
  for (int64_t i = 0; i < rows; ++i) {
    const float corr = softmax_row(sc + i * ldk, cols, m[i], l[i], p16 + i * even(cols));
    if (corr != 1.f)
      for (int64_t c = 0; c < dv; ++c) acc[i * dv + c] *= corr;
  }
}

// Y = acc / l rounded once (row stride dv); a row masked everywhere has no softmax (as Softmax
// over -inf gives NaN).
__attribute__((target(OTTER_TARGET_BF16))) void output_rows(const float* acc, const float* l, int64_t rows,
                                                             int64_t dv, u16* y) {
  for (int64_t i = 0; i < rows; ++i) {
    const __m512 inv = _mm512_set1_ps(l[i] > 0.f ? 1.f / l[i] : std::numeric_limits<float>::quiet_NaN());
    for (int64_t c = 0; c < dv; c += 16) {
      const __mmask16 k = cpu::lanes::first(dv - c);
      const __m512 x = _mm512_mul_ps(_mm512_maskz_loadu_ps(k, acc + i * dv + c), inv);
      _mm256_mask_storeu_epi16(y + i * dv + c, k, cpu::lanes::round_to_bf16(x));
    }
  }
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
    softmax_rows(b.sc.data(), bl.k, rows, cols, b.m.data(), b.l.data(), b.p16.data(), b.acc.data(), s.dv);
    blk::pairs_down(vp + k0 * s.dv, s.dv, cols, s.dv, b.vb.data(), s.dv);
    blk::gemm(rows, s.dv, pairs(cols), reinterpret_cast<const u32*>(b.p16.data()), pairs(cols), 1, b.vb.data(), s.dv,
              1.f, true, b.acc.data(), s.dv);
  }
  if (lse)
    for (int64_t i = 0; i < rows; ++i) lse[bh * s.s + q0 + i] = b.l[i] > 0.f ? b.m[i] + std::log(b.l[i]) : kNegInf;
  output_rows(b.acc.data(), b.l.data(), rows, s.dv, y + (bh * s.s + q0) * s.dv);
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

// P = e^(S - LSE) for a block's rows (row stride ldp), in place in p and rounded into p16 (row
// stride even(cols)); 0 in a row whose LSE is -inf (masked everywhere).
__attribute__((target(OTTER_TARGET_BF16))) void probabilities(float* p, int64_t ldp, const float* lse, int64_t rows,
                                                               int64_t cols, u16* p16) {
  for (int64_t i = 0; i < rows; ++i) {
    float* row = p + i * ldp;
    u16* out = p16 + i * even(cols);
    if (lse[i] == kNegInf) {
      std::fill(row, row + cols, 0.f);
      std::fill(out, out + even(cols), u16{0});
      continue;
    }
    const __m512 shift = _mm512_set1_ps(lse[i]);
    for (int64_t j = 0; j < cols; j += 16) {
      const __mmask16 k = cpu::lanes::first(cols - j);
      const __m512 e = cpu::lanes::exp_nonpositive_fma(_mm512_sub_ps(_mm512_maskz_loadu_ps(k, row + j), shift));
      _mm512_mask_storeu_ps(row + j, k, e);
      _mm256_mask_storeu_epi16(out + j, k, cpu::lanes::round_to_bf16(e));
    }
    if (cols % 2) out[cols] = 0;
  }
}

// dS = P * (dP - rowsum(dY * Y)) for a block's rows (row stride ld), dP given in ds: rounded
// straight into ds16 (row stride even(cols)) where it is given, else into ds in place.
__attribute__((target(OTTER_TARGET_BF16))) void score_grads(float* ds, const float* p, int64_t ld, const float* di,
                                                            int64_t rows, int64_t cols, u16* ds16) {
  for (int64_t i = 0; i < rows; ++i) {
    float* g = ds + i * ld;
    const float* pr = p + i * ld;
    const __m512 d = _mm512_set1_ps(di[i]);
    for (int64_t j = 0; j < cols; j += 16) {
      const __mmask16 k = cpu::lanes::first(cols - j);
      const __m512 x =
          _mm512_mul_ps(_mm512_maskz_loadu_ps(k, pr + j), _mm512_sub_ps(_mm512_maskz_loadu_ps(k, g + j), d));
      if (ds16)
        _mm256_mask_storeu_epi16(ds16 + i * even(cols) + j, k, cpu::lanes::round_to_bf16(x));
      else
        _mm512_mask_storeu_ps(g + j, k, x);
    }
    if (ds16 && cols % 2) ds16[i * even(cols) + cols] = 0;
  }
}

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
  probabilities(pb.p.data(), bl.k, a.lse + bh * s.s + q0, rows, cols, pb.p16.data());
  // dV += bf16(P)^T dY.
  blk::pairs_down(pb.p16.data(), ld16, rows, cols, pb.pd.data(), cols);
  blk::gemm(cols, s.dv, kpq, pb.pd.data(), 1, cols, qb.dyd.data() + (q0 / 2) * s.dv, s.dv, 1.f, true,
            h.dv.data() + k0 * s.dv, s.dv);
  // dS = P * (dY V^T - rowsum(dY * Y)); zero where the mask replaces the score.
  blk::gemm(rows, cols, pairs(s.dv), dyw + q0 * dys, dys, 1, h.v_t.data() + k0, s.t, 1.f, false, pb.ds.data(), bl.k);
  score_grads(pb.ds.data(), pb.p.data(), bl.k, qb.di.data() + q0, rows, cols, clean ? pb.ds16.data() : nullptr);
  if (!clean) {  // zeroed where the mask replaced the score, then rounded
    mv.zero_replaced(pb.ds.data(), bl.k, o, q0, rows, k0, cols);
    round_block(pb.ds.data(), bl.k, rows, cols, pb.ds16.data());
  }
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
  for (int64_t i = 0; i < s.s; ++i)  // rowsum(dY * Y) in double
    qb.di[i] = static_cast<float>(dot_bf16_f64(dyh + i * s.dv, yh + i * s.dv, s.dv));
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

#else
#define OTTER_BF16_ATTENTION 0  // no x86 intrinsics: bf16_gemm_native() is false, the widening kernel runs
#endif

// The native kernels where bf16_gemm_native() holds when they run, else the widening kernel.
class Bf16Kernel : public Kernel {
 public:
  Bf16Kernel(const Node& n, bool grad, std::unique_ptr<Kernel> widened)
      : at_(n), grad_(grad), widened_(std::move(widened)) {}
  void run(KernelContext& ctx) override {
    // Dropout and dScores (a trained additive mask's gradient) only on the widening kernel.
    if (!cpu::bf16_gemm_native() || at_.dropout > 0 || (grad_ && ctx.has_output(3))) return widened_->run(ctx);
#if OTTER_BF16_ATTENTION
    grad_ ? backward(ctx, at_) : forward(ctx, at_);
#endif
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
