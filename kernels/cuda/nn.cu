// CUDA kernels for normalisation and dropout: BatchNormalization (training statistics and
// inference), LayerNormalization, Dropout (Philox4x32-10, deterministic per seed), and the
// normalisation gradients (BatchNormalizationGrad, LayerNormalizationGrad). Half types compute in
// float; batch statistics accumulate in double as on the CPU.
#include <cmath>

#include "kernels/common/nn_params.h"
#include "kernels/common/philox.h"
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/cuda_kernels.h"

namespace otter::cuda {
namespace {

// ---- LayerNormalization ------------------------------------------------------------------------

// Scale or B of the normalisations as a contiguous row of the normalised shape: `t` itself, or
// broadcast into scratch when it has fewer elements. `x` is the tensor it scales (for its dtype).
Tensor row_operand(KernelContext& ctx, const Tensor& t, const Tensor& x, const char* name,
                   const std::vector<int64_t>& norm_dims) {
  if (t.dtype() != x.dtype()) ctx.error(str_cat(name, " has type ", t.describe(), ", X ", x.describe()));
  if (t.dims() == norm_dims) return t;
  bool ok = t.rank() <= static_cast<int64_t>(norm_dims.size());
  for (int64_t k = 0; ok && k < t.rank(); ++k) {
    const int64_t d = t.dims()[k], nd = norm_dims[norm_dims.size() - t.rank() + k];
    ok = d == nd || d == 1;
  }
  if (!ok) ctx.error(str_cat(name, " ", t.describe(), " does not broadcast to the normalised shape ", dims_to_string(norm_dims)));
  Tensor row = ctx.scratch(t.dtype(), norm_dims);
  copy_strided(ctx, t.dtype(), row.raw(), contiguous_strides(norm_dims), t.raw(), broadcast_strides(t.dims(), norm_dims),
               norm_dims);
  return row;
}

// One block per row: two passes (mean, then the mean squared deviation), then the normalised
// row times scale plus bias (scale and bias already of the row's length).
template <typename S>
__global__ void layer_norm_kernel(int64_t rows, int64_t cols, const S* x, const S* scale, const S* bias, S* y,
                                  float* mean_out, float* inv_out, float eps) {
  OTTER_BLOCK_STRIDE(r, rows) {
    const S* xr = x + r * cols;
    S* yr = y + r * cols;
    float s = 0;
    for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) s += load_value(xr[j]);
    s = block_reduce(s, SumOp{}, 0.f);
    const float mean = cols ? s / static_cast<float>(cols) : 0.f;
    float ss = 0;
    for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) {
      const float dv = load_value(xr[j]) - mean;
      ss += dv * dv;
    }
    ss = block_reduce(ss, SumOp{}, 0.f);
    const float var = cols ? ss / static_cast<float>(cols) : 0.f;
    const float inv = 1.f / sqrtf(var + eps);
    for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) {
      float v = (load_value(xr[j]) - mean) * inv * load_value(scale[j]);
      if (bias) v += load_value(bias[j]);
      yr[j] = store_value<S>(v);
    }
    if (threadIdx.x == 0) {
      if (mean_out) mean_out[r] = mean;
      if (inv_out) inv_out[r] = inv;
    }
  }
}

// Normalises over axes [axis, rank). Mean and InvStdDev have shape [d0..d(axis-1), 1, ..., 1] and
// are float32 (stash_type 1; float64 statistics are a CPU feature).
class LayerNormKernel : public Kernel {
 public:
  explicit LayerNormKernel(const Node& n) : axis_(n.attr_i("axis", -1)), epsilon_(n.attr_f("epsilon", 1e-5f)) {
    const int64_t stash = n.attr_i("stash_type", 1);
    if (stash != 1) fail(n.describe(), ": stash_type ", stash, " is not supported on CUDA (only 1 = float32)");
  }

  void run(KernelContext& ctx) override {
    const Tensor& x = ctx.input(0);
    const int64_t r = x.rank();
    const int64_t axis = axis_ < 0 ? axis_ + r : axis_;
    if (axis < 0 || axis > r) ctx.error(str_cat("axis ", axis_, " out of range for X ", x.describe()));
    const std::vector<int64_t> norm_dims(x.dims().begin() + axis, x.dims().end());
    const int64_t cols = num_elements(norm_dims);
    const int64_t rows = num_elements(std::vector<int64_t>(x.dims().begin(), x.dims().begin() + axis));
    const Tensor scale = row_operand(ctx, ctx.input(1), x, "Scale", norm_dims);
    const Tensor bias = ctx.has_input(2) ? row_operand(ctx, ctx.input(2), x, "B", norm_dims) : Tensor();
    Tensor& y = ctx.allocate_output(0, x.dtype(), x.dims());
    std::vector<int64_t> sdims(x.dims().begin(), x.dims().begin() + axis);
    sdims.resize(r, 1);
    float* mean = ctx.has_output(1) ? static_cast<float*>(ctx.allocate_output(1, DataType::kFloat32, sdims).raw()) : nullptr;
    float* inv = ctx.has_output(2) ? static_cast<float*>(ctx.allocate_output(2, DataType::kFloat32, sdims).raw()) : nullptr;
    if (rows == 0) return;
    dispatch_float(x.dtype(), [&](auto tag) {
      using S = typename decltype(tag)::type;
      layer_norm_kernel<S><<<blocks_for(rows), kBlock, 0, stream_of(ctx)>>>(
          rows, cols, static_cast<const S*>(x.raw()), static_cast<const S*>(scale.raw()),
          bias.defined() ? static_cast<const S*>(bias.raw()) : nullptr, static_cast<S*>(y.raw()), mean, inv, epsilon_);
      OTTER_CUDA_LAUNCH_CHECK();
    });
  }

 private:
  int64_t axis_;
  float epsilon_;
};

// ---- BatchNormalization ------------------------------------------------------------------------

// Per-channel parameters of the normalisation y = x * a[c] + b[c], and the statistics outputs.
struct BnChannelOut {
  float* a;
  float* b;
  void* running_mean;  // outputs of the type of input_mean / input_var, or null
  void* running_var;
  void* saved_mean;
  void* saved_var;
};

struct BnParams {
  const void *scale, *bias, *mean, *var;
  DataType scale_t, bias_t, mean_t, var_t;
  double eps, momentum;
};

// One block per channel: batch mean and biased variance over N and the spatial axes (two passes,
// double), then a, b and the running statistics.
template <typename S>
__global__ void bn_train_stats_kernel(int64_t channels, int64_t batch, int64_t spatial, const S* x, BnParams p,
                                      BnChannelOut out) {
  OTTER_BLOCK_STRIDE(c, channels) {
    const int64_t count = batch * spatial;
    double s = 0;
    for (int64_t t = threadIdx.x; t < count; t += blockDim.x)
      s += load_value(x[((t / spatial) * channels + c) * spatial + t % spatial]);
    const double mean = block_reduce(s, SumOp{}, 0.0) / static_cast<double>(count);
    double ss = 0;
    for (int64_t t = threadIdx.x; t < count; t += blockDim.x) {
      const double dv = load_value(x[((t / spatial) * channels + c) * spatial + t % spatial]) - mean;
      ss += dv * dv;
    }
    const double var = block_reduce(ss, SumOp{}, 0.0) / static_cast<double>(count);
    if (threadIdx.x == 0) {
      const double scale = load_as_double(p.scale, p.scale_t, c), bias = load_as_double(p.bias, p.bias_t, c);
      const double inv = 1.0 / sqrt(var + p.eps);
      out.a[c] = static_cast<float>(scale * inv);
      out.b[c] = static_cast<float>(bias - mean * scale * inv);
      const double m = p.momentum;
      if (out.running_mean)
        store_from_double(out.running_mean, p.mean_t, c, load_as_double(p.mean, p.mean_t, c) * m + mean * (1 - m));
      if (out.running_var)
        store_from_double(out.running_var, p.var_t, c, load_as_double(p.var, p.var_t, c) * m + var * (1 - m));
      if (out.saved_mean) store_from_double(out.saved_mean, p.mean_t, c, mean);
      if (out.saved_var) store_from_double(out.saved_var, p.var_t, c, var);
    }
  }
}

// Inference: a and b from the given statistics.
__global__ void bn_infer_params_kernel(int64_t channels, BnParams p, float* a, float* b) {
  OTTER_GRID_STRIDE(c, channels) {
    const double scale = load_as_double(p.scale, p.scale_t, c), bias = load_as_double(p.bias, p.bias_t, c);
    const double inv = 1.0 / sqrt(load_as_double(p.var, p.var_t, c) + p.eps);
    a[c] = static_cast<float>(scale * inv);
    b[c] = static_cast<float>(bias - load_as_double(p.mean, p.mean_t, c) * scale * inv);
  }
}

template <typename S>
__global__ void bn_apply_kernel(int64_t n, int64_t channels, int64_t spatial, const S* x, const float* a, const float* b,
                                S* y) {
  OTTER_GRID_STRIDE(i, n) {
    const int64_t c = (i / spatial) % channels;
    y[i] = store_value<S>(load_value(x[i]) * a[c] + b[c]);
  }
}

// Inference: Y = (X - mean) / sqrt(var + eps) * scale + B. Training (opset >= 14: training_mode=1;
// before: extra outputs requested): batch statistics, running statistics blended with momentum
// from the biased batch variance, saved mean/var outputs, exactly as the CPU kernel documents.
class BatchNormKernel : public Kernel {
 public:
  explicit BatchNormKernel(const Node& n) : epsilon_(n.attr_f("epsilon", 1e-5f)), momentum_(n.attr_f("momentum", 0.9f)) {
    training_ = params::batch_norm_training(n);
  }

  void run(KernelContext& ctx) override {
    const Tensor& x = ctx.input(0);
    static const char* const kNames[] = {"X", "scale", "B", "input_mean", "input_var"};
    const params::BatchNormDims bn = params::check_batch_norm(ctx, x, 1, kNames, training_);
    const int64_t batch = bn.batch, channels = bn.channels, spatial = bn.spatial;
    const BnParams p{ctx.input(1).raw(), ctx.input(2).raw(), ctx.input(3).raw(), ctx.input(4).raw(),
                     ctx.input(1).dtype(), ctx.input(2).dtype(), ctx.input(3).dtype(), ctx.input(4).dtype(),
                     static_cast<double>(epsilon_), static_cast<double>(momentum_)};
    Tensor& y = ctx.allocate_output(0, x.dtype(), x.dims());
    Tensor ab = ctx.scratch(DataType::kFloat32, {2, channels});
    float* a = static_cast<float*>(ab.raw());
    float* b = a + channels;
    BnChannelOut o{a, b, nullptr, nullptr, nullptr, nullptr};
    if (training_) {
      auto out = [&](int i, int like) -> void* {
        return ctx.has_output(i) ? ctx.allocate_output(i, ctx.input(like).dtype(), {channels}).raw() : nullptr;
      };
      o = BnChannelOut{a, b, out(1, 3), out(2, 4), out(3, 3), out(4, 4)};
    }
    if (channels == 0) return;
    const cudaStream_t s = stream_of(ctx);
    dispatch_float(x.dtype(), [&](auto tag) {
      using S = typename decltype(tag)::type;
      const S* px = static_cast<const S*>(x.raw());
      if (training_) {
        bn_train_stats_kernel<S><<<blocks_for(channels), kBlock, 0, s>>>(channels, batch, spatial, px, p, o);
      } else {
        bn_infer_params_kernel<<<grid_for(channels), kBlock, 0, s>>>(channels, p, a, b);
      }
      OTTER_CUDA_LAUNCH_CHECK();
      const int64_t n = x.numel();
      if (n == 0) return;
      bn_apply_kernel<S><<<grid_for(n), kBlock, 0, s>>>(n, channels, spatial, px, a, b, static_cast<S*>(y.raw()));
      OTTER_CUDA_LAUNCH_CHECK();
    });
  }

 private:
  float epsilon_, momentum_;
  bool training_ = false;
};

// ---- Dropout -----------------------------------------------------------------------------------

// Element i keeps its value (times scale) when word i % 4 of Philox block i / 4 is >= threshold
// (= ratio * 2^32, so P(drop) = ratio).
template <typename S>
__global__ void dropout_kernel(int64_t n, const S* x, S* y, bool* mask, uint64_t seed, uint64_t offset,
                               uint64_t threshold, float scale) {
  OTTER_GRID_STRIDE(blk, (n + 3) / 4) {
    const Philox4 r = philox_block(seed, offset, static_cast<uint64_t>(blk));
    for (int j = 0; j < 4; ++j) {
      const int64_t i = blk * 4 + j;
      if (i >= n) break;
      const bool keep = r.w[j] >= threshold;
      y[i] = keep ? store_value<S>(load_value(x[i]) * scale) : store_value<S>(0.f);
      if (mask) mask[i] = keep;
    }
  }
}

// output = data * mask / (1 - ratio) in training mode, identity otherwise (mask all true). The
// bits: with the node's `seed` attribute, that seed and a per-node run counter as the stream;
// else a seed drawn per run from the executor's generator (ctx.rng), else seed 0 and the counter.
// The masks differ from the CPU kernel's (mt19937_64); their statistics do not.
class DropoutKernel : public Kernel {
 public:
  explicit DropoutKernel(const Node& n)
      : has_seed_(n.has_attr("seed")), seed_(static_cast<uint64_t>(n.attr_i("seed", 0))) {}

  void run(KernelContext& ctx) override {
    const Tensor& x = ctx.input(0);
    if (ctx.has_input(1) && !is_float(ctx.input(1).dtype()))
      ctx.error(str_cat("ratio must be a float scalar, got ", ctx.input(1).describe()));
    const double ratio = ctx.has_input(1) ? host_scalar(ctx, 1, "ratio") : 0.5;
    const bool training = ctx.has_input(2) && host_scalar(ctx, 2, "training_mode") != 0;
    const bool want_mask = ctx.has_output(1);
    const int64_t n = x.numel();
    if (!training || ratio == 0) {
      ctx.alias_output(0, x, x.dims());
      if (want_mask) {
        Tensor& m = ctx.allocate_output(1, DataType::kBool, x.dims());
        if (n) OTTER_CUDA_CHECK(cudaMemsetAsync(m.raw(), 1, static_cast<size_t>(n), stream_of(ctx)));
      }
      return;
    }
    if (!(ratio > 0 && ratio < 1)) ctx.error(str_cat("ratio ", ratio, " must be in [0, 1)"));
    uint64_t seed = seed_, offset = runs_++;
    if (!has_seed_ && ctx.rng) {
      seed = (*ctx.rng)();
      offset = 0;
    }
    Tensor& y = ctx.allocate_output(0, x.dtype(), x.dims());
    bool* mask = want_mask ? static_cast<bool*>(ctx.allocate_output(1, DataType::kBool, x.dims()).raw()) : nullptr;
    if (n == 0) return;
    const uint64_t threshold = static_cast<uint64_t>(std::ldexp(ratio, 32));
    const float scale = static_cast<float>(1.0 / (1.0 - ratio));
    dispatch_float(x.dtype(), [&](auto tag) {
      using S = typename decltype(tag)::type;
      dropout_kernel<S><<<grid_for((n + 3) / 4), kBlock, 0, stream_of(ctx)>>>(
          n, static_cast<const S*>(x.raw()), static_cast<S*>(y.raw()), mask, seed, offset, threshold, scale);
      OTTER_CUDA_LAUNCH_CHECK();
    });
  }

 private:
  bool has_seed_;
  uint64_t seed_;
  uint64_t runs_ = 0;
};

// ---- gradients (ai.otter) ----------------------------------------------------------------------

template <typename S>
__global__ void bn_grad_stats_kernel(int64_t channels, int64_t batch, int64_t spatial, const S* dy, const S* x,
                                     BnParams p, bool training, double* stats, void* dscale, void* dbias, void* dmean,
                                     void* dvar) {
  OTTER_BLOCK_STRIDE(c, channels) {
    const int64_t count = batch * spatial;
    auto at = [&](int64_t t) { return ((t / spatial) * channels + c) * spatial + t % spatial; };
    double mean = load_as_double(p.mean, p.mean_t, c), var = load_as_double(p.var, p.var_t, c);
    if (training) {
      double s = 0;
      for (int64_t t = threadIdx.x; t < count; t += blockDim.x) s += load_value(x[at(t)]);
      mean = block_reduce(s, SumOp{}, 0.0) / static_cast<double>(count);
      double ss = 0;
      for (int64_t t = threadIdx.x; t < count; t += blockDim.x) {
        const double dv = load_value(x[at(t)]) - mean;
        ss += dv * dv;
      }
      var = block_reduce(ss, SumOp{}, 0.0) / static_cast<double>(count);
    }
    const double inv = 1.0 / sqrt(var + p.eps);
    double sg = 0, sgx = 0;
    for (int64_t t = threadIdx.x; t < count; t += blockDim.x) {
      const double g = load_value(dy[at(t)]);
      sg += g;
      sgx += g * ((load_value(x[at(t)]) - mean) * inv);
    }
    sg = block_reduce(sg, SumOp{}, 0.0);
    sgx = block_reduce(sgx, SumOp{}, 0.0);
    if (threadIdx.x == 0) {
      const double scale = load_as_double(p.scale, p.scale_t, c);
      stats[4 * c] = mean;
      stats[4 * c + 1] = inv;
      stats[4 * c + 2] = sg;
      stats[4 * c + 3] = sgx;
      if (dscale) store_from_double(dscale, p.scale_t, c, sgx);
      if (dbias) store_from_double(dbias, p.scale_t, c, sg);
      if (dmean) store_from_double(dmean, p.mean_t, c, -scale * inv * sg);
      if (dvar) store_from_double(dvar, p.var_t, c, -0.5 * scale * inv * inv * sgx);
    }
  }
}

// training: dX = scale inv / M (M dY - sum dY - xhat sum(dY xhat)); inference: dX = scale inv dY.
template <typename S>
__global__ void bn_grad_dx_kernel(int64_t n, int64_t channels, int64_t spatial, double m, const S* dy, const S* x,
                                  BnParams p, bool training, const double* stats, S* dx) {
  OTTER_GRID_STRIDE(i, n) {
    const int64_t c = (i / spatial) % channels;
    const double mean = stats[4 * c], inv = stats[4 * c + 1], sg = stats[4 * c + 2], sgx = stats[4 * c + 3];
    const double k = load_as_double(p.scale, p.scale_t, c) * inv, g = load_value(dy[i]);
    double v = k * g;
    if (training) {
      const double xhat = (load_value(x[i]) - mean) * inv;
      v = k / m * (m * g - sg - xhat * sgx);
    }
    dx[i] = store_value<S>(static_cast<float>(v));
  }
}

// BatchNormalizationGrad(dY, X, scale, mean, var) {epsilon, training_mode} -> dX?, dScale?, dB?,
// dMean?, dVar? (docs/ops.md).
class BatchNormGradKernel : public Kernel {
 public:
  explicit BatchNormGradKernel(const Node& n)
      : epsilon_(n.attr_f("epsilon", 1e-5f)), training_(n.attr_i("training_mode", 1) != 0) {}

  void run(KernelContext& ctx) override {
    const Tensor& dy = ctx.input(0);
    const Tensor& x = ctx.input(1);
    const params::BatchNormDims bn = params::check_batch_norm_grad(ctx, training_);
    const int64_t batch = bn.batch, channels = bn.channels, spatial = bn.spatial;
    const double m = bn.count();
    const BnParams p{ctx.input(2).raw(), nullptr, ctx.input(3).raw(), ctx.input(4).raw(), ctx.input(2).dtype(),
                     ctx.input(2).dtype(), ctx.input(3).dtype(), ctx.input(4).dtype(), static_cast<double>(epsilon_), 0.0};
    auto out = [&](int i, int like) -> void* {
      return ctx.has_output(i) ? ctx.allocate_output(i, ctx.input(like).dtype(), {channels}).raw() : nullptr;
    };
    void* dscale = out(1, 2);
    void* dbias = out(2, 2);
    void* dmean = out(3, 3);
    void* dvar = out(4, 4);
    Tensor* dx = ctx.has_output(0) ? &ctx.allocate_output(0, x.dtype(), x.dims()) : nullptr;
    if (channels == 0) return;
    Tensor stats = ctx.scratch(DataType::kFloat64, {4 * channels});
    double* ps = static_cast<double*>(stats.raw());
    const cudaStream_t s = stream_of(ctx);
    dispatch_float(x.dtype(), [&](auto tag) {
      using S = typename decltype(tag)::type;
      const S* pdy = static_cast<const S*>(dy.raw());
      const S* px = static_cast<const S*>(x.raw());
      bn_grad_stats_kernel<S><<<blocks_for(channels), kBlock, 0, s>>>(channels, batch, spatial, pdy, px, p, training_, ps,
                                                                     dscale, dbias, dmean, dvar);
      OTTER_CUDA_LAUNCH_CHECK();
      if (!dx || x.numel() == 0) return;
      bn_grad_dx_kernel<S><<<grid_for(x.numel()), kBlock, 0, s>>>(x.numel(), channels, spatial, m, pdy, px, p, training_,
                                                                  ps, static_cast<S*>(dx->raw()));
      OTTER_CUDA_LAUNCH_CHECK();
    });
  }

 private:
  float epsilon_;
  bool training_;
};

// One block per row: with g = dY scale and xhat the normalised row,
// dX = inv (g - mean(g) - xhat mean(g xhat)); the row's mean and inv go to `stats` for the
// parameter gradients.
template <typename S>
__global__ void layer_norm_grad_kernel(int64_t rows, int64_t cols, const S* dy, const S* x, const S* scale,
                                       const S* dres, S* dx, float* stats, float eps) {
  OTTER_BLOCK_STRIDE(r, rows) {
    const S* xr = x + r * cols;
    const S* gr = dy + r * cols;
    float s = 0;
    for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) s += load_value(xr[j]);
    const float mean = block_reduce(s, SumOp{}, 0.f) / static_cast<float>(cols);
    float ss = 0;
    for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) {
      const float dv = load_value(xr[j]) - mean;
      ss += dv * dv;
    }
    const float inv = 1.f / sqrtf(block_reduce(ss, SumOp{}, 0.f) / static_cast<float>(cols) + eps);
    float sg = 0, sgx = 0;
    for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) {
      const float g = load_value(gr[j]) * load_value(scale[j]);
      sg += g;
      sgx += g * (load_value(xr[j]) - mean) * inv;
    }
    const float mg = block_reduce(sg, SumOp{}, 0.f) / static_cast<float>(cols);
    const float mgx = block_reduce(sgx, SumOp{}, 0.f) / static_cast<float>(cols);
    if (dx)
      for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) {
        const float xhat = (load_value(xr[j]) - mean) * inv;
        float v = inv * (load_value(gr[j]) * load_value(scale[j]) - mg - xhat * mgx);
        if (dres) v += load_value(dres[r * cols + j]);  // AddLayerNorm's gradient: the sum's other gradient
        dx[r * cols + j] = store_value<S>(v);
      }
    if (threadIdx.x == 0) {
      stats[2 * r] = mean;
      stats[2 * r + 1] = inv;
    }
  }
}

// One thread per column: dScale = sum over rows of dY xhat, dB = sum of dY (double, in row order).
template <typename S>
__global__ void layer_norm_param_grad_kernel(int64_t rows, int64_t cols, const S* dy, const S* x, const float* stats,
                                             S* dscale, S* dbias) {
  OTTER_GRID_STRIDE(j, cols) {
    double sx = 0, sb = 0;
    for (int64_t r = 0; r < rows; ++r) {
      const double g = load_value(dy[r * cols + j]);
      sx += g * ((load_value(x[r * cols + j]) - stats[2 * r]) * stats[2 * r + 1]);
      sb += g;
    }
    if (dscale) dscale[j] = store_value<S>(static_cast<float>(sx));
    if (dbias) dbias[j] = store_value<S>(static_cast<float>(sb));
  }
}

// LayerNormalizationGrad(dY, X, scale, dResidual?) {axis, epsilon} -> dX?, dScale?, dB? (the last
// two of the normalised shape X.shape[axis:]; dResidual, of X's shape, added to dX).
class LayerNormGradKernel : public Kernel {
 public:
  explicit LayerNormGradKernel(const Node& n) : axis_(n.attr_i("axis", -1)), epsilon_(n.attr_f("epsilon", 1e-5f)) {}

  void run(KernelContext& ctx) override {
    const Tensor& dy = ctx.input(0);
    check_same(ctx, 1, dy, "X");
    const Tensor& x = ctx.input(1);
    const int64_t r = x.rank();
    const int64_t axis = axis_ < 0 ? axis_ + r : axis_;
    if (axis < 0 || axis >= r) ctx.error(str_cat("axis ", axis_, " out of range for X ", x.describe()));
    const std::vector<int64_t> norm_dims(x.dims().begin() + axis, x.dims().end());
    const int64_t cols = num_elements(norm_dims), rows = cols == 0 ? 0 : x.numel() / cols;
    const Tensor scale = row_operand(ctx, ctx.input(2), x, "Scale", norm_dims);
    Tensor* dx = ctx.has_output(0) ? &ctx.allocate_output(0, x.dtype(), x.dims()) : nullptr;
    if (ctx.has_input(3)) {
      check_same(ctx, 3, dy, "dResidual");
      if (!dx) ctx.error("input 3 (dResidual) needs output 0 (dX)");
    }
    Tensor* dscale = ctx.has_output(1) ? &ctx.allocate_output(1, x.dtype(), norm_dims) : nullptr;
    Tensor* dbias = ctx.has_output(2) ? &ctx.allocate_output(2, x.dtype(), norm_dims) : nullptr;
    if (cols == 0) return;
    const cudaStream_t s = stream_of(ctx);
    if (rows == 0) {  // empty sums
      for (Tensor* t : {dscale, dbias})
        if (t) OTTER_CUDA_CHECK(cudaMemsetAsync(t->raw(), 0, t->nbytes(), s));
      return;
    }
    Tensor stats = ctx.scratch(DataType::kFloat32, {2 * rows});
    dispatch_float(x.dtype(), [&](auto tag) {
      using S = typename decltype(tag)::type;
      auto ptr = [](Tensor* t) { return t ? static_cast<S*>(t->raw()) : nullptr; };
      const S* pdy = static_cast<const S*>(dy.raw());
      const S* px = static_cast<const S*>(x.raw());
      float* ps = static_cast<float*>(stats.raw());
      const S* pres = ctx.has_input(3) ? static_cast<const S*>(ctx.input(3).raw()) : nullptr;
      layer_norm_grad_kernel<S><<<blocks_for(rows), kBlock, 0, s>>>(
          rows, cols, pdy, px, static_cast<const S*>(scale.raw()), pres, ptr(dx), ps, epsilon_);
      OTTER_CUDA_LAUNCH_CHECK();
      if (!dscale && !dbias) return;
      layer_norm_param_grad_kernel<S><<<grid_for(cols), kBlock, 0, s>>>(rows, cols, pdy, px, ps, ptr(dscale), ptr(dbias));
      OTTER_CUDA_LAUNCH_CHECK();
    });
  }

 private:
  int64_t axis_;
  float epsilon_;
};

}  // namespace

KernelFactory nn_kernel(const std::string& op) {
  if (op == "LayerNormalization")
    return [](const Node& n) -> std::unique_ptr<Kernel> { return std::make_unique<LayerNormKernel>(n); };
  if (op == "BatchNormalization")
    return [](const Node& n) -> std::unique_ptr<Kernel> { return std::make_unique<BatchNormKernel>(n); };
  if (op == "Dropout") return [](const Node& n) -> std::unique_ptr<Kernel> { return std::make_unique<DropoutKernel>(n); };
  if (op == "BatchNormalizationGrad")
    return [](const Node& n) -> std::unique_ptr<Kernel> { return std::make_unique<BatchNormGradKernel>(n); };
  if (op == "LayerNormalizationGrad")
    return [](const Node& n) -> std::unique_ptr<Kernel> { return std::make_unique<LayerNormGradKernel>(n); };
  fail("nn_kernel: no CUDA kernel for ", op);
}

}  // namespace otter::cuda
