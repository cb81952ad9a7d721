// CPU kernels of the along-one-axis ops (graph/ops/scan.cc, graph/ops/integer.cc): CumSum, ArgMax,
// ArgMin and Hardmax. X is viewed as [outer, len, inner]; each of the outer * inner lines runs the
// kernels/common/scan.h.
#include "kernels/common/scan.h"
#include "graph/op_table.h"
#include "kernels/cpu/broadcast.h"
#include "kernels/cpu/cpu_kernels.h"

namespace otter {
namespace {

// The [outer, len, inner] view of dims around `axis` (possibly negative); fails naming the node.
// The line view around axis (possibly negative); fails naming the node when out of range.
AxisLines lines_around(const KernelContext& ctx, const std::vector<int64_t>& dims, int64_t axis) {
  const int64_t rank = static_cast<int64_t>(dims.size());
  if (axis < -rank || axis >= rank) ctx.error(str_cat("axis ", axis, " is out of range for rank ", rank));
  return axis_lines(dims, axis < 0 ? axis + rank : axis);
}

// Calls f(line index, offset of its first element) for every line, split across threads.
template <typename F>
void for_lines(const AxisLines& l, F f) {
  cpu::parallel_ranges(
      l.outer * l.inner,
      [&](int64_t b, int64_t e) {
        for (int64_t k = b; k < e; ++k) f(k, l.base(k));
      },
      l.len);
}

class CumSumKernel : public Kernel {
 public:
  explicit CumSumKernel(const Node& n)
      : exclusive_(n.attr_i("exclusive", 0) != 0), reverse_(n.attr_i("reverse", 0) != 0) {}
  void run(KernelContext& ctx) override {
    const Tensor& x = ctx.input(0);
    const Tensor& a = ctx.input(1);
    if (a.numel() != 1) ctx.error(str_cat("input 1 (axis) must hold one value, got ", a.describe()));
    const AxisLines l = lines_around(ctx, x.dims(), a.to_int64_vector()[0]);
    Tensor& y = ctx.allocate_output(0, x.dtype(), x.dims());
    if (x.numel() == 0) return;
    cpu::visit_numeric(x.dtype(), [&](auto tag) {
      using S = typename decltype(tag)::type;
      const S* px = x.data<S>();
      S* py = y.data<S>();
      for_lines(l, [&](int64_t, int64_t o) { cumsum_line(px + o, py + o, l.len, l.inner, exclusive_, reverse_); });
    });
  }

 private:
  bool exclusive_, reverse_;
};

class ArgExtremeKernel : public Kernel {
 public:
  ArgExtremeKernel(const Node& n, bool is_max)
      : is_max_(is_max),
        axis_(n.attr_i("axis", 0)),
        keepdims_(n.attr_i("keepdims", 1) != 0),
        last_(n.attr_i("select_last_index", 0) != 0) {}
  void run(KernelContext& ctx) override {
    const Tensor& x = ctx.input(0);
    const AxisLines l = lines_around(ctx, x.dims(), axis_);
    if (l.len == 0)
      ctx.error(str_cat("cannot take the arg", is_max_ ? "max" : "min", " of an empty axis of ", x.describe()));
    const int64_t axis = axis_ < 0 ? axis_ + x.rank() : axis_;
    Tensor& y = ctx.allocate_output(0, DataType::kInt64, arg_output_dims(x.dims(), axis, keepdims_));
    int64_t* py = y.data<int64_t>();
    cpu::visit_numeric(x.dtype(), [&](auto tag) {
      using S = typename decltype(tag)::type;
      const S* px = x.data<S>();
      for_lines(l, [&](int64_t k, int64_t o) { py[k] = arg_extreme_line(px + o, l.len, l.inner, is_max_, last_); });
    });
  }

 private:
  bool is_max_;
  int64_t axis_;
  bool keepdims_, last_;
};

class HardmaxKernel : public Kernel {
 public:
  explicit HardmaxKernel(const Node& n) : axis_(n.attr_i("axis", -1)) {}
  void run(KernelContext& ctx) override {
    const Tensor& x = ctx.input(0);
    const AxisLines l = lines_around(ctx, x.dims(), axis_);
    Tensor& y = ctx.allocate_output(0, x.dtype(), x.dims());
    if (x.numel() == 0) return;
    cpu::visit_float(x.dtype(), [&](auto tag) {
      using S = typename decltype(tag)::type;
      const S* px = x.data<S>();
      S* py = y.data<S>();
      for_lines(l, [&](int64_t, int64_t o) { hardmax_line(px + o, py + o, l.len, l.inner); });
    });
  }

 private:
  int64_t axis_;
};

void add(KernelRegistry& r, const char* op, int since, KernelFactory f) {
  KernelDef d;
  d.op_type = op;
  d.since_version = since;
  d.until_version = kMaxOnnxOpset;
  d.dtypes = {DataType::kFloat32, DataType::kFloat64, DataType::kFloat16, DataType::kBFloat16,
              DataType::kInt64,   DataType::kInt32,   DataType::kInt8,    DataType::kUInt8};
  d.create = std::move(f);
  r.add(std::move(d));
}

}  // namespace

void register_cpu_scan_kernels(KernelRegistry& r) {
  add(r, "CumSum", 14, [](const Node& n) -> std::unique_ptr<Kernel> { return std::make_unique<CumSumKernel>(n); });
  add(r, "ArgMax", 13,
      [](const Node& n) -> std::unique_ptr<Kernel> { return std::make_unique<ArgExtremeKernel>(n, true); });
  add(r, "ArgMin", 13,
      [](const Node& n) -> std::unique_ptr<Kernel> { return std::make_unique<ArgExtremeKernel>(n, false); });
  add(r, "Hardmax", 13, [](const Node& n) -> std::unique_ptr<Kernel> { return std::make_unique<HardmaxKernel>(n); });
}

}  // namespace otter
