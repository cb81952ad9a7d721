// CPU kernels of LRN and LRNGrad (graph/ops/lrn_det.cc) over the shared element math of
// kernels/common/lrn.h, accumulated in double.
#include <algorithm>

#include "graph/op_table.h"
#include "kernels/common/lrn.h"
#include "kernels/cpu/cpu_kernels.h"

namespace otter {
namespace {

LrnParams lrn_params(const KernelContext& ctx) {
  const Node& n = ctx.node();
  const int64_t size = n.attr_i("size", 0);
  if (size < 1) ctx.error(str_cat("attribute 'size' must be positive, got ", size));
  return {n.attr_f("alpha", 1e-4f), n.attr_f("beta", 0.75f), n.attr_f("bias", 1.f), size};
}

// Calls f(n, c, inner position, T tag) for every element of X [N, C, ...] by dtype.
template <typename F>
void for_each_lrn(KernelContext& ctx, const Tensor& x, F&& f) {
  if (x.rank() < 2) ctx.error(str_cat("X ", x.describe(), " has no channel axis [N, C, ...]"));
  const int64_t N = x.dim(0), C = x.dim(1), inner = C == 0 ? 0 : x.numel() / std::max<int64_t>(N * C, 1);
  auto run = [&](auto tag) {
#pragma omp parallel for collapse(2) if (x.numel() > 32768)
    for (int64_t n = 0; n < N; ++n)
      for (int64_t s = 0; s < inner; ++s)
        for (int64_t c = 0; c < C; ++c) f(n * C * inner + s, C, inner, c, tag);
  };
  if (x.dtype() == DataType::kFloat32) run(float{});
  else if (x.dtype() == DataType::kFloat64) run(double{});
  else ctx.error(str_cat("no LRN kernel for ", x.describe()));
}

void lrn_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const LrnParams p = lrn_params(ctx);
  Tensor& y = ctx.allocate_output(0, x.dtype(), x.dims());
  for_each_lrn(ctx, x, [&](int64_t base, int64_t C, int64_t stride, int64_t c, auto tag) {
    using T = decltype(tag);
    y.data<T>()[base + c * stride] = static_cast<T>(lrn_element<double>(x.data<T>() + base, C, stride, c, p));
  });
}

void lrn_grad_kernel(KernelContext& ctx) {
  const Tensor& dy = ctx.input(0);
  const Tensor& x = ctx.input(1);
  if (dy.dims() != x.dims() || dy.dtype() != x.dtype())
    ctx.error(str_cat("dY ", dy.describe(), " does not match X ", x.describe()));
  const LrnParams p = lrn_params(ctx);
  Tensor& dx = ctx.allocate_output(0, x.dtype(), x.dims());
  for_each_lrn(ctx, x, [&](int64_t base, int64_t C, int64_t stride, int64_t c, auto tag) {
    using T = decltype(tag);
    dx.data<T>()[base + c * stride] =
        static_cast<T>(lrn_grad_element<double>(dy.data<T>() + base, x.data<T>() + base, C, stride, c, p));
  });
}

}  // namespace

void register_cpu_lrn_kernels(KernelRegistry& r) {
  const std::vector<DataType> floats = {DataType::kFloat32, DataType::kFloat64};
  r.add({.op_type = "LRN", .dtypes = floats, .create = simple_kernel(lrn_kernel)});
  r.add({.domain = kOtterDomain, .op_type = "LRNGrad", .dtypes = floats, .create = simple_kernel(lrn_grad_kernel)});
}

}  // namespace otter
