// CPU kernels of InstanceNormalization, MeanVarianceNormalization and LpNormalization
// (graph/ops/normalization.cc): each group of X (the kept axes' positions) is normalised by the
// shared group algorithm of kernels/common/normalize.h, groups split across threads.
#include "kernels/common/normalize.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/shape_util.h"

namespace otter {
namespace {

// What a node normalises over: the reduced-axis flags for X's rank, its mode and epsilon.
struct NormSpec {
  NormMode mode = NormMode::kMeanVar;
  double eps = 0;
  bool affine = false;  // InstanceNormalization: scale and bias per channel (axis 1)
};

NormSpec spec_of(const Node& n) {
  NormSpec s;
  if (n.op_type() == "InstanceNormalization") {
    s.eps = n.attr_f("epsilon", 1e-5f);
    s.affine = true;
  } else if (n.op_type() == "MeanVarianceNormalization") {
    s.eps = 1e-9;  // the epsilon of the ONNX function body
  } else {
    const int64_t p = n.attr_i("p", 2);
    if (p != 1 && p != 2) fail(n.describe(), ": attribute 'p' must be 1 or 2, got ", p);
    s.mode = p == 1 ? NormMode::kL1 : NormMode::kL2;
  }
  return s;
}

// The axes a node reduces: all from 2 on (InstanceNormalization, `axes` empty), or those listed.
std::vector<int64_t> axes_of(const Node& n) {
  if (n.op_type() == "InstanceNormalization") return {};
  if (n.op_type() == "MeanVarianceNormalization") return n.attr_ints("axes", {0, 2, 3});
  return {n.attr_i("axis", -1)};
}

// The reduced-axis flags for input rank r (fails naming the node).
std::vector<bool> reduced_axes(const KernelContext& ctx, const std::vector<int64_t>& axes, int64_t r) {
  if (r > kMaxNormRank) ctx.error(str_cat("input rank ", r, " is above ", kMaxNormRank));
  std::vector<bool> red(static_cast<size_t>(r), axes.empty());
  if (axes.empty()) {
    if (r < 3) ctx.error(str_cat("input must have rank >= 3 (N, C, spatial...), got rank ", r));
    red[0] = red[1] = false;
  }
  for (int64_t a : axes) red[cpu::normalize_axis(ctx, a, r)] = true;
  return red;
}

class NormalizeKernel : public Kernel {
 public:
  explicit NormalizeKernel(const Node& n) : axes_(axes_of(n)), spec_(spec_of(n)) {}
  void run(KernelContext& ctx) override {
    const Tensor& x = ctx.input(0);
    const NormGeom g = make_norm_geom(x.dims(), reduced_axes(ctx, axes_, x.rank()));
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
  std::vector<int64_t> axes_;
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
