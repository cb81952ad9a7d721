// CUDA pooling kernels: MaxPool (with the Indices output, storage_order, dilations, ceil_mode) and
// AveragePool (count_include_pad) over 1 to 3 spatial axes, one thread per output element with the
// same window arithmetic as the CPU kernel; GlobalAveragePool as a reduction; MaxPoolGrad and
// AveragePoolGrad gathered per input element over the windows covering it (deterministic).
#include <cmath>

#include "kernels/common/window.h"
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/cuda_kernels.h"

namespace otter::cuda {
namespace {

using window::ceil_div;
using window::floor_div;

// Spatial geometry padded to three axes (leading axes of size 1).
struct PoolGeometry : window::Window3 {
  int64_t in_plane, out_plane;
};

OTTER_HD int64_t clampi(int64_t v, int64_t lo, int64_t hi) { return v < lo ? lo : (v > hi ? hi : v); }

// Along axis j for output position o: kernel positions [lo, hi) read the input; `padded` counts
// those inside the padded extent (the divisor of count_include_pad).
struct AxisWindow {
  int64_t start, lo, hi, padded;
};
__device__ inline AxisWindow axis_window(const PoolGeometry& g, int j, int64_t o) {
  AxisWindow w;
  w.start = o * g.s[j] - g.pb[j];
  w.lo = clampi(ceil_div(-w.start, g.d[j]), 0, g.k[j]);
  w.hi = clampi(floor_div(g.in[j] - 1 - w.start, g.d[j]) + 1, w.lo, g.k[j]);
  const int64_t plo = clampi(ceil_div(-g.pb[j] - w.start, g.d[j]), 0, g.k[j]);
  const int64_t phi = clampi(floor_div(g.in[j] + g.pe[j] - 1 - w.start, g.d[j]) + 1, plo, g.k[j]);
  w.padded = phi - plo;
  return w;
}

// NaN propagates (the first NaN wins), as in PyTorch; `idx` is -1 for an empty window.
template <typename S>
__global__ void max_pool_kernel(int64_t n, const S* x, S* y, int64_t* indices, PoolGeometry g, bool col_major) {
  OTTER_GRID_STRIDE(i, n) {
    const int64_t pl = i / g.out_plane, oi = i % g.out_plane;
    const int64_t o2 = oi % g.out[2], o1 = (oi / g.out[2]) % g.out[1], o0 = oi / (g.out[2] * g.out[1]);
    const AxisWindow w0 = axis_window(g, 0, o0), w1 = axis_window(g, 1, o1), w2 = axis_window(g, 2, o2);
    const S* xp = x + pl * g.in_plane;
    float best = -INFINITY;
    int64_t bi = -1;
    for (int64_t k0 = w0.lo; k0 < w0.hi; ++k0) {
      const int64_t i0 = w0.start + k0 * g.d[0];
      for (int64_t k1 = w1.lo; k1 < w1.hi; ++k1) {
        const int64_t i1 = w1.start + k1 * g.d[1];
        for (int64_t k2 = w2.lo; k2 < w2.hi; ++k2) {
          const int64_t i2 = w2.start + k2 * g.d[2];
          const float v = load_value(xp[(i0 * g.in[1] + i1) * g.in[2] + i2]);
          if (v > best || v != v) {
            if (v != v && best != best) continue;
            best = v;
            bi = col_major ? i0 + g.in[0] * (i1 + g.in[1] * i2) : (i0 * g.in[1] + i1) * g.in[2] + i2;
          }
        }
      }
    }
    y[i] = store_value<S>(best);
    if (indices) indices[i] = bi < 0 ? -1 : pl * g.in_plane + bi;
  }
}

template <typename S>
__global__ void avg_pool_kernel(int64_t n, const S* x, S* y, PoolGeometry g, bool count_include_pad) {
  OTTER_GRID_STRIDE(i, n) {
    const int64_t pl = i / g.out_plane, oi = i % g.out_plane;
    const int64_t o2 = oi % g.out[2], o1 = (oi / g.out[2]) % g.out[1], o0 = oi / (g.out[2] * g.out[1]);
    const AxisWindow w0 = axis_window(g, 0, o0), w1 = axis_window(g, 1, o1), w2 = axis_window(g, 2, o2);
    const S* xp = x + pl * g.in_plane;
    double sum = 0;
    for (int64_t k0 = w0.lo; k0 < w0.hi; ++k0) {
      const int64_t i0 = w0.start + k0 * g.d[0];
      for (int64_t k1 = w1.lo; k1 < w1.hi; ++k1) {
        const int64_t i1 = w1.start + k1 * g.d[1];
        for (int64_t k2 = w2.lo; k2 < w2.hi; ++k2)
          sum += load_value(xp[(i0 * g.in[1] + i1) * g.in[2] + w2.start + k2 * g.d[2]]);
      }
    }
    const int64_t cnt = count_include_pad ? w0.padded * w1.padded * w2.padded
                                          : (w0.hi - w0.lo) * (w1.hi - w1.lo) * (w2.hi - w2.lo);
    y[i] = store_value<S>(static_cast<compute_type<S>>(cnt > 0 ? sum / static_cast<double>(cnt) : NAN));
  }
}

PoolGeometry pool_geometry(const window::Geometry& g) {
  PoolGeometry p{};
  static_cast<window::Window3&>(p) = window::to_3d(g);
  p.in_plane = g.in_plane;
  p.out_plane = g.out_plane;
  return p;
}

class PoolKernel : public Kernel {
 public:
  PoolKernel(const Node& n, bool max)
      : w_(n, true),
        max_(max),
        count_include_pad_(n.attr_i("count_include_pad", 0) != 0),
        storage_order_(n.attr_i("storage_order", 0)) {
    if (storage_order_ != 0 && storage_order_ != 1) fail(n.describe(), ": storage_order must be 0 or 1");
    if (!max && !w_.dilations.empty() && n.opset() < 19)
      for (int64_t v : w_.dilations)
        if (v != 1) fail(n.describe(), ": AveragePool has dilations only from opset 19");
  }

  void run(KernelContext& ctx) override {
    const Tensor& x = ctx.input(0);
    if (x.rank() < 3) ctx.error(str_cat("X must have rank >= 3 (N, C, spatial...), got ", x.describe()));
    const int nsp = static_cast<int>(x.rank()) - 2;
    if (nsp > 3) ctx.error(str_cat("pooling over ", nsp, " spatial axes is not supported (at most 3)"));
    if (static_cast<int>(w_.kernel.size()) != nsp)
      ctx.error(str_cat("kernel_shape has ", w_.kernel.size(), " values for ", nsp, " spatial axes of X ", x.describe()));
    const std::vector<int64_t> in(x.dims().begin() + 2, x.dims().end());
    const window::Geometry g = window::resolve_geometry(ctx, w_, in, w_.kernel);
    std::vector<int64_t> odims = {x.dim(0), x.dim(1)};
    odims.insert(odims.end(), g.out.begin(), g.out.end());
    Tensor& y = ctx.allocate_output(0, x.dtype(), odims);
    int64_t* indices = nullptr;
    if (max_ && ctx.has_output(1)) indices = static_cast<int64_t*>(ctx.allocate_output(1, DataType::kInt64, odims).raw());
    const int64_t n = y.numel();
    if (n == 0) return;
    const PoolGeometry pg = pool_geometry(g);
    dispatch_float(x.dtype(), [&](auto tag) {
      using S = typename decltype(tag)::type;
      const S* px = static_cast<const S*>(x.raw());
      S* py = static_cast<S*>(y.raw());
      if (max_) {
        max_pool_kernel<S><<<grid_for(n), kBlock, 0, stream_of(ctx)>>>(n, px, py, indices, pg, storage_order_ == 1);
      } else {
        avg_pool_kernel<S><<<grid_for(n), kBlock, 0, stream_of(ctx)>>>(n, px, py, pg, count_include_pad_);
      }
      OTTER_CUDA_LAUNCH_CHECK();
    });
  }

 private:
  window::WindowAttrs w_;
  bool max_, count_include_pad_;
  int64_t storage_order_;
};

// One value per (n, c) plane: the mean (GlobalAveragePool) or maximum (GlobalMaxPool) over the
// spatial axes.
class GlobalAveragePoolKernel : public Kernel {
 public:
  explicit GlobalAveragePoolKernel(const Node& n) : kind_(n.op_type() == "GlobalMaxPool" ? Reduction::kMax : Reduction::kMean) {}
  void run(KernelContext& ctx) override {
    const Tensor& x = ctx.input(0);
    if (x.rank() < 2) ctx.error(str_cat("X must have rank >= 2 (N, C, spatial...), got ", x.describe()));
    std::vector<int64_t> odims(x.dims().begin(), x.dims().begin() + 2);
    odims.resize(x.rank(), 1);
    Tensor& y = ctx.allocate_output(0, x.dtype(), odims);
    std::vector<bool> reduced(static_cast<size_t>(x.rank()), true);
    reduced[0] = reduced[1] = false;
    reduce_axes(ctx, kind_, x, y, reduced);
  }

 private:
  Reduction kind_;
};

// ---- gradients: gathered per input element (each window covering it), so no atomics -----------

// Calls f(o) for the flat output index (within the plane) of every window whose kernel covers
// input position (i0, i1, i2).
template <typename F>
__device__ void for_each_covering_window(const PoolGeometry& g, int64_t i0, int64_t i1, int64_t i2, F&& f) {
  const int64_t pos[3] = {i0, i1, i2};
  int64_t o[3][64];  // candidate outputs per axis (kernel extents above 64 are refused on the host)
  int cnt[3] = {0, 0, 0};
  for (int j = 0; j < 3; ++j)
    for (int64_t k = 0; k < g.k[j]; ++k) {
      const int64_t t = pos[j] + g.pb[j] - k * g.d[j];
      if (t < 0 || t % g.s[j] != 0 || t / g.s[j] >= g.out[j]) continue;
      o[j][cnt[j]++] = t / g.s[j];
    }
  for (int a = 0; a < cnt[0]; ++a)
    for (int b = 0; b < cnt[1]; ++b)
      for (int c = 0; c < cnt[2]; ++c) f((o[0][a] * g.out[1] + o[1][b]) * g.out[2] + o[2][c]);
}

// dX[i] = sum of dY over the windows whose first maximum (argmax, from the forward kernel) is i.
template <typename S>
__global__ void max_pool_grad_kernel(int64_t n, const S* dy, const int64_t* argmax, S* dx, PoolGeometry g) {
  OTTER_GRID_STRIDE(i, n) {
    const int64_t pl = i / g.in_plane, ii = i % g.in_plane;
    const int64_t i2 = ii % g.in[2], i1 = (ii / g.in[2]) % g.in[1], i0 = ii / (g.in[2] * g.in[1]);
    float sum = 0;
    for_each_covering_window(g, i0, i1, i2, [&](int64_t o) {
      const int64_t flat = pl * g.out_plane + o;
      if (argmax[flat] == i) sum += load_value(dy[flat]);
    });
    dx[i] = store_value<S>(sum);
  }
}

// dX[i] = sum over the windows covering i of dY / (the window's count of valid, or padded, positions).
template <typename S>
__global__ void avg_pool_grad_kernel(int64_t n, const S* dy, S* dx, PoolGeometry g, bool count_include_pad) {
  OTTER_GRID_STRIDE(i, n) {
    const int64_t pl = i / g.in_plane, ii = i % g.in_plane;
    const int64_t i2 = ii % g.in[2], i1 = (ii / g.in[2]) % g.in[1], i0 = ii / (g.in[2] * g.in[1]);
    float sum = 0;
    for_each_covering_window(g, i0, i1, i2, [&](int64_t o) {
      const int64_t o2 = o % g.out[2], o1 = (o / g.out[2]) % g.out[1], o0 = o / (g.out[2] * g.out[1]);
      const AxisWindow w0 = axis_window(g, 0, o0), w1 = axis_window(g, 1, o1), w2 = axis_window(g, 2, o2);
      const int64_t cnt = count_include_pad ? w0.padded * w1.padded * w2.padded
                                            : (w0.hi - w0.lo) * (w1.hi - w1.lo) * (w2.hi - w2.lo);
      if (cnt > 0) sum += load_value(dy[pl * g.out_plane + o]) / static_cast<float>(cnt);
    });
    dx[i] = store_value<S>(sum);
  }
}

// MaxPoolGrad(dY, X) / AveragePoolGrad(dY, X) with the forward's attributes.
class PoolGradKernel : public Kernel {
 public:
  PoolGradKernel(const Node& n, bool max)
      : w_(n, true), max_(max), count_include_pad_(n.attr_i("count_include_pad", 0) != 0) {
    for (int64_t k : w_.kernel)
      if (k > 64) fail(n.describe(), ": pooling gradients on CUDA take kernel extents up to 64");
  }

  void run(KernelContext& ctx) override {
    const Tensor& dy = ctx.input(0);
    const Tensor& x = ctx.input(1);
    const window::Geometry g = window::check_pool_grad(ctx, dy, x, w_, max_ ? "MaxPool" : "AveragePool");
    const std::vector<int64_t>& ydims = dy.dims();  // the pooling's output shape (checked)
    Tensor& dx = ctx.allocate_output(0, x.dtype(), x.dims());
    const int64_t n = x.numel();
    if (n == 0) return;
    const PoolGeometry pg = pool_geometry(g);
    const cudaStream_t s = stream_of(ctx);
    dispatch_float(x.dtype(), [&](auto tag) {
      using S = typename decltype(tag)::type;
      const S* pdy = static_cast<const S*>(dy.raw());
      S* pdx = static_cast<S*>(dx.raw());
      if (!max_) {
        avg_pool_grad_kernel<S><<<grid_for(n), kBlock, 0, s>>>(n, pdy, pdx, pg, count_include_pad_);
        OTTER_CUDA_LAUNCH_CHECK();
        return;
      }
      // The forward's argmax per output (row-major indices), then the gather.
      Tensor argmax = ctx.scratch(DataType::kInt64, ydims);
      Tensor y = ctx.scratch(x.dtype(), ydims);
      const int64_t m = dy.numel();
      if (m > 0) {
        max_pool_kernel<S><<<grid_for(m), kBlock, 0, s>>>(m, static_cast<const S*>(x.raw()), static_cast<S*>(y.raw()),
                                                          static_cast<int64_t*>(argmax.raw()), pg, false);
        OTTER_CUDA_LAUNCH_CHECK();
      }
      max_pool_grad_kernel<S><<<grid_for(n), kBlock, 0, s>>>(n, pdy, static_cast<const int64_t*>(argmax.raw()), pdx, pg);
      OTTER_CUDA_LAUNCH_CHECK();
    });
  }

 private:
  window::WindowAttrs w_;
  bool max_, count_include_pad_;
};

}  // namespace

KernelFactory pool_kernel(const std::string& op) {
  if (op == "MaxPool" || op == "AveragePool")
    return [max = op == "MaxPool"](const Node& n) -> std::unique_ptr<Kernel> { return std::make_unique<PoolKernel>(n, max); };
  if (op == "GlobalAveragePool" || op == "GlobalMaxPool")
    return [](const Node& n) -> std::unique_ptr<Kernel> { return std::make_unique<GlobalAveragePoolKernel>(n); };
  if (op == "MaxPoolGrad" || op == "AveragePoolGrad")
    return [max = op == "MaxPoolGrad"](const Node& n) -> std::unique_ptr<Kernel> {
      return std::make_unique<PoolGradKernel>(n, max);
    };
  fail("pool_kernel: no CUDA kernel for ", op);
}

}  // namespace otter::cuda
