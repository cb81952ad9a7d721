// Host-side parameter resolution of the normalisation and softmax kernels, shared by the CPU and
// CUDA backends (and their gradients): BatchNormalization's mode and per-channel operands, and
// the [outer, d, inner] view Softmax and LogSoftmax run over, validated with errors that name the
// node.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "graph/error.h"
#include "kernels/common/checks.h"
#include "kernels/kernel.h"

namespace otter::params {

// BatchNormalization trains (batch statistics, running-statistic outputs) from the opset-14
// attribute training_mode; before 14 when any output beyond Y is wanted.
inline bool batch_norm_training(const Node& n) {
  if (n.opset() >= 14) return n.attr_i("training_mode", 0) != 0;
  bool training = false;
  for (int i = 1; i < n.num_outputs(); ++i) training |= n.output(i) != nullptr;
  return training;
}

// X [N, C, spatial...] of a batch normalisation, seen per channel.
struct BatchNormDims {
  int64_t batch = 0, channels = 0, spatial = 0;
  // Elements per channel (the count of the batch statistics).
  double count() const { return static_cast<double>(batch * spatial); }
};

// Checks X (rank >= 2) and the per-channel float inputs [first, 5) of the node, which the
// names list describes (index = input), and in training that each channel has elements.
inline BatchNormDims check_batch_norm(const KernelContext& ctx, const Tensor& x, int first, const char* const names[5],
                                      bool training) {
  if (x.rank() < 2) ctx.error(str_cat("X must have rank >= 2 (N, C, ...), got ", x.describe()));
  BatchNormDims d{x.dim(0), x.dim(1), 0};
  d.spatial = d.batch * d.channels == 0 ? 0 : x.numel() / (d.batch * d.channels);
  for (int i = first; i < 5; ++i) {
    const Tensor& p = ctx.input(i);
    if (p.numel() != d.channels || p.rank() != 1)
      ctx.error(str_cat("channel mismatch: ", names[i], " ", p.describe(), " for X ", x.describe()));
    if (!is_float(p.dtype())) ctx.error(str_cat(names[i], " must be a float tensor, got ", p.describe()));
  }
  if (training && d.count() == 0)
    ctx.error(str_cat("training-mode statistics need elements per channel, X is ", x.describe()));
  return d;
}

// BatchNormalizationGrad(dY, X, scale, mean, var): dY matches X; the per-channel inputs as above.
inline BatchNormDims check_batch_norm_grad(const KernelContext& ctx, bool training) {
  static const char* const kNames[] = {"dY", "X", "scale", "mean", "var"};
  check_same(ctx, 1, ctx.input(0), "X");
  return check_batch_norm(ctx, ctx.input(1), 2, kNames, training);
}

// The loss ops' attribute 'reduction'.
enum class LossReduction { kNone, kSum, kMean };

inline LossReduction loss_reduction(const Node& n) {
  const std::string red = n.attr_s("reduction", "mean");
  if (red == "none") return LossReduction::kNone;
  if (red == "sum") return LossReduction::kSum;
  if (red != "mean") fail(n.describe(), ": unknown reduction '", red, "' (none, sum or mean)");
  return LossReduction::kMean;
}

// The loss ops' scores/input X [N, C, d...] with labels [N, d...] and optional class weights [C] of
// X's type: `positions` = N * inner label positions, `inner` = the product of d.
struct LossDims {
  int64_t batch = 0, classes = 0, inner = 1, positions = 0;
  std::vector<int64_t> label_dims;
};

inline LossDims check_loss_inputs(const KernelContext& ctx, bool softmax) {
  const Tensor& x = ctx.input(0);
  const Tensor& labels = ctx.input(1);
  const char* xname = softmax ? "scores" : "input";
  if (x.rank() < 2) ctx.error(str_cat(xname, " must have rank >= 2 (N, C, ...), got ", x.describe()));
  LossDims d{x.dim(0), x.dim(1), 1, 0, {x.dim(0)}};
  for (int64_t i = 2; i < x.rank(); ++i) {
    d.label_dims.push_back(x.dim(i));
    d.inner *= x.dim(i);
  }
  d.positions = d.batch * d.inner;
  if (labels.dims() != d.label_dims)
    ctx.error(str_cat("labels ", labels.describe(), " must have shape ", dims_to_string(d.label_dims), " for ", xname,
                      " ", x.describe()));
  if (labels.dtype() != DataType::kInt64 && labels.dtype() != DataType::kInt32)
    ctx.error(str_cat("labels must be int32 or int64, got ", labels.describe()));
  if (ctx.has_input(2)) {
    const Tensor& w = ctx.input(2);
    if (w.rank() != 1 || w.dim(0) != d.classes || w.dtype() != x.dtype())
      ctx.error(str_cat("weights ", w.describe(), " must be [", d.classes, "] of the type of ", xname));
  }
  return d;
}

// The first opset of the Softmax and LogSoftmax kernels on both backends: they also serve the
// opset-11 form (coerced to 2-D at axis) that the op table (from 13) does not define.
constexpr int kSoftmaxKernelSince = 11;

// Softmax / LogSoftmax of x along `axis`: `outer` groups of `d` elements `inner` apart. Before
// opset 13 the input is coerced to 2-D at axis: the softmax runs over the flattened trailing part.
struct SoftmaxView {
  int64_t outer = 1, d = 1, inner = 1;
};

inline SoftmaxView resolve_softmax(const KernelContext& ctx, const Tensor& x, int64_t axis_attr, bool coerce_2d) {
  const int64_t r = x.rank();
  const int64_t axis = axis_attr < 0 ? axis_attr + r : axis_attr;
  if (r == 0 || axis < 0 || axis >= r) ctx.error(str_cat("axis ", axis_attr, " out of range for ", x.describe()));
  SoftmaxView v;
  v.d = x.dim(axis);
  for (int64_t i = 0; i < axis; ++i) v.outer *= x.dim(i);
  for (int64_t i = axis + 1; i < r; ++i) v.inner *= x.dim(i);
  if (coerce_2d) {
    v.d *= v.inner;
    v.inner = 1;
  }
  return v;
}

}  // namespace otter::params
