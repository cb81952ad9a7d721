// CPU kernels for normalisation, softmax, dropout and the classification losses: BatchNormalization,
// LayerNormalization, Softmax, LogSoftmax, Dropout, SoftmaxCrossEntropyLoss, NegativeLogLikelihoodLoss.
#include <omp.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include "graph/op_table.h"
#include "kernels/common/nn_params.h"
#include "kernels/cpu/broadcast.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/float_kernel.h"
#include "kernels/cpu/dispatch.h"
#include "kernels/cpu/isa.h"
#include "kernels/cpu/lane_sum.h"
#include "kernels/cpu/layer_norm_row.h"

namespace otter {
namespace {

constexpr int64_t kParallelWork = 32768;  // elements below which OpenMP is not worth starting

// Reads a small float tensor (per-channel parameters, any float dtype) as doubles.
std::vector<double> as_doubles(const Tensor& t) {
  std::vector<double> v(static_cast<size_t>(t.numel()));
  for (int64_t i = 0; i < t.numel(); ++i) v[i] = t.get_as_double(i);
  return v;
}

void write_doubles(Tensor& t, const std::vector<double>& v) {
  OTTER_DISPATCH_FLOAT(t.dtype(), T, [&] {
    for (size_t i = 0; i < v.size(); ++i) t.data<T>()[i] = static_cast<T>(v[i]);
  });
}

// Unidirectional broadcast of a small tensor into `dims` (Scale/B of LayerNormalization).
template <typename T>
bool broadcast_into(const Tensor& src, const std::vector<int64_t>& dims, std::vector<T>& out) {
  const int64_t total = num_elements(dims);
  out.resize(static_cast<size_t>(total));
  if (src.rank() > static_cast<int64_t>(dims.size())) return false;
  const size_t off = dims.size() - src.rank();
  std::vector<int64_t> sstr(dims.size(), 0);
  int64_t s = 1;
  for (size_t i = dims.size(); i-- > off;) {
    const int64_t d = src.dims()[i - off];
    if (d != 1 && d != dims[i]) return false;
    sstr[i] = d == 1 ? 0 : s;
    s *= d;
  }
  const T* ps = src.data<T>();
  std::vector<int64_t> idx(dims.size(), 0);
  for (int64_t t = 0; t < total; ++t) {
    int64_t o = 0;
    for (size_t i = 0; i < dims.size(); ++i) o += idx[i] * sstr[i];
    out[t] = ps[o];
    for (size_t i = dims.size(); i-- > 0;) {
      if (++idx[i] < dims[i]) break;
      idx[i] = 0;
    }
  }
  return true;
}

// A float or double vector kept by a kernel between runs.
struct TypedBuffer {
  std::vector<float> f;
  std::vector<double> d;
  template <typename T>
  std::vector<T>& get() {
    if constexpr (std::is_same_v<T, float>) return f;
    else return d;
  }
};

// ---- BatchNormalization --------------------------------------------------------------------------

// Inference: Y = (X - mean) / sqrt(var + eps) * scale + B with the given statistics.
// Training (opset >= 14: training_mode=1; before: extra outputs requested): batch statistics over
// N and the spatial axes, Y normalised with the batch mean and the biased batch variance, and
//   running_mean = input_mean * momentum + batch_mean * (1 - momentum)
//   running_var  = input_var  * momentum + batch_var  * (1 - momentum)
// where batch_var is the population (biased) variance, as the ONNX spec of BatchNormalization-15
// says and its backend tests check. PyTorch's BatchNorm instead blends the unbiased variance
// (divisor count - 1) into running_var; an importer of PyTorch training semantics must correct
// for that (factor count / (count - 1)). Outputs 3 and 4 (saved_mean, saved_var of
// BatchNormalization-9) are filled with the batch mean and biased variance when requested.
class BatchNormKernel : public cpu::FloatKernel<BatchNormKernel> {
 public:
  explicit BatchNormKernel(const Node& n)
      : epsilon_(n.attr_f("epsilon", 1e-5f)), momentum_(n.attr_f("momentum", 0.9f)) {
    training_ = params::batch_norm_training(n);
  }

 private:
  friend cpu::FloatKernel<BatchNormKernel>;
  template <typename T>
  void compute(KernelContext& ctx) {
    const Tensor& x = ctx.input(0);
    static const char* const kNames[] = {"X", "scale", "B", "input_mean", "input_var"};
    const params::BatchNormDims bn = params::check_batch_norm(ctx, x, 1, kNames, training_);
    const int64_t batch = bn.batch, channels = bn.channels, spatial = bn.spatial;
    const std::vector<double> scale = as_doubles(ctx.input(1)), bias = as_doubles(ctx.input(2));
    const std::vector<double> in_mean = as_doubles(ctx.input(3)), in_var = as_doubles(ctx.input(4));
    Tensor& y = ctx.allocate_output(0, x.dtype(), x.dims());
    const T* px = x.data<T>();
    T* py = y.data<T>();

    std::vector<double> mean = in_mean, var = in_var;
    if (training_) {
      const int64_t count = batch * spatial;
      // Per channel, in double over lane_sum's 8 partial sums per image (vectorised).
#pragma omp parallel for schedule(static) if (x.numel() > kParallelWork)
      for (int64_t c = 0; c < channels; ++c) {
        double s = 0, ss = 0;
        cpu::isa_dispatch_if<std::is_same_v<T, float>>([&] {
          s = cpu::channel_sum(batch, channels, spatial, c, [&](int64_t i) { return static_cast<double>(px[i]); });
          const double m = s / static_cast<double>(count);
          ss = cpu::channel_sum(batch, channels, spatial, c, [&](int64_t i) {
            const double dv = px[i] - m;
            return dv * dv;
          });
        });
        mean[c] = s / static_cast<double>(count);
        var[c] = ss / static_cast<double>(count);
      }
    }
    // y = x * a + b per channel
    std::vector<T> a(channels), b(channels);
    for (int64_t c = 0; c < channels; ++c) {
      const double inv = 1.0 / std::sqrt(var[c] + static_cast<double>(epsilon_));
      a[c] = static_cast<T>(scale[c] * inv);
      b[c] = static_cast<T>(bias[c] - mean[c] * scale[c] * inv);
    }
    const int64_t planes = batch * channels;
#pragma omp parallel for schedule(static) if (x.numel() > kParallelWork)
    for (int64_t pl = 0; pl < planes; ++pl) {
      const int64_t c = pl % channels;
      const T av = a[c], bv = b[c];
      const T* p = px + pl * spatial;
      T* q = py + pl * spatial;
      cpu::isa_dispatch_if<std::is_same_v<T, float>>([&] {
        for (int64_t i = 0; i < spatial; ++i) q[i] = p[i] * av + bv;
      });
    }
    if (!training_) return;
    const double mom = momentum_;
    if (ctx.has_output(1)) {
      std::vector<double> rm(channels);
      for (int64_t c = 0; c < channels; ++c) rm[c] = in_mean[c] * mom + mean[c] * (1 - mom);
      write_doubles(ctx.allocate_output(1, ctx.input(3).dtype(), {channels}), rm);
    }
    if (ctx.has_output(2)) {
      std::vector<double> rv(channels);
      for (int64_t c = 0; c < channels; ++c) rv[c] = in_var[c] * mom + var[c] * (1 - mom);
      write_doubles(ctx.allocate_output(2, ctx.input(4).dtype(), {channels}), rv);
    }
    if (ctx.has_output(3)) write_doubles(ctx.allocate_output(3, ctx.input(3).dtype(), {channels}), mean);
    if (ctx.has_output(4)) write_doubles(ctx.allocate_output(4, ctx.input(4).dtype(), {channels}), var);
  }

  float epsilon_, momentum_;
  bool training_ = false;
};

// ---- LayerNormalization --------------------------------------------------------------------------

// Normalises over axes [axis, rank). Mean and InvStdDev have shape [d0..d(axis-1), 1, ..., 1] and
// the type stash_type names (1: float32, 11: float64). The statistics are computed in the wider of
// that type and X's type.
class LayerNormKernel : public Kernel {
 public:
  explicit LayerNormKernel(const Node& n)
      : axis_(n.attr_i("axis", -1)), epsilon_(n.attr_f("epsilon", 1e-5f)) {
    const int64_t stash = n.attr_i("stash_type", 1);
    if (stash == 1) stash_ = DataType::kFloat32;
    else if (stash == 11) stash_ = DataType::kFloat64;
    else fail(n.describe(), ": stash_type ", stash, " is not supported (1 = float32, 11 = float64)");
  }

  void run(KernelContext& ctx) override {
    OTTER_DISPATCH_FLOAT(ctx.input(0).dtype(), T, [&] {
      if (stash_ == DataType::kFloat64 || std::is_same_v<T, double>) compute<T, double>(ctx);
      else compute<T, float>(ctx);
    });
  }

 private:
  template <typename T, typename A>
  void compute(KernelContext& ctx) {
    const Tensor& x = ctx.input(0);
    const int64_t r = x.rank();
    const int64_t axis = axis_ < 0 ? axis_ + r : axis_;
    if (axis < 0 || axis > r) ctx.error(str_cat("axis ", axis_, " out of range for X ", x.describe()));
    const std::vector<int64_t> norm_dims(x.dims().begin() + axis, x.dims().end());
    const int64_t rows = num_elements(std::vector<int64_t>(x.dims().begin(), x.dims().begin() + axis));
    const int64_t cols = num_elements(norm_dims);
    const Tensor& sc = ctx.input(1);
    if (sc.dtype() != x.dtype()) ctx.error(str_cat("Scale has type ", sc.describe(), ", X ", x.describe()));
    const T* pscale = sc.data<T>();
    if (sc.numel() != cols || sc.rank() > static_cast<int64_t>(norm_dims.size())) {
      if (!broadcast_into<T>(sc, norm_dims, scale_buf_.get<T>()))
        ctx.error(str_cat("Scale ", sc.describe(), " does not broadcast to the normalised shape ",
                          dims_to_string(norm_dims)));
      pscale = scale_buf_.get<T>().data();
    }
    const T* pbias = nullptr;
    if (ctx.has_input(2)) {
      const Tensor& b = ctx.input(2);
      if (b.dtype() != x.dtype()) ctx.error(str_cat("B has type ", b.describe(), ", X ", x.describe()));
      pbias = b.data<T>();
      if (b.numel() != cols || b.rank() > static_cast<int64_t>(norm_dims.size())) {
        if (!broadcast_into<T>(b, norm_dims, bias_buf_.get<T>()))
          ctx.error(str_cat("B ", b.describe(), " does not broadcast to the normalised shape ",
                            dims_to_string(norm_dims)));
        pbias = bias_buf_.get<T>().data();
      }
    }
    Tensor& y = ctx.allocate_output(0, x.dtype(), x.dims());
    std::vector<int64_t> sdims(x.dims().begin(), x.dims().begin() + axis);
    sdims.resize(r, 1);
    Tensor* mean_t = ctx.has_output(1) ? &ctx.allocate_output(1, stash_, sdims) : nullptr;
    Tensor* inv_t = ctx.has_output(2) ? &ctx.allocate_output(2, stash_, sdims) : nullptr;
    const T* px = x.data<T>();
    T* py = y.data<T>();
    const A eps = static_cast<A>(epsilon_);
    auto store = [&](Tensor* t, int64_t row, A v) {
      if (!t) return;
      if (stash_ == DataType::kFloat32) t->data<float>()[row] = static_cast<float>(v);
      else t->data<double>()[row] = static_cast<double>(v);
    };
    cpu::row_ranges<std::is_same_v<T, float>>(rows, x.numel() > kParallelWork, [&](int64_t b, int64_t e, int) {
      for (int64_t row = b; row < e; ++row) {
        A m, inv;
        cpu::layer_norm_row<T, A>(px + row * cols, py + row * cols, cols, pscale, pbias, eps, m, inv);
        store(mean_t, row, m);
        store(inv_t, row, inv);
      }
    });
  }

  int64_t axis_;
  float epsilon_;
  DataType stash_ = DataType::kFloat32;
  TypedBuffer scale_buf_, bias_buf_;  // broadcast Scale / B, reused between runs
};

// ---- Softmax / LogSoftmax ------------------------------------------------------------------------

// Softmax of `d` contiguous values x -> y: max subtraction keeps exp() in range for large inputs,
// and LogSoftmax computes (x - max) - log(sum) so that large offsets cancel exactly first.
template <typename T>
void softmax_contiguous(const T* x, T* y, int64_t d, bool log) {
  T mx = -std::numeric_limits<T>::infinity();
  for (int64_t i = 0; i < d; ++i) mx = std::max(mx, x[i]);
  if (std::isinf(mx) && mx < 0) mx = 0;  // all -inf: avoid inf - inf
  if (log) {
    double sum = 0;
    for (int64_t i = 0; i < d; ++i) sum += std::exp(static_cast<double>(x[i] - mx));
    const T ls = static_cast<T>(std::log(sum));
    for (int64_t i = 0; i < d; ++i) y[i] = (x[i] - mx) - ls;
  } else {
    T sum = 0;
    for (int64_t i = 0; i < d; ++i) {
      const T e = std::exp(x[i] - mx);
      y[i] = e;
      sum += e;
    }
    const T inv = T(1) / sum;
    for (int64_t i = 0; i < d; ++i) y[i] *= inv;
  }
}

// Softmax along an axis with `inner` > 1 trailing elements: columns [c0, c1) of a [d, inner] block.
template <typename T>
void softmax_strided(const T* x, T* y, int64_t d, int64_t inner, int64_t c0, int64_t c1, bool log) {
  constexpr int64_t kChunk = 256;
  T mx[kChunk];
  T sum[kChunk];
  for (int64_t base = c0; base < c1; base += kChunk) {
    const int64_t w = std::min(kChunk, c1 - base);
    for (int64_t j = 0; j < w; ++j) mx[j] = -std::numeric_limits<T>::infinity();
    for (int64_t i = 0; i < d; ++i) {
      const T* r = x + i * inner + base;
      for (int64_t j = 0; j < w; ++j) mx[j] = std::max(mx[j], r[j]);
    }
    for (int64_t j = 0; j < w; ++j) {
      if (std::isinf(mx[j]) && mx[j] < 0) mx[j] = 0;
      sum[j] = 0;
    }
    for (int64_t i = 0; i < d; ++i) {
      const T* r = x + i * inner + base;
      T* o = y + i * inner + base;
      for (int64_t j = 0; j < w; ++j) {
        const T e = std::exp(r[j] - mx[j]);
        if (!log) o[j] = e;
        sum[j] += e;
      }
    }
    if (log) {
      for (int64_t j = 0; j < w; ++j) sum[j] = std::log(sum[j]);
      for (int64_t i = 0; i < d; ++i) {
        const T* r = x + i * inner + base;
        T* o = y + i * inner + base;
        for (int64_t j = 0; j < w; ++j) o[j] = (r[j] - mx[j]) - sum[j];
      }
    } else {
      for (int64_t j = 0; j < w; ++j) sum[j] = T(1) / sum[j];
      for (int64_t i = 0; i < d; ++i) {
        T* o = y + i * inner + base;
        for (int64_t j = 0; j < w; ++j) o[j] *= sum[j];
      }
    }
  }
}

// Softmax / LogSoftmax. Opset >= 13: over the single axis `axis` (default -1). Opsets 11-12: X is
// coerced to 2-D at `axis` (default 1) and the softmax runs over the flattened trailing part.
class SoftmaxKernel : public cpu::FloatKernel<SoftmaxKernel> {
 public:
  SoftmaxKernel(const Node& n, bool log)
      : log_(log), coerce_2d_(n.opset() < 13), axis_(n.attr_i("axis", n.opset() < 13 ? 1 : -1)) {}

 private:
  friend cpu::FloatKernel<SoftmaxKernel>;
  template <typename T>
  void compute(KernelContext& ctx) {
    const Tensor& x = ctx.input(0);
    const params::SoftmaxView v = params::resolve_softmax(ctx, x, axis_, coerce_2d_);
    const int64_t outer = v.outer, d = v.d, inner = v.inner;
    Tensor& y = ctx.allocate_output(0, x.dtype(), x.dims());
    if (x.numel() == 0) return;
    const T* px = x.data<T>();
    T* py = y.data<T>();
    const bool par = x.numel() > kParallelWork;
    if (inner == 1) {
#pragma omp parallel for schedule(static) if (par)
      for (int64_t o = 0; o < outer; ++o)
        cpu::isa_dispatch_if<std::is_same_v<T, float>>([&] { softmax_contiguous(px + o * d, py + o * d, d, log_); });
      return;
    }
    constexpr int64_t kCols = 256;
    const int64_t chunks = (inner + kCols - 1) / kCols;
#pragma omp parallel for schedule(static) if (par)
    for (int64_t t = 0; t < outer * chunks; ++t) {
      const int64_t o = t / chunks, c0 = (t % chunks) * kCols;
      cpu::isa_dispatch_if<std::is_same_v<T, float>>([&] {
        softmax_strided(px + o * d * inner, py + o * d * inner, d, inner, c0, std::min(inner, c0 + kCols), log_);
      });
    }
  }

  bool log_, coerce_2d_;
  int64_t axis_;
};

// ---- Dropout -------------------------------------------------------------------------------------

// output = data * mask / (1 - ratio) in training mode, identity otherwise (mask all true). The
// generator: the node's own mt19937_64 seeded with `seed` when that attribute is set (advancing from
// run to run), else the executor's (ctx.rng), else an own one seeded with 0.
class DropoutKernel : public cpu::FloatKernel<DropoutKernel> {
 public:
  explicit DropoutKernel(const Node& n) : has_seed_(n.has_attr("seed")), own_(0) {
    if (has_seed_) own_.seed(static_cast<uint64_t>(n.attr_i("seed", 0)));
  }

 private:
  friend cpu::FloatKernel<DropoutKernel>;
  template <typename T>
  void compute(KernelContext& ctx) {
    const Tensor& x = ctx.input(0);
    double ratio = 0.5;
    if (ctx.has_input(1)) {
      const Tensor& rt = ctx.input(1);
      if (rt.numel() != 1 || !is_float(rt.dtype()))
        ctx.error(str_cat("ratio must be a float scalar, got ", rt.describe()));
      ratio = rt.get_as_double(0);
    }
    bool training = false;
    if (ctx.has_input(2)) {
      const Tensor& tm = ctx.input(2);
      if (tm.numel() != 1) ctx.error(str_cat("training_mode must be a scalar, got ", tm.describe()));
      training = tm.get_as_double(0) != 0;
    }
    const bool want_mask = ctx.has_output(1);
    if (!training || ratio == 0) {
      ctx.alias_output(0, x, x.dims());
      if (want_mask) {
        Tensor& m = ctx.allocate_output(1, DataType::kBool, x.dims());
        std::fill(m.data<bool>(), m.data<bool>() + m.numel(), true);
      }
      return;
    }
    if (!(ratio > 0 && ratio < 1)) ctx.error(str_cat("ratio ", ratio, " must be in [0, 1)"));
    std::mt19937_64& gen = has_seed_ || !ctx.rng ? own_ : *ctx.rng;
    Tensor& y = ctx.allocate_output(0, x.dtype(), x.dims());
    bool* pm = want_mask ? ctx.allocate_output(1, DataType::kBool, x.dims()).data<bool>() : nullptr;
    const T* px = x.data<T>();
    T* py = y.data<T>();
    const T scale = static_cast<T>(1.0 / (1.0 - ratio));
    // Keep an element when its 32-bit uniform u satisfies u >= ratio * 2^32 (P(drop) = ratio); each
    // 64-bit draw decides two elements. Sequential, so results do not depend on the thread count.
    const uint64_t threshold = static_cast<uint64_t>(std::ldexp(ratio, 32));
    const int64_t n = x.numel();
    int64_t i = 0;
    for (; i + 1 < n; i += 2) {
      const uint64_t bits = gen();
      const bool k0 = (bits & 0xffffffffu) >= threshold, k1 = (bits >> 32) >= threshold;
      py[i] = k0 ? px[i] * scale : T(0);
      py[i + 1] = k1 ? px[i + 1] * scale : T(0);
      if (pm) {
        pm[i] = k0;
        pm[i + 1] = k1;
      }
    }
    if (i < n) {
      const bool k0 = (gen() & 0xffffffffu) >= threshold;
      py[i] = k0 ? px[i] * scale : T(0);
      if (pm) pm[i] = k0;
    }
  }

  bool has_seed_;
  std::mt19937_64 own_;
};

// ---- SoftmaxCrossEntropyLoss / NegativeLogLikelihoodLoss ----------------------------------------

// scores/log-probabilities [N, C, d1..dk], labels [N, d1..dk] (int32/int64), optional weights [C].
// Per position: loss = -logp[label] * w[label] (0 where label == ignore_index); reduction none
// returns that tensor, sum its sum, mean its sum divided by the sum of the weights of the
// non-ignored positions (their count without weights).
class LossKernel : public Kernel {
 public:
  LossKernel(const Node& n, bool softmax)
      : softmax_(softmax), has_ignore_(n.has_attr("ignore_index")), ignore_(n.attr_i("ignore_index", 0)) {
    reduction_ = params::loss_reduction(n);
  }

  void run(KernelContext& ctx) override {
    const Tensor& labels = ctx.input(1);
    OTTER_DISPATCH_FLOAT(ctx.input(0).dtype(), T, [&] {
      if (labels.dtype() == DataType::kInt64) compute<T, int64_t>(ctx);
      else if (labels.dtype() == DataType::kInt32) compute<T, int32_t>(ctx);
      else ctx.error(str_cat("labels must be int32 or int64, got ", labels.describe()));
    });
  }

 private:
  using Reduction = params::LossReduction;

  template <typename T, typename L>
  void compute(KernelContext& ctx) {
    const Tensor& x = ctx.input(0);
    const Tensor& labels = ctx.input(1);
    const params::LossDims ld = params::check_loss_inputs(ctx, softmax_);
    const int64_t classes = ld.classes, inner = ld.inner, positions = ld.positions;
    const std::vector<int64_t>& ldims = ld.label_dims;
    const T* pw = ctx.has_input(2) ? ctx.input(2).data<T>() : nullptr;
    T* plogp = nullptr;
    if (softmax_ && ctx.has_output(1)) plogp = ctx.allocate_output(1, x.dtype(), x.dims()).data<T>();
    loss_.resize(static_cast<size_t>(positions));
    wsum_.resize(static_cast<size_t>(positions));
    const T* px = x.data<T>();
    const L* pl = labels.data<L>();
    std::atomic<int64_t> bad{-1};
    // Below kParallelThreshold elements no OpenMP region starts (parallel_ranges).
    cpu::for_each_class_position(positions, classes, inner, [&](int64_t p, int64_t off) {
      const T* xs = px + off;  // class c at xs[c * inner]
      const int64_t label = static_cast<int64_t>(pl[p]);
      double lp = 0;  // log-probability of the label
      if (softmax_) {
        lp = log_softmax_at(xs, classes, inner, label, plogp ? plogp + off : nullptr);
      } else if (label >= 0 && label < classes) {
        lp = static_cast<double>(xs[label * inner]);
      }
      if (has_ignore_ && label == ignore_) {
        loss_[p] = 0;
        wsum_[p] = 0;
        return;
      }
      if (label < 0 || label >= classes) {
        int64_t expected = -1;
        bad.compare_exchange_strong(expected, p);
        loss_[p] = 0;
        wsum_[p] = 0;
        return;
      }
      const double w = pw ? static_cast<double>(pw[label]) : 1.0;
      loss_[p] = -lp * w;
      wsum_[p] = w;
    });
    if (bad.load() >= 0) {
      const int64_t p = bad.load();
      ctx.error(str_cat("label ", static_cast<int64_t>(pl[p]), " at flat position ", p,
                        " is out of range [0, ", classes, ")",
                        has_ignore_ ? str_cat(" and is not ignore_index ", ignore_) : std::string()));
    }
    write_loss<T>(ctx, x.dtype(), ldims);
  }

  // The log-softmax of the label at one position (class c at xs[c * inner]), 0 for a label out of
  // range; with `lps`, the whole log-softmax column is written there (same layout).
  template <typename T>
  static double log_softmax_at(const T* xs, int64_t classes, int64_t inner, int64_t label, T* lps) {
    T mx = -std::numeric_limits<T>::infinity();
    for (int64_t c = 0; c < classes; ++c) mx = std::max(mx, xs[c * inner]);
    if (std::isinf(mx) && mx < 0) mx = 0;
    const double sum = cpu::exp_sum(xs, classes, inner, mx);  // exponents <= 0, vectorised
    const double ls = std::log(sum);
    if (lps)
      for (int64_t c = 0; c < classes; ++c) lps[c * inner] = static_cast<T>((xs[c * inner] - mx) - ls);
    return label >= 0 && label < classes ? static_cast<double>(xs[label * inner] - mx) - ls : 0.0;
  }

  // Output 0 from the per-position losses and weights: as they are (reduction none, of dims
  // `ldims`), or their sum or weighted mean (summed in order: the same for any thread count).
  template <typename T>
  void write_loss(KernelContext& ctx, DataType t, const std::vector<int64_t>& ldims) {
    const int64_t positions = static_cast<int64_t>(loss_.size());
    if (reduction_ == Reduction::kNone) {
      T* po = ctx.allocate_output(0, t, ldims).data<T>();
      for (int64_t p = 0; p < positions; ++p) po[p] = static_cast<T>(loss_[p]);
      return;
    }
    double total = 0, wtotal = 0;
    for (int64_t p = 0; p < positions; ++p) {
      total += loss_[p];
      wtotal += wsum_[p];
    }
    Tensor& out = ctx.allocate_output(0, t, {});
    out.data<T>()[0] = static_cast<T>(reduction_ == Reduction::kSum ? total : total / wtotal);
  }

  bool softmax_;
  bool has_ignore_;
  int64_t ignore_;
  Reduction reduction_ = Reduction::kMean;
  std::vector<double> loss_, wsum_;
};

}  // namespace

void register_cpu_nn_kernels(KernelRegistry& r) {
  const std::vector<DataType> kFloats = {DataType::kFloat32, DataType::kFloat64};
  r.add({.op_type = "BatchNormalization", .dtypes = kFloats, .create = node_kernel<BatchNormKernel>()});
  r.add({.op_type = "LayerNormalization", .dtypes = kFloats, .create = node_kernel<LayerNormKernel>()});
  // Softmax and LogSoftmax also run their opset-11 form (2-D coercion) for direct kernel use,
  // below the op table's range (13): the one kernel range that is not the table's.
  for (bool log : {false, true})
    r.add({.op_type = log ? "LogSoftmax" : "Softmax",
           .since_version = params::kSoftmaxKernelSince,
           .until_version = kMaxOnnxOpset,
           .dtypes = kFloats,
           .create = node_kernel<SoftmaxKernel>(log)});
  r.add({.op_type = "Dropout", .dtypes = kFloats, .create = node_kernel<DropoutKernel>()});
  r.add({.op_type = "SoftmaxCrossEntropyLoss", .dtypes = kFloats, .create = node_kernel<LossKernel>(true)});
  r.add({.op_type = "NegativeLogLikelihoodLoss", .dtypes = kFloats, .create = node_kernel<LossKernel>(false)});
}

}  // namespace otter
