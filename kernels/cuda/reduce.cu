// CUDA reduction kernels (ReduceSum, ReduceMean, ReduceMax, ReduceMin, ReduceSumSquare, ReduceL2,
// ReduceProd, ReduceL1, ReduceLogSum, ReduceLogSumExp, and ai.otter.ReduceSumF32)
// and the sums over axes that
// SumToShape, GlobalAveragePool and the gradient kernels use.
//
// An output element is the reduction over the reduced axes at its kept-axes position; two strided
// indexers give the input offsets of both. Where consecutive outputs read consecutive memory (the
// innermost axis is kept) one thread computes one output; otherwise one block does, its threads
// striding over the reduced elements. Floats accumulate in double, integers in int64 (as on the
// CPU), and block results combine in a fixed order, so results are deterministic.
#include <cmath>
#include <limits>

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/cuda_kernels.h"

namespace otter::cuda {
namespace {

template <typename S>
using acc_t = std::conditional_t<std::is_floating_point_v<compute_type<S>>, double, int64_t>;

template <Reduction K>
struct Combine {
  template <typename A> __device__ A operator()(A acc, A v) const {
    if constexpr (K == Reduction::kMax) return MaxOp{}(acc, v);
    else if constexpr (K == Reduction::kMin) return MinOp{}(acc, v);
    else if constexpr (K == Reduction::kProd) return acc * v;
    else return acc + v;
  }
};

// An element as it enters the reduction: squared for ReduceSumSquare and ReduceL2.
template <Reduction K, typename A>
__device__ A prepare(A v) {
  if constexpr (K == Reduction::kSumSquare || K == Reduction::kL2) return v * v;
  else if constexpr (K == Reduction::kL1) return v < A(0) ? A(-v) : v;
  else return v;
}

// The result in the output type O: S, or float for ReduceSumF32 of a half S (the value a float32
// input's sum would take).
template <Reduction K, typename S, typename O, typename A>
__device__ O finish(A acc, int64_t count) {
  if constexpr (K == Reduction::kMean) acc = acc / static_cast<A>(count);
  if constexpr (K == Reduction::kL2 && std::is_floating_point_v<A>) acc = sqrt(acc);  // floats only (registered)
  if constexpr (K == Reduction::kLogSum && std::is_floating_point_v<A>) acc = log(acc);
  return store_value<O>(static_cast<compute_type<S>>(acc));
}

// The combination of the prepared elements x[base + red(r)] for r = first, first + step, ... < R.
template <Reduction K, typename S, typename A>
__device__ A accumulate(const S* x, int64_t base, StridedIndexer<1> red, int64_t R, int64_t first, int64_t step,
                        A init) {
  const Combine<K> comb;
  A acc = init;
  int64_t off[1];
  for (int64_t r = first; r < R; r += step) {
    red.offsets(r, off);
    acc = comb(acc, prepare<K>(static_cast<A>(load_value(x[base + off[0]]))));
  }
  return acc;
}

// One thread per output: loops over the R reduced elements.
template <Reduction K, typename S, typename O, typename A>
__global__ void reduce_thread_kernel(int64_t outputs, int64_t R, const S* x, O* y, StridedIndexer<1> kept,
                                     StridedIndexer<1> red, A init) {
  OTTER_GRID_STRIDE(o, outputs) {
    int64_t base[1];
    kept.offsets(o, base);
    y[o] = finish<K, S, O>(accumulate<K>(x, base[0], red, R, 0, 1, init), R);
  }
}

// One block per output: threads stride over the reduced elements, then a block reduction.
template <Reduction K, typename S, typename O, typename A>
__global__ void reduce_block_kernel(int64_t outputs, int64_t R, const S* x, O* y, StridedIndexer<1> kept,
                                    StridedIndexer<1> red, A init) {
  const Combine<K> comb;
  OTTER_BLOCK_STRIDE(o, outputs) {
    int64_t base[1];
    kept.offsets(o, base);
    const A acc = block_reduce(accumulate<K>(x, base[0], red, R, threadIdx.x, blockDim.x, init), comb, init);
    if (threadIdx.x == 0) y[o] = finish<K, S, O>(acc, R);
  }
}

// ReduceLogSumExp, one block per output: m + log(sum(exp(x - m))) with m the maximum (0 where it
// is not finite), so large inputs do not overflow.
template <typename S>
__global__ void log_sum_exp_kernel(int64_t outputs, int64_t R, const S* x, S* y, StridedIndexer<1> kept,
                                   StridedIndexer<1> red) {
  OTTER_BLOCK_STRIDE(o, outputs) {
    int64_t base[1], off[1];
    kept.offsets(o, base);
    double m = -INFINITY;
    for (int64_t r = threadIdx.x; r < R; r += blockDim.x) {
      red.offsets(r, off);
      m = MaxOp{}(m, static_cast<double>(load_value(x[base[0] + off[0]])));
    }
    m = block_reduce(m, MaxOp{}, -static_cast<double>(INFINITY));
    const double shift = isfinite(m) ? m : 0.0;
    double s = 0;
    for (int64_t r = threadIdx.x; r < R; r += blockDim.x) {
      red.offsets(r, off);
      s += exp(static_cast<double>(load_value(x[base[0] + off[0]])) - shift);
    }
    s = block_reduce(s, SumOp{}, 0.0);
    if (threadIdx.x == 0) y[o] = store_value<S>(static_cast<compute_type<S>>(log(s) + shift));
  }
}

template <typename A>
A reduce_init(Reduction k) {
  if (k == Reduction::kProd) return A(1);
  if (k == Reduction::kMax)
    return std::is_floating_point_v<A> ? -std::numeric_limits<A>::infinity() : std::numeric_limits<A>::lowest();
  if (k == Reduction::kMin)
    return std::is_floating_point_v<A> ? std::numeric_limits<A>::infinity() : std::numeric_limits<A>::max();
  return A(0);
}

// y (allocated, dims = x's kept axes, of type O) = reduction of x over the axes flagged in `reduced`.
template <Reduction K, typename S, typename O = S>
void launch_reduce(const KernelContext& ctx, const Tensor& x, Tensor& y, const std::vector<bool>& reduced) {
  using A = acc_t<S>;
  const int64_t outputs = y.numel();
  if (outputs == 0) return;
  const std::vector<int64_t> strides = contiguous_strides(x.dims());
  std::vector<int64_t> kd, ks, rd, rs;
  for (int64_t i = 0; i < x.rank(); ++i) {
    (reduced[i] ? rd : kd).push_back(x.dims()[i]);
    (reduced[i] ? rs : ks).push_back(strides[i]);
  }
  const auto kept = make_indexer<1>(kd, {ks});
  const auto red = make_indexer<1>(rd, {rs});
  const int64_t R = num_elements(rd);
  const A init = reduce_init<A>(K);
  const S* px = static_cast<const S*>(x.raw());
  O* py = static_cast<O*>(y.raw());
  const bool outputs_coalesce = kept.rank > 0 && kept.strides[0][kept.rank - 1] == 1;
  if constexpr (K == Reduction::kLogSumExp) {
    static_assert(std::is_same_v<S, O>, "ReduceLogSumExp writes its input's type");
    log_sum_exp_kernel<S><<<blocks_for(outputs), kBlock, 0, stream_of(ctx)>>>(outputs, R, px, py, kept, red);
  } else if (outputs_coalesce && outputs >= 1024) {
    reduce_thread_kernel<K, S, O, A><<<grid_for(outputs), kBlock, 0, stream_of(ctx)>>>(outputs, R, px, py, kept, red, init);
  } else {
    reduce_block_kernel<K, S, O, A><<<blocks_for(outputs), kBlock, 0, stream_of(ctx)>>>(outputs, R, px, py, kept, red, init);
  }
  OTTER_CUDA_LAUNCH_CHECK();
}

template <typename S>
void dispatch_kind(Reduction k, const KernelContext& ctx, const Tensor& x, Tensor& y, const std::vector<bool>& red) {
  switch (k) {
    case Reduction::kSum: return launch_reduce<Reduction::kSum, S>(ctx, x, y, red);
    case Reduction::kMean: return launch_reduce<Reduction::kMean, S>(ctx, x, y, red);
    case Reduction::kMax: return launch_reduce<Reduction::kMax, S>(ctx, x, y, red);
    case Reduction::kMin: return launch_reduce<Reduction::kMin, S>(ctx, x, y, red);
    case Reduction::kSumSquare: return launch_reduce<Reduction::kSumSquare, S>(ctx, x, y, red);
    case Reduction::kL2: return launch_reduce<Reduction::kL2, S>(ctx, x, y, red);
    case Reduction::kProd: return launch_reduce<Reduction::kProd, S>(ctx, x, y, red);
    case Reduction::kL1: return launch_reduce<Reduction::kL1, S>(ctx, x, y, red);
    case Reduction::kLogSum: return launch_reduce<Reduction::kLogSum, S>(ctx, x, y, red);
    case Reduction::kLogSumExp: return launch_reduce<Reduction::kLogSumExp, S>(ctx, x, y, red);
  }
}

class ReduceKernel : public Kernel {
 public:
  // Axes come from an input from opset `axes_input_since` on, before from the attribute. f32_out:
  // ai.otter.ReduceSumF32 (axes an input), the sum of a half X written as float32.
  ReduceKernel(const Node& n, Reduction kind, int axes_input_since, bool f32_out = false)
      : kind_(kind),
        f32_out_(f32_out),
        axes_input_(f32_out || n.opset() >= axes_input_since),
        keepdims_(n.attr_i("keepdims", 1) != 0),
        noop_empty_(n.attr_i("noop_with_empty_axes", 0) != 0),
        axes_(axes_input_ ? std::vector<int64_t>{} : n.attr_ints("axes")) {}

  void run(KernelContext& ctx) override {
    const Tensor& x = ctx.input(0);
    std::vector<int64_t> axes = axes_;
    if (axes_input_ && ctx.has_input(1)) axes = host_ints(ctx, 1, "axes");
    const int64_t rank = x.rank();
    std::vector<bool> red(static_cast<size_t>(rank), axes.empty());
    if (axes.empty() && noop_empty_ && !f32_out_) {
      Tensor& out = ctx.allocate_output(0, x.dtype(), x.dims());
      device_of(ctx).copy_async(out.raw(), x.raw(), x.nbytes());
      return;
    }
    for (int64_t a : axes) {
      if (a < -rank || a >= rank) ctx.error(str_cat("axis ", a, " is out of range for input ", x.describe()));
      red[a < 0 ? a + rank : a] = true;
    }
    std::vector<int64_t> out_dims;
    for (int64_t i = 0; i < rank; ++i) {
      if (!red[i]) out_dims.push_back(x.dims()[i]);
      else if (keepdims_) out_dims.push_back(1);
    }
    const bool float_only = kind_ == Reduction::kMean || kind_ == Reduction::kSumSquare || kind_ == Reduction::kL2 ||
                            kind_ == Reduction::kLogSum || kind_ == Reduction::kLogSumExp;
    if (float_only && !is_float(x.dtype()))
      ctx.error(str_cat("input must be a float tensor, got ", x.describe()));
    if (f32_out_) {
      if (!is_float(x.dtype()) || x.dtype() == DataType::kFloat64)
        ctx.error(str_cat("input must be float32, float16 or bfloat16, got ", x.describe()));
      Tensor& out = ctx.allocate_output(0, DataType::kFloat32, out_dims);
      dispatch_float(x.dtype(), [&](auto tag) {
        using S = typename decltype(tag)::type;
        if constexpr (!std::is_same_v<S, double>) launch_reduce<Reduction::kSum, S, float>(ctx, x, out, red);
      });
      return;
    }
    Tensor& out = ctx.allocate_output(0, x.dtype(), out_dims);
    dispatch_numeric(x.dtype(), [&](auto tag) {
      using S = typename decltype(tag)::type;
      dispatch_kind<S>(kind_, ctx, x, out, red);
    });
  }

 private:
  Reduction kind_;
  bool f32_out_;
  bool axes_input_, keepdims_, noop_empty_;
  std::vector<int64_t> axes_;
};

KernelFactory reduce(Reduction kind, int axes_input_since) {
  return [=](const Node& n) -> std::unique_ptr<Kernel> { return std::make_unique<ReduceKernel>(n, kind, axes_input_since); };
}

}  // namespace

KernelFactory reduce_kernel(const std::string& op) {
  if (op == "ReduceSumF32")
    return [](const Node& n) -> std::unique_ptr<Kernel> {
      return std::make_unique<ReduceKernel>(n, Reduction::kSum, 13, true);
    };
  if (op == "ReduceSum") return reduce(Reduction::kSum, 13);
  if (op == "ReduceMean") return reduce(Reduction::kMean, 18);
  if (op == "ReduceMax") return reduce(Reduction::kMax, 18);
  if (op == "ReduceMin") return reduce(Reduction::kMin, 18);
  if (op == "ReduceSumSquare") return reduce(Reduction::kSumSquare, 18);
  if (op == "ReduceL2") return reduce(Reduction::kL2, 18);
  if (op == "ReduceProd") return reduce(Reduction::kProd, 18);
  if (op == "ReduceL1") return reduce(Reduction::kL1, 18);
  if (op == "ReduceLogSum") return reduce(Reduction::kLogSum, 18);
  if (op == "ReduceLogSumExp") return reduce(Reduction::kLogSumExp, 18);
  fail("reduce_kernel: no CUDA kernel for ", op);
}

void reduce_axes(const KernelContext& ctx, Reduction kind, const Tensor& x, Tensor& y, const std::vector<bool>& reduced) {
  if (x.dtype() != y.dtype()) ctx.error(str_cat("reduction of ", x.describe(), " into ", y.describe()));
  dispatch_numeric(x.dtype(), [&](auto tag) {
    using S = typename decltype(tag)::type;
    dispatch_kind<S>(kind, ctx, x, y, reduced);
  });
}

void sum_to_shape(const KernelContext& ctx, const Tensor& x, Tensor& y) {
  const int64_t r = x.rank(), ry = y.rank();
  if (ry > r) ctx.error(str_cat("cannot sum ", x.describe(), " to the higher-rank ", y.describe()));
  std::vector<bool> red(static_cast<size_t>(r), true);
  for (int64_t i = 0; i < ry; ++i) {
    const int64_t xd = x.dims()[r - ry + i], yd = y.dims()[i];
    if (yd != xd && yd != 1) ctx.error(str_cat("cannot sum ", x.describe(), " to shape ", dims_to_string(y.dims())));
    red[r - ry + i] = yd == 1 && xd != 1;
  }
  // Axes of size 1 in both stay, so y's elements are x's kept elements in order.
  reduce_axes(ctx, Reduction::kSum, x, y, red);
}

}  // namespace otter::cuda
