// CPU kernels for Conv (N-D, groups, im2col + BLAS GEMM, direct depthwise) and pooling (MaxPool
// with Indices, AveragePool, GlobalAveragePool, GlobalMaxPool). A bfloat16 Conv runs im2col on its
// bits and the GEMM on the CPU's bf16 dot products (kernels/cpu/gemm_bf16.h) into float32, rounded
// once into Y.
#include <omp.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

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

using namespace cpu;  // window geometry, im2col (kernels/cpu/window.h)

constexpr int64_t kColumnBudget = int64_t{1} << 22;  // elements of the column and output buffers per chunk

// ---- Conv ----------------------------------------------------------------------------------------

class ConvKernel : public cpu::FloatKernel<ConvKernel> {
 public:
  explicit ConvKernel(const Node& n) : w_(n, false), group_(n.attr_i("group", 1)) {
    if (group_ <= 0) fail(n.describe(), ": group must be positive");
  }

  void run(KernelContext& ctx) override {
    if (ctx.input(0).dtype() == DataType::kBFloat16) return compute<uint16_t>(ctx);
    cpu::FloatKernel<ConvKernel>::run(ctx);
  }

 private:
  friend cpu::FloatKernel<ConvKernel>;
  // S: the storage type of X, W, B and Y (float, double, or the bits of bfloat16). The GEMM sums
  // into A (conv_acc_t: float32 for bfloat16, whose products it takes exactly), the bias added
  // before the GEMM; a bfloat16 Y is that result rounded once.
  template <typename S>
  void compute(KernelContext& ctx) {
    using A = conv_acc_t<S>;
    constexpr bool kRound = !std::is_same_v<S, A>;  // bfloat16: round the float32 result into Y
    const Tensor& x = ctx.input(0);
    const Tensor& w = ctx.input(1);
    const window::ConvShape cs = window::check_conv_shape(ctx, x, w, group_, w_.kernel);
    const int nsp = static_cast<int>(x.rank()) - 2;
    const int64_t batch = cs.batch, cin = cs.cin, cout = cs.cout, cg = cs.cg;
    const A* pbias = bias<S>(ctx, cout, x);
    const Geometry g = resolve_geometry(ctx, w_, cs.in, cs.kernel);
    std::vector<int64_t> odims = {batch, cout};
    odims.insert(odims.end(), g.out.begin(), g.out.end());
    Tensor& y = ctx.allocate_output(0, x.dtype(), odims);
    const int64_t L = g.out_plane;
    if (batch == 0 || cout == 0 || L == 0) return;
    const S *px = static_cast<const S*>(x.raw()), *pw = static_cast<const S*>(w.raw());
    S* py = static_cast<S*>(y.raw());
    const int64_t mg = cout / group_, kc = cg * g.k_size;

    if (cg == 1 && group_ > 1 && mg <= 8) {  // depthwise (small channel multiplier): direct, no im2col
      depthwise_any<S>(g, x, w, pbias, y, mg);
      return;
    }
    bool pointwise = true;  // 1x1, stride 1, no padding: X itself is the column matrix
    for (int j = 0; j < nsp; ++j)
      pointwise &= g.k[j] == 1 && g.s[j] == 1 && g.pb[j] == 0 && g.pe[j] == 0;

    // Per group, chunks of nb images at once (nb bounded by the column budget):
    //   cols [kc, nb*L] = im2col of the nb images side by side (X itself when pointwise and nb = 1)
    //   out  [mg, nb*L] = W_g * cols (+ bias)       one GEMM per chunk, wide enough for BLAS
    //   Y[n0+b, group's channels] = out[:, b*L:(b+1)*L]   (written in place when nb = 1 and Y has
    //                                                       the GEMM's type; else copied or rounded)
    // One wide GEMM instead of one per image keeps the weights packed once per chunk.
    // Kernel offsets that only ever see padding leave im2col and the GEMM (kc shrinks to kce):
    // the weights of the live offsets are gathered into W_live [cout, cg * live].
    const std::vector<int64_t> taps = pointwise ? std::vector<int64_t>{} : live_taps(g);
    const bool reduced = !pointwise && static_cast<int64_t>(taps.size()) < g.k_size;
    const int64_t kce = reduced ? cg * static_cast<int64_t>(taps.size()) : kc;
    const S* wsrc = reduced ? live_weights(pw, cout, cg, g, taps) : pw;
    const int64_t chunk = std::clamp<int64_t>(kColumnBudget / std::max<int64_t>((kce + mg) * L, 1), 1, batch);
    const bool gather = chunk > 1 || !pointwise;
    S* cols = gather ? scratch_.get<S>(static_cast<size_t>(kce * chunk * L)) : nullptr;
    A* out = chunk > 1 || kRound ? oscratch_.get<A>(static_cast<size_t>(mg * chunk * L)) : nullptr;
    const A gemm_beta = pbias ? A(1) : A(0);
    for (int64_t gi = 0; gi < group_; ++gi) {
      const S* wg = wsrc + gi * mg * kce;
      for (int64_t n0 = 0; n0 < batch; n0 += chunk) {
        const int64_t nb = std::min(chunk, batch - n0), ld = nb * L;
        const S* col;
        if (pointwise && nb == 1) {
          col = px + (n0 * cin + gi * cg) * g.in_plane;
        } else {
          const bool par_images = nb > 1 && kce * ld > 32768;
#pragma omp parallel for schedule(static) if (par_images)
          for (int64_t b = 0; b < nb; ++b) {
            const S* xg = px + ((n0 + b) * cin + gi * cg) * g.in_plane;
            S* cb = cols + b * L;
            if (pointwise) {
              for (int64_t c = 0; c < cg; ++c) std::memcpy(cb + c * ld, xg + c * L, L * sizeof(S));
            } else {
              isa_dispatch_if<!std::is_same_v<S, double>>([&] {
                conv_im2col(g, xg, cg, cb, taps, !par_images, ld);
              });
            }
          }
          col = cols;
        }
        A* dst = out;
        if constexpr (!kRound) {
          if (nb == 1) dst = py + (n0 * cout + gi * mg) * L;
        }
        if (pbias) {
          for (int64_t m = 0; m < mg; ++m) std::fill(dst + m * ld, dst + (m + 1) * ld, pbias[gi * mg + m]);
        }
        conv_gemm<S>(false, false, mg, ld, kce, wg, kce, col, ld, gemm_beta, dst, ld);
        if (dst == out) store_chunk(out, py + (n0 * cout + gi * mg) * L, nb, mg, cout, L);
      }
    }
  }

  // Y[b, m] (images b, channels m of a chunk; y0 the first one's) = out[m, b*L:(b+1)*L], copied,
  // or rounded from float32 into bfloat16.
  template <typename S, typename A>
  static void store_chunk(const A* out, S* y0, int64_t nb, int64_t mg, int64_t cout, int64_t L) {
    const int64_t ld = nb * L;
#pragma omp parallel for schedule(static) if (mg * ld > 65536)
    for (int64_t b = 0; b < nb; ++b)
      for (int64_t m = 0; m < mg; ++m) {
        const A* src = out + m * ld + b * L;
        S* yrow = y0 + (b * cout + m) * L;
        if constexpr (std::is_same_v<S, A>) std::memcpy(yrow, src, L * sizeof(S));
        else round_to_bf16(src, yrow, L);
      }
  }

  // The depthwise convolution; a bfloat16 one on X and W widened (bf16 products are exact in
  // float32, the sums accumulate in float32), rounded once into Y.
  template <typename S>
  void depthwise_any(const Geometry& g, const Tensor& x, const Tensor& w, const conv_acc_t<S>* pbias, Tensor& y,
                     int64_t mg) {
    const S* px = static_cast<const S*>(x.raw());
    const S* pw = static_cast<const S*>(w.raw());
    S* py = static_cast<S*>(y.raw());
    if constexpr (std::is_same_v<S, conv_acc_t<S>>) {
      depthwise<S>(g, px, pw, pbias, py, x.dim(0), x.dim(1), mg);
    } else {
      float* buf = oscratch_.get<float>(static_cast<size_t>(x.numel() + w.numel() + y.numel()));
      float *xf = buf, *wf = buf + x.numel(), *yf = wf + w.numel();
      parallel_ranges(x.numel(), [&](int64_t b, int64_t e) { widen_bf16(px + b, xf + b, e - b); });
      widen_bf16(pw, wf, w.numel());
      depthwise<float>(g, xf, wf, pbias, yf, x.dim(0), x.dim(1), mg);
      parallel_ranges(y.numel(), [&](int64_t b, int64_t e) { round_to_bf16(yf + b, py + b, e - b); });
    }
  }

  // Input 2 (B, [cout] of X's type) or null; a bfloat16 B widened (exactly) into bias_.
  template <typename S>
  const conv_acc_t<S>* bias(const KernelContext& ctx, int64_t cout, const Tensor& x) {
    if (!ctx.has_input(2)) return nullptr;
    const Tensor& b = ctx.input(2);
    if (b.rank() != 1 || b.dim(0) != cout || b.dtype() != x.dtype())
      ctx.error(str_cat("bias ", b.describe(), " must be [", cout, "] of the type of X"));
    if constexpr (std::is_same_v<S, uint16_t>) {
      bias_.resize(static_cast<size_t>(cout));
      widen_bf16(static_cast<const uint16_t*>(b.raw()), bias_.data(), cout);
      return bias_.data();
    } else {
      return b.data<S>();
    }
  }

  // W_live [cout, cg * live]: the weights of the live kernel offsets `taps`, in scratch.
  template <typename T>
  const T* live_weights(const T* pw, int64_t cout, int64_t cg, const Geometry& g, const std::vector<int64_t>& taps) {
    const int64_t kce = cg * static_cast<int64_t>(taps.size());
    T* wl = wscratch_.get<T>(static_cast<size_t>(std::max<int64_t>(cout * kce, 1)));
    gather_tap_weights(pw, cout, cg, g.k_size, taps, wl);
    return wl;
  }

  // One input channel per group: y[n, c*mg + j] = bias + sum_k w[c*mg + j, k] * shifted x[n, c].
  template <typename T>
  static void depthwise(const Geometry& g, const T* px, const T* pw, const T* pbias, T* py, int64_t batch,
                        int64_t cin, int64_t mg) {
    const int64_t L = g.out_plane, cout = cin * mg;
    const int64_t slast = g.s[g.nsp - 1], klast = g.k[g.nsp - 1];
    std::vector<AxisRange> last(static_cast<size_t>(klast));
    for (int64_t k = 0; k < klast; ++k) last[k] = axis_range(g, g.nsp - 1, k);
#pragma omp parallel for schedule(static) if (batch * cout * L * g.k_size > 32768)
    for (int64_t p = 0; p < batch * cout; ++p) {
      const int64_t nb = p / cout, m = p % cout, c = m / mg;
      const T* xc = px + (nb * cin + c) * g.in_plane;
      const T* wm = pw + m * g.k_size;
      T* yp = py + p * L;
      std::fill(yp, yp + L, pbias ? pbias[m] : T(0));
      for (int64_t kidx = 0; kidx < g.k_size; ++kidx) {
        const T wv = wm[kidx];
        const AxisRange& lr = last[kidx % klast];
        for_each_row(g, kidx, lr, [&](int64_t out_row, int64_t in_row, bool valid) {
          if (!valid) return;
          T* d = yp + out_row;
          const T* s = xc + in_row;
          if (slast == 1) {
            for (int64_t o = lr.lo; o < lr.hi; ++o) d[o] += wv * s[o];
          } else {
            for (int64_t o = lr.lo; o < lr.hi; ++o) d[o] += wv * s[o * slast];
          }
        });
      }
    }
  }

  WindowAttrs w_;
  int64_t group_;
  Scratch scratch_, oscratch_, wscratch_;
  std::vector<float> bias_;  // a bfloat16 bias, widened
};

// ---- pooling ------------------------------------------------------------------------------------

class PoolKernel : public Kernel {
 public:
  enum class Mode { kMax, kAverage };
  PoolKernel(const Node& n, Mode mode)
      : w_(n, true),
        mode_(mode),
        count_include_pad_(n.attr_i("count_include_pad", 0) != 0),
        storage_order_(n.attr_i("storage_order", 0)) {
    if (storage_order_ != 0 && storage_order_ != 1)
      fail(n.describe(), ": storage_order must be 0 or 1");
    if (mode == Mode::kAverage && !w_.dilations.empty() && n.opset() < 19) {
      for (int64_t v : w_.dilations)
        if (v != 1) fail(n.describe(), ": AveragePool has dilations only from opset 19");
    }
  }

  void run(KernelContext& ctx) override {
    const DataType t = ctx.input(0).dtype();
    if (mode_ == Mode::kMax && (t == DataType::kUInt8 || t == DataType::kInt8)) {
      if (t == DataType::kUInt8) compute<uint8_t>(ctx);
      else compute<int8_t>(ctx);
      return;
    }
    OTTER_DISPATCH_FLOAT(t, T, [&] { compute<T>(ctx); });
  }

 private:
  template <typename T>
  void compute(KernelContext& ctx) {
    const Tensor& x = ctx.input(0);
    if (x.rank() < 3) ctx.error(str_cat("X must have rank >= 3 (N, C, spatial...), got ", x.describe()));
    const int nsp = static_cast<int>(x.rank()) - 2;
    if (nsp > 3) ctx.error(str_cat("pooling over ", nsp, " spatial axes is not supported (at most 3)"));
    if (static_cast<int>(w_.kernel.size()) != nsp)
      ctx.error(str_cat("kernel_shape has ", w_.kernel.size(), " values for ", nsp, " spatial axes of X ",
                        x.describe()));
    std::vector<int64_t> in(x.dims().begin() + 2, x.dims().end());
    const Geometry g = resolve_geometry(ctx, w_, in, w_.kernel);
    std::vector<int64_t> odims = {x.dim(0), x.dim(1)};
    odims.insert(odims.end(), g.out.begin(), g.out.end());
    Tensor& y = ctx.allocate_output(0, x.dtype(), odims);
    const bool want_idx = mode_ == Mode::kMax && ctx.has_output(1);
    int64_t* pidx = want_idx ? ctx.allocate_output(1, DataType::kInt64, odims).data<int64_t>() : nullptr;
    const int64_t planes = x.dim(0) * x.dim(1);
    if (planes == 0 || g.out_plane == 0) return;
    const Pool3 p = make_pool3(g);
    const T* px = x.data<T>();
    T* py = y.data<T>();
    const int64_t in_plane = g.in_plane, out_plane = g.out_plane;
    const bool col_major = storage_order_ == 1;
    if (mode_ == Mode::kMax && nsp == 2 && !col_major) {  // images: the 2-D loops
#pragma omp parallel for schedule(static) if (planes * out_plane * g.k_size > 32768)
      for (int64_t pl = 0; pl < planes; ++pl) {
        T* yp = py + pl * out_plane;
        int64_t* ip = pidx ? pidx + pl * out_plane : nullptr;
        max_pool_plane_2d(p, px + pl * in_plane, [&](int64_t oi, int64_t bi, T best) {
          yp[oi] = best;
          if (ip) ip[oi] = bi < 0 ? -1 : pl * in_plane + bi;
        });
      }
      return;
    }
#pragma omp parallel for schedule(static) if (planes * out_plane * g.k_size > 32768)
    for (int64_t pl = 0; pl < planes; ++pl) {
      const T* xp = px + pl * in_plane;
      T* yp = py + pl * out_plane;
      int64_t* ip = pidx ? pidx + pl * out_plane : nullptr;
      int64_t oi = 0;
      for (int64_t o0 = 0; o0 < p.out[0]; ++o0) {
        const int64_t s0 = o0 * p.s[0] - p.pb[0];
        for (int64_t o1 = 0; o1 < p.out[1]; ++o1) {
          const int64_t s1 = o1 * p.s[1] - p.pb[1];
          for (int64_t o2 = 0; o2 < p.out[2]; ++o2, ++oi) {
            const int64_t s2 = o2 * p.s[2] - p.pb[2];
            if (mode_ == Mode::kMax) {
              int64_t bi = -1;
              yp[oi] = max_window(p, xp, {o0, o1, o2}, {s0, s1, s2}, col_major, bi);
              if (ip) ip[oi] = bi < 0 ? -1 : pl * in_plane + bi;
            } else {
              yp[oi] = average_window(p, xp, {o0, o1, o2}, {s0, s1, s2});
            }
          }
        }
      }
    }
  }

  // The maximum of one window of plane xp (output position o, window start s per axis) and its
  // flat index in the plane (`bi`, -1 where the window is empty). NaN propagates, as in PyTorch.
  template <typename T>
  static T max_window(const Pool3& p, const T* xp, const std::array<int64_t, 3>& o, const std::array<int64_t, 3>& s,
                      bool col_major, int64_t& bi) {
    T best = std::numeric_limits<T>::has_infinity ? -std::numeric_limits<T>::infinity()
                                                  : std::numeric_limits<T>::lowest();
    const int64_t lo2 = p.klo[2][o[2]], hi2 = p.khi[2][o[2]];
    for (int64_t k0 = p.klo[0][o[0]]; k0 < p.khi[0][o[0]]; ++k0) {
      const int64_t i0 = s[0] + k0 * p.d[0];
      for (int64_t k1 = p.klo[1][o[1]]; k1 < p.khi[1][o[1]]; ++k1) {
        const int64_t i1 = s[1] + k1 * p.d[1];
        const T* row = xp + (i0 * p.in[1] + i1) * p.in[2];
        for (int64_t k2 = lo2; k2 < hi2; ++k2) {
          const int64_t i2 = s[2] + k2 * p.d[2];
          const T v = row[i2];
          if (v > best || v != v) {
            if (v != v && best != best) continue;
            best = v;
            bi = col_major ? i0 + p.in[0] * (i1 + p.in[1] * i2) : (i0 * p.in[1] + i1) * p.in[2] + i2;
          }
        }
      }
    }
    return best;
  }

  // The mean of one window (count_include_pad counts the padding); NaN for an empty window.
  template <typename T>
  T average_window(const Pool3& p, const T* xp, const std::array<int64_t, 3>& o,
                   const std::array<int64_t, 3>& s) const {
    const int64_t lo2 = p.klo[2][o[2]], hi2 = p.khi[2][o[2]];
    double sum = 0;
    for (int64_t k0 = p.klo[0][o[0]]; k0 < p.khi[0][o[0]]; ++k0) {
      const int64_t i0 = s[0] + k0 * p.d[0];
      for (int64_t k1 = p.klo[1][o[1]]; k1 < p.khi[1][o[1]]; ++k1) {
        const int64_t i1 = s[1] + k1 * p.d[1];
        const T* row = xp + (i0 * p.in[1] + i1) * p.in[2];
        for (int64_t k2 = lo2; k2 < hi2; ++k2) sum += row[s[2] + k2 * p.d[2]];
      }
    }
    const int64_t cnt = count_include_pad_
                            ? p.cnt_pad[0][o[0]] * p.cnt_pad[1][o[1]] * p.cnt_pad[2][o[2]]
                            : (p.khi[0][o[0]] - p.klo[0][o[0]]) * (p.khi[1][o[1]] - p.klo[1][o[1]]) * (hi2 - lo2);
    return cnt > 0 ? static_cast<T>(sum / static_cast<double>(cnt)) : std::numeric_limits<T>::quiet_NaN();
  }

  WindowAttrs w_;
  Mode mode_;
  bool count_include_pad_;
  int64_t storage_order_;
};

// GlobalAveragePool / GlobalMaxPool: one value per (n, c) plane.
class GlobalPoolKernel : public cpu::FloatKernel<GlobalPoolKernel> {
 public:
  explicit GlobalPoolKernel(bool max) : max_(max) {}
 private:
  friend cpu::FloatKernel<GlobalPoolKernel>;
  template <typename T>
  void compute(KernelContext& ctx) {
    const Tensor& x = ctx.input(0);
    if (x.rank() < 2) ctx.error(str_cat("X must have rank >= 2 (N, C, spatial...), got ", x.describe()));
    std::vector<int64_t> odims(x.dims().begin(), x.dims().begin() + 2);
    odims.resize(x.rank(), 1);
    Tensor& y = ctx.allocate_output(0, x.dtype(), odims);
    const int64_t planes = x.dim(0) * x.dim(1);
    const int64_t plane = planes == 0 ? 0 : x.numel() / planes;
    const T* px = x.data<T>();
    T* py = y.data<T>();
#pragma omp parallel for schedule(static) if (x.numel() > 32768)
    for (int64_t pl = 0; pl < planes; ++pl) {
      const T* xp = px + pl * plane;
      if (max_) {
        T best = -std::numeric_limits<T>::infinity();
        for (int64_t i = 0; i < plane; ++i)
          if (xp[i] > best || xp[i] != xp[i]) best = xp[i];
        py[pl] = best;
      } else {
        double sum = 0;
        for (int64_t i = 0; i < plane; ++i) sum += xp[i];
        py[pl] = static_cast<T>(sum / static_cast<double>(plane));
      }
    }
  }
  bool max_;
};

}  // namespace

void register_cpu_conv_kernels(KernelRegistry& r) {
  const std::vector<DataType> kFloats = {DataType::kFloat32, DataType::kFloat64};
  const std::vector<DataType> kMaxPoolTypes = {DataType::kFloat32, DataType::kFloat64, DataType::kInt8,
                                               DataType::kUInt8};
  auto add = [&](const char* op, const std::vector<DataType>& types, auto make) {
    r.add({.op_type = op, .dtypes = types, .create = [make](const Node& n) -> std::unique_ptr<Kernel> {
             return make(n);
           }});
  };
  // bfloat16 Conv multiplies on the bf16 GEMM (kernels/cpu/gemm_bf16.h); float16 comes through
  // kernels/cpu/half.cc's widening wrapper.
  add("Conv", {DataType::kFloat32, DataType::kFloat64, DataType::kBFloat16},
      [](const Node& n) { return std::make_unique<ConvKernel>(n); });
  add("MaxPool", kMaxPoolTypes, [](const Node& n) { return std::make_unique<PoolKernel>(n, PoolKernel::Mode::kMax); });
  add("AveragePool", kFloats,
      [](const Node& n) { return std::make_unique<PoolKernel>(n, PoolKernel::Mode::kAverage); });
  add("GlobalAveragePool", kFloats, [](const Node&) { return std::make_unique<GlobalPoolKernel>(false); });
  add("GlobalMaxPool", kFloats, [](const Node&) { return std::make_unique<GlobalPoolKernel>(true); });
}

}  // namespace otter
