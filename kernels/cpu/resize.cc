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

std::vector<double> doubles_of(const KernelContext& ctx, int i) {
  std::vector<double> v;
  if (!ctx.has_input(i)) return v;
  const Tensor& t = ctx.input(i);
  for (int64_t k = 0; k < t.numel(); ++k) v.push_back(t.get_as_double(k));
  return v;
}

// The geometry from the input dims `in` and inputs roi, scales, sizes at first_param...+2.
ResizeGeom geom_of(const KernelContext& ctx, const ResizeAttrs& a, const std::vector<int64_t>& in, int first_param) {
  std::vector<int64_t> sizes;
  if (ctx.has_input(first_param + 2)) sizes = cpu::int_input(ctx, first_param + 2, "sizes");
  ResizeGeom g;
  std::string e = make_resize_geom(a, in, doubles_of(ctx, first_param), doubles_of(ctx, first_param + 1), sizes, &g);
  if (!e.empty()) ctx.error(str_cat(e, " (input dims ", dims_to_string(in), ")"));
  return g;
}

std::vector<int64_t> out_dims(const ResizeGeom& g) { return std::vector<int64_t>(g.out, g.out + g.rank); }

class ResizeKernel : public Kernel {
 public:
  explicit ResizeKernel(const Node& n) : a_(resize_attrs(n)) {}
  void run(KernelContext& ctx) override {
    const Tensor& x = ctx.input(0);
    const ResizeGeom g = geom_of(ctx, a_, x.dims(), 1);
    Tensor& y = ctx.allocate_output(0, x.dtype(), out_dims(g));
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

 private:
  ResizeAttrs a_;
};

// ResizeGrad(dY, shape, roi?, scales?, sizes?) -> dX of `shape`.
class ResizeGradKernel : public Kernel {
 public:
  explicit ResizeGradKernel(const Node& n) : a_(resize_attrs(n)) {}
  void run(KernelContext& ctx) override {
    const Tensor& dy = ctx.input(0);
    const std::vector<int64_t> in = cpu::int_input(ctx, 1, "shape");
    const ResizeGeom g = geom_of(ctx, a_, in, 2);
    if (dy.dims() != out_dims(g))
      ctx.error(str_cat("dY ", dy.describe(), " does not match the forward output ", dims_to_string(out_dims(g))));
    Tensor& dx = ctx.allocate_output(0, dy.dtype(), in);
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

 private:
  ResizeAttrs a_;
};

}  // namespace

void register_cpu_resize_kernels(KernelRegistry& r) {
  r.add({.op_type = "Resize", .create = node_kernel<ResizeKernel>()});
  r.add({.domain = kOtterDomain, .op_type = "ResizeGrad", .create = node_kernel<ResizeGradKernel>()});
}

}  // namespace otter
