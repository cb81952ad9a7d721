// CPU kernels for Conv (N-D, groups, im2col + BLAS GEMM, direct depthwise) and pooling (MaxPool
// with Indices, AveragePool, GlobalAveragePool, GlobalMaxPool).
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "kernels/common/window.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/dispatch.h"
#include "kernels/cpu/gemm.h"

namespace otter {
namespace {

using window::ceil_div;
using window::floor_div;
using window::Geometry;
using window::resolve_geometry;
using window::WindowAttrs;

// Per-axis tables for one kernel offset along axis j: output positions o in [lo, hi) read input
// o*s + off, the others fall into padding.
struct AxisRange {
  int64_t off, lo, hi;
};
AxisRange axis_range(const Geometry& g, int j, int64_t kj) {
  const int64_t off = kj * g.d[j] - g.pb[j];
  const int64_t lo = std::clamp<int64_t>(ceil_div(-off, g.s[j]), 0, g.out[j]);
  const int64_t hi = std::clamp<int64_t>(floor_div(g.in[j] - 1 - off, g.s[j]) + 1, lo, g.out[j]);
  return {off, lo, hi};
}

// For one kernel offset (kidx, a flat index over the kernel window), visits each output row (all
// spatial axes but the last fixed) with f(out_row, in_row, valid): out_row is the flat output index
// of the row's first element; in_row the flat input index that output position 0 of the row would
// read (only meaningful when valid). Output positions [lo, hi) of the last axis (from `last`) read
// in_row + o * s_last; the rest of a valid row, and all of an invalid row, are padding.
template <class F>
void for_each_row(const Geometry& g, int64_t kidx, const AxisRange& last, F&& f) {
  const int n = g.nsp;
  // Decompose kidx into per-axis kernel positions.
  int64_t kpos[8];
  for (int j = n - 1; j >= 0; --j) {
    kpos[j] = kidx % g.k[j];
    kidx /= g.k[j];
  }
  if (n == 1) {
    f(int64_t{0}, last.off, true);
    return;
  }
  int64_t off[8], in_stride[8];
  in_stride[n - 1] = 1;
  for (int j = n - 2; j >= 0; --j) in_stride[j] = in_stride[j + 1] * g.in[j + 1];
  for (int j = 0; j < n - 1; ++j) off[j] = kpos[j] * g.d[j] - g.pb[j];
  const int64_t olast = g.out[n - 1];
  const int64_t rows = g.out_plane / std::max<int64_t>(olast, 1);
  int64_t o[8] = {0};
  for (int64_t r = 0; r < rows; ++r) {
    bool valid = true;
    int64_t in_row = last.off;
    for (int j = 0; j < n - 1; ++j) {
      const int64_t i = o[j] * g.s[j] + off[j];
      if (i < 0 || i >= g.in[j]) { valid = false; break; }
      in_row += i * in_stride[j];
    }
    f(r * olast, in_row, valid);
    for (int j = n - 2; j >= 0; --j) {
      if (++o[j] < g.out[j]) break;
      o[j] = 0;
    }
  }
}

// im2col of one image group: col[(c*k_size + kidx), out_plane] for channels [0, channels) of x.
template <typename T>
void im2col(const Geometry& g, const T* x, int64_t channels, T* col, bool parallel) {
  const int64_t rows = channels * g.k_size, L = g.out_plane, olast = g.out[g.nsp - 1];
  const int64_t slast = g.s[g.nsp - 1];
  const int64_t klast = g.k[g.nsp - 1];
#pragma omp parallel for schedule(static) if (parallel && rows * L > 32768)
  for (int64_t row = 0; row < rows; ++row) {
    const int64_t c = row / g.k_size, kidx = row % g.k_size;
    const T* xc = x + c * g.in_plane;
    T* dst = col + row * L;
    const AxisRange last = axis_range(g, g.nsp - 1, kidx % klast);
    for_each_row(g, kidx, last, [&](int64_t out_row, int64_t in_row, bool valid) {
      T* d = dst + out_row;
      if (!valid) {
        std::fill(d, d + olast, T(0));
        return;
      }
      std::fill(d, d + last.lo, T(0));
      const T* s = xc + in_row;
      if (slast == 1) {
        std::copy(s + last.lo, s + last.hi, d + last.lo);
      } else {
        for (int64_t o = last.lo; o < last.hi; ++o) d[o] = s[o * slast];
      }
      std::fill(d + last.hi, d + olast, T(0));
    });
  }
}

// A growable scratch buffer kept by a kernel between runs (no allocation in the steady state).
class Scratch {
 public:
  template <typename T>
  T* get(size_t count) {
    const size_t words = (count * sizeof(T) + sizeof(double) - 1) / sizeof(double);
    if (buf_.size() < words) buf_.resize(words);
    return reinterpret_cast<T*>(buf_.data());
  }

 private:
  std::vector<double> buf_;
};

// ---- Conv ----------------------------------------------------------------------------------------

class ConvKernel : public Kernel {
 public:
  explicit ConvKernel(const Node& n) : w_(n, false), group_(n.attr_i("group", 1)) {
    if (group_ <= 0) fail(n.describe(), ": group must be positive");
  }

  void run(KernelContext& ctx) override {
    OTTER_DISPATCH_FLOAT(ctx.input(0).dtype(), T, [&] { compute<T>(ctx); });
  }

 private:
  template <typename T>
  void compute(KernelContext& ctx) {
    const Tensor& x = ctx.input(0);
    const Tensor& w = ctx.input(1);
    if (x.rank() < 3) ctx.error(str_cat("X must have rank >= 3 (N, C, spatial...), got ", x.describe()));
    if (w.rank() != x.rank())
      ctx.error(str_cat("W ", w.describe(), " must have the rank of X ", x.describe()));
    if (w.dtype() != x.dtype()) ctx.error(str_cat("W has type ", w.describe(), ", X ", x.describe()));
    const int nsp = static_cast<int>(x.rank()) - 2;
    if (nsp > 8) ctx.error("more than 8 spatial axes");
    const int64_t batch = x.dim(0), cin = x.dim(1), cout = w.dim(0), cg = w.dim(1);
    if (cin != cg * group_)
      ctx.error(str_cat("channel mismatch: X ", x.describe(), " has ", cin, " channels, W ", w.describe(),
                        " expects ", cg, " per group x ", group_, " groups"));
    if (cout % group_ != 0)
      ctx.error(str_cat("W ", w.describe(), ": ", cout, " output channels not divisible by group ", group_));
    std::vector<int64_t> in(x.dims().begin() + 2, x.dims().end());
    std::vector<int64_t> kernel(w.dims().begin() + 2, w.dims().end());
    if (!w_.kernel.empty() && w_.kernel != kernel)
      ctx.error(str_cat("kernel_shape ", dims_to_string(w_.kernel), " differs from W ", w.describe()));
    const T* pbias = nullptr;
    if (ctx.has_input(2)) {
      const Tensor& b = ctx.input(2);
      if (b.rank() != 1 || b.dim(0) != cout || b.dtype() != x.dtype())
        ctx.error(str_cat("bias ", b.describe(), " must be [", cout, "] of the type of X"));
      pbias = b.data<T>();
    }
    const Geometry g = resolve_geometry(ctx, w_, in, kernel);
    std::vector<int64_t> odims = {batch, cout};
    odims.insert(odims.end(), g.out.begin(), g.out.end());
    Tensor& y = ctx.allocate_output(0, x.dtype(), odims);
    const int64_t L = g.out_plane;
    if (batch == 0 || cout == 0 || L == 0) return;
    const T* px = x.data<T>();
    const T* pw = w.data<T>();
    T* py = y.data<T>();
    const int64_t mg = cout / group_, kc = cg * g.k_size;

    if (cg == 1 && mg <= 8) {  // depthwise (small channel multiplier): direct, no im2col
      depthwise<T>(g, px, pw, pbias, py, batch, cin, mg);
      return;
    }
    bool pointwise = true;  // 1x1, stride 1, no padding: X itself is the column matrix
    for (int j = 0; j < nsp; ++j)
      pointwise &= g.k[j] == 1 && g.s[j] == 1 && g.pb[j] == 0 && g.pe[j] == 0;

    const int64_t items = batch * group_;
    const bool small = cpu::gemm_is_small(mg, L, kc);
    auto init_bias = [&](T* yg, int64_t m0) {
      for (int64_t m = 0; m < mg; ++m) std::fill(yg + m * L, yg + (m + 1) * L, pbias ? pbias[m0 + m] : T(0));
    };
    const T gemm_beta = pbias ? T(1) : T(0);
    if (small && items > 1) {
      const int threads = omp_get_max_threads();
      T* cols = pointwise ? nullptr : scratch_.get<T>(static_cast<size_t>(threads) * kc * L);
#pragma omp parallel for schedule(dynamic)
      for (int64_t it = 0; it < items; ++it) {
        const int64_t nb = it / group_, gi = it % group_;
        const T* xg = px + (nb * cin + gi * cg) * g.in_plane;
        T* yg = py + (nb * cout + gi * mg) * L;
        const T* col = xg;
        if (!pointwise) {
          T* mine = cols + static_cast<size_t>(omp_get_thread_num()) * kc * L;
          im2col(g, xg, cg, mine, false);
          col = mine;
        }
        if (pbias) init_bias(yg, gi * mg);
        cpu::gemm<T>(false, false, mg, L, kc, T(1), pw + gi * mg * kc, col, gemm_beta, yg);
      }
    } else {
      T* cols = pointwise ? nullptr : scratch_.get<T>(static_cast<size_t>(kc) * L);
      for (int64_t it = 0; it < items; ++it) {
        const int64_t nb = it / group_, gi = it % group_;
        const T* xg = px + (nb * cin + gi * cg) * g.in_plane;
        T* yg = py + (nb * cout + gi * mg) * L;
        const T* col = xg;
        if (!pointwise) {
          im2col(g, xg, cg, cols, true);
          col = cols;
        }
        if (pbias) init_bias(yg, gi * mg);
        cpu::gemm<T>(false, false, mg, L, kc, T(1), pw + gi * mg * kc, col, gemm_beta, yg);
      }
    }
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
  Scratch scratch_;
};

// ---- pooling ------------------------------------------------------------------------------------

// Pooling geometry padded to three spatial axes (leading axes of size 1), with per-axis tables of
// the valid kernel positions for each output position.
struct Pool3 {
  int64_t in[3], out[3], s[3], d[3], pb[3];
  std::vector<int64_t> klo[3], khi[3], cnt_pad[3];  // valid k range; k count inside the padded extent
};

Pool3 make_pool3(const Geometry& g) {
  Pool3 p;
  const int shift = 3 - g.nsp;
  for (int j = 0; j < 3; ++j) {
    const int src = j - shift;
    const bool real = src >= 0;
    p.in[j] = real ? g.in[src] : 1;
    p.out[j] = real ? g.out[src] : 1;
    p.s[j] = real ? g.s[src] : 1;
    p.d[j] = real ? g.d[src] : 1;
    p.pb[j] = real ? g.pb[src] : 0;
    const int64_t k = real ? g.k[src] : 1, pe = real ? g.pe[src] : 0;
    p.klo[j].resize(p.out[j]);
    p.khi[j].resize(p.out[j]);
    p.cnt_pad[j].resize(p.out[j]);
    for (int64_t o = 0; o < p.out[j]; ++o) {
      const int64_t start = o * p.s[j] - p.pb[j];
      // k valid when 0 <= start + k*d < in
      const int64_t lo = std::clamp<int64_t>(ceil_div(-start, p.d[j]), 0, k);
      const int64_t hi = std::clamp<int64_t>(floor_div(p.in[j] - 1 - start, p.d[j]) + 1, lo, k);
      p.klo[j][o] = lo;
      p.khi[j][o] = hi;
      // positions inside [-pb, in + pe): the divisor of count_include_pad
      const int64_t plo = std::clamp<int64_t>(ceil_div(-p.pb[j] - start, p.d[j]), 0, k);
      const int64_t phi = std::clamp<int64_t>(floor_div(p.in[j] + pe - 1 - start, p.d[j]) + 1, plo, k);
      p.cnt_pad[j][o] = phi - plo;
    }
  }
  return p;
}

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
            const int64_t lo2 = p.klo[2][o2], hi2 = p.khi[2][o2];
            if (mode_ == Mode::kMax) {
              T best = std::numeric_limits<T>::has_infinity ? -std::numeric_limits<T>::infinity()
                                                            : std::numeric_limits<T>::lowest();
              int64_t bi = -1;
              for (int64_t k0 = p.klo[0][o0]; k0 < p.khi[0][o0]; ++k0) {
                const int64_t i0 = s0 + k0 * p.d[0];
                for (int64_t k1 = p.klo[1][o1]; k1 < p.khi[1][o1]; ++k1) {
                  const int64_t i1 = s1 + k1 * p.d[1];
                  const T* row = xp + (i0 * p.in[1] + i1) * p.in[2];
                  for (int64_t k2 = lo2; k2 < hi2; ++k2) {
                    const int64_t i2 = s2 + k2 * p.d[2];
                    const T v = row[i2];
                    if (v > best || v != v) {  // NaN propagates, as in PyTorch
                      if (v != v && best != best) continue;
                      best = v;
                      bi = col_major ? i0 + p.in[0] * (i1 + p.in[1] * i2) : (i0 * p.in[1] + i1) * p.in[2] + i2;
                    }
                  }
                }
              }
              yp[oi] = best;
              if (ip) ip[oi] = bi < 0 ? -1 : pl * in_plane + bi;
            } else {
              double sum = 0;
              for (int64_t k0 = p.klo[0][o0]; k0 < p.khi[0][o0]; ++k0) {
                const int64_t i0 = s0 + k0 * p.d[0];
                for (int64_t k1 = p.klo[1][o1]; k1 < p.khi[1][o1]; ++k1) {
                  const int64_t i1 = s1 + k1 * p.d[1];
                  const T* row = xp + (i0 * p.in[1] + i1) * p.in[2];
                  for (int64_t k2 = lo2; k2 < hi2; ++k2) sum += row[s2 + k2 * p.d[2]];
                }
              }
              const int64_t cnt =
                  count_include_pad_
                      ? p.cnt_pad[0][o0] * p.cnt_pad[1][o1] * p.cnt_pad[2][o2]
                      : (p.khi[0][o0] - p.klo[0][o0]) * (p.khi[1][o1] - p.klo[1][o1]) * (hi2 - lo2);
              yp[oi] = cnt > 0 ? static_cast<T>(sum / static_cast<double>(cnt))
                               : std::numeric_limits<T>::quiet_NaN();
            }
          }
        }
      }
    }
  }

  WindowAttrs w_;
  Mode mode_;
  bool count_include_pad_;
  int64_t storage_order_;
};

// GlobalAveragePool / GlobalMaxPool: one value per (n, c) plane.
class GlobalPoolKernel : public Kernel {
 public:
  explicit GlobalPoolKernel(bool max) : max_(max) {}
  void run(KernelContext& ctx) override {
    OTTER_DISPATCH_FLOAT(ctx.input(0).dtype(), T, [&] { compute<T>(ctx); });
  }

 private:
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
  r.add({"", "Conv", 11, 1 << 30, DeviceType::kCpu, kFloats, nullptr,
         [](const Node& n) -> std::unique_ptr<Kernel> { return std::make_unique<ConvKernel>(n); }});
  r.add({"", "MaxPool", 12, 1 << 30, DeviceType::kCpu, kMaxPoolTypes, nullptr,
         [](const Node& n) -> std::unique_ptr<Kernel> {
           return std::make_unique<PoolKernel>(n, PoolKernel::Mode::kMax);
         }});
  r.add({"", "AveragePool", 11, 1 << 30, DeviceType::kCpu, kFloats, nullptr,
         [](const Node& n) -> std::unique_ptr<Kernel> {
           return std::make_unique<PoolKernel>(n, PoolKernel::Mode::kAverage);
         }});
  r.add({"", "GlobalAveragePool", 1, 1 << 30, DeviceType::kCpu, kFloats, nullptr,
         [](const Node&) -> std::unique_ptr<Kernel> { return std::make_unique<GlobalPoolKernel>(false); }});
  r.add({"", "GlobalMaxPool", 1, 1 << 30, DeviceType::kCpu, kFloats, nullptr,
         [](const Node&) -> std::unique_ptr<Kernel> { return std::make_unique<GlobalPoolKernel>(true); }});
}

}  // namespace otter
