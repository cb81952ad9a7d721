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
// Every op above: F(Name) ... for the four lists in turn.
#define OTTER_MATH_ALL_OPS(F, N, C, D) \
  OTTER_MATH_FLOAT_OPS(F) OTTER_MATH_NUMERIC_OPS(N) OTTER_MATH_CLASSIFY_OPS(C) OTTER_MATH_DERIVATIVE_OPS(D)
// clang-format on

namespace otter {

// The functor of an op for node n: F{} unless specialised below for an op with attributes.
template <typename F>
F functor_from(const Node&) {
  return F{};
}
// NameOp and NameGradOp built from the same attribute reads (the initializer list `...` of node n).
#define OTTER_FUNCTOR_FROM(Op, ...)       \
  template <>                             \
  inline Op functor_from(const Node& n) { \
    return {__VA_ARGS__};                 \
  }
#define OTTER_FUNCTOR_PAIR_FROM(Name, ...)  \
  OTTER_FUNCTOR_FROM(Name##Op, __VA_ARGS__) \
  OTTER_FUNCTOR_FROM(Name##GradOp, __VA_ARGS__)
// clang-format off
OTTER_FUNCTOR_PAIR_FROM(HardSigmoid, n.attr_f("alpha", 0.2f), n.attr_f("beta", 0.5f))
OTTER_FUNCTOR_PAIR_FROM(Elu, n.attr_f("alpha", 1.f))
OTTER_FUNCTOR_PAIR_FROM(Selu, n.attr_f("alpha", SeluOp{}.alpha), n.attr_f("gamma", SeluOp{}.gamma))
OTTER_FUNCTOR_PAIR_FROM(Celu, n.attr_f("alpha", 1.f))
OTTER_FUNCTOR_PAIR_FROM(ThresholdedRelu, n.attr_f("alpha", 1.f))
OTTER_FUNCTOR_FROM(ShrinkOp, n.attr_f("lambd", 0.5f), n.attr_f("bias", 0.f))
OTTER_FUNCTOR_FROM(ShrinkGradOp, n.attr_f("lambd", 0.5f))
OTTER_FUNCTOR_FROM(IsInfOp, n.attr_i("detect_positive", 1) != 0, n.attr_i("detect_negative", 1) != 0)
// clang-format on
#undef OTTER_FUNCTOR_PAIR_FROM
#undef OTTER_FUNCTOR_FROM

}  // namespace otter
