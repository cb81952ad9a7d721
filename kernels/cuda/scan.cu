// CUDA kernels of the along-one-axis ops (graph/ops/scan.cc): CumSum, ArgMax and ArgMin. X is
// viewed as [outer, len, inner]; one thread runs each line with the line algorithm the CPU kernels
// also run (kernels/common/scan.h).
#include "kernels/common/scan.h"
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/cuda_kernels.h"

namespace otter::cuda {
namespace {

template <typename S>
__global__ void cumsum_kernel(AxisLines l, const S* x, S* y, bool exclusive, bool reverse) {
  OTTER_GRID_STRIDE(k, l.outer * l.inner) {
    const int64_t o = l.base(k);
    cumsum_line(x + o, y + o, l.len, l.inner, exclusive, reverse);
  }
}

class CumSumKernel : public Kernel {
 public:
  explicit CumSumKernel(const Node& n) : at_(n) {}
  void run(KernelContext& ctx) override {
    const Tensor& x = ctx.input(0);
    const AxisLines l = cumsum_lines(ctx, host_ints(ctx, 1, "axis"));
    Tensor& y = ctx.allocate_output(0, x.dtype(), x.dims());
    if (x.numel() == 0) return;
    dispatch_numeric(x.dtype(), [&](auto tag) {
      using S = typename decltype(tag)::type;
      cumsum_kernel<S><<<grid_for(l.outer * l.inner), kBlock, 0, stream_of(ctx)>>>(
          l, static_cast<const S*>(x.raw()), static_cast<S*>(y.raw()), at_.exclusive, at_.reverse);
      OTTER_CUDA_LAUNCH_CHECK();
    });
  }

 private:
  CumSumAttrs at_;
};

template <typename S>
__global__ void arg_kernel(AxisLines l, const S* x, int64_t* y, bool is_max, bool last) {
  OTTER_GRID_STRIDE(k, l.outer * l.inner) { y[k] = arg_extreme_line(x + l.base(k), l.len, l.inner, is_max, last); }
}

class ArgExtremeKernel : public Kernel {
 public:
  ArgExtremeKernel(const Node& n, bool is_max) : at_(n, is_max) {}
  void run(KernelContext& ctx) override {
    const Tensor& x = ctx.input(0);
    const ArgExtremeShape s = resolve_arg_extreme(ctx, at_);
    const AxisLines& l = s.lines;
    Tensor& y = ctx.allocate_output(0, DataType::kInt64, s.out_dims);
    if (y.numel() == 0) return;
    dispatch_numeric(x.dtype(), [&](auto tag) {
      using S = typename decltype(tag)::type;
      arg_kernel<S><<<grid_for(l.outer * l.inner), kBlock, 0, stream_of(ctx)>>>(
          l, static_cast<const S*>(x.raw()), static_cast<int64_t*>(y.raw()), at_.is_max, at_.last);
      OTTER_CUDA_LAUNCH_CHECK();
    });
  }

 private:
  ArgExtremeAttrs at_;
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
