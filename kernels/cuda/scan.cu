// CUDA kernels of the along-one-axis ops (graph/ops/scan.cc): CumSum, ArgMax and ArgMin. X is
// viewed as [outer, len, inner]; one thread runs each line with the line algorithm the CPU kernels
// also run (kernels/common/scan.h).
#include "kernels/common/scan.h"
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/cuda_kernels.h"

namespace otter::cuda {
namespace {

// The line view around axis (possibly negative); fails naming the node when out of range.
AxisLines lines_around(const KernelContext& ctx, const std::vector<int64_t>& dims, int64_t axis) {
  const int64_t rank = static_cast<int64_t>(dims.size());
  if (axis < -rank || axis >= rank) ctx.error(str_cat("axis ", axis, " is out of range for rank ", rank));
  return axis_lines(dims, axis < 0 ? axis + rank : axis);
}

template <typename S>
__global__ void cumsum_kernel(AxisLines l, const S* x, S* y, bool exclusive, bool reverse) {
  OTTER_GRID_STRIDE(k, l.outer * l.inner) {
    const int64_t o = l.base(k);
    cumsum_line(x + o, y + o, l.len, l.inner, exclusive, reverse);
  }
}

template <typename S>
__global__ void arg_kernel(AxisLines l, const S* x, int64_t* y, bool is_max, bool last) {
  OTTER_GRID_STRIDE(k, l.outer * l.inner) { y[k] = arg_extreme_line(x + l.base(k), l.len, l.inner, is_max, last); }
}

class CumSumKernel : public Kernel {
 public:
  explicit CumSumKernel(const Node& n)
      : exclusive_(n.attr_i("exclusive", 0) != 0), reverse_(n.attr_i("reverse", 0) != 0) {}
  void run(KernelContext& ctx) override {
    const Tensor& x = ctx.input(0);
    const std::vector<int64_t> axis = host_ints(ctx, 1, "axis");
    if (axis.size() != 1) ctx.error(str_cat("input 1 (axis) must hold one value, got ", axis.size()));
    const AxisLines l = lines_around(ctx, x.dims(), axis[0]);
    Tensor& y = ctx.allocate_output(0, x.dtype(), x.dims());
    if (x.numel() == 0) return;
    dispatch_numeric(x.dtype(), [&](auto tag) {
      using S = typename decltype(tag)::type;
      cumsum_kernel<S><<<grid_for(l.outer * l.inner), kBlock, 0, stream_of(ctx)>>>(
          l, static_cast<const S*>(x.raw()), static_cast<S*>(y.raw()), exclusive_, reverse_);
      OTTER_CUDA_LAUNCH_CHECK();
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
    if (l.len == 0) ctx.error(str_cat("cannot take the arg extreme of an empty axis of ", x.describe()));
    const int64_t axis = axis_ < 0 ? axis_ + x.rank() : axis_;
    Tensor& y = ctx.allocate_output(0, DataType::kInt64, arg_output_dims(x.dims(), axis, keepdims_));
    if (y.numel() == 0) return;
    dispatch_numeric(x.dtype(), [&](auto tag) {
      using S = typename decltype(tag)::type;
      arg_kernel<S><<<grid_for(l.outer * l.inner), kBlock, 0, stream_of(ctx)>>>(
          l, static_cast<const S*>(x.raw()), static_cast<int64_t*>(y.raw()), is_max_, last_);
      OTTER_CUDA_LAUNCH_CHECK();
    });
  }

 private:
  bool is_max_;
  int64_t axis_;
  bool keepdims_, last_;
};

template <typename S>
__global__ void hardmax_kernel(AxisLines l, const S* x, S* y) {
  OTTER_GRID_STRIDE(k, l.outer * l.inner) {
    const int64_t o = l.base(k);
    hardmax_line(x + o, y + o, l.len, l.inner);
  }
}

class HardmaxKernel : public Kernel {
 public:
  explicit HardmaxKernel(const Node& n) : axis_(n.attr_i("axis", -1)) {}
  void run(KernelContext& ctx) override {
    const Tensor& x = ctx.input(0);
    const AxisLines l = lines_around(ctx, x.dims(), axis_);
    Tensor& y = ctx.allocate_output(0, x.dtype(), x.dims());
    if (x.numel() == 0) return;
    dispatch_float(x.dtype(), [&](auto tag) {
      using S = typename decltype(tag)::type;
      hardmax_kernel<S><<<grid_for(l.outer * l.inner), kBlock, 0, stream_of(ctx)>>>(
          l, static_cast<const S*>(x.raw()), static_cast<S*>(y.raw()));
      OTTER_CUDA_LAUNCH_CHECK();
    });
  }

 private:
  int64_t axis_;
};

}  // namespace

KernelFactory scan_kernel(const std::string& op) {
  if (op == "CumSum") return [](const Node& n) -> std::unique_ptr<Kernel> { return std::make_unique<CumSumKernel>(n); };
  if (op == "ArgMax" || op == "ArgMin")
    return [max = op == "ArgMax"](const Node& n) -> std::unique_ptr<Kernel> {
      return std::make_unique<ArgExtremeKernel>(n, max);
    };
  if (op == "Hardmax")
    return [](const Node& n) -> std::unique_ptr<Kernel> { return std::make_unique<HardmaxKernel>(n); };
  fail("scan_kernel: no CUDA kernel for ", op);
}

}  // namespace otter::cuda
