// Op-table rows of the math families: trigonometric and hyperbolic functions, rounding, Sign,
// IsNaN / IsInf, and the activations HardSigmoid, HardSwish, Elu, Selu, Celu, ThresholdedRelu,
// Mish, Shrink and PRelu; with their gradient rules and the ai.otter derivative ops
// (<Op>Grad(dY, X) -> dX) those rules emit. Kernels: kernels/cpu/math.cc, kernels/cuda/math.cu.
#include <cmath>

#include "graph/gradient.h"
#include "graph/op_table.h"
#include "graph/ops/infer_util.h"

namespace otter {
namespace {

using infer::Types;
using P = PrecisionClass;

// ---- inference ------------------------------------------------------------------------------------
InferFn same_shape(Types allowed) { return infer::unary(allowed); }

// IsNaN / IsInf: float in, bool out.
void infer_classify(InferContext& ctx) {
  infer::check_arity(ctx, 1, 1);
  infer::check_type(ctx, 0, Types::kFloat);
  ctx.set_output(0, DataType::kBool, ctx.in_shape(0));
}

void infer_celu(InferContext& ctx) {
  same_shape(Types::kFloat)(ctx);
  if (ctx.node().attr_f("alpha", 1.f) == 0.f) ctx.error("attribute 'alpha' must be nonzero (Celu divides by it)");
}

// PRelu(X, slope): slope broadcasts onto X one way; Y has X's shape.
void infer_prelu(InferContext& ctx) {
  infer::check_arity(ctx, 2, 2);
  infer::check_type(ctx, 0, Types::kNumeric);
  infer::check_same_type(ctx, 0, 1);
  const Shape &x = ctx.in_shape(0), &s = ctx.in_shape(1);
  if (x.rank_known && s.rank_known) {
    bool ok = s.rank() <= x.rank();
    for (int64_t i = 0; ok && i < s.rank(); ++i) {
      const Dim &ds = s.dims[s.rank() - 1 - i], &dx = x.dims[x.rank() - 1 - i];
      ok = !(ds.is_static() && ds.value != 1 && dx.is_static() && ds.value != dx.value);
    }
    if (!ok)
      ctx.error(str_cat(infer::input_desc(ctx, 1), " (slope) of shape ", s.to_string(),
                        " does not broadcast onto X of shape ", x.to_string()));
  }
  ctx.set_output(0, ctx.in_dtype(0), x);
}

// <Op>Grad(dY, X) -> dX: both float, one type, one shape.
void infer_derivative(InferContext& ctx) {
  infer::check_arity(ctx, 2, 2);
  infer::check_float(ctx, 0);
  infer::check_same_type(ctx, 0, 1);
  infer::same_as_input(ctx, 1);
}

// ---- gradient rules -------------------------------------------------------------------------------
// dX = <op>Grad(dY, X) with the forward attributes `attrs`.
GradSpec derivative(std::string op, std::vector<std::string> attrs = {}) {
  return grad_rule([op = std::move(op) + "Grad", attrs = std::move(attrs)](GradContext& c) {
    c.set_grad_input(0, c.emit_otter(op, {c.grad_output(0), c.input(0)}, c.forward_attrs(attrs)));
  });
}

// PRelu: dX = dY where X >= 0, dY * slope below; dSlope = dY * X below 0, summed back onto the
// slope's shape.
void grad_prelu(GradContext& c) {
  Value *dy = c.grad_output(0), *x = c.input(0), *slope = c.input(1);
  Value* neg = c.emit("Less", {x, c.scalar_like(0, x)});
  if (c.needs_grad(0)) c.set_grad_input(0, c.emit("Where", {neg, c.emit("Mul", {dy, slope}), dy}));
  if (c.needs_grad(1)) {
    Value* t = c.emit("Where", {neg, c.emit("Mul", {dy, x}), c.scalar_like(0, dy)});
    c.set_grad_input(1, c.sum_to_shape(t, slope));
  }
}

// ---- registration ---------------------------------------------------------------------------------
struct Row {
  const char* op;
  int since;  // the ONNX schema version in force at opset 13 (or the op's first, when later)
  InferFn infer;
  P precision;
  GradSpec grad;
  const char* summary;
};

void add(OpTable& t, Row r) {
  t.add({.domain = "",
         .op_type = r.op,
         .since_version = r.since,
         .until_version = kMaxOnnxOpset,
         .infer = std::move(r.infer),
         .precision = r.precision,
         .inplace = true,
         .grad_kind = r.grad.kind,
         .grad = std::move(r.grad.fn),
         .summary = r.summary});
}

// Precision classes follow PyTorch's CUDA autocast: acos, asin, cosh, sinh and tan run in fp32;
// prelu in the half type; the rest in their inputs' type.
std::vector<Row> rows() {
  const InferFn f = same_shape(Types::kFloat);
  return {
      {"Sin", 7, f, P::kFollow, derivative("Sin"), "sin(X)"},
      {"Cos", 7, f, P::kFollow, derivative("Cos"), "cos(X)"},
      {"Tan", 7, f, P::kFp32, derivative("Tan"), "tan(X)"},
      {"Asin", 7, f, P::kFp32, derivative("Asin"), "arcsin(X)"},
      {"Acos", 7, f, P::kFp32, derivative("Acos"), "arccos(X)"},
      {"Atan", 7, f, P::kFollow, derivative("Atan"), "arctan(X)"},
      {"Sinh", 9, f, P::kFp32, derivative("Sinh"), "sinh(X)"},
      {"Cosh", 9, f, P::kFp32, derivative("Cosh"), "cosh(X)"},
      {"Asinh", 9, f, P::kFollow, derivative("Asinh"), "arsinh(X)"},
      {"Acosh", 9, f, P::kFollow, derivative("Acosh"), "arcosh(X)"},
      {"Atanh", 9, f, P::kFollow, derivative("Atanh"), "artanh(X)"},
      // Piecewise constant: the gradient is zero (no gradient flows, as PyTorch's zeros).
      {"Ceil", 13, f, P::kFollow, no_gradient(), "smallest integer >= X"},
      {"Floor", 13, f, P::kFollow, no_gradient(), "largest integer <= X"},
      {"Round", 11, f, P::kFollow, no_gradient(), "X rounded to the nearest integer, halves to even"},
      {"Sign", 13, same_shape(Types::kNumeric), P::kFollow, no_gradient(), "-1, 0 or 1 by the sign of X"},
      {"IsNaN", 13, infer_classify, P::kNone, no_gradient(), "X is NaN (bool)"},
      {"IsInf", 10, infer_classify, P::kNone, no_gradient(),
       "X is +inf (detect_positive) or -inf (detect_negative), bool"},
      {"HardSigmoid", 6, f, P::kFollow, derivative("HardSigmoid", {"alpha", "beta"}),
       "max(0, min(1, alpha * X + beta))"},
      {"HardSwish", 14, f, P::kFollow, derivative("HardSwish"), "X * max(0, min(1, X / 6 + 1/2))"},
      {"Elu", 6, f, P::kFollow, derivative("Elu", {"alpha"}), "X > 0 ? X : alpha * (exp(X) - 1)"},
      {"Selu", 6, f, P::kFollow, derivative("Selu", {"alpha", "gamma"}), "gamma * (X > 0 ? X : alpha * (exp(X) - 1))"},
      {"Celu", 12, infer_celu, P::kFollow, derivative("Celu", {"alpha"}),
       "max(0, X) + min(0, alpha * (exp(X / alpha) - 1))"},
      {"ThresholdedRelu", 10, f, P::kFollow, derivative("ThresholdedRelu", {"alpha"}), "X > alpha ? X : 0"},
      {"Mish", 18, f, P::kFollow, derivative("Mish"), "X * tanh(softplus(X))"},
      {"Shrink", 9, same_shape(Types::kNumeric), P::kFollow, derivative("Shrink", {"lambd"}),
       "X + bias below -lambd, X - bias above lambd, else 0"},
      {"PRelu", 16, infer_prelu, P::kLow, grad_rule(grad_prelu),
       "X >= 0 ? X : slope * X, slope broadcast onto X (PRelu 9, 16)"},
  };
}

// The derivative ops the rules above emit: (op, what it computes).
const std::vector<std::pair<const char*, const char*>> kDerivatives = {
    {"SinGrad", "dY * cos(X)"},
    {"CosGrad", "-dY * sin(X)"},
    {"TanGrad", "dY / cos(X)^2"},
    {"AsinGrad", "dY / sqrt(1 - X^2)"},
    {"AcosGrad", "-dY / sqrt(1 - X^2)"},
    {"AtanGrad", "dY / (1 + X^2)"},
    {"SinhGrad", "dY * cosh(X)"},
    {"CoshGrad", "dY * sinh(X)"},
    {"AsinhGrad", "dY / sqrt(X^2 + 1)"},
    {"AcoshGrad", "dY / sqrt(X^2 - 1)"},
    {"AtanhGrad", "dY / (1 - X^2)"},
    {"HardSigmoidGrad", "{alpha, beta}: dY * alpha where 0 < alpha * X + beta < 1, else 0"},
    {"HardSwishGrad", "dY * (X < -3 ? 0 : X <= 3 ? X / 3 + 1/2 : 1)"},
    {"EluGrad", "{alpha}: X > 0 ? dY : dY * alpha * exp(X)"},
    {"SeluGrad", "{alpha, gamma}: gamma * (X > 0 ? dY : dY * alpha * exp(X))"},
    {"CeluGrad", "{alpha}: X > 0 ? dY : dY * exp(X / alpha)"},
    {"ThresholdedReluGrad", "{alpha}: X > alpha ? dY : 0"},
    {"MishGrad", "dY * (t + X * sigmoid(X) * (1 - t^2)), t = tanh(softplus(X))"},
    {"ShrinkGrad", "{lambd}: |X| > lambd ? dY : 0"},
};

}  // namespace

void register_math_ops(OpTable& t) {
  for (Row& r : rows()) add(t, std::move(r));
  t.mutable_find("", "IsNaN", 13)->inplace = false;  // bool output: another buffer
  t.mutable_find("", "IsInf", 13)->inplace = false;
  for (const auto& [op, what] : kDerivatives) {
    infer::add_otter_op(t, op, infer_derivative, P::kFollow, str_cat(op, "(dY, X) ", what));
    t.mutable_find(kOtterDomain, op, 1)->inplace = true;  // each dX element reads only its dY
  }
}

}  // namespace otter
