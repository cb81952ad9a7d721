// CPU kernels of the along-one-axis ops (graph/ops/scan.cc, graph/ops/integer.cc): CumSum, ArgMax,
// ArgMin and Hardmax. X is viewed as [outer, len, inner]; each of the outer * inner lines runs the
// kernels/common/scan.h.
#include "kernels/common/scan.h"
#include "graph/op_table.h"
#include "kernels/cpu/broadcast.h"
#include "kernels/cpu/cpu_kernels.h"

namespace otter {
namespace {

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
  explicit CumSumKernel(const Node& n) : at_(n) {}
  void run(KernelContext& ctx) override {
    const Tensor& x = ctx.input(0);
    const AxisLines l = cumsum_lines(ctx, ctx.input(1).to_int64_vector());
    Tensor& y = ctx.allocate_output(0, x.dtype(), x.dims());
    if (x.numel() == 0) return;
    cpu::visit_numeric(x.dtype(), [&](auto tag) {
      using S = typename decltype(tag)::type;
      const S* px = x.data<S>();
      S* py = y.data<S>();
      for_lines(l,
                [&](int64_t, int64_t o) { cumsum_line(px + o, py + o, l.len, l.inner, at_.exclusive, at_.reverse); });
    });
  }

 private:
  CumSumAttrs at_;
};

class ArgExtremeKernel : public Kernel {
 public:
  ArgExtremeKernel(const Node& n, bool is_max) : at_(n, is_max) {}
  void run(KernelContext& ctx) override {
    const ArgExtremeShape s = resolve_arg_extreme(ctx, at_);
    const Tensor& x = ctx.input(0);
    const AxisLines& l = s.lines;
    Tensor& y = ctx.allocate_output(0, DataType::kInt64, s.out_dims);
    int64_t* py = y.data<int64_t>();
    cpu::visit_numeric(x.dtype(), [&](auto tag) {
      using S = typename decltype(tag)::type;
      const S* px = x.data<S>();
      for_lines(l,
                [&](int64_t k, int64_t o) { py[k] = arg_extreme_line(px + o, l.len, l.inner, at_.is_max, at_.last); });
    });
  }

 private:
  ArgExtremeAttrs at_;
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
