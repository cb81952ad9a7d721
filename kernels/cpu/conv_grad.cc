// CPU kernels of the convolution and pooling gradients (ai.otter ConvGrad, MaxPoolGrad,
// AveragePoolGrad), on the window geometry, im2col and col2im of kernels/cpu/window.h.
//
// ConvGrad works on chunks of B images per group g (B chosen to bound the column buffer); with a
// fourth input dW_acc (grad-accumulation's fusion) dW is that accumulator, added to after the
// first micro-step:
//   cols  [kc, B*L] = im2col of the B images side by side      (kc = C/g * kernel size, L = out plane)
//   dYc   [mg, B*L] = dY of those images for the group's mg output channels
//   dW_g += dYc * cols^T                      one GEMM per chunk (beta 0 on the first chunk: no fill)
//   dX    = col2im(W_g^T * dYc)               one GEMM per chunk, then col2im per image
//   dB    = sum of dY over images and positions
#include <omp.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <vector>

#include "graph/op_table.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/float_kernel.h"
#include "kernels/cpu/dispatch.h"
#include "kernels/cpu/gemm.h"
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

class ConvGradKernel : public cpu::FloatKernel<ConvGradKernel> {
 public:
  explicit ConvGradKernel(const Node& n) : w_(n, false), group_(n.attr_i("group", 1)) {
    if (group_ <= 0) fail(n.describe(), ": group must be positive");
  }

 private:
  friend cpu::FloatKernel<ConvGradKernel>;
  template <typename T>
  void compute(KernelContext& ctx) {
    const Tensor& dy = ctx.input(0);
    const Tensor& x = ctx.input(1);
    const Tensor& w = ctx.input(2);
    if (x.dtype() != dy.dtype())
      ctx.error(
          str_cat("X ", x.describe(), " and W ", w.describe(), " must be N-d tensors of dY's type ", dy.describe()));
    const window::ConvShape cs = window::check_conv_shape(ctx, x, w, group_, w_.kernel);
    const int64_t batch = cs.batch, cin = cs.cin, cout = cs.cout, cg = cs.cg;
    const Geometry g = resolve_geometry(ctx, w_, cs.in, cs.kernel);
    std::vector<int64_t> ydims = {batch, cout};
    ydims.insert(ydims.end(), g.out.begin(), g.out.end());
    check_grad_input(ctx, dy, ydims, "Conv");
    T* dx = ctx.has_output(0) ? ctx.allocate_output(0, x.dtype(), x.dims()).template data<T>() : nullptr;
    bool dw_add = false;  // add into dW (a fused accumulator after the first micro-step)
    T* dw = dw_output<T>(ctx, w, dw_add);
    T* db = ctx.has_output(2) ? ctx.allocate_output(2, w.dtype(), {cout}).template data<T>() : nullptr;
    const int64_t L = g.out_plane, mg = cout / group_, kc = cg * g.k_size;
    const T* pdy = dy.data<T>();
    if (db) bias_grad(pdy, db, batch, cout, L);
    if (dx) std::fill(dx, dx + x.numel(), T(0));
    if ((!dx && !dw) || batch == 0 || L == 0) {
      if (dw && !dw_add) std::fill(dw, dw + w.numel(), T(0));
      return;
    }
    // Kernel offsets that only ever see padding leave im2col and the GEMMs (kc shrinks to kce);
    // their dW is zero (or unchanged when accumulating). The live offsets' weights and weight
    // gradients go through W_live / dW_live [.., cg * live].
    const std::vector<int64_t> taps = live_taps(g);
    const int64_t nt = static_cast<int64_t>(taps.size());
    const bool reduced = nt < g.k_size;
    const int64_t kce = reduced ? cg * nt : kc;
    const int64_t chunk = std::clamp<int64_t>(kColumnBudget / std::max<int64_t>(kce * L, 1), 1, batch);
    T* cols = scratch_.get<T>(static_cast<size_t>(kce * chunk * L + mg * chunk * L));
    T* dyc = cols + kce * chunk * L;
    const T* px = x.data<T>();
    const T* pw = w.data<T>();
    T* wl = nullptr;   // W_live [cout, kce]
    T* dwl = nullptr;  // one group's dW_live [mg, kce]
    if (reduced) {
      T* buf = wscratch_.get<T>(static_cast<size_t>(std::max<int64_t>((cout + mg) * kce, 1)));
      wl = buf;
      dwl = buf + cout * kce;
      gather_tap_weights(pw, cout, cg, g.k_size, taps, wl);
    }
    for (int64_t gi = 0; gi < group_; ++gi) {
      T* dwg = dw ? (reduced ? dwl : dw + gi * mg * kc) : nullptr;
      const bool add_to_dwg = dw_add && !reduced;
      for (int64_t n0 = 0; n0 < batch; n0 += chunk) {
        const int64_t nb = std::min(chunk, batch - n0), ld = nb * L;
        gather_dy(pdy, dyc, n0, nb, gi * mg, mg, cout, L);
        if (dw) {
#pragma omp parallel for schedule(static) if (nb > 1 && kce * ld > 32768)
          for (int64_t b = 0; b < nb; ++b) {
            isa_dispatch_if<std::is_same_v<T, float>>([&] {
              conv_im2col(g, px + ((n0 + b) * cin + gi * cg) * g.in_plane, cg, cols + b * L, taps, nb == 1, ld);
            });
          }
          // The first chunk writes the group's dW (beta 0), later chunks add to it.
          cpu::gemm<T>(false, true, mg, kce, ld, T(1), dyc, ld, cols, ld, n0 == 0 && !add_to_dwg ? T(0) : T(1), dwg,
                       kce);
        }
        if (dx) {
          const T* wg = reduced ? wl + gi * mg * kce : pw + gi * mg * kc;
          cpu::gemm<T>(true, false, kce, ld, mg, T(1), wg, kce, dyc, ld, T(0), cols, ld);
#pragma omp parallel for schedule(static) if (nb > 1 && kce * ld > 32768)
          for (int64_t b = 0; b < nb; ++b) {
            isa_dispatch_if<std::is_same_v<T, float>>([&] {
              conv_col2im_add(g, cols + b * L, cg, dx + ((n0 + b) * cin + gi * cg) * g.in_plane, taps, nb == 1, ld);
            });
          }
        }
      }
      if (dw && reduced) {  // scatter dW_live into the group's dW; dead offsets get 0 (or keep their sum)
        T* dg = dw + gi * mg * kc;
        if (!dw_add) std::fill(dg, dg + mg * kc, T(0));
        if (kce == 0) continue;
        for (int64_t m = 0; m < mg; ++m)
          for (int64_t c = 0; c < cg; ++c)
            for (int64_t j = 0; j < nt; ++j) dg[m * kc + c * g.k_size + taps[j]] += dwl[(m * cg + c) * nt + j];
      }
    }
  }

  // Output 1 (dW), or null where it is not wanted: the dW accumulator input 3 where the graph fused
  // accumulation into ConvGrad (`add`: add to it after the first micro-step), else a new tensor.
  template <typename T>
  static T* dw_output(KernelContext& ctx, const Tensor& w, bool& add) {
    if (!ctx.has_output(1)) return nullptr;
    if (!ctx.has_input(3)) return ctx.allocate_output(1, w.dtype(), w.dims()).template data<T>();
    const Tensor& acc = ctx.input(3);
    if (acc.dtype() != w.dtype() || acc.dims() != w.dims())
      ctx.error(str_cat("the dW accumulator ", acc.describe(), " does not match W ", w.describe()));
    ctx.alias_output(1, acc, acc.dims());
    Tensor a = acc;
    add = !ctx.first_micro_step;
    return a.data<T>();
  }

  // dYc[m, b*L + l] = dY[n0 + b, m0 + m, l].
  template <typename T>
  static void gather_dy(const T* dy, T* dyc, int64_t n0, int64_t nb, int64_t m0, int64_t mg, int64_t cout,
                        int64_t L) {
#pragma omp parallel for schedule(static) if (mg * nb * L > 65536)
    for (int64_t m = 0; m < mg; ++m)
      for (int64_t b = 0; b < nb; ++b)
        std::memcpy(dyc + (m * nb + b) * L, dy + ((n0 + b) * cout + m0 + m) * L, L * sizeof(T));
  }

  template <typename T>
  static void bias_grad(const T* dy, T* db, int64_t batch, int64_t cout, int64_t L) {
#pragma omp parallel for schedule(static) if (batch * cout * L > 32768)
    for (int64_t m = 0; m < cout; ++m) {
      double s = 0;
      for (int64_t n = 0; n < batch; ++n) {
        const T* p = dy + (n * cout + m) * L;
        for (int64_t l = 0; l < L; ++l) s += p[l];
      }
      db[m] = static_cast<T>(s);
    }
  }

  WindowAttrs w_;
  int64_t group_;
  Scratch scratch_, wscratch_;
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
  add("ConvGrad", [](const Node& n) { return std::make_unique<ConvGradKernel>(n); });
  add("MaxPoolGrad", [](const Node& n) { return std::make_unique<PoolGradKernel>(n, true); });
  add("AveragePoolGrad", [](const Node& n) { return std::make_unique<PoolGradKernel>(n, false); });
}

}  // namespace otter
