// CPU kernels of the normalisation, softmax and loss gradients (ai.otter SoftmaxGrad,
// LogSoftmaxGrad, SoftmaxCrossEntropyLossGrad, NegativeLogLikelihoodLossGrad,
// BatchNormalizationGrad, LayerNormalizationGrad). Reductions accumulate in double; templated on
// the element type.
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

#include "graph/op_table.h"
#include "kernels/common/checks.h"
#include "kernels/common/elementwise.h"
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

constexpr int64_t kParallelWork = 32768;

// [outer, d, inner] view of a tensor around `axis`.
struct AxisView {
  int64_t outer = 1, d = 1, inner = 1;
};
AxisView axis_view(const KernelContext& ctx, const Tensor& t, int64_t axis) {
  const int64_t r = t.rank();
  if (axis < -r || axis >= r) ctx.error(str_cat("axis ", axis, " is out of range for ", t.describe()));
  if (axis < 0) axis += r;
  AxisView v;
  for (int64_t i = 0; i < axis; ++i) v.outer *= t.dim(i);
  v.d = t.dim(axis);
  for (int64_t i = axis + 1; i < r; ++i) v.inner *= t.dim(i);
  return v;
}

// ---- SoftmaxGrad / LogSoftmaxGrad ------------------------------------------------------------------
// Softmax:    dX = Y * (dY - sum(dY * Y))      LogSoftmax: dX = dY - exp(Y) * sum(dY)
// with the sums along the axis; one column (outer, inner position) at a time.
class SoftmaxGradKernel : public cpu::FloatKernel<SoftmaxGradKernel> {
 public:
  SoftmaxGradKernel(const Node& n, bool log) : log_(log), axis_(n.attr_i("axis", -1)) {}
 private:
  friend cpu::FloatKernel<SoftmaxGradKernel>;
  template <typename T>
  void compute(KernelContext& ctx) {
    const Tensor& dy = ctx.input(0);
    check_same(ctx, 1, dy, "Y");
    const AxisView v = axis_view(ctx, dy, axis_);
    Tensor& dxt = ctx.allocate_output(0, dy.dtype(), dy.dims());
    const T* pg = dy.data<T>();
    const T* py = ctx.input(1).data<T>();
    T* dx = dxt.data<T>();
    const int64_t d = v.d, in = v.inner;
#pragma omp parallel for schedule(static) if (dy.numel() > kParallelWork)
    for (int64_t col = 0; col < v.outer * in; ++col) {
      const int64_t base = (col / in) * d * in + col % in;
      double s = 0;
      for (int64_t i = 0; i < d; ++i) {
        const int64_t k = base + i * in;
        s += log_ ? static_cast<double>(pg[k]) : static_cast<double>(pg[k]) * py[k];
      }
      const T st = static_cast<T>(s);
      for (int64_t i = 0; i < d; ++i) {
        const int64_t k = base + i * in;
        dx[k] = log_ ? pg[k] - std::exp(py[k]) * st : py[k] * (pg[k] - st);
      }
    }
  }

  bool log_;
  int64_t axis_;
};

// ---- SoftmaxCrossEntropyLossGrad / NegativeLogLikelihoodLossGrad ----------------------------------
// scores/input [N, C, d...], labels [N, d...], weights [C]?, dL a scalar (reduction mean/sum) or
// [N, d...] (none). Per position p with label l (not ignored) and weight w = weights[l] (or 1):
//   g_p = dL / sum of the counted weights (mean), dL (sum), dL[p] (none)
//   SCE:  dX[n, c, d] = (softmax(x)[c] - [c == l]) * w * g_p
//   NLL:  dX[n, l, d] = -w * g_p, 0 elsewhere
// Ignored positions get 0. Output 1, when present, is the gradient of the class weights.
class LossGradKernel : public Kernel {
 public:
  LossGradKernel(const Node& n, bool softmax)
      : softmax_(softmax), has_ignore_(n.has_attr("ignore_index")), ignore_(n.attr_i("ignore_index", 0)),
        reduction_(n.attr_s("reduction", "mean")) {
    if (reduction_ != "none" && reduction_ != "sum" && reduction_ != "mean")
      fail(n.describe(), ": unknown reduction '", reduction_, "' (none, sum or mean)");
  }

  void run(KernelContext& ctx) override {
    const Tensor& labels = ctx.input(2);
    OTTER_DISPATCH_FLOAT(ctx.input(1).dtype(), T, [&] {
      if (labels.dtype() == DataType::kInt64) compute<T, int64_t>(ctx);
      else if (labels.dtype() == DataType::kInt32) compute<T, int32_t>(ctx);
      else ctx.error(str_cat("labels must be int32 or int64, got ", labels.describe()));
    });
  }

 private:
  template <typename T, typename L>
  void compute(KernelContext& ctx) {
    const Tensor& dl = ctx.input(0);
    const Tensor& x = ctx.input(1);
    const Tensor& labels = ctx.input(2);
    if (x.rank() < 2 || dl.dtype() != x.dtype())
      ctx.error(str_cat("scores ", x.describe(), " must have rank >= 2 and dL's type ", dl.describe()));
    const int64_t batch = x.dim(0), classes = x.dim(1);
    std::vector<int64_t> ldims = {batch};
    ldims.insert(ldims.end(), x.dims().begin() + 2, x.dims().end());
    if (labels.dims() != ldims)
      ctx.error(str_cat("labels ", labels.describe(), " must have shape ", dims_to_string(ldims)));
    const bool none = reduction_ == "none";
    if (none ? dl.dims() != ldims : dl.numel() != 1)
      ctx.error(str_cat("dL ", dl.describe(), " does not match reduction '", reduction_, "'"));
    const T* pw = nullptr;
    if (ctx.has_input(3)) {
      const Tensor& w = ctx.input(3);
      if (w.rank() != 1 || w.dim(0) != classes || w.dtype() != x.dtype())
        ctx.error(str_cat("weights ", w.describe(), " must be [", classes, "] of the scores' type"));
      pw = w.data<T>();
    }
    const int64_t inner = batch * classes == 0 ? 0 : x.numel() / (batch * classes);
    const int64_t positions = batch * inner;
    const L* pl = labels.data<L>();
    auto counted = [&](int64_t p) { return !(has_ignore_ && static_cast<int64_t>(pl[p]) == ignore_); };
    double wsum = 0;
    for (int64_t p = 0; p < positions; ++p) {
      if (!counted(p)) continue;
      const int64_t l = static_cast<int64_t>(pl[p]);
      if (l < 0 || l >= classes)
        ctx.error(str_cat("label ", l, " at flat position ", p, " is out of range [0, ", classes, ")"));
      wsum += pw ? static_cast<double>(pw[l]) : 1.0;
    }
    const T* pdl = dl.data<T>();
    const double scale = reduction_ == "mean" ? 1.0 / wsum : 1.0;
    T* dx = ctx.has_output(0) ? ctx.allocate_output(0, x.dtype(), x.dims()).template data<T>() : nullptr;
    const T* px = x.data<T>();
    loss_.assign(static_cast<size_t>(positions), 0.0);
    // Below kParallelThreshold elements no OpenMP region starts (parallel_ranges).
    cpu::for_each_class_position(positions, classes, inner, [&](int64_t p, int64_t off) {
      const T* xs = px + off;  // class c at xs[c * inner]
      T* gs = dx ? dx + off : nullptr;
      if (gs)
        for (int64_t c = 0; c < classes; ++c) gs[c * inner] = T(0);
      if (!counted(p)) return;
      const int64_t l = static_cast<int64_t>(pl[p]);
      const double w = pw ? static_cast<double>(pw[l]) : 1.0;
      const double g = static_cast<double>(none ? pdl[p] : pdl[0]) * scale * w;
      if (!softmax_) {
        loss_[p] = -static_cast<double>(xs[l * inner]);
        if (gs) gs[l * inner] = static_cast<T>(-g);
        return;
      }
      loss_[p] = softmax_grad_at(xs, gs, classes, inner, l, g);
    });
    if (ctx.has_output(1)) weights_grad<T, L>(ctx, pl, pw, pdl, positions, classes, wsum, counted);
  }

  // One position's loss -log softmax(x)[l] (class c at xs[c * inner]) and, where gs is not null,
  // its gradient (softmax(x) - onehot(l)) * g into gs (same layout).
  template <typename T>
  static double softmax_grad_at(const T* xs, T* gs, int64_t classes, int64_t inner, int64_t l, double g) {
    T mx = -std::numeric_limits<T>::infinity();
    for (int64_t c = 0; c < classes; ++c) mx = std::max(mx, xs[c * inner]);
    if (std::isinf(mx) && mx < 0) mx = 0;
    if (!gs) return std::log(cpu::exp_sum(xs, classes, inner, mx)) - static_cast<double>(xs[l * inner] - mx);
    // One exponential per class (every exponent <= 0), in T and vectorised where the classes are
    // contiguous, held in dX until the sum is known; the sum and the scaling stay in double.
    cpu::isa_dispatch_if<std::is_same_v<T, float>>([&] {
      for (int64_t c = 0; c < classes; ++c) gs[c * inner] = math::exp_nonpositive(xs[c * inner] - mx);
    });
    double sum = 0;
    for (int64_t c = 0; c < classes; ++c) sum += static_cast<double>(gs[c * inner]);
    const double inv = 1.0 / sum;
    for (int64_t c = 0; c < classes; ++c) {
      const double prob = static_cast<double>(gs[c * inner]) * inv;
      gs[c * inner] = static_cast<T>((prob - (c == l ? 1.0 : 0.0)) * g);
    }
    return std::log(sum) - static_cast<double>(xs[l * inner] - mx);
  }

  // dWeights[c] from the per-position losses l_p (ignored positions excluded): sum: dL * sum l_p,
  // none: sum dL_p * l_p, mean (L = sum w l / W): dL * sum (l_p - L) / W, over positions labelled c.
  template <typename T, typename L, typename C>
  void weights_grad(KernelContext& ctx, const L* pl, const T* pw, const T* pdl, int64_t positions, int64_t classes,
                    double wsum, C counted) {
    if (!pw) ctx.error("a weights gradient needs the weights input");
    const bool none = reduction_ == "none", mean = reduction_ == "mean";
    double total = 0;
    for (int64_t p = 0; p < positions; ++p)
      if (counted(p)) total += pw[pl[p]] * loss_[p];
    const double mean_loss = total / wsum;
    std::vector<double> dw(static_cast<size_t>(classes), 0.0);
    for (int64_t p = 0; p < positions; ++p) {
      if (!counted(p)) continue;
      const double g = static_cast<double>(none ? pdl[p] : pdl[0]);
      dw[pl[p]] += mean ? g * (loss_[p] - mean_loss) / wsum : g * loss_[p];
    }
    T* out = ctx.allocate_output(1, ctx.input(3).dtype(), {classes}).template data<T>();
    for (int64_t c = 0; c < classes; ++c) out[c] = static_cast<T>(dw[c]);
  }

  bool softmax_;
  bool has_ignore_;
  int64_t ignore_;
  std::string reduction_;
  std::vector<double> loss_;  // per-position loss, kept between runs
};

// ---- BatchNormalizationGrad ---------------------------------------------------------------------
// Per channel c over its M = N * spatial elements, with xhat = (x - mean) * inv, inv = 1/sqrt(var+eps):
//   dB = sum dy, dScale = sum dy * xhat
//   training (batch statistics, differentiated through): dX = scale * inv / M * (M dy - dB - xhat dScale)
//   inference (given statistics): dX = scale * inv * dy, dMean = -scale * inv * dB,
//                                 dVar = -0.5 * scale * inv^2 * dScale
class BatchNormGradKernel : public cpu::FloatKernel<BatchNormGradKernel> {
 public:
  explicit BatchNormGradKernel(const Node& n)
      : epsilon_(n.attr_f("epsilon", 1e-5f)), training_(n.attr_i("training_mode", 1) != 0) {}

 private:
  friend cpu::FloatKernel<BatchNormGradKernel>;
  template <typename T>
  void compute(KernelContext& ctx) {
    const Tensor& dy = ctx.input(0);
    const Tensor& x = ctx.input(1);
    const params::BatchNormDims bn = params::check_batch_norm_grad(ctx, training_);
    const int64_t batch = bn.batch, channels = bn.channels, spatial = bn.spatial;
    const double m = bn.count();
    const T* px = x.data<T>();
    const T* pg = dy.data<T>();
    T* dx = ctx.has_output(0) ? ctx.allocate_output(0, x.dtype(), x.dims()).template data<T>() : nullptr;
    std::vector<double> dscale(channels), dbias(channels), dmean(channels), dvar(channels);
    const int64_t cs = channels * spatial;
    const double in_eps = static_cast<double>(epsilon_);
    // Per channel; every sum in double over lane_sum's 8 partial sums per image (vectorised).
#pragma omp parallel for schedule(static) if (x.numel() > kParallelWork)
    for (int64_t c = 0; c < channels; ++c) {
      cpu::isa_dispatch_if<std::is_same_v<T, float>>([&] {
        auto over_images = [&](auto&& f) { return cpu::channel_sum(batch, channels, spatial, c, f); };
        double mean = ctx.input(3).get_as_double(c), var = ctx.input(4).get_as_double(c);
        if (training_) {
          mean = over_images([&](int64_t i) { return static_cast<double>(px[i]); }) / m;
          var = over_images([&](int64_t i) {
                  const double dv = px[i] - mean;
                  return dv * dv;
                }) / m;
        }
        const double inv = 1.0 / std::sqrt(var + in_eps);
        const double scale = ctx.input(2).get_as_double(c);
        const double sg = over_images([&](int64_t i) { return static_cast<double>(pg[i]); });
        const double sgx = over_images([&](int64_t i) { return pg[i] * ((px[i] - mean) * inv); });
        dbias[c] = sg;
        dscale[c] = sgx;
        dmean[c] = -scale * inv * sg;
        dvar[c] = -0.5 * scale * inv * inv * sgx;
        if (!dx) return;
        const double k = scale * inv;
        for (int64_t n = 0; n < batch; ++n) {
          const int64_t base = n * cs + c * spatial;
          const T* gp = pg + base;
          const T* xp = px + base;
          T* dp = dx + base;
          if (!training_) {
            for (int64_t i = 0; i < spatial; ++i) dp[i] = static_cast<T>(k * gp[i]);
            continue;
          }
          for (int64_t i = 0; i < spatial; ++i) {
            const double xhat = (xp[i] - mean) * inv;
            dp[i] = static_cast<T>(k / m * (m * gp[i] - sg - xhat * sgx));
          }
        }
      });
    }
    const std::vector<double>* outs[] = {&dscale, &dbias, &dmean, &dvar};
    for (int i = 1; i < 5; ++i) {
      if (!ctx.has_output(i)) continue;
      Tensor& t = ctx.allocate_output(i, ctx.input(i <= 2 ? 2 : i).dtype(), {channels});
      OTTER_DISPATCH_FLOAT(t.dtype(), U, [&] {
        for (int64_t c = 0; c < channels; ++c) t.data<U>()[c] = static_cast<U>((*outs[i - 1])[c]);
      });
    }
  }

  float epsilon_;
  bool training_;
};

// ---- LayerNormalizationGrad ---------------------------------------------------------------------

// One row of LayerNormalizationGrad (see below): dX into dr (plus rr, dResidual, where given) and
// dScale, dB partial sums into acc[0, cols), acc[cols, 2 cols) where given.
template <typename T>
inline void layer_norm_grad_row(const T* xr, const T* gr, const T* scale, int64_t cols, double eps, T* dr,
                                const T* rr, double* acc) {
  const double mean = cpu::lane_sum(cols, [&](int64_t i) { return static_cast<double>(xr[i]); }) / static_cast<double>(cols);
  const double ss = cpu::lane_sum(cols, [&](int64_t i) { return (xr[i] - mean) * (xr[i] - mean); });
  const double inv = 1.0 / std::sqrt(ss / static_cast<double>(cols) + eps);
  const double sg = cpu::lane_sum(cols, [&](int64_t i) { return static_cast<double>(gr[i]) * scale[i]; });
  const double sgx =
      cpu::lane_sum(cols, [&](int64_t i) { return static_cast<double>(gr[i]) * scale[i] * ((xr[i] - mean) * inv); });
  if (dr) {
    const double mg = sg / static_cast<double>(cols), mgx = sgx / static_cast<double>(cols);
    auto grad = [&](int64_t i) {
      const double xhat = (xr[i] - mean) * inv;
      return static_cast<T>(inv * (static_cast<double>(gr[i]) * scale[i] - mg - xhat * mgx));
    };
    if (rr) {  // dResidual added in T: the rounding of an Add of the two gradients
      for (int64_t i = 0; i < cols; ++i) dr[i] = grad(i) + rr[i];
    } else {
      for (int64_t i = 0; i < cols; ++i) dr[i] = grad(i);
    }
  }
  if (!acc) return;
  for (int64_t i = 0; i < cols; ++i) {
    acc[i] += static_cast<double>(gr[i]) * (xr[i] - mean) * inv;
    acc[cols + i] += gr[i];
  }
}

// Rows over the axes before `axis`, columns (H of them) over the normalised axes; per row with
// xhat = (x - mean) * inv and g = dy * scale:
//   dX = inv * (g - mean(g) - xhat * mean(g * xhat)),  dScale += dy * xhat,  dB += dy
// dScale and dB have the normalised shape; rows run in parallel with per-thread partial sums.
class LayerNormGradKernel : public cpu::FloatKernel<LayerNormGradKernel> {
 public:
  explicit LayerNormGradKernel(const Node& n) : axis_(n.attr_i("axis", -1)), epsilon_(n.attr_f("epsilon", 1e-5f)) {}

 private:
  friend cpu::FloatKernel<LayerNormGradKernel>;
  template <typename T>
  void compute(KernelContext& ctx) {
    const Tensor& dy = ctx.input(0);
    check_same(ctx, 1, dy, "X");
    const Tensor& x = ctx.input(1);
    const Tensor& sc = ctx.input(2);
    const int64_t r = x.rank();
    const int64_t axis = axis_ < 0 ? axis_ + r : axis_;
    if (axis < 0 || axis >= r) ctx.error(str_cat("axis ", axis_, " out of range for X ", x.describe()));
    const std::vector<int64_t> norm_dims(x.dims().begin() + axis, x.dims().end());
    const int64_t cols = num_elements(norm_dims), rows = cols == 0 ? 0 : x.numel() / cols;
    std::vector<int64_t> od;
    if (sc.dtype() != x.dtype() || !cpu::broadcast_dims({&sc.dims(), &norm_dims}, &od) || od != norm_dims)
      ctx.error(str_cat("Scale ", sc.describe(), " does not broadcast to the normalised shape ",
                        dims_to_string(norm_dims)));
    std::vector<T> scale(static_cast<size_t>(cols));
    cpu::BroadcastPlan<1> plan({&sc.dims()}, norm_dims);
    plan.for_each_run([&](int64_t o, const std::array<int64_t, 1>& offs, int64_t len) {
      for (int64_t j = 0; j < len; ++j) scale[o + j] = sc.data<T>()[offs[0] + j * plan.inner_strides()[0]];
    });
    T* dx = ctx.has_output(0) ? ctx.allocate_output(0, x.dtype(), x.dims()).template data<T>() : nullptr;
    // dResidual (AddLayerNorm's gradient): the sum's gradient from its other readers, added to dX.
    const T* pres = nullptr;
    if (ctx.has_input(3)) {
      check_like(ctx, 3, x, "dResidual");
      if (!dx) ctx.error("input 3 (dResidual) needs output 0 (dX)");
      pres = ctx.input(3).data<T>();
    }
    const bool want_params = ctx.has_output(1) || ctx.has_output(2);
    const int threads = rows * cols > kParallelWork ? omp_get_max_threads() : 1;
    std::vector<double> part(want_params ? static_cast<size_t>(threads) * 2 * cols : 0, 0.0);
    const T* px = x.data<T>();
    const T* pg = dy.data<T>();
    const double eps = epsilon_;
    const auto one_row = [&](int64_t row, int t) {
      layer_norm_grad_row(px + row * cols, pg + row * cols, scale.data(), cols, eps, dx ? dx + row * cols : nullptr,
                          pres ? pres + row * cols : nullptr,
                          want_params ? part.data() + static_cast<size_t>(t) * 2 * cols : nullptr);
    };
    cpu::row_ranges<std::is_same_v<T, float>>(rows, threads > 1, [&](int64_t b, int64_t e, int t) {
      for (int64_t row = b; row < e; ++row) one_row(row, t);
    });
    for (int o = 1; o <= 2; ++o) {
      if (!ctx.has_output(o)) continue;
      T* out = ctx.allocate_output(o, x.dtype(), norm_dims).template data<T>();
      for (int64_t i = 0; i < cols; ++i) {
        double v = 0;
        for (int t = 0; t < threads; ++t) v += part[static_cast<size_t>(t) * 2 * cols + (o - 1) * cols + i];
        out[i] = static_cast<T>(v);
      }
    }
  }

  int64_t axis_;
  float epsilon_;
};

}  // namespace

void register_cpu_nn_grad_kernels(KernelRegistry& r) {
  const std::vector<DataType> kFloats = {DataType::kFloat32, DataType::kFloat64};
  auto add = [&](const char* op, KernelFactory f) {
    r.add({.domain = kOtterDomain, .op_type = op, .dtypes = kFloats, .create = std::move(f)});
  };
  add("SoftmaxGrad", node_kernel<SoftmaxGradKernel>(false));
  add("LogSoftmaxGrad", node_kernel<SoftmaxGradKernel>(true));
  add("SoftmaxCrossEntropyLossGrad", node_kernel<LossGradKernel>(true));
  add("NegativeLogLikelihoodLossGrad", node_kernel<LossGradKernel>(false));
  add("BatchNormalizationGrad", node_kernel<BatchNormGradKernel>());
  add("LayerNormalizationGrad", node_kernel<LayerNormGradKernel>());
}

}  // namespace otter
