// CPU kernels of InstanceNormalization, MeanVarianceNormalization, LpNormalization and
// GroupNormalization (graph/ops/normalization.cc): each group of X (the kept axes' positions) is
// normalised by the shared group algorithm of kernels/common/normalize.h (GroupNormalization: each
// [sample, channel group] row by group_norm_row), groups split across threads, float32 loops in the
// CPU's widest ISA variant (kernels/cpu/isa.h).
#include <type_traits>

#include "kernels/common/normalize.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/isa.h"
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
            cpu::isa_dispatch_if<std::is_same_v<S, float>>([&] {
              for (int64_t k = b; k < e; ++k)
                normalize_group(g, k, x.data<S>(), y.data<S>(), spec_.mode, spec_.eps, sc, bi, channels);
            });
          },
          g.members);
    });
  }

 private:
  NormSpec spec_;
};

// GroupNormalization {num_groups, epsilon}: scale and bias [num_groups] before opset 21, [C] from 21.
class GroupNormKernel : public Kernel {
 public:
  explicit GroupNormKernel(const Node& n)
      : groups_(n.attr_i("num_groups", 0)), eps_(n.attr_f("epsilon", 1e-5f)), per_channel_(n.opset() >= 21) {
    if (groups_ <= 0) fail(n.describe(), ": attribute 'num_groups' must be positive, got ", groups_);
  }
  void run(KernelContext& ctx) override {
    const Tensor& x = ctx.input(0);
    if (x.rank() < 2) ctx.error(str_cat("input X must have rank >= 2 (N, C, ...), got ", x.describe()));
    const int64_t n = x.dims()[0], c = x.dims()[1];
    if (c % groups_ != 0)
      ctx.error(str_cat("the channels of X (", c, ") are not divisible by num_groups (", groups_, ")"));
    const int64_t len = per_channel_ ? c : groups_;
    for (int i = 1; i <= 2; ++i)
      if (ctx.input(i).dtype() != x.dtype() || ctx.input(i).dims() != std::vector<int64_t>{len})
        ctx.error(str_cat("input ", i, " (", i == 1 ? "scale" : "bias", ") must be ", dtype_name(x.dtype()), "[", len,
                          "], got ", ctx.input(i).describe()));
    Tensor& y = ctx.allocate_output(0, x.dtype(), x.dims());
    if (x.numel() == 0) return;
    const int64_t spatial = x.numel() / (n * c), members = c / groups_ * spatial;
    cpu::visit_float(x.dtype(), [&](auto tag) {
      using S = typename decltype(tag)::type;
      const S *sc = ctx.input(1).data<S>(), *bi = ctx.input(2).data<S>();
      cpu::parallel_ranges(
          n * groups_,
          [&](int64_t b, int64_t e) {
            cpu::isa_dispatch_if<std::is_same_v<S, float>>([&] {
              for (int64_t r = b; r < e; ++r)
                group_norm_row(x.data<S>(), y.data<S>(), r, groups_, members, spatial, eps_, sc, bi, per_channel_);
            });
          },
          members);
    });
  }

 private:
  int64_t groups_;
  double eps_;
  bool per_channel_;
};

}  // namespace

void register_cpu_normalize_kernels(KernelRegistry& r) {
  const std::vector<DataType> kFloats = {DataType::kFloat32, DataType::kFloat64, DataType::kFloat16,
                                         DataType::kBFloat16};
  for (const char* op : {"InstanceNormalization", "MeanVarianceNormalization", "LpNormalization"})
    r.add({.op_type = op, .dtypes = kFloats, .create = node_kernel<NormalizeKernel>()});
  r.add({.op_type = "GroupNormalization", .dtypes = kFloats, .create = node_kernel<GroupNormKernel>()});
}

}  // namespace otter
