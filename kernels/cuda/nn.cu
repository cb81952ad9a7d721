// CUDA kernels for normalisation, softmax, dropout and the classification losses:
// BatchNormalization (training statistics and inference), LayerNormalization, Softmax, LogSoftmax,
// Dropout (Philox4x32-10, deterministic per seed), SoftmaxCrossEntropyLoss and
// NegativeLogLikelihoodLoss, and their gradients (SoftmaxGrad, LogSoftmaxGrad, the two loss
// gradients, BatchNormalizationGrad, LayerNormalizationGrad). Half types compute in float;
// statistics over many elements (batch norm, loss sums) accumulate in double as on the CPU.
#include <cmath>

#include "kernels/common/philox.h"
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/cuda_kernels.h"

namespace otter::cuda {
namespace {

struct MaxF {
  __device__ float operator()(float a, float b) const { return fmaxf(a, b); }
};

// ---- Softmax / LogSoftmax ----------------------------------------------------------------------

// One block per row of d contiguous values. The maximum is subtracted first (all -inf: 0), and
// LogSoftmax computes (x - max) - log(sum) so large offsets cancel exactly.
template <typename S, bool kLog>
__global__ void softmax_rows_kernel(int64_t rows, int64_t d, const S* x, S* y) {
  OTTER_BLOCK_STRIDE(r, rows) {
    const S* xr = x + r * d;
    S* yr = y + r * d;
    float mx = -INFINITY;
    for (int64_t j = threadIdx.x; j < d; j += blockDim.x) mx = fmaxf(mx, load_value(xr[j]));
    mx = block_reduce(mx, MaxF{}, -INFINITY);
    if (isinf(mx) && mx < 0) mx = 0;
    float sum = 0;
    for (int64_t j = threadIdx.x; j < d; j += blockDim.x) sum += expf(load_value(xr[j]) - mx);
    sum = block_reduce(sum, SumOp{}, 0.f);
    if (kLog) {
      const float ls = logf(sum);
      for (int64_t j = threadIdx.x; j < d; j += blockDim.x) yr[j] = store_value<S>((load_value(xr[j]) - mx) - ls);
    } else {
      const float inv = 1.f / sum;
      for (int64_t j = threadIdx.x; j < d; j += blockDim.x) yr[j] = store_value<S>(expf(load_value(xr[j]) - mx) * inv);
    }
  }
}

// One thread per column of a [outer, d, inner] layout with inner > 1.
template <typename S, bool kLog>
__global__ void softmax_cols_kernel(int64_t columns, int64_t d, int64_t inner, const S* x, S* y) {
  OTTER_GRID_STRIDE(t, columns) {
    const int64_t base = (t / inner) * d * inner + t % inner;
    float mx = -INFINITY;
    for (int64_t i = 0; i < d; ++i) mx = fmaxf(mx, load_value(x[base + i * inner]));
    if (isinf(mx) && mx < 0) mx = 0;
    float sum = 0;
    for (int64_t i = 0; i < d; ++i) sum += expf(load_value(x[base + i * inner]) - mx);
    if (kLog) {
      const float ls = logf(sum);
      for (int64_t i = 0; i < d; ++i)
        y[base + i * inner] = store_value<S>((load_value(x[base + i * inner]) - mx) - ls);
    } else {
      const float inv = 1.f / sum;
      for (int64_t i = 0; i < d; ++i)
        y[base + i * inner] = store_value<S>(expf(load_value(x[base + i * inner]) - mx) * inv);
    }
  }
}

// Softmax / LogSoftmax. Opset >= 13: over the single axis `axis` (default -1). Opsets 11-12: X is
// coerced to 2-D at `axis` (default 1) and the softmax runs over the flattened trailing part.
class SoftmaxKernel : public Kernel {
 public:
  SoftmaxKernel(const Node& n, bool log)
      : log_(log), coerce_2d_(n.opset() < 13), axis_(n.attr_i("axis", n.opset() < 13 ? 1 : -1)) {}

  void run(KernelContext& ctx) override {
    const Tensor& x = ctx.input(0);
    const int64_t r = x.rank();
    const int64_t axis = axis_ < 0 ? axis_ + r : axis_;
    if (r == 0 || axis < 0 || axis >= r) ctx.error(str_cat("axis ", axis_, " out of range for ", x.describe()));
    Tensor& y = ctx.allocate_output(0, x.dtype(), x.dims());
    int64_t outer = 1, d = x.dim(axis), inner = 1;
    for (int64_t i = 0; i < axis; ++i) outer *= x.dim(i);
    for (int64_t i = axis + 1; i < r; ++i) inner *= x.dim(i);
    if (coerce_2d_) {
      d *= inner;
      inner = 1;
    }
    if (x.numel() == 0) return;
    dispatch_float(x.dtype(), [&](auto tag) {
      using S = typename decltype(tag)::type;
      const S* px = static_cast<const S*>(x.raw());
      S* py = static_cast<S*>(y.raw());
      const cudaStream_t s = stream_of(ctx);
      if (inner == 1) {
        if (log_) softmax_rows_kernel<S, true><<<blocks_for(outer), kBlock, 0, s>>>(outer, d, px, py);
        else softmax_rows_kernel<S, false><<<blocks_for(outer), kBlock, 0, s>>>(outer, d, px, py);
      } else {
        const int64_t cols = outer * inner;
        if (log_) softmax_cols_kernel<S, true><<<grid_for(cols), kBlock, 0, s>>>(cols, d, inner, px, py);
        else softmax_cols_kernel<S, false><<<grid_for(cols), kBlock, 0, s>>>(cols, d, inner, px, py);
      }
      OTTER_CUDA_LAUNCH_CHECK();
    });
  }

 private:
  bool log_, coerce_2d_;
  int64_t axis_;
};

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
    if (n.opset() >= 14) {
      training_ = n.attr_i("training_mode", 0) != 0;
    } else {
      for (int i = 1; i < n.num_outputs(); ++i) training_ |= n.output(i) != nullptr;
    }
  }

  void run(KernelContext& ctx) override {
    const Tensor& x = ctx.input(0);
    if (x.rank() < 2) ctx.error(str_cat("X must have rank >= 2 (N, C, ...), got ", x.describe()));
    const int64_t batch = x.dim(0), channels = x.dim(1);
    const int64_t spatial = channels == 0 || batch == 0 ? 0 : x.numel() / (batch * channels);
    static const char* kNames[] = {"X", "scale", "B", "input_mean", "input_var"};
    for (int i = 1; i < 5; ++i) {
      const Tensor& p = ctx.input(i);
      if (p.numel() != channels || p.rank() != 1)
        ctx.error(str_cat("channel mismatch: ", kNames[i], " ", p.describe(), " for X ", x.describe()));
      if (!is_float(p.dtype())) ctx.error(str_cat(kNames[i], " must be a float tensor, got ", p.describe()));
    }
    const BnParams p{ctx.input(1).raw(), ctx.input(2).raw(), ctx.input(3).raw(), ctx.input(4).raw(),
                     ctx.input(1).dtype(), ctx.input(2).dtype(), ctx.input(3).dtype(), ctx.input(4).dtype(),
                     static_cast<double>(epsilon_), static_cast<double>(momentum_)};
    Tensor& y = ctx.allocate_output(0, x.dtype(), x.dims());
    Tensor ab = ctx.scratch(DataType::kFloat32, {2, channels});
    float* a = static_cast<float*>(ab.raw());
    float* b = a + channels;
    BnChannelOut o{a, b, nullptr, nullptr, nullptr, nullptr};
    if (training_) {
      if (channels > 0 && batch * spatial == 0)
        ctx.error(str_cat("training-mode statistics need elements per channel, X is ", x.describe()));
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

// ---- SoftmaxCrossEntropyLoss / NegativeLogLikelihoodLoss -----------------------------------------

struct LossArgs {
  int64_t positions, classes, inner;
  bool has_ignore;
  int64_t ignore;
  DeviceError* slot;
  int reporter;
};

// One block per position: the label's log-probability (log-softmax of the scores, or the input
// itself for NLL), times its weight; per-position loss and weight go to double scratch.
template <typename S, typename L, bool kSoftmax>
__global__ void loss_kernel(LossArgs a, const S* x, const L* labels, const S* weights, S* log_prob, double* loss,
                            double* wsum) {
  OTTER_BLOCK_STRIDE(p, a.positions) {
    const int64_t nb = p / a.inner, d = p % a.inner;
    const S* xs = x + nb * a.classes * a.inner + d;
    const int64_t label = static_cast<int64_t>(labels[p]);
    const bool in_range = label >= 0 && label < a.classes;
    double lp = 0;
    if (kSoftmax) {
      float mx = -INFINITY;
      for (int64_t c = threadIdx.x; c < a.classes; c += blockDim.x) mx = fmaxf(mx, load_value(xs[c * a.inner]));
      mx = block_reduce(mx, MaxF{}, -INFINITY);
      if (isinf(mx) && mx < 0) mx = 0;
      double sum = 0;
      for (int64_t c = threadIdx.x; c < a.classes; c += blockDim.x)
        sum += exp(static_cast<double>(load_value(xs[c * a.inner]) - mx));
      const double ls = log(block_reduce(sum, SumOp{}, 0.0));
      if (log_prob) {
        S* lps = log_prob + nb * a.classes * a.inner + d;
        for (int64_t c = threadIdx.x; c < a.classes; c += blockDim.x)
          lps[c * a.inner] = store_value<S>(static_cast<float>((load_value(xs[c * a.inner]) - mx) - ls));
      }
      if (in_range) lp = static_cast<double>(load_value(xs[label * a.inner]) - mx) - ls;
    } else if (in_range) {
      lp = load_value(xs[label * a.inner]);
    }
    if (threadIdx.x == 0) {
      double l = 0, w = 0;
      if (a.has_ignore && label == a.ignore) {
        // ignored: no loss, no weight
      } else if (!in_range) {
        report_error(a.slot, a.reporter, 1, label, p, a.classes);
      } else {
        w = weights ? static_cast<double>(load_value(weights[label])) : 1.0;
        l = -lp * w;
      }
      loss[p] = l;
      wsum[p] = w;
    }
  }
}

// One block: the sum of the per-position losses (divided by the weight sum for a mean).
template <typename S>
__global__ void loss_total_kernel(int64_t positions, const double* loss, const double* wsum, S* out, bool mean) {
  double t = 0, w = 0;
  for (int64_t p = threadIdx.x; p < positions; p += blockDim.x) {
    t += loss[p];
    w += wsum[p];
  }
  t = block_reduce(t, SumOp{}, 0.0);
  w = block_reduce(w, SumOp{}, 0.0);
  if (threadIdx.x == 0) out[0] = store_value<S>(static_cast<float>(mean ? t / w : t));
}

template <typename S>
__global__ void loss_none_kernel(int64_t positions, const double* loss, S* out) {
  OTTER_GRID_STRIDE(p, positions) { out[p] = store_value<S>(static_cast<float>(loss[p])); }
}

// scores/log-probabilities [N, C, d1..dk], labels [N, d1..dk] (int32/int64), optional weights [C].
// Per position: loss = -logp[label] * w[label] (0 where label == ignore_index); reduction none
// returns that tensor, sum its sum, mean its sum divided by the sum of the weights of the
// non-ignored positions. A label outside [0, C) (and not ignore_index) is reported.
class LossKernel : public Kernel {
 public:
  LossKernel(const Node& n, bool softmax)
      : softmax_(softmax),
        has_ignore_(n.has_attr("ignore_index")),
        ignore_(n.attr_i("ignore_index", 0)),
        reporter_(n, [](const DeviceError& e) {
          return str_cat("label ", e.a, " at flat position ", e.b, " is out of range [0, ", e.c, ")");
        }) {
    const std::string red = n.attr_s("reduction", "mean");
    if (red == "none") reduction_ = Reduction::kNone;
    else if (red == "sum") reduction_ = Reduction::kSum;
    else if (red == "mean") reduction_ = Reduction::kMean;
    else fail(n.describe(), ": unknown reduction '", red, "' (none, sum or mean)");
  }

  void run(KernelContext& ctx) override {
    const Tensor& x = ctx.input(0);
    const Tensor& labels = ctx.input(1);
    const char* xname = softmax_ ? "scores" : "input";
    if (x.rank() < 2) ctx.error(str_cat(xname, " must have rank >= 2 (N, C, ...), got ", x.describe()));
    const int64_t batch = x.dim(0), classes = x.dim(1);
    std::vector<int64_t> ldims = {batch};
    ldims.insert(ldims.end(), x.dims().begin() + 2, x.dims().end());
    if (labels.dims() != ldims)
      ctx.error(str_cat("labels ", labels.describe(), " must have shape ", dims_to_string(ldims), " for ", xname, " ",
                        x.describe()));
    if (labels.dtype() != DataType::kInt64 && labels.dtype() != DataType::kInt32)
      ctx.error(str_cat("labels must be int32 or int64, got ", labels.describe()));
    if (ctx.has_input(2)) {
      const Tensor& w = ctx.input(2);
      if (w.rank() != 1 || w.dim(0) != classes || w.dtype() != x.dtype())
        ctx.error(str_cat("weights ", w.describe(), " must be [", classes, "] of the type of ", xname));
    }
    const int64_t inner = num_elements(std::vector<int64_t>(x.dims().begin() + 2, x.dims().end()));
    CudaDevice& dev = device_of(ctx);
    const LossArgs args{batch * inner, classes, inner, has_ignore_, ignore_, dev.error_slot(), reporter_.id(dev)};
    Tensor scratch = ctx.scratch(DataType::kFloat64, {2, args.positions});
    double* loss = static_cast<double*>(scratch.raw());
    double* wsum = loss + args.positions;
    const cudaStream_t s = dev.cuda_stream();
    dispatch_float(x.dtype(), [&](auto tag) {
      using S = typename decltype(tag)::type;
      S* log_prob = softmax_ && ctx.has_output(1) ? static_cast<S*>(ctx.allocate_output(1, x.dtype(), x.dims()).raw()) : nullptr;
      const S* weights = ctx.has_input(2) ? static_cast<const S*>(ctx.input(2).raw()) : nullptr;
      Tensor& out = ctx.allocate_output(0, x.dtype(), reduction_ == Reduction::kNone ? ldims : std::vector<int64_t>{});
      if (args.positions > 0) {
        auto launch = [&](auto* lab) {
          using L = std::remove_const_t<std::remove_pointer_t<decltype(lab)>>;
          if (softmax_)
            loss_kernel<S, L, true><<<blocks_for(args.positions), kBlock, 0, s>>>(args, static_cast<const S*>(x.raw()), lab,
                                                                                  weights, log_prob, loss, wsum);
          else
            loss_kernel<S, L, false><<<blocks_for(args.positions), kBlock, 0, s>>>(args, static_cast<const S*>(x.raw()), lab,
                                                                                   weights, log_prob, loss, wsum);
          OTTER_CUDA_LAUNCH_CHECK();
        };
        if (labels.dtype() == DataType::kInt64) launch(static_cast<const int64_t*>(labels.raw()));
        else launch(static_cast<const int32_t*>(labels.raw()));
      }
      if (reduction_ == Reduction::kNone) {
        if (args.positions == 0) return;
        loss_none_kernel<S><<<grid_for(args.positions), kBlock, 0, s>>>(args.positions, loss, static_cast<S*>(out.raw()));
      } else {
        loss_total_kernel<S><<<1, kBlock, 0, s>>>(args.positions, loss, wsum, static_cast<S*>(out.raw()),
                                                  reduction_ == Reduction::kMean);
      }
      OTTER_CUDA_LAUNCH_CHECK();
    });
  }

 private:
  enum class Reduction { kNone, kSum, kMean };
  bool softmax_;
  bool has_ignore_;
  int64_t ignore_;
  Reduction reduction_ = Reduction::kMean;
  ErrorReporter reporter_;
};

// ---- gradients (ai.otter) ----------------------------------------------------------------------

void check_same(const KernelContext& ctx, int i, const Tensor& ref, const char* what) {
  const Tensor& t = ctx.input(i);
  if (t.dtype() != ref.dtype() || t.dims() != ref.dims())
    ctx.error(str_cat(what, " ", t.describe(), " must match dY ", ref.describe()));
}

// Softmax: dX = Y (dY - sum(dY Y)); LogSoftmax: dX = dY - exp(Y) sum(dY); sums along the axis.
template <typename S, bool kLog>
__device__ float softmax_grad_term(const S* dy, const S* y, int64_t k) {
  return kLog ? load_value(dy[k]) : load_value(dy[k]) * load_value(y[k]);
}
template <typename S, bool kLog>
__device__ S softmax_grad_value(const S* dy, const S* y, int64_t k, float sum) {
  const float g = load_value(dy[k]), v = load_value(y[k]);
  return store_value<S>(kLog ? g - expf(v) * sum : v * (g - sum));
}

// One block per row of d contiguous values.
template <typename S, bool kLog>
__global__ void softmax_grad_rows_kernel(int64_t rows, int64_t d, const S* dy, const S* y, S* dx) {
  OTTER_BLOCK_STRIDE(r, rows) {
    const int64_t base = r * d;
    float sum = 0;
    for (int64_t j = threadIdx.x; j < d; j += blockDim.x) sum += softmax_grad_term<S, kLog>(dy, y, base + j);
    sum = block_reduce(sum, SumOp{}, 0.f);
    for (int64_t j = threadIdx.x; j < d; j += blockDim.x) dx[base + j] = softmax_grad_value<S, kLog>(dy, y, base + j, sum);
  }
}

// One thread per column of a [outer, d, inner] layout with inner > 1.
template <typename S, bool kLog>
__global__ void softmax_grad_cols_kernel(int64_t columns, int64_t d, int64_t inner, const S* dy, const S* y, S* dx) {
  OTTER_GRID_STRIDE(t, columns) {
    const int64_t base = (t / inner) * d * inner + t % inner;
    float sum = 0;
    for (int64_t i = 0; i < d; ++i) sum += softmax_grad_term<S, kLog>(dy, y, base + i * inner);
    for (int64_t i = 0; i < d; ++i) dx[base + i * inner] = softmax_grad_value<S, kLog>(dy, y, base + i * inner, sum);
  }
}

class SoftmaxGradKernel : public Kernel {
 public:
  SoftmaxGradKernel(const Node& n, bool log) : log_(log), axis_(n.attr_i("axis", -1)) {}
  void run(KernelContext& ctx) override {
    const Tensor& dy = ctx.input(0);
    check_same(ctx, 1, dy, "Y");
    const int64_t r = dy.rank();
    if (axis_ < -r || axis_ >= r) ctx.error(str_cat("axis ", axis_, " is out of range for ", dy.describe()));
    const int64_t axis = axis_ < 0 ? axis_ + r : axis_;
    int64_t outer = 1, inner = 1;
    for (int64_t i = 0; i < axis; ++i) outer *= dy.dim(i);
    for (int64_t i = axis + 1; i < r; ++i) inner *= dy.dim(i);
    const int64_t d = dy.dim(axis);
    Tensor& dx = ctx.allocate_output(0, dy.dtype(), dy.dims());
    if (dy.numel() == 0) return;
    dispatch_float(dy.dtype(), [&](auto tag) {
      using S = typename decltype(tag)::type;
      const S* pg = static_cast<const S*>(dy.raw());
      const S* py = static_cast<const S*>(ctx.input(1).raw());
      S* po = static_cast<S*>(dx.raw());
      const cudaStream_t s = stream_of(ctx);
      if (inner == 1) {
        if (log_) softmax_grad_rows_kernel<S, true><<<blocks_for(outer), kBlock, 0, s>>>(outer, d, pg, py, po);
        else softmax_grad_rows_kernel<S, false><<<blocks_for(outer), kBlock, 0, s>>>(outer, d, pg, py, po);
      } else {
        const int64_t cols = outer * inner;
        if (log_) softmax_grad_cols_kernel<S, true><<<grid_for(cols), kBlock, 0, s>>>(cols, d, inner, pg, py, po);
        else softmax_grad_cols_kernel<S, false><<<grid_for(cols), kBlock, 0, s>>>(cols, d, inner, pg, py, po);
      }
      OTTER_CUDA_LAUNCH_CHECK();
    });
  }

 private:
  bool log_;
  int64_t axis_;
};

// Per position: the weight it counts with (0 when ignored); labels out of range are reported.
template <typename S, typename L>
__global__ void loss_weights_kernel(LossArgs a, const L* labels, const S* weights, double* w) {
  OTTER_GRID_STRIDE(p, a.positions) {
    const int64_t l = static_cast<int64_t>(labels[p]);
    if (a.has_ignore && l == a.ignore) {
      w[p] = 0;
    } else if (l < 0 || l >= a.classes) {
      report_error(a.slot, a.reporter, 1, l, p, a.classes);
      w[p] = 0;
    } else {
      w[p] = weights ? static_cast<double>(load_value(weights[l])) : 1.0;
    }
  }
}

// One block: the sum of the weights, in a fixed order.
__global__ void sum_kernel(int64_t n, const double* v, double* out) {
  double s = 0;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) s += v[i];
  s = block_reduce(s, SumOp{}, 0.0);
  if (threadIdx.x == 0) *out = s;
}

// One block per position: g = dL (or dL[p]) * w_p (/ the weight sum for mean); SCE writes
// (softmax - onehot(label)) * g over the classes, NLL -g at the label, zeros elsewhere.
template <typename S, typename L, bool kSoftmax>
__global__ void loss_grad_kernel(LossArgs a, const S* dl, bool per_position, const double* wsum, const S* x,
                                 const L* labels, const double* w, S* dx) {
  OTTER_BLOCK_STRIDE(p, a.positions) {
    const int64_t nb = p / a.inner, d = p % a.inner;
    const S* xs = x + nb * a.classes * a.inner + d;
    S* gs = dx + nb * a.classes * a.inner + d;
    const int64_t l = static_cast<int64_t>(labels[p]);
    const double g = static_cast<double>(load_value(dl[per_position ? p : 0])) * (wsum ? 1.0 / *wsum : 1.0) * w[p];
    if (w[p] == 0 || !kSoftmax) {  // ignored (or weight 0), or NLL: only the label's class
      const bool at_label = !kSoftmax && w[p] != 0;
      for (int64_t c = threadIdx.x; c < a.classes; c += blockDim.x)
        gs[c * a.inner] = store_value<S>(static_cast<float>(at_label && c == l ? -g : 0.0));
      continue;
    }
    float mx = -INFINITY;
    for (int64_t c = threadIdx.x; c < a.classes; c += blockDim.x) mx = fmaxf(mx, load_value(xs[c * a.inner]));
    mx = block_reduce(mx, MaxF{}, -INFINITY);
    if (isinf(mx) && mx < 0) mx = 0;
    double sum = 0;
    for (int64_t c = threadIdx.x; c < a.classes; c += blockDim.x)
      sum += exp(static_cast<double>(load_value(xs[c * a.inner]) - mx));
    const double inv = 1.0 / block_reduce(sum, SumOp{}, 0.0);
    for (int64_t c = threadIdx.x; c < a.classes; c += blockDim.x) {
      const double prob = exp(static_cast<double>(load_value(xs[c * a.inner]) - mx)) * inv;
      gs[c * a.inner] = store_value<S>(static_cast<float>((prob - (c == l ? 1.0 : 0.0)) * g));
    }
  }
}

// SoftmaxCrossEntropyLossGrad / NegativeLogLikelihoodLossGrad(dL, scores, labels, weights?)
// {reduction, ignore_index} -> dScores (docs/ops.md).
class LossGradKernel : public Kernel {
 public:
  LossGradKernel(const Node& n, bool softmax)
      : softmax_(softmax),
        has_ignore_(n.has_attr("ignore_index")),
        ignore_(n.attr_i("ignore_index", 0)),
        reduction_(n.attr_s("reduction", "mean")),
        reporter_(n, [](const DeviceError& e) {
          return str_cat("label ", e.a, " at flat position ", e.b, " is out of range [0, ", e.c, ")");
        }) {
    if (reduction_ != "none" && reduction_ != "sum" && reduction_ != "mean")
      fail(n.describe(), ": unknown reduction '", reduction_, "' (none, sum or mean)");
  }

  void run(KernelContext& ctx) override {
    const Tensor& dl = ctx.input(0);
    const Tensor& x = ctx.input(1);
    const Tensor& labels = ctx.input(2);
    if (x.rank() < 2 || dl.dtype() != x.dtype())
      ctx.error(str_cat("scores ", x.describe(), " must have rank >= 2 and dL's type ", dl.describe()));
    if (labels.dtype() != DataType::kInt64 && labels.dtype() != DataType::kInt32)
      ctx.error(str_cat("labels must be int32 or int64, got ", labels.describe()));
    const int64_t batch = x.dim(0), classes = x.dim(1);
    std::vector<int64_t> ldims = {batch};
    ldims.insert(ldims.end(), x.dims().begin() + 2, x.dims().end());
    if (labels.dims() != ldims) ctx.error(str_cat("labels ", labels.describe(), " must have shape ", dims_to_string(ldims)));
    const bool none = reduction_ == "none";
    if (none ? dl.dims() != ldims : dl.numel() != 1)
      ctx.error(str_cat("dL ", dl.describe(), " does not match reduction '", reduction_, "'"));
    if (ctx.has_input(3)) {
      const Tensor& w = ctx.input(3);
      if (w.rank() != 1 || w.dim(0) != classes || w.dtype() != x.dtype())
        ctx.error(str_cat("weights ", w.describe(), " must be [", classes, "] of the scores' type"));
    }
    Tensor& dx = ctx.allocate_output(0, x.dtype(), x.dims());
    const int64_t inner = num_elements(std::vector<int64_t>(x.dims().begin() + 2, x.dims().end()));
    CudaDevice& dev = device_of(ctx);
    const LossArgs args{batch * inner, classes, inner, has_ignore_, ignore_, dev.error_slot(), reporter_.id(dev)};
    if (args.positions == 0 || classes == 0) return;
    Tensor scratch = ctx.scratch(DataType::kFloat64, {args.positions + 1});
    double* w = static_cast<double*>(scratch.raw());
    double* wsum = w + args.positions;
    const cudaStream_t s = dev.cuda_stream();
    dispatch_float(x.dtype(), [&](auto tag) {
      using S = typename decltype(tag)::type;
      const S* weights = ctx.has_input(3) ? static_cast<const S*>(ctx.input(3).raw()) : nullptr;
      auto launch = [&](auto* lab) {
        using L = std::remove_const_t<std::remove_pointer_t<decltype(lab)>>;
        loss_weights_kernel<S, L><<<grid_for(args.positions), kBlock, 0, s>>>(args, lab, weights, w);
        OTTER_CUDA_LAUNCH_CHECK();
        const bool mean = reduction_ == "mean";
        if (mean) {
          sum_kernel<<<1, kBlock, 0, s>>>(args.positions, w, wsum);
          OTTER_CUDA_LAUNCH_CHECK();
        }
        const S* pdl = static_cast<const S*>(dl.raw());
        const S* px = static_cast<const S*>(x.raw());
        S* pdx = static_cast<S*>(dx.raw());
        if (softmax_)
          loss_grad_kernel<S, L, true><<<blocks_for(args.positions), kBlock, 0, s>>>(args, pdl, none, mean ? wsum : nullptr,
                                                                                     px, lab, w, pdx);
        else
          loss_grad_kernel<S, L, false><<<blocks_for(args.positions), kBlock, 0, s>>>(args, pdl, none, mean ? wsum : nullptr,
                                                                                      px, lab, w, pdx);
        OTTER_CUDA_LAUNCH_CHECK();
      };
      if (labels.dtype() == DataType::kInt64) launch(static_cast<const int64_t*>(labels.raw()));
      else launch(static_cast<const int32_t*>(labels.raw()));
    });
  }

 private:
  bool softmax_;
  bool has_ignore_;
  int64_t ignore_;
  std::string reduction_;
  ErrorReporter reporter_;
};

// Per channel: mean, inv = 1/sqrt(var + eps), sum dY, sum dY * xhat (double), and the parameter
// gradient outputs; stats[4c .. 4c+3] keeps the first four for the dX pass.
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
    check_same(ctx, 1, dy, "X");
    const Tensor& x = ctx.input(1);
    if (x.rank() < 2) ctx.error(str_cat("X must have rank >= 2, got ", x.describe()));
    const int64_t batch = x.dim(0), channels = x.dim(1);
    const int64_t spatial = batch * channels == 0 ? 0 : x.numel() / (batch * channels);
    for (int i = 2; i < 5; ++i)
      if (ctx.input(i).numel() != channels || !is_float(ctx.input(i).dtype()))
        ctx.error(str_cat("input ", i, " ", ctx.input(i).describe(), " must be a float tensor of ", channels, " channels"));
    const double m = static_cast<double>(batch * spatial);
    if (training_ && m == 0) ctx.error(str_cat("training-mode statistics need elements per channel, X is ", x.describe()));
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
__global__ void layer_norm_grad_kernel(int64_t rows, int64_t cols, const S* dy, const S* x, const S* scale, S* dx,
                                       float* stats, float eps) {
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
        dx[r * cols + j] = store_value<S>(inv * (load_value(gr[j]) * load_value(scale[j]) - mg - xhat * mgx));
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

// LayerNormalizationGrad(dY, X, scale) {axis, epsilon} -> dX?, dScale?, dB? (the last two of the
// normalised shape X.shape[axis:]).
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
      layer_norm_grad_kernel<S><<<blocks_for(rows), kBlock, 0, s>>>(rows, cols, pdy, px, static_cast<const S*>(scale.raw()),
                                                                   ptr(dx), ps, epsilon_);
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
  if (op == "Softmax" || op == "LogSoftmax")
    return [log = op == "LogSoftmax"](const Node& n) -> std::unique_ptr<Kernel> { return std::make_unique<SoftmaxKernel>(n, log); };
  if (op == "LayerNormalization")
    return [](const Node& n) -> std::unique_ptr<Kernel> { return std::make_unique<LayerNormKernel>(n); };
  if (op == "BatchNormalization")
    return [](const Node& n) -> std::unique_ptr<Kernel> { return std::make_unique<BatchNormKernel>(n); };
  if (op == "Dropout") return [](const Node& n) -> std::unique_ptr<Kernel> { return std::make_unique<DropoutKernel>(n); };
  if (op == "SoftmaxCrossEntropyLoss" || op == "NegativeLogLikelihoodLoss")
    return [softmax = op == "SoftmaxCrossEntropyLoss"](const Node& n) -> std::unique_ptr<Kernel> {
      return std::make_unique<LossKernel>(n, softmax);
    };
  if (op == "SoftmaxGrad" || op == "LogSoftmaxGrad")
    return [log = op == "LogSoftmaxGrad"](const Node& n) -> std::unique_ptr<Kernel> {
      return std::make_unique<SoftmaxGradKernel>(n, log);
    };
  if (op == "SoftmaxCrossEntropyLossGrad" || op == "NegativeLogLikelihoodLossGrad")
    return [softmax = op == "SoftmaxCrossEntropyLossGrad"](const Node& n) -> std::unique_ptr<Kernel> {
      return std::make_unique<LossGradKernel>(n, softmax);
    };
  if (op == "BatchNormalizationGrad")
    return [](const Node& n) -> std::unique_ptr<Kernel> { return std::make_unique<BatchNormGradKernel>(n); };
  if (op == "LayerNormalizationGrad")
    return [](const Node& n) -> std::unique_ptr<Kernel> { return std::make_unique<LayerNormGradKernel>(n); };
  fail("nn_kernel: no CUDA kernel for ", op);
}

}  // namespace otter::cuda
