// Neural-network ops of the default domain: BatchNormalization, LayerNormalization, Softmax,
// LogSoftmax, Dropout and the two loss ops, their gradient rules and gradient ops. MatMul, Gemm,
// convolution and pooling are in graph/ops/matmul_conv.cc.
#include <algorithm>

#include "graph/gradient.h"
#include "graph/op_table.h"
#include "graph/ops/infer_util.h"

namespace otter {
namespace {

using infer::add;
using infer::check_dims_match;
using infer::dim_at;
using infer::grad_fused;
using infer::grads_like;
using infer::Types;

// ---- normalisation ------------------------------------------------------------------------------
void infer_batch_norm(InferContext& ctx) {
  bool v14 = ctx.node().opset() >= 14;
  infer::check_arity(ctx, 5, 5, 1, v14 ? 3 : 5);
  infer::check_type(ctx, 0, Types::kFloat);
  for (int i = 1; i < 5; ++i) infer::check_type(ctx, i, Types::kFloat);
  const Shape& x = ctx.in_shape(0);
  if (x.rank_known && x.rank() < 2) ctx.error("input 0 (X) must have rank >= 2, got shape " + x.to_string());
  Dim c = dim_at(x, 1);
  static const char* kNames[] = {"X", "scale", "B", "input_mean", "input_var"};
  for (int i = 1; i < 5; ++i) {
    const Shape& s = ctx.in_shape(i);
    if (!s.rank_known) continue;
    if (s.rank() != 1) ctx.error(str_cat("input ", i, " (", kNames[i], ") must be 1-D, got shape ", s.to_string()));
    check_dims_match(ctx, s.dims[0], c, str_cat("input ", i, " (", kNames[i], ") size differs from X's channels"));
  }
  bool stats_out = ctx.has_output(1) || ctx.has_output(2);
  if (v14) {
    bool training = ctx.node().attr_i("training_mode", 0) != 0;
    if (stats_out && !training)
      ctx.error("outputs running_mean/running_var are only produced with training_mode=1");
  }
  ctx.set_output(0, ctx.in_dtype(0), x);
  DataType st = ctx.in_dtype(3);
  for (int i = 1; i < ctx.num_outputs(); ++i) ctx.set_output(i, st, Shape({c}));
}

void infer_layer_norm(InferContext& ctx) {
  infer::check_arity(ctx, 2, 3, 1, 3);
  infer::check_type(ctx, 0, Types::kFloat);
  infer::check_same_type(ctx, 0, 1);
  infer::check_same_type(ctx, 0, 2);
  int64_t stash = ctx.node().attr_i("stash_type", 1);
  DataType st = dtype_from_onnx(static_cast<int>(stash));
  if (!is_float(st)) ctx.error(str_cat("attribute 'stash_type' = ", stash, " is not a float type"));
  const Shape& x = ctx.in_shape(0);
  ctx.set_output(0, ctx.in_dtype(0), x);
  if (!x.rank_known) {
    ctx.set_output(1, st, Shape::unknown());
    ctx.set_output(2, st, Shape::unknown());
    return;
  }
  int64_t axis = normalize_axis(ctx, ctx.node().attr_i("axis", -1), x.rank());
  for (int i = 1; i <= 2; ++i) {
    if (!ctx.has_input(i)) continue;
    const Shape& s = ctx.in_shape(i);
    if (!s.rank_known) continue;
    if (s.rank() > x.rank() - axis)
      ctx.error(str_cat(infer::input_desc(ctx, i), " of shape ", s.to_string(), " does not broadcast to X",
                        x.to_string(), "'s normalised axes from ", axis));
    for (int64_t k = 0; k < s.rank(); ++k) {
      const Dim& d = s.dims[s.rank() - 1 - k];
      const Dim& o = x.dims[x.rank() - 1 - k];
      if (d.is_static() && d.value != 1 && o.is_static() && d.value != o.value)
        ctx.error(str_cat(infer::input_desc(ctx, i), " of shape ", s.to_string(), " does not broadcast to X",
                          x.to_string(), "'s normalised axes from ", axis));
    }
  }
  std::vector<Dim> stat(x.dims.begin(), x.dims.begin() + axis);
  stat.resize(x.dims.size(), Dim(int64_t{1}));
  ctx.set_output(1, st, Shape(stat));
  ctx.set_output(2, st, Shape(stat));
}

void infer_softmax(InferContext& ctx) {
  infer::check_arity(ctx, 1, 1);
  infer::check_type(ctx, 0, Types::kFloat);
  const Shape& x = ctx.in_shape(0);
  if (x.rank_known) normalize_axis(ctx, ctx.node().attr_i("axis", -1), x.rank());
  ctx.set_output(0, ctx.in_dtype(0), x);
}

void infer_dropout(InferContext& ctx) {
  infer::check_arity(ctx, 1, 3, 1, 2);
  infer::check_type(ctx, 0, Types::kFloat);
  infer::check_type(ctx, 1, Types::kFloat);
  infer::check_type(ctx, 2, Types::kBool);
  for (int i = 1; i <= 2; ++i) {
    if (!ctx.has_input(i)) continue;
    const Shape& s = ctx.in_shape(i);
    if (s.rank_known && s.is_static() && s.numel() != 1)
      ctx.error(str_cat(infer::input_desc(ctx, i), " (", i == 1 ? "ratio" : "training_mode",
                        ") must be a scalar, got shape ", s.to_string()));
  }
  if (auto r = infer::const_doubles(ctx, 1))
    if (!r->empty() && ((*r)[0] < 0 || (*r)[0] >= 1))
      ctx.error(str_cat("ratio ", (*r)[0], " must be in [0, 1)"));
  ctx.set_output(0, ctx.in_dtype(0), ctx.in_shape(0));
  ctx.set_output(1, DataType::kBool, ctx.in_shape(0));
}

// SoftmaxCrossEntropyLoss (sce) and NegativeLogLikelihoodLoss: scores/input [N,C,d1..], labels
// [N,d1..], optional weights [C].
InferFn loss(bool sce) {
  return [sce](InferContext& ctx) {
    infer::check_arity(ctx, 2, 3, 1, sce ? 2 : 1);
    infer::check_type(ctx, 0, Types::kFloat);
    infer::check_type(ctx, 1, Types::kIndex);
    infer::check_same_type(ctx, 0, 2);
    std::string red = ctx.node().attr_s("reduction", "mean");
    if (red != "none" && red != "mean" && red != "sum")
      ctx.error("attribute 'reduction' must be none, mean or sum, got '" + red + "'");
    if (const Attribute* ii = ctx.node().find_attr("ignore_index"); ii && ii->kind() != Attribute::Kind::kInt)
      ctx.error("attribute 'ignore_index' must be an int");
    const Shape& x = ctx.in_shape(0);
    const Shape& y = ctx.in_shape(1);
    if (x.rank_known && x.rank() < 2) ctx.error("input 0 (scores) must have rank >= 2, got shape " + x.to_string());
    if (x.rank_known && y.rank_known) {
      if (y.rank() != x.rank() - 1)
        ctx.error(str_cat("input 1 (labels) has shape ", y.to_string(), " but scores have shape ", x.to_string(),
                          " (labels must be scores' shape without axis 1)"));
      for (int64_t i = 0; i < y.rank(); ++i)
        check_dims_match(ctx, y.dims[i], x.dims[i == 0 ? 0 : i + 1],
                         str_cat("input 1 (labels) shape ", y.to_string(), " does not match scores ", x.to_string()));
    }
    if (ctx.has_input(2)) {
      const Shape& w = ctx.in_shape(2);
      if (w.rank_known && w.rank() != 1) ctx.error("input 2 (weights) must be 1-D, got shape " + w.to_string());
      if (w.rank_known) check_dims_match(ctx, w.dims[0], dim_at(x, 1), "input 2 (weights) size differs from classes");
    }
    DataType t = ctx.in_dtype(0);
    if (red != "none") {
      ctx.set_output(0, t, Shape());
    } else if (y.rank_known) {
      // Prefer the labels' dims, falling back on the scores' where the labels' are unknown.
      std::vector<Dim> d = y.dims;
      for (int64_t i = 0; i < y.rank(); ++i)
        if (!infer::dim_known(d[i])) d[i] = dim_at(x, i == 0 ? 0 : i + 1);
      ctx.set_output(0, t, Shape(d));
    } else if (x.rank_known) {
      std::vector<Dim> d = x.dims;
      d.erase(d.begin() + 1);
      ctx.set_output(0, t, Shape(d));
    } else {
      ctx.set_output(0, t, Shape::unknown());
    }
    if (sce) ctx.set_output(1, t, x);
  };
}

// ---- gradient rules -----------------------------------------------------------------------------
bool batch_norm_training(const Node& n) {
  if (n.opset() >= 14) return n.attr_i("training_mode", 0) != 0;
  for (int i = 1; i < n.num_outputs(); ++i)
    if (n.output(i)) return true;
  return false;
}

// BatchNormalizationGrad(dY, X, scale, mean, var) -> dX, dScale, dB (and, in inference mode only,
// dMean, dVar). In training mode the batch statistics are recomputed from X and differentiated
// through; the running statistics (outputs 1, 2) are state updates and carry no gradient.
void grad_batch_norm(GradContext& c) {
  if (!c.grad_output(0)) return;
  bool training = batch_norm_training(c.node());
  std::vector<int> grads = {0, 1, 2, training ? -1 : 3, training ? -1 : 4};
  std::vector<Value*> ins = {c.grad_output(0), c.input(0), c.input(1), c.input(3), c.input(4)};
  grad_fused(c, "BatchNormalizationGrad", ins, grads, {"epsilon"},
             {{"training_mode", Attribute(int64_t{training})}});
}

// LayerNormalizationGrad(dY, X, scale) -> dX, dScale, dB; the last two over the normalised shape,
// summed back to the shapes of Scale and B where those broadcast.
void grad_layer_norm(GradContext& c) {
  if (c.grad_output(1) || c.grad_output(2))
    c.unsupported("a gradient reaches LayerNormalization's Mean or InvStdDev output");
  Value* dy = c.grad_output(0);
  std::vector<bool> want = {c.needs_grad(0), c.needs_grad(1), c.node().has_input(2) && c.needs_grad(2)};
  if (!dy || std::none_of(want.begin(), want.end(), [](bool w) { return w; })) return;
  std::vector<Value*> g =
      c.emit_some("LayerNormalizationGrad", {dy, c.input(0), c.input(1)}, want, c.forward_attrs({"axis", "epsilon"}),
                  kOtterDomain);
  for (int i = 0; i < 3; ++i)
    if (g[i]) c.set_grad_input(i, i == 0 ? g[0] : c.sum_to_shape(g[i], c.input(i)));
}

GradFn softmax_grad(std::string op) {
  return [op](GradContext& c) {
    c.set_grad_input(0, c.emit_otter(op, {c.grad_output(0), c.output(0)}, c.forward_attrs({"axis"})));
  };
}

// The constant contents of a bool scalar input, when it is a constant.
std::optional<bool> const_bool(const Value* v) {
  if (!v || v->kind() != ValueKind::kInitializer || v->trainable() || !v->has_data()) return std::nullopt;
  return v->data().get_as_double(0) != 0;
}

// Dropout: the forward's mask selects the kept elements (scaled by 1/(1-ratio)); without
// training_mode (or with a constant false) Dropout is the identity.
void grad_dropout(GradContext& c) {
  Value* dy = c.grad_output(0);
  if (!dy) return;
  Value* training = c.input(2);
  if (!training || const_bool(training) == false) return c.set_grad_input(0, dy);
  if (!c.output(1))
    c.unsupported("training-mode Dropout without its mask output: the backward pass needs the mask the "
                  "forward pass drew (export Dropout with both outputs)");
  c.set_grad_input(0, c.emit_otter("DropoutGrad", {dy, c.output(1), c.input(1), training}));
}

// The fused loss gradient op `op`(dL, scores, labels, weights?) -> dScores?, dWeights?.
std::vector<Value*> loss_grad(GradContext& c, const std::string& op) {
  std::vector<bool> want = {c.needs_grad(0), c.node().has_input(2) && c.needs_grad(2)};
  Value* dl = c.grad_output(0);
  if (!dl || (!want[0] && !want[1])) return {nullptr, nullptr};
  return c.emit_some(op, {dl, c.input(0), c.input(1), c.input(2)}, want,
                     c.forward_attrs({"reduction", "ignore_index"}), kOtterDomain);
}

// SoftmaxCrossEntropyLoss: SoftmaxCrossEntropyLossGrad computes (softmax - onehot) * weight / norm
// in one pass (and the class weights' gradient when they need one); a gradient reaching the
// log_prob output adds through LogSoftmaxGrad. Labels carry no gradient.
void grad_sce(GradContext& c) {
  std::vector<Value*> g = loss_grad(c, "SoftmaxCrossEntropyLossGrad");
  Value* total = g[0];
  if (Value* dlp = c.grad_output(1); dlp && c.needs_grad(0)) {
    Value* t = c.emit_otter("LogSoftmaxGrad", {dlp, c.output(1)}, {{"axis", Attribute(int64_t{1})}});
    total = total ? c.emit("Add", {total, t}) : t;
  }
  c.set_grad_input(0, total);
  c.set_grad_input(2, g[1]);
}

void grad_nll(GradContext& c) {
  std::vector<Value*> g = loss_grad(c, "NegativeLogLikelihoodLossGrad");
  c.set_grad_input(0, g[0]);
  c.set_grad_input(2, g[1]);
}

// ---- gradient ops (ai.otter) --------------------------------------------------------------------
// The optional input 3 (dResidual, of X's shape and dY's type) is added to dX in the same loop
// (ai.otter.AddLayerNorm's gradient: the sum's gradient from its other readers).
void infer_layer_norm_grad(InferContext& ctx) {
  grads_like(3, 4, {1, 2, 2})(ctx);  // dScale, dB then take the normalised shape
  if (ctx.has_input(3)) {
    infer::check_same_type(ctx, 0, 3);
    const Shape &d = ctx.in_shape(3), &x = ctx.in_shape(1);
    if (d.rank_known && x.rank_known && d.is_static() && x.is_static() && !(d == x))
      ctx.error("input 3 (dResidual) has shape " + d.to_string() + ", X " + x.to_string());
    if (!ctx.has_output(0)) ctx.error("input 3 (dResidual) needs output 0 (dX)");
  }
  const Shape& x = ctx.in_shape(1);
  for (int i = 1; i <= 2; ++i) {
    if (!ctx.has_output(i)) continue;
    if (!x.rank_known) {
      ctx.set_output(i, ctx.in_dtype(2), Shape::unknown());
      continue;
    }
    int64_t axis = normalize_axis(ctx, ctx.node().attr_i("axis", -1), x.rank());
    ctx.set_output(i, ctx.in_dtype(2), Shape(std::vector<Dim>(x.dims.begin() + axis, x.dims.end())));
  }
}

void infer_batch_norm_grad(InferContext& ctx) {
  grads_like(5, 5, {1, 2, 2, 3, 4})(ctx);
}

void infer_softmax_grad(InferContext& ctx) {
  grads_like(2, 2, {1})(ctx);
  const Shape& y = ctx.in_shape(1);
  if (y.rank_known) normalize_axis(ctx, ctx.node().attr_i("axis", -1), y.rank());
}

void infer_loss_grad(InferContext& ctx) {
  infer::check_arity(ctx, 3, 4, 1, 2);
  infer::check_float(ctx, 0);
  infer::check_same_type(ctx, 0, 1);
  infer::check_type(ctx, 2, Types::kIndex);
  infer::check_same_type(ctx, 0, 3);
  if (ctx.has_output(0)) infer::same_as_input(ctx, 1, 0);
  if (ctx.has_output(1)) {
    if (!ctx.has_input(3)) ctx.error("output 1 (dWeights) needs input 3 (weights)");
    infer::same_as_input(ctx, 3, 1);
  }
}

void register_nn_grad_ops(OpTable& t) {
  using P = PrecisionClass;
  infer::add_otter_op(t, "BatchNormalizationGrad", infer_batch_norm_grad, P::kFp32,
                      "BatchNormalizationGrad(dY, X, scale, mean, var) {epsilon, training_mode} -> dX?, dScale?, "
                      "dB?, dMean?, dVar?");
  infer::add_otter_op(t, "LayerNormalizationGrad", infer_layer_norm_grad, P::kFp32,
                      "LayerNormalizationGrad(dY, X, scale, dResidual?) {axis, epsilon} -> dX?, dScale?, dB? (the "
                      "last two over the normalised shape; dResidual added to dX)");
  infer::add_otter_op(t, "SoftmaxGrad", infer_softmax_grad, P::kFp32,
                      "SoftmaxGrad(dY, Y) {axis}: Y * (dY - sum(dY * Y, axis))");
  infer::add_otter_op(t, "LogSoftmaxGrad", infer_softmax_grad, P::kFp32,
                      "LogSoftmaxGrad(dY, Y) {axis}: dY - exp(Y) * sum(dY, axis)");
  infer::add_otter_op(t, "SoftmaxCrossEntropyLossGrad", infer_loss_grad, P::kFp32,
                      "SoftmaxCrossEntropyLossGrad(dL, scores, labels, weights?) {reduction, ignore_index} -> "
                      "dScores?, dWeights?: (softmax(scores) - onehot(labels)) * weight * dL / norm");
  infer::add_otter_op(t, "NegativeLogLikelihoodLossGrad", infer_loss_grad, P::kFp32,
                      "NegativeLogLikelihoodLossGrad(dL, input, labels, weights?) {reduction, ignore_index} -> "
                      "dInput?, dWeights?: -weight * dL / norm at each label, 0 elsewhere");
  // A column's sum is read before any of its dX is written: dX may take over dY's buffer.
  for (const char* op : {"SoftmaxGrad", "LogSoftmaxGrad"}) t.mutable_find(kOtterDomain, op, 1)->inplace = true;
}

}  // namespace

void register_attention_ops(OpTable& t);      // graph/ops/attention.cc
void register_add_layer_norm_op(OpTable& t);  // graph/ops/add_layer_norm.cc

void register_nn_ops(OpTable& t) {
  using P = PrecisionClass;
  constexpr int kMax = kMaxOnnxOpset;
  auto rule = grad_rule;
  // BatchNormalization 9 (outputs mean, var, saved_mean, saved_var in training), 14 (training_mode
  // attribute, outputs running_mean/running_var), 15 (separate scale/stat types).
  add(t, "BatchNormalization", 9, kMax, infer_batch_norm, P::kFollow, false, rule(grad_batch_norm),
      "per-channel normalisation with running statistics");
  add(t, "LayerNormalization", 17, kMax, infer_layer_norm, P::kFp32, false, rule(grad_layer_norm),
      "normalisation over the axes from 'axis', optional mean/inv_std_dev outputs");
  add(t, "Softmax", 13, kMax, infer_softmax, P::kFp32, false, rule(softmax_grad("SoftmaxGrad")),
      "softmax along 'axis' (default -1)");
  add(t, "LogSoftmax", 13, kMax, infer_softmax, P::kFp32, false, rule(softmax_grad("LogSoftmaxGrad")),
      "log of softmax along 'axis' (default -1)");
  add(t, "Dropout", 13, kMax, infer_dropout, P::kFollow, true, rule(grad_dropout),
      "random zeroing with scaling; bool mask output");
  add(t, "SoftmaxCrossEntropyLoss", 13, kMax, loss(true), P::kFp32, false, rule(grad_sce),
      "cross entropy of softmax(scores) and labels, reduction none/mean/sum, optional log_prob");
  add(t, "NegativeLogLikelihoodLoss", 13, kMax, loss(false), P::kFp32, false, rule(grad_nll),
      "negative log likelihood of log-probabilities and targets, reduction none/mean/sum");
  // Only X shares the output's type: the parameters, statistics and ratio have type variables of
  // their own (T1, T2), so a half X keeps fp32 scale, bias and running statistics.
  for (const char* op : {"BatchNormalization", "Dropout"}) t.mutable_find("", op, kMax)->precision_inputs = {0};
  // Inference-mode Dropout returns its input as is.
  t.mutable_find("", "Dropout", kMax)->views = {{0, 0}};
  register_matmul_conv_ops(t);
  register_attention_ops(t);
  register_add_layer_norm_op(t);
  register_nn_grad_ops(t);
}

}  // namespace otter
