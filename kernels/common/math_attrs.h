// Host-side glue of the math op families shared by the CPU (kernels/cpu/math.cc) and CUDA
// (kernels/cuda/math.cu) backends: the op lists as X-macros, and each functor of
// kernels/common/math.h built from a node's attributes (ONNX defaults where unset).
#pragma once

#include "graph/ir.h"
#include "kernels/common/math.h"

// clang-format off
// Float-only unary ops: X(Name) for the functor NameOp.
#define OTTER_MATH_FLOAT_OPS(X)                                                                            \
  X(Sin) X(Cos) X(Tan) X(Asin) X(Acos) X(Atan) X(Sinh) X(Cosh) X(Asinh) X(Acosh) X(Atanh) X(Ceil) X(Floor) \
  X(Round) X(HardSigmoid) X(HardSwish) X(Elu) X(Selu) X(Celu) X(ThresholdedRelu) X(Mish)
// Unary ops of every numeric type.
#define OTTER_MATH_NUMERIC_OPS(X) X(Sign) X(Shrink)
// Float in, bool out.
#define OTTER_MATH_CLASSIFY_OPS(X) X(IsNaN) X(IsInf)
// Derivative ops (ai.otter NameGrad(dY, X)): X(Name) for the functor NameGradOp.
#define OTTER_MATH_DERIVATIVE_OPS(X)                                                                    \
  X(Sin) X(Cos) X(Tan) X(Asin) X(Acos) X(Atan) X(Sinh) X(Cosh) X(Asinh) X(Acosh) X(Atanh) X(HardSigmoid) \
  X(HardSwish) X(Elu) X(Selu) X(Celu) X(ThresholdedRelu) X(Mish) X(Shrink)
// clang-format on

namespace otter {

// The functor of an op for node n: F{} unless specialised below for an op with attributes.
template <typename F>
F functor_from(const Node&) {
  return F{};
}
template <>
inline HardSigmoidOp functor_from(const Node& n) {
  return {n.attr_f("alpha", 0.2f), n.attr_f("beta", 0.5f)};
}
template <>
inline HardSigmoidGradOp functor_from(const Node& n) {
  return {n.attr_f("alpha", 0.2f), n.attr_f("beta", 0.5f)};
}
template <>
inline EluOp functor_from(const Node& n) {
  return {n.attr_f("alpha", 1.f)};
}
template <>
inline EluGradOp functor_from(const Node& n) {
  return {n.attr_f("alpha", 1.f)};
}
template <>
inline SeluOp functor_from(const Node& n) {
  return {n.attr_f("alpha", SeluOp{}.alpha), n.attr_f("gamma", SeluOp{}.gamma)};
}
template <>
inline SeluGradOp functor_from(const Node& n) {
  return {n.attr_f("alpha", SeluOp{}.alpha), n.attr_f("gamma", SeluOp{}.gamma)};
}
template <>
inline CeluOp functor_from(const Node& n) {
  return {n.attr_f("alpha", 1.f)};
}
template <>
inline CeluGradOp functor_from(const Node& n) {
  return {n.attr_f("alpha", 1.f)};
}
template <>
inline ThresholdedReluOp functor_from(const Node& n) {
  return {n.attr_f("alpha", 1.f)};
}
template <>
inline ThresholdedReluGradOp functor_from(const Node& n) {
  return {n.attr_f("alpha", 1.f)};
}
template <>
inline ShrinkOp functor_from(const Node& n) {
  return {n.attr_f("lambd", 0.5f), n.attr_f("bias", 0.f)};
}
template <>
inline ShrinkGradOp functor_from(const Node& n) {
  return {n.attr_f("lambd", 0.5f)};
}
template <>
inline IsInfOp functor_from(const Node& n) {
  return {n.attr_i("detect_positive", 1) != 0, n.attr_i("detect_negative", 1) != 0};
}

}  // namespace otter
