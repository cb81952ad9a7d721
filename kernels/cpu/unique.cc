// CPU kernels of Unique and ReverseSequence (graph/ops/detect.cc), registered with the detection
// kernels (kernels/cpu/detect.cc). The CUDA backend runs them on host copies of their inputs
// (kernels/cuda/host_ops.cc).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>

#include "kernels/common/scan.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/shape_util.h"

namespace otter {
namespace {

// Three-way comparison of two values; NaN equals NaN and sorts after every number (numpy.unique).
template <typename C>
int compare_values(C a, C b) {
  if constexpr (std::is_floating_point_v<C>) {
    if (std::isnan(a) || std::isnan(b)) return std::isnan(a) == std::isnan(b) ? 0 : std::isnan(a) ? 1 : -1;
  }
  return a < b ? -1 : b < a ? 1 : 0;
}

// The groups of equal slices: each group's slice indices in increasing order.
struct Groups {
  std::vector<std::vector<int64_t>> members;
};

// Slices k of X viewed as [outer, len, inner] (slice k: elements (o, k, i), o-major), grouped by
// equality; groups in ascending lexicographic order when `sorted`, else by first occurrence.
template <typename S>
Groups group_slices(const S* px, const AxisLines& l, bool sorted) {
  auto cmp = [&](int64_t a, int64_t b) {
    for (int64_t o = 0; o < l.outer; ++o)
      for (int64_t i = 0; i < l.inner; ++i) {
        const int c = compare_values(load_value(px[(o * l.len + a) * l.inner + i]),
                                     load_value(px[(o * l.len + b) * l.inner + i]));
        if (c != 0) return c;
      }
    return 0;
  };
  std::vector<int64_t> order(static_cast<size_t>(l.len));
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return cmp(a, b) < 0; });
  Groups g;
  for (size_t k = 0; k < order.size(); ++k) {
    if (k == 0 || cmp(order[k - 1], order[k]) != 0) g.members.emplace_back();
    g.members.back().push_back(order[k]);  // stable sort: increasing indices within a group
  }
  if (!sorted)
    std::sort(g.members.begin(), g.members.end(), [](const auto& a, const auto& b) { return a[0] < b[0]; });
  return g;
}

class UniqueKernel : public Kernel {
 public:
  explicit UniqueKernel(const Node& n)
      : has_axis_(n.find_attr("axis") != nullptr), axis_(n.attr_i("axis", 0)), sorted_(n.attr_i("sorted", 1) != 0) {}
  void run(KernelContext& ctx) override {
    const Tensor& x = ctx.input(0);
    if (has_axis_ && x.rank() == 0) ctx.error("X must have rank >= 1 when 'axis' is given, got a scalar");
    const std::vector<int64_t> dims = has_axis_ ? x.dims() : std::vector<int64_t>{x.numel()};
    const int64_t axis = has_axis_ ? cpu::normalize_axis(ctx, axis_, x.rank()) : 0;
    const AxisLines l = axis_lines(dims, axis);
    Groups g;
    cpu::visit_all(x.dtype(), [&](auto tag) {
      using S = typename decltype(tag)::type;
      g = group_slices(x.data<S>(), l, sorted_);
    });
    const int64_t nu = static_cast<int64_t>(g.members.size());
    std::vector<int64_t> yd = dims;
    yd[axis] = nu;
    Tensor& y = ctx.allocate_output(0, x.dtype(), yd);
    const size_t row = static_cast<size_t>(l.inner) * dtype_size(x.dtype());
    const char* src = static_cast<const char*>(x.raw());
    char* dst = static_cast<char*>(y.raw());
    for (int64_t o = 0; o < l.outer; ++o)
      for (int64_t u = 0; u < nu; ++u)
        std::memcpy(dst + (o * nu + u) * row, src + (o * l.len + g.members[u][0]) * row, row);
    auto fill = [&](int i, int64_t len, auto&& value) {
      if (!ctx.has_output(i)) return;
      int64_t* p = ctx.allocate_output(i, DataType::kInt64, {len}).template data<int64_t>();
      for (int64_t u = 0; u < nu; ++u) value(p, u);
    };
    fill(1, nu, [&](int64_t* p, int64_t u) { p[u] = g.members[u][0]; });
    fill(2, l.len, [&](int64_t* p, int64_t u) {
      for (int64_t k : g.members[u]) p[k] = u;
    });
    fill(3, nu, [&](int64_t* p, int64_t u) { p[u] = static_cast<int64_t>(g.members[u].size()); });
  }

 private:
  bool has_axis_;
  int64_t axis_;
  bool sorted_;
};

class ReverseSequenceKernel : public Kernel {
 public:
  explicit ReverseSequenceKernel(const Node& n)
      : batch_axis_(n.attr_i("batch_axis", 1)), time_axis_(n.attr_i("time_axis", 0)) {}
  void run(KernelContext& ctx) override {
    const Tensor& x = ctx.input(0);
    if (x.rank() < 2) ctx.error(str_cat("input must have rank >= 2, got ", x.describe()));
    const std::vector<int64_t> lens = cpu::int_input(ctx, 1, "sequence_lens");
    const int64_t nb = x.dims()[batch_axis_], nt = x.dims()[time_axis_];
    if (static_cast<int64_t>(lens.size()) != nb)
      ctx.error(str_cat("sequence_lens has ", lens.size(), " entries, the batch axis ", batch_axis_, " of input ",
                        x.describe(), " has ", nb));
    for (int64_t b = 0; b < nb; ++b)
      if (lens[b] < 0 || lens[b] > nt)
        ctx.error(str_cat("sequence_lens[", b, "] = ", lens[b], " is outside [0, ", nt, "] (time axis ", time_axis_,
                          " of input ", x.describe(), ")"));
    Tensor& out = ctx.allocate_output(0, x.dtype(), x.dims());
    if (out.numel() == 0) return;
    const size_t row = static_cast<size_t>(x.numel() / (nb * nt)) * dtype_size(x.dtype());
    const char* src = static_cast<const char*>(x.raw());
    char* dst = static_cast<char*>(out.raw());
    // Element (b, t) of axes 0 and 1 starts row (b, t) in batch-major or time-major order.
    auto at = [&](int64_t b, int64_t t) { return static_cast<size_t>(batch_axis_ == 0 ? b * nt + t : t * nb + b) * row; };
    for (int64_t b = 0; b < nb; ++b)
      for (int64_t t = 0; t < nt; ++t) std::memcpy(dst + at(b, t), src + at(b, t < lens[b] ? lens[b] - 1 - t : t), row);
  }

 private:
  int64_t batch_axis_, time_axis_;
};

}  // namespace

void register_cpu_unique_kernels(KernelRegistry& r) {
  cpu::add_any_type(r, "Unique", node_kernel<UniqueKernel>());
  cpu::add_any_type(r, "ReverseSequence", node_kernel<ReverseSequenceKernel>());
}

}  // namespace otter
