// CPU kernels of GridSample and ai.otter.GridSampleGrad (graph/ops/grid_sample.cc) over the shared
// tap arithmetic of kernels/common/grid_sample.h, in double. X and Grid may differ in float type.
// GridSampleGrad writes dX by planes (one (n, c) per iteration) and dGrid by output points, so
// neither scatters across threads and both are deterministic.
#include <algorithm>
#include <vector>

#include "graph/op_table.h"
#include "kernels/common/grid_sample.h"
#include "kernels/cpu/cpu_kernels.h"

namespace otter {
namespace {

constexpr int kMaxTaps = 64;  // 4 cubic taps on each of 3 axes

// The geometry of a node and its X and Grid; fails naming the node on a bad attribute or shape.
GridSampleGeom geometry(const KernelContext& ctx, const Tensor& x, const Tensor& grid) {
  const Node& n = ctx.node();
  GridSampleGeom g;
  const std::string mode = n.attr_s("mode", "linear"), pad = n.attr_s("padding_mode", "zeros");
  if (!grid_sample_mode(mode, &g.mode)) ctx.error(str_cat("unknown mode \"", mode, "\""));
  if (!grid_sample_padding(pad, &g.padding)) ctx.error(str_cat("unknown padding_mode \"", pad, "\""));
  g.align_corners = n.attr_i("align_corners", 0) != 0;
  if (x.rank() < 3 || x.rank() > 2 + kMaxGridSampleDims)
    ctx.error(str_cat("X ", x.describe(), " must have 1 to ", kMaxGridSampleDims, " spatial axes [N, C, D1, ...]"));
  g.r = static_cast<int>(x.rank() - 2);
  if (grid.rank() != x.rank() || grid.dim(0) != x.dim(0) || grid.dim(grid.rank() - 1) != g.r)
    ctx.error(str_cat("Grid ", grid.describe(), " must be [N, H1, ..., Hr, r] for X ", x.describe()));
  for (int d = 0; d < g.r; ++d) {
    g.in[d] = x.dim(d + 2);
    g.plane *= g.in[d];
  }
  return g;
}

// Output points per sample (H1 * ... * Hr) and the output dims [N, C, H1, ..., Hr].
int64_t points(const Tensor& grid, std::vector<int64_t>* y_dims, int64_t c) {
  int64_t p = 1;
  *y_dims = {grid.dim(0), c};
  for (int64_t d = 1; d + 1 < grid.rank(); ++d) {
    p *= grid.dim(d);
    y_dims->push_back(grid.dim(d));
  }
  return p;
}

// Calls f(X tag, Grid tag) with the tags of the float types of x and grid.
template <typename F>
void dispatch(const KernelContext& ctx, const Tensor& x, const Tensor& grid, F&& f) {
  auto with_grid = [&](auto xt) {
    if (grid.dtype() == DataType::kFloat32)
      f(xt, float{});
    else if (grid.dtype() == DataType::kFloat64)
      f(xt, double{});
    else
      ctx.error(str_cat("no GridSample kernel for Grid ", grid.describe()));
  };
  if (x.dtype() == DataType::kFloat32)
    with_grid(float{});
  else if (x.dtype() == DataType::kFloat64)
    with_grid(double{});
  else
    ctx.error(str_cat("no GridSample kernel for X ", x.describe()));
}

void grid_sample_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Tensor& grid = ctx.input(1);
  const GridSampleGeom g = geometry(ctx, x, grid);
  std::vector<int64_t> y_dims;
  const int64_t N = x.dim(0), C = x.dim(1), P = points(grid, &y_dims, C);
  Tensor& y = ctx.allocate_output(0, x.dtype(), y_dims);
  dispatch(ctx, x, grid, [&](auto xt, auto gt) {
    using T = decltype(xt);
    using G = decltype(gt);
    T* out = y.data<T>();
    if (g.plane == 0) {  // nothing to read: zeros
      std::fill(out, out + y.numel(), T(0));
      return;
    }
#pragma omp parallel for collapse(2) if (N * P * C > 32768)
    for (int64_t n = 0; n < N; ++n)
      for (int64_t p = 0; p < P; ++p) {
        GridSampleTaps<double> t;
        grid_sample_taps(g, grid.data<G>() + (n * P + p) * g.r, &t);
        int64_t off[kMaxTaps];
        double w[kMaxTaps];
        int k = 0;
        grid_sample_visit(g, t, [&](int64_t o, double wt, const double*) { off[k] = o, w[k++] = wt; });
        for (int64_t c = 0; c < C; ++c) {
          const T* xp = x.data<T>() + (n * C + c) * g.plane;
          double acc = 0;
          for (int i = 0; i < k; ++i) acc += w[i] * static_cast<double>(xp[off[i]]);
          out[(n * C + c) * P + p] = static_cast<T>(acc);
        }
      }
  });
}

// GridSampleGrad(dY, X, Grid) -> dX?, dGrid?.
void grid_sample_grad_kernel(KernelContext& ctx) {
  const Tensor& dy = ctx.input(0);
  const Tensor& x = ctx.input(1);
  const Tensor& grid = ctx.input(2);
  const GridSampleGeom g = geometry(ctx, x, grid);
  std::vector<int64_t> y_dims;
  const int64_t N = x.dim(0), C = x.dim(1), P = points(grid, &y_dims, C);
  if (dy.dims() != y_dims || dy.dtype() != x.dtype())
    ctx.error(str_cat("dY ", dy.describe(), " does not match GridSample's output ", dims_to_string(y_dims), " of ",
                      dtype_name(x.dtype())));
  Tensor* dx = ctx.has_output(0) ? &ctx.allocate_output(0, x.dtype(), x.dims()) : nullptr;
  Tensor* dgrid = ctx.has_output(1) ? &ctx.allocate_output(1, grid.dtype(), grid.dims()) : nullptr;
  dispatch(ctx, x, grid, [&](auto xt, auto gt) {
    using T = decltype(xt);
    using G = decltype(gt);
    const G* gp = grid.data<G>();
    const T* dyp = dy.data<T>();
    const T* xp = x.data<T>();
    if (dx) {
      T* out = dx->data<T>();
#pragma omp parallel for collapse(2) if (N * P * C > 32768)
      for (int64_t n = 0; n < N; ++n)
        for (int64_t c = 0; c < C; ++c) {
          std::vector<double> acc(static_cast<size_t>(g.plane), 0.0);
          for (int64_t p = 0; p < P && g.plane > 0; ++p) {
            GridSampleTaps<double> t;
            grid_sample_taps(g, gp + (n * P + p) * g.r, &t);
            const double d = static_cast<double>(dyp[(n * C + c) * P + p]);
            grid_sample_visit(g, t, [&](int64_t o, double w, const double*) { acc[o] += d * w; });
          }
          T* plane = out + (n * C + c) * g.plane;
          for (int64_t i = 0; i < g.plane; ++i) plane[i] = static_cast<T>(acc[i]);
        }
    }
    if (dgrid) {
      G* out = dgrid->data<G>();
#pragma omp parallel for collapse(2) if (N * P * C > 32768)
      for (int64_t n = 0; n < N; ++n)
        for (int64_t p = 0; p < P; ++p) {
          double acc[kMaxGridSampleDims] = {};
          GridSampleTaps<double> t;
          grid_sample_taps(g, gp + (n * P + p) * g.r, &t);
          for (int64_t c = 0; c < C && g.plane > 0 && g.mode != GridSampleMode::kNearest; ++c) {
            const T* xc = xp + (n * C + c) * g.plane;
            const double d = static_cast<double>(dyp[(n * C + c) * P + p]);
            grid_sample_visit(g, t, [&](int64_t o, double, const double* partial) {
              const double v = d * static_cast<double>(xc[o]);
              for (int e = 0; e < g.r; ++e) acc[e] += v * partial[e];
            });
          }
          for (int e = 0; e < g.r; ++e) out[(n * P + p) * g.r + (g.r - 1 - e)] = static_cast<G>(acc[e] * t.dxdn[e]);
        }
    }
  });
}

}  // namespace

void register_cpu_grid_sample_kernels(KernelRegistry& r) {
  const std::vector<DataType> floats = {DataType::kFloat32, DataType::kFloat64};
  r.add({.op_type = "GridSample", .dtypes = floats, .create = simple_kernel(grid_sample_kernel)});
  r.add({.domain = kOtterDomain,
         .op_type = "GridSampleGrad",
         .dtypes = floats,
         .create = simple_kernel(grid_sample_grad_kernel)});
}

}  // namespace otter
