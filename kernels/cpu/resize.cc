// CPU kernels of Resize (graph/ops/resize.cc) and its gradient ai.otter.ResizeGrad(dY, shape,
// roi?, scales?, sizes?): each output element sums its weighted taps (kernels/common/resize.h);
// the gradient adds dY times each tap's weight into the input position, in output order.
#include <cmath>
#include <cstring>

#include "graph/op_table.h"
#include "kernels/common/resize.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/shape_util.h"

namespace otter {
namespace {

struct CpuResize {
  static std::vector<int64_t> ints(const KernelContext& ctx, int i, const char* what) {
    return cpu::int_input(ctx, i, what);
  }
  static const Tensor& host(const KernelContext& ctx, int i) { return ctx.input(i); }
  static void resize(KernelContext&, const ResizeGeom& g, const Tensor& x, Tensor& y) {
    cpu::visit_numeric(x.dtype(), [&](auto tag) {
      using S = typename decltype(tag)::type;
      const S* px = x.data<S>();
      S* py = y.data<S>();
      cpu::parallel_ranges(
          y.numel(),
          [&](int64_t b, int64_t e) {
            for (int64_t o = b; o < e; ++o) {
              double acc = 0;
              const bool in = resize_visit(
                  g, o, [&](int64_t off, double w) { acc += w * static_cast<double>(load_value(px[off])); });
              if (!in) acc = g.extrapolation;
              if constexpr (std::is_integral_v<S>) acc = std::nearbyint(acc);
              py[o] = store_value<S>(static_cast<compute_type<S>>(acc));
            }
          },
          16);
    });
  }
  static void resize_grad(KernelContext&, const ResizeGeom& g, const Tensor& dy, Tensor& dx) {
    std::vector<double> acc(static_cast<size_t>(dx.numel()), 0.0);
    cpu::visit_float(dy.dtype(), [&](auto tag) {
      using S = typename decltype(tag)::type;
      const S* pdy = dy.data<S>();
      for (int64_t o = 0; o < dy.numel(); ++o) {
        const double v = static_cast<double>(load_value(pdy[o]));
        resize_visit(g, o, [&](int64_t off, double w) { acc[off] += w * v; });
      }
      S* pdx = dx.data<S>();
      for (int64_t i = 0; i < dx.numel(); ++i) pdx[i] = store_value<S>(static_cast<compute_type<S>>(acc[i]));
    });
  }
};

}  // namespace

void register_cpu_resize_kernels(KernelRegistry& r) {
  r.add({.op_type = "Resize", .create = node_kernel<ResizeKernelT<CpuResize, false>>()});
  r.add({.domain = kOtterDomain, .op_type = "ResizeGrad", .create = node_kernel<ResizeKernelT<CpuResize, true>>()});
}

}  // namespace otter
