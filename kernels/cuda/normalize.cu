// CUDA kernels of InstanceNormalization, MeanVarianceNormalization and LpNormalization
// (graph/ops/normalization.cc): one thread per group runs the group algorithm the CPU kernels also
// run (kernels/common/normalize.h), in double.
#include "kernels/common/normalize.h"
#include "kernels/common/shape_params.h"
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
  explicit NormalizeKernel(const Node& n) : op_(n.op_type()) {
    if (op_ == "InstanceNormalization") {
      eps_ = n.attr_f("epsilon", 1e-5f);
    } else if (op_ == "MeanVarianceNormalization") {
      eps_ = 1e-9;
      axes_ = n.attr_ints("axes", {0, 2, 3});
    } else {
      const int64_t p = n.attr_i("p", 2);
      if (p != 1 && p != 2) fail(n.describe(), ": attribute 'p' must be 1 or 2, got ", p);
      mode_ = p == 1 ? NormMode::kL1 : NormMode::kL2;
      axes_ = {n.attr_i("axis", -1)};
    }
  }
  void run(KernelContext& ctx) override {
    const Tensor& x = ctx.input(0);
    const int64_t r = x.rank();
    if (r > kMaxNormRank) ctx.error(str_cat("input rank ", r, " is above ", kMaxNormRank));
    const bool affine = op_ == "InstanceNormalization";
    if (affine && r < 3) ctx.error(str_cat("input must have rank >= 3 (N, C, spatial...), got ", x.describe()));
    std::vector<bool> red(static_cast<size_t>(r), affine);
    if (affine) red[0] = red[1] = false;
    for (int64_t a : axes_) red[params::normalize_axis(ctx, a, r)] = true;
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
          g, static_cast<const S*>(x.raw()), static_cast<S*>(y.raw()), mode_, eps_,
          affine ? static_cast<const S*>(ctx.input(1).raw()) : nullptr,
          affine ? static_cast<const S*>(ctx.input(2).raw()) : nullptr, channels);
      OTTER_CUDA_LAUNCH_CHECK();
    });
  }

 private:
  std::string op_;
  NormMode mode_ = NormMode::kMeanVar;
  double eps_ = 0;
  std::vector<int64_t> axes_;
};

}  // namespace

KernelFactory normalize_kernel(const std::string& op) {
  if (op == "InstanceNormalization" || op == "MeanVarianceNormalization" || op == "LpNormalization")
    return node_kernel<NormalizeKernel>();
  fail("normalize_kernel: no CUDA kernel for ", op);
}

}  // namespace otter::cuda
