// CUDA kernels for softmax and the classification losses: Softmax, LogSoftmax,
// SoftmaxCrossEntropyLoss and NegativeLogLikelihoodLoss, and their gradients (SoftmaxGrad,
// LogSoftmaxGrad, SoftmaxCrossEntropyLossGrad, NegativeLogLikelihoodLossGrad). Half types compute in
// float; the loss sums accumulate in double as on the CPU.
#include <cmath>

#include "kernels/common/nn_params.h"
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
    const params::SoftmaxView v = params::resolve_softmax(ctx, x, axis_, coerce_2d_);
    const int64_t outer = v.outer, d = v.d, inner = v.inner;
    Tensor& y = ctx.allocate_output(0, x.dtype(), x.dims());
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


// ---- SoftmaxCrossEntropyLoss / NegativeLogLikelihoodLoss -----------------------------------------

struct LossArgs {
  int64_t positions, classes, inner;
  bool has_ignore;
  int64_t ignore;
  DeviceError* slot;
  int reporter;
};

// Over one position's scores xs[c * inner], c < classes: returns the block's maximum (0 where all
// are -inf) and sets `sum` to the block's sum of exp(x - max) in double; every thread gets both.
template <typename S>
__device__ float block_max_sumexp(const S* xs, int64_t classes, int64_t inner, double& sum) {
  float mx = -INFINITY;
  for (int64_t c = threadIdx.x; c < classes; c += blockDim.x) mx = fmaxf(mx, load_value(xs[c * inner]));
  mx = block_reduce(mx, MaxF{}, -INFINITY);
  if (isinf(mx) && mx < 0) mx = 0;
  double part = 0;
  for (int64_t c = threadIdx.x; c < classes; c += blockDim.x)
    part += exp(static_cast<double>(load_value(xs[c * inner]) - mx));
  sum = block_reduce(part, SumOp{}, 0.0);
  return mx;
}

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
      double sum;
      const float mx = block_max_sumexp(xs, a.classes, a.inner, sum);
      const double ls = log(sum);
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
    reduction_ = params::loss_reduction(n);
  }

  void run(KernelContext& ctx) override {
    const Tensor& x = ctx.input(0);
    const Tensor& labels = ctx.input(1);
    const params::LossDims ld = params::check_loss_inputs(ctx, softmax_);
    const int64_t batch = ld.batch, classes = ld.classes, inner = ld.inner;
    const std::vector<int64_t>& ldims = ld.label_dims;
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
  using Reduction = params::LossReduction;
  bool softmax_;
  bool has_ignore_;
  int64_t ignore_;
  Reduction reduction_ = Reduction::kMean;
  ErrorReporter reporter_;
};


// ---- gradients (ai.otter) ----------------------------------------------------------------------

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
    double sum;
    const float mx = block_max_sumexp(xs, a.classes, a.inner, sum);
    const double inv = 1.0 / sum;
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
}  // namespace

KernelFactory softmax_loss_kernel(const std::string& op) {
  if (op == "Softmax" || op == "LogSoftmax")
    return [log = op == "LogSoftmax"](const Node& n) -> std::unique_ptr<Kernel> {
      return std::make_unique<SoftmaxKernel>(n, log);
    };
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
  fail("softmax_loss_kernel: no CUDA kernel for ", op);
}

}  // namespace otter::cuda
