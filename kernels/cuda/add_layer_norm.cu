// CUDA kernel of ai.otter.AddLayerNorm(X, R, scale, bias?) {axis, epsilon} -> Y, S? (graph/ops/
// add_layer_norm.cc): one block per row, S = X + R in float (written once where S is an output),
// then LayerNormalization's two statistics passes and the normalised row over the sum (as
// layer_norm_kernel in nn.cu), the row's re-reads served by the cache. Half types compute in float
// and round S and Y once, as the CPU's widened kernel does.
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/cuda_kernels.h"

namespace otter::cuda {
namespace {

template <typename S>
__global__ void add_layer_norm_kernel(int64_t rows, int64_t cols, const S* x, const S* r, const S* scale, const S* bias,
                                      S* y, S* sum, float eps) {
  OTTER_BLOCK_STRIDE(row, rows) {
    const S* xr = x + row * cols;
    const S* rr = r + row * cols;
    float s = 0;
    for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) {
      const float v = load_value(xr[j]) + load_value(rr[j]);
      if (sum) sum[row * cols + j] = store_value<S>(v);
      s += v;
    }
    const float mean = block_reduce(s, SumOp{}, 0.f) / static_cast<float>(cols);
    float ss = 0;
    for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) {
      const float dv = load_value(xr[j]) + load_value(rr[j]) - mean;
      ss += dv * dv;
    }
    const float inv = 1.f / sqrtf(block_reduce(ss, SumOp{}, 0.f) / static_cast<float>(cols) + eps);
    for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) {
      float v = (load_value(xr[j]) + load_value(rr[j]) - mean) * inv * load_value(scale[j]);
      if (bias) v += load_value(bias[j]);
      y[row * cols + j] = store_value<S>(v);
    }
  }
}

class AddLayerNormKernel : public Kernel {
 public:
  explicit AddLayerNormKernel(const Node& n) : axis_(n.attr_i("axis", -1)), epsilon_(n.attr_f("epsilon", 1e-5f)) {}

  void run(KernelContext& ctx) override {
    const Tensor& x = ctx.input(0);
    const Tensor& r = ctx.input(1);
    if (r.dtype() != x.dtype() || r.dims() != x.dims())
      ctx.error(str_cat("R ", r.describe(), " must match X ", x.describe()));
    const int64_t rank = x.rank();
    if (rank < 1 || (axis_ != -1 && axis_ != rank - 1))
      ctx.error(str_cat("axis ", axis_, " is not the last axis of X ", x.describe()));
    const int64_t cols = x.dim(rank - 1), rows = cols == 0 ? 0 : x.numel() / cols;
    for (int i = 2; i < 4; ++i) {
      if (!ctx.has_input(i)) continue;
      const Tensor& t = ctx.input(i);
      if (t.dtype() != x.dtype() || t.rank() != 1 || t.numel() != cols)
        ctx.error(str_cat("input ", i, " ", t.describe(), " must be 1-D of X's last axis ", x.describe()));
    }
    Tensor& y = ctx.allocate_output(0, x.dtype(), x.dims());
    Tensor* sum = ctx.has_output(1) ? &ctx.allocate_output(1, x.dtype(), x.dims()) : nullptr;
    if (rows == 0) return;
    dispatch_float(x.dtype(), [&](auto tag) {
      using S = typename decltype(tag)::type;
      add_layer_norm_kernel<S><<<blocks_for(rows), kBlock, 0, stream_of(ctx)>>>(
          rows, cols, static_cast<const S*>(x.raw()), static_cast<const S*>(r.raw()),
          static_cast<const S*>(ctx.input(2).raw()),
          ctx.has_input(3) ? static_cast<const S*>(ctx.input(3).raw()) : nullptr, static_cast<S*>(y.raw()),
          sum ? static_cast<S*>(sum->raw()) : nullptr, epsilon_);
      OTTER_CUDA_LAUNCH_CHECK();
    });
  }

 private:
  int64_t axis_;
  float epsilon_;
};

}  // namespace

KernelFactory add_layer_norm_kernel(const std::string& op) {
  if (op != "AddLayerNorm") fail("add_layer_norm_kernel: no CUDA kernel for ", op);
  return [](const Node& n) -> std::unique_ptr<Kernel> { return std::make_unique<AddLayerNormKernel>(n); };
}

}  // namespace otter::cuda
