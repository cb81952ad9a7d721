// CPU kernels of the convolution and pooling gradients (ai.otter ConvGrad, MaxPoolGrad,
// AveragePoolGrad) and of ConvTranspose, whose forward is ConvGrad's data pass (conv_backward), on
// the window geometry, im2col and col2im of kernels/cpu/window.h.
//
// ConvGrad works on chunks of B images per group g (B chosen to bound the column buffer); with a
// fourth input dW_acc (grad-accumulation's fusion) dW is that accumulator, added to after the
// first micro-step:
//   cols  [kc, B*L] = im2col of the B images side by side      (kc = C/g * kernel size, L = out plane)
//   dYc   [mg, B*L] = dY of those images for the group's mg output channels
//   dW_g += dYc * cols^T                      one GEMM per chunk (beta 0 on the first chunk: no fill)
//   dX    = col2im(W_g^T * dYc)               one GEMM per chunk, then col2im per image
//   dB    = sum of dY over images and positions
// bfloat16 operands stay bfloat16 through im2col and the GEMMs, which run on the CPU's bf16 dot
// products (kernels/cpu/gemm_bf16.h) into float32: dW, and dX after col2im's float32 sums, are
// rounded once into the bfloat16 gradients.
#include <omp.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "graph/op_table.h"
#include "kernels/common/half.h"
#include "kernels/cpu/broadcast.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/float_kernel.h"
#include "kernels/cpu/dispatch.h"
#include "kernels/cpu/gemm.h"
#include "kernels/cpu/half.h"
#include "kernels/cpu/isa.h"
#include "kernels/cpu/window.h"

namespace otter {
namespace {

using namespace cpu;  // window geometry (kernels/cpu/window.h)

constexpr int64_t kColumnBudget = int64_t{1} << 22;  // elements of the column buffer per chunk

void check_grad_input(const KernelContext& ctx, const Tensor& dy, const std::vector<int64_t>& dims, const char* what) {
  if (dy.dims() != dims)
    ctx.error(str_cat("dY ", dy.describe(), " does not match the ", what, " output shape ", dims_to_string(dims)));
}

// The operands of a convolution's backward pass in the convolution's own terms: X [batch, cin,
// in...], W [cout, cg, kernel...], dY [batch, cout, out...] over geometry g, stored as S (float,
// double, or the bits of bfloat16). dx (added to: the caller fills it) and dw (written, or added to
// with dw_add) are in the GEMMs' result type A (conv_acc_t: float32 for bfloat16, which the caller
// rounds) and null where not wanted; x may be null where dw is.
template <typename S>
struct ConvBackward {
  using A = conv_acc_t<S>;
  const Geometry& g;
  int64_t batch, cin, cout, group;
  const S *dy, *x, *w;
  A *dx, *dw;
  bool dw_add;
};

// Two buffers carved from one scratch: n1 elements of T1, then n2 of T2.
template <typename T1, typename T2>
std::pair<T1*, T2*> scratch_pair(Scratch& scratch, int64_t n1, int64_t n2) {
  const size_t off = (static_cast<size_t>(n1) * sizeof(T1) + alignof(T2) - 1) / alignof(T2) * alignof(T2);
  char* b = scratch.get<char>(off + static_cast<size_t>(n2) * sizeof(T2));
  return {reinterpret_cast<T1*>(b), reinterpret_cast<T2*>(b + off)};
}

// dY of images [n0, n0 + nb), output channels [m0, m0 + mg) side by side: dYc[m, b*L + l].
template <typename T>
void gather_dy(const T* dy, T* dyc, int64_t n0, int64_t nb, int64_t m0, int64_t mg, int64_t cout, int64_t L) {
#pragma omp parallel for schedule(static) if (mg * nb * L > 65536)
  for (int64_t m = 0; m < mg; ++m)
    for (int64_t b = 0; b < nb; ++b)
      std::memcpy(dyc + (m * nb + b) * L, dy + ((n0 + b) * cout + m0 + m) * L, L * sizeof(T));
}

// Scatters one group's dW_live [mg, cg * taps] into its dW [mg, cg * k_size]: dead offsets get 0 (or
// keep their sum when accumulating).
template <typename T>
void scatter_live_dw(const T* dwl, T* dg, int64_t mg, int64_t cg, int64_t k_size, const std::vector<int64_t>& taps,
                     bool add) {
  const int64_t nt = static_cast<int64_t>(taps.size());
  if (!add) std::fill(dg, dg + mg * cg * k_size, T(0));
  for (int64_t m = 0; m < mg; ++m)
    for (int64_t c = 0; c < cg; ++c)
      for (int64_t j = 0; j < nt; ++j) dg[(m * cg + c) * k_size + taps[j]] += dwl[(m * cg + c) * nt + j];
}

// The backward pass: dW from im2col(X) and dY, dX += col2im(W^T dY), per group and chunk of images.
// ConvGrad runs it for Conv's gradients; ConvTranspose's forward is its data pass (dY = the
// ConvTranspose input, dX = its output). Kernel offsets that only ever see padding leave im2col and
// the GEMMs (kc shrinks to kce): their dW is zero (or unchanged when accumulating); the live offsets'
// weights and weight gradients go through W_live / dW_live [.., cg * live]. With bfloat16 operands
// the GEMMs run on the bf16 dot products (conv_gemm) into float32, col2im adds in float32.
template <typename S>
void conv_backward(const ConvBackward<S>& a, Scratch& scratch, Scratch& wscratch) {
  using A = conv_acc_t<S>;
  const Geometry& g = a.g;
  const int64_t L = g.out_plane, cg = a.cin / a.group, mg = a.cout / a.group, kc = cg * g.k_size;
  if ((!a.dx && !a.dw) || a.batch == 0 || L == 0) {
    if (a.dw && !a.dw_add) std::fill(a.dw, a.dw + a.cout * kc, A(0));
    return;
  }
  const std::vector<int64_t> taps = live_taps(g);
  const bool reduced = static_cast<int64_t>(taps.size()) < g.k_size;
  const int64_t kce = reduced ? cg * static_cast<int64_t>(taps.size()) : kc;
  const int64_t chunk = std::clamp<int64_t>(kColumnBudget / std::max<int64_t>(kce * L, 1), 1, a.batch);
  // cols [kce, chunk*L] and dYc [mg, chunk*L] in S; W^T dYc [kce, chunk*L] in A: in cols where A
  // is S, else in a buffer of its own (dcols).
  constexpr bool kWiden = !std::is_same_v<S, A>;
  const int64_t ncols = kce * chunk * L;
  S* cols;
  A* dcols_own;
  std::tie(cols, dcols_own) = scratch_pair<S, A>(scratch, ncols + mg * chunk * L, kWiden ? ncols : 0);
  S* dyc = cols + ncols;
  A* dcols = kWiden ? dcols_own : reinterpret_cast<A*>(cols);
  S* wl = nullptr;   // W_live [cout, kce]
  A* dwl = nullptr;  // one group's dW_live [mg, kce]
  if (reduced) {
    std::tie(wl, dwl) = scratch_pair<S, A>(wscratch, a.cout * kce, std::max<int64_t>(mg * kce, 1));
    gather_tap_weights(a.w, a.cout, cg, g.k_size, taps, wl);
  }
  for (int64_t gi = 0; gi < a.group; ++gi) {
    A* dwg = a.dw ? (reduced ? dwl : a.dw + gi * mg * kc) : nullptr;
    const bool add_to_dwg = a.dw_add && !reduced;
    for (int64_t n0 = 0; n0 < a.batch; n0 += chunk) {
      const int64_t nb = std::min(chunk, a.batch - n0), ld = nb * L;
      const bool par = nb > 1 && kce * ld > 32768;
      gather_dy(a.dy, dyc, n0, nb, gi * mg, mg, a.cout, L);
      if (dwg) {
#pragma omp parallel for schedule(static) if (par)
        for (int64_t b = 0; b < nb; ++b) {
          isa_dispatch_if<!std::is_same_v<S, double>>([&] {
            conv_im2col(g, a.x + ((n0 + b) * a.cin + gi * cg) * g.in_plane, cg, cols + b * L, taps, nb == 1, ld);
          });
        }
        // The first chunk writes the group's dW (beta 0), later chunks add to it.
        conv_gemm<S>(false, true, mg, kce, ld, dyc, ld, cols, ld, n0 == 0 && !add_to_dwg ? A(0) : A(1), dwg, kce);
      }
      if (a.dx) {
        const S* wg = reduced ? wl + gi * mg * kce : a.w + gi * mg * kc;
        conv_gemm<S>(true, false, kce, ld, mg, wg, kce, dyc, ld, A(0), dcols, ld);
#pragma omp parallel for schedule(static) if (par)
        for (int64_t b = 0; b < nb; ++b) {
          isa_dispatch_if<std::is_same_v<A, float>>([&] {
            conv_col2im_add(g, dcols + b * L, cg, a.dx + ((n0 + b) * a.cin + gi * cg) * g.in_plane, taps, nb == 1, ld);
          });
        }
      }
    }
    if (a.dw && reduced && kce > 0)
      scatter_live_dw(dwl, a.dw + gi * mg * kc, mg, cg, g.k_size, taps, a.dw_add);
    else if (a.dw && reduced && !a.dw_add)
      std::fill(a.dw + gi * mg * kc, a.dw + (gi + 1) * mg * kc, A(0));
  }
}

class ConvGradKernel : public cpu::FloatKernel<ConvGradKernel> {
 public:
  explicit ConvGradKernel(const Node& n) : w_(n, false), group_(n.attr_i("group", 1)) {
    if (group_ <= 0) fail(n.describe(), ": group must be positive");
  }

  void run(KernelContext& ctx) override {
    if (ctx.input(0).dtype() == DataType::kBFloat16) return compute<uint16_t>(ctx);
    cpu::FloatKernel<ConvGradKernel>::run(ctx);
  }

 private:
  friend cpu::FloatKernel<ConvGradKernel>;
  // S: the storage type of dY, X, W and the gradients (float, double, or the bits of bfloat16).
  // bfloat16 gradients are computed in float32 (dX summed by col2im, dW by the GEMM, both over
  // exact bf16 products) and rounded once.
  template <typename S>
  void compute(KernelContext& ctx) {
    using A = conv_acc_t<S>;
    constexpr bool kRound = !std::is_same_v<S, A>;
    const Tensor& dy = ctx.input(0);
    const Tensor& x = ctx.input(1);
    const Tensor& w = ctx.input(2);
    if (x.dtype() != dy.dtype())
      ctx.error(
          str_cat("X ", x.describe(), " and W ", w.describe(), " must be N-d tensors of dY's type ", dy.describe()));
    const window::ConvShape cs = window::check_conv_shape(ctx, x, w, group_, w_.kernel);
    const Geometry g = resolve_geometry(ctx, w_, cs.in, cs.kernel);
    std::vector<int64_t> ydims = {cs.batch, cs.cout};
    ydims.insert(ydims.end(), g.out.begin(), g.out.end());
    check_grad_input(ctx, dy, ydims, "Conv");
    S* dx = ctx.has_output(0) ? static_cast<S*>(ctx.allocate_output(0, x.dtype(), x.dims()).raw()) : nullptr;
    bool dw_add = false;  // add into dW (a fused accumulator after the first micro-step)
    S* dw = dw_output<S>(ctx, w, dw_add);
    S* db = ctx.has_output(2) ? static_cast<S*>(ctx.allocate_output(2, w.dtype(), {cs.cout}).raw()) : nullptr;
    const S* pdy = static_cast<const S*>(dy.raw());
    if (db) bias_grad(pdy, db, cs.batch, cs.cout, g.out_plane);
    A* dxa = nullptr;  // dX and dW as the backward pass sums them: float32 buffers for bfloat16
    A* dwa = nullptr;
    if constexpr (kRound) {
      std::tie(dxa, dwa) = scratch_pair<A, A>(gscratch_, dx ? x.numel() : 0, dw ? w.numel() : 0);
      if (!dx) dxa = nullptr;
      if (!dw) dwa = nullptr;
    } else {
      dxa = dx;
      dwa = dw;
    }
    if (dxa) std::fill(dxa, dxa + x.numel(), A(0));
    conv_backward<S>({g, cs.batch, cs.cin, cs.cout, group_, pdy, static_cast<const S*>(x.raw()),
                      static_cast<const S*>(w.raw()), dxa, dwa, dw_add && !kRound},
                     scratch_, wscratch_);
    if constexpr (kRound) {
      if (dx) parallel_ranges(x.numel(), [&](int64_t b, int64_t e) { round_to_bf16(dxa + b, dx + b, e - b); });
      if (dw && dw_add) {  // a bfloat16 accumulator: the float32 dW added to it in float32, rounded
        for (int64_t i = 0; i < w.numel(); ++i) dw[i] = float_to_bf16(bf16_to_float(dw[i]) + dwa[i]);
      } else if (dw) {
        round_to_bf16(dwa, dw, w.numel());
      }
    }
  }

  // Output 1 (dW), or null where it is not wanted: the dW accumulator input 3 where the graph fused
  // accumulation into ConvGrad (`add`: add to it after the first micro-step), else a new tensor.
  template <typename S>
  static S* dw_output(KernelContext& ctx, const Tensor& w, bool& add) {
    if (!ctx.has_output(1)) return nullptr;
    if (!ctx.has_input(3)) return static_cast<S*>(ctx.allocate_output(1, w.dtype(), w.dims()).raw());
    const Tensor& acc = ctx.input(3);
    if (acc.dtype() != w.dtype() || acc.dims() != w.dims())
      ctx.error(str_cat("the dW accumulator ", acc.describe(), " does not match W ", w.describe()));
    ctx.alias_output(1, acc, acc.dims());
    Tensor a = acc;
    add = !ctx.first_micro_step;
    return static_cast<S*>(a.raw());
  }

  // dB = the sum of dY over images and positions, in float64, rounded once to S.
  template <typename S>
  static void bias_grad(const S* dy, S* db, int64_t batch, int64_t cout, int64_t L) {
#pragma omp parallel for schedule(static) if (batch * cout * L > 32768)
    for (int64_t m = 0; m < cout; ++m) {
      double s = 0;
      for (int64_t n = 0; n < batch; ++n) {
        const S* p = dy + (n * cout + m) * L;
        if constexpr (std::is_same_v<S, uint16_t>) {
          for (int64_t l = 0; l < L; ++l) s += bf16_to_float(p[l]);
        } else {
          for (int64_t l = 0; l < L; ++l) s += p[l];
        }
      }
      if constexpr (std::is_same_v<S, uint16_t>) db[m] = float_to_bf16(double_to_float_round_odd(s));
      else db[m] = static_cast<S>(s);
    }
  }

  WindowAttrs w_;
  int64_t group_;
  Scratch scratch_, wscratch_, gscratch_;
};

// ConvTranspose(X, W, B?): Y = B + the data gradient of the Conv from Y's shape to X's (W is that
// Conv's [C, M / group, kernel...] filter), computed by conv_backward with dY = X. bfloat16 runs
// its GEMMs on the bf16 dot products, sums B and col2im in float32 and rounds Y once.
class ConvTransposeKernel : public cpu::FloatKernel<ConvTransposeKernel> {
 public:
  explicit ConvTransposeKernel(const Node& n) : a_(n) {
    if (a_.group <= 0) fail(n.describe(), ": group must be positive");
  }

  void run(KernelContext& ctx) override {
    if (ctx.input(0).dtype() == DataType::kBFloat16) return compute<uint16_t>(ctx);
    cpu::FloatKernel<ConvTransposeKernel>::run(ctx);
  }

 private:
  friend cpu::FloatKernel<ConvTransposeKernel>;
  template <typename S>
  void compute(KernelContext& ctx) {
    using A = conv_acc_t<S>;
    constexpr bool kRound = !std::is_same_v<S, A>;
    const Tensor& x = ctx.input(0);
    const Tensor& w = ctx.input(1);
    const window::TransposeShape ts = window::check_conv_transpose(ctx, a_);
    Tensor& y = ctx.allocate_output(0, x.dtype(), ts.y_dims);
    S* py = static_cast<S*>(y.raw());
    A* ya = kRound ? scratch_pair<A, A>(yscratch_, y.numel(), 0).first : reinterpret_cast<A*>(py);
    const int64_t plane = ts.g.in_plane, cout = ts.y_dims[1];
    if (ctx.has_input(2)) {
      const S* b = static_cast<const S*>(ctx.input(2).raw());
      for (int64_t p = 0; p < x.dim(0) * cout; ++p) {
        A bias;
        if constexpr (kRound) bias = bf16_to_float(b[p % cout]);
        else bias = b[p % cout];
        std::fill(ya + p * plane, ya + (p + 1) * plane, bias);
      }
    } else {
      std::fill(ya, ya + y.numel(), A(0));
    }
    conv_backward<S>({ts.g, x.dim(0), cout, x.dim(1), a_.group, static_cast<const S*>(x.raw()), nullptr,
                      static_cast<const S*>(w.raw()), ya, nullptr, false},
                     scratch_, wscratch_);
    if constexpr (kRound)
      parallel_ranges(y.numel(), [&](int64_t b, int64_t e) { round_to_bf16(ya + b, py + b, e - b); });
  }

  conv_transpose::Attrs a_;
  Scratch scratch_, wscratch_, yscratch_;
};

// MaxPoolGrad(dY, X) and AveragePoolGrad(dY, X) with the forward's attributes: per plane, each
// output's gradient goes to its window's first maximum (the forward's argmax, NaN included) or is
// spread over the window's counted positions.
class PoolGradKernel : public cpu::FloatKernel<PoolGradKernel> {
 public:
  PoolGradKernel(const Node& n, bool max)
      : w_(n, true), max_(max), count_include_pad_(n.attr_i("count_include_pad", 0) != 0) {}

 private:
  friend cpu::FloatKernel<PoolGradKernel>;
  template <typename T>
  void compute(KernelContext& ctx) {
    const Tensor& dy = ctx.input(0);
    const Tensor& x = ctx.input(1);
    const Geometry g = window::check_pool_grad(ctx, dy, x, w_, max_ ? "MaxPool" : "AveragePool");
    Tensor& dxt = ctx.allocate_output(0, x.dtype(), x.dims());
    T* dx = dxt.data<T>();
    std::fill(dx, dx + x.numel(), T(0));
    const int64_t planes = x.dim(0) * x.dim(1);
    if (planes == 0 || g.out_plane == 0) return;
    const Pool3 p = make_pool3(g);
    const T* px = x.data<T>();
    const T* pdy = dy.data<T>();
    if (max_ && g.nsp == 2) {  // images: the forward's 2-D loops
#pragma omp parallel for schedule(static) if (planes * g.out_plane * g.k_size > 32768)
      for (int64_t pl = 0; pl < planes; ++pl) {
        const T* gp = pdy + pl * g.out_plane;
        T* dp = dx + pl * g.in_plane;
        max_pool_plane_2d(p, px + pl * g.in_plane, [&](int64_t oi, int64_t bi, T) {
          if (bi >= 0) dp[bi] += gp[oi];
        });
      }
      return;
    }
#pragma omp parallel for schedule(static) if (planes * g.out_plane * g.k_size > 32768)
    for (int64_t pl = 0; pl < planes; ++pl) {
      const T* xp = px + pl * g.in_plane;
      const T* gp = pdy + pl * g.out_plane;
      T* dp = dx + pl * g.in_plane;
      for_each_pool_window(p, [&](int64_t oi, const PoolWindow& win) {
        if (max_) {
          int64_t best_i = -1;
          T best = -std::numeric_limits<T>::infinity();
          for_each_window_input(p, win, [&](int64_t i) {
            const T v = xp[i];
            if ((v > best || v != v) && !(v != v && best != best)) {
              best = v;
              best_i = i;
            }
          });
          if (best_i >= 0) dp[best_i] += gp[oi];
          return;
        }
        const int64_t cnt = count_include_pad_ ? win.padded(p) : win.valid();
        if (cnt == 0) return;
        const T share = gp[oi] / static_cast<T>(cnt);
        for_each_window_input(p, win, [&](int64_t i) { dp[i] += share; });
      });
    }
  }

  WindowAttrs w_;
  bool max_, count_include_pad_;
};

}  // namespace

void register_cpu_conv_grad_kernels(KernelRegistry& r) {
  const std::vector<DataType> kFloats = {DataType::kFloat32, DataType::kFloat64};
  auto add = [&](const char* op, auto make) {
    r.add({.domain = kOtterDomain,
           .op_type = op,
           .dtypes = kFloats,
           .create = [make](const Node& n) -> std::unique_ptr<Kernel> { return make(n); }});
  };
  // bfloat16 ConvGrad multiplies on the bf16 GEMM (kernels/cpu/gemm_bf16.h); float16 comes through
  // kernels/cpu/half.cc's widening wrapper, as do the others' half types.
  r.add({.domain = kOtterDomain,
         .op_type = "ConvGrad",
         .dtypes = {DataType::kFloat32, DataType::kFloat64, DataType::kBFloat16},
         .create = [](const Node& n) -> std::unique_ptr<Kernel> { return std::make_unique<ConvGradKernel>(n); }});
  r.add({.op_type = "ConvTranspose",
         .dtypes = {DataType::kFloat32, DataType::kFloat64, DataType::kBFloat16},
         .create = [](const Node& n) -> std::unique_ptr<Kernel> { return std::make_unique<ConvTransposeKernel>(n); }});
  add("MaxPoolGrad", [](const Node& n) { return std::make_unique<PoolGradKernel>(n, true); });
  add("AveragePoolGrad", [](const Node& n) { return std::make_unique<PoolGradKernel>(n, false); });
}

}  // namespace otter
