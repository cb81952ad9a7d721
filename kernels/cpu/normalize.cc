// CPU kernels of InstanceNormalization, MeanVarianceNormalization and LpNormalization
// (graph/ops/normalization.cc): each group of X (the kept axes' positions) is normalised by the
// shared group algorithm of kernels/common/normalize.h, groups split across threads.
#include "kernels/common/normalize.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/shape_util.h"

namespace otter {
namespace {

class NormalizeKernel : public Kernel {
 public:
  explicit NormalizeKernel(const Node& n) : spec_(norm_spec(n)) {}
  void run(KernelContext& ctx) override {
    const Tensor& x = ctx.input(0);
    const NormGeom g = make_norm_geom(x.dims(), norm_reduced_axes(ctx, spec_, x.rank()));
    Tensor& y = ctx.allocate_output(0, x.dtype(), x.dims());
    const int64_t channels = spec_.affine ? x.dims()[1] : 0;
    if (spec_.affine) {
      for (int i = 1; i <= 2; ++i)
        if (ctx.input(i).dtype() != x.dtype() || ctx.input(i).dims() != std::vector<int64_t>{channels})
          ctx.error(str_cat("input ", i, " (", i == 1 ? "scale" : "B", ") must be ", dtype_name(x.dtype()), "[",
                            channels, "], got ", ctx.input(i).describe()));
    }
    if (x.numel() == 0) return;
    cpu::visit_float(x.dtype(), [&](auto tag) {
      using S = typename decltype(tag)::type;
      const S* sc = spec_.affine ? ctx.input(1).data<S>() : nullptr;
      const S* bi = spec_.affine ? ctx.input(2).data<S>() : nullptr;
      cpu::parallel_ranges(
          g.groups,
          [&](int64_t b, int64_t e) {
            for (int64_t k = b; k < e; ++k)
              normalize_group(g, k, x.data<S>(), y.data<S>(), spec_.mode, spec_.eps, sc, bi, channels);
          },
          g.members);
    });
  }

 private:
  NormSpec spec_;
};

}  // namespace

void register_cpu_normalize_kernels(KernelRegistry& r) {
  const std::vector<DataType> kFloats = {DataType::kFloat32, DataType::kFloat64, DataType::kFloat16,
                                         DataType::kBFloat16};
  for (const char* op : {"InstanceNormalization", "MeanVarianceNormalization", "LpNormalization"})
    r.add({.op_type = op, .dtypes = kFloats, .create = node_kernel<NormalizeKernel>()});
}

}  // namespace otter
