// CUDA kernels of InstanceNormalization, MeanVarianceNormalization and LpNormalization
// (graph/ops/normalization.cc): one thread per group runs the group algorithm the CPU kernels also
// run (kernels/common/normalize.h), in double.
#include "kernels/common/normalize.h"
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/cuda_kernels.h"

namespace otter::cuda {
namespace {

template <typename S>
__global__ void normalize_kernel(NormGeom g, const S* x, S* y, NormMode mode, double eps, const S* scale, const S* bias,
                                 int64_t channels) {
  OTTER_GRID_STRIDE(k, g.groups) { normalize_group(g, k, x, y, mode, eps, scale, bias, channels); }
}

class NormalizeKernel : public Kernel {
 public:
  explicit NormalizeKernel(const Node& n) : spec_(norm_spec(n)) {}
  void run(KernelContext& ctx) override {
    const Tensor& x = ctx.input(0);
    const bool affine = spec_.affine;
    const std::vector<bool> red = norm_reduced_axes(ctx, spec_, x.rank());
    const NormGeom g = make_norm_geom(x.dims(), red);
    const int64_t channels = affine ? x.dims()[1] : 0;
    for (int i = 1; affine && i <= 2; ++i)
      if (ctx.input(i).dtype() != x.dtype() || ctx.input(i).dims() != std::vector<int64_t>{channels})
        ctx.error(str_cat("input ", i, " must be ", dtype_name(x.dtype()), "[", channels, "], got ",
                          ctx.input(i).describe()));
    Tensor& y = ctx.allocate_output(0, x.dtype(), x.dims());
    if (x.numel() == 0) return;
    dispatch_float(x.dtype(), [&](auto tag) {
      using S = typename decltype(tag)::type;
      normalize_kernel<S><<<grid_for(g.groups), kBlock, 0, stream_of(ctx)>>>(
          g, static_cast<const S*>(x.raw()), static_cast<S*>(y.raw()), spec_.mode, spec_.eps,
          affine ? static_cast<const S*>(ctx.input(1).raw()) : nullptr,
          affine ? static_cast<const S*>(ctx.input(2).raw()) : nullptr, channels);
      OTTER_CUDA_LAUNCH_CHECK();
    });
  }

 private:
  NormSpec spec_;
};

}  // namespace

KernelFactory normalize_kernel(const std::string& op) {
  if (op == "InstanceNormalization" || op == "MeanVarianceNormalization" || op == "LpNormalization")
    return node_kernel<NormalizeKernel>();
  fail("normalize_kernel: no CUDA kernel for ", op);
}

}  // namespace otter::cuda
