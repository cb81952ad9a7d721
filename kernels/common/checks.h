// Host-side input checks shared by the CPU and CUDA kernels, with errors that name the node:
// agreeing dtypes and dims, Clip's scalar bounds, Where's and ClipGrad's inputs, and the accumulator of AccumulateGrad.
#pragma once

#include <utility>

#include "graph/error.h"
#include "kernels/kernel.h"

namespace otter {

// Inputs i and j have one dtype.
inline void check_same_dtype(const KernelContext& ctx, int i, int j) {
  if (ctx.input(i).dtype() != ctx.input(j).dtype())
    ctx.error(str_cat("input ", j, " is ", dtype_name(ctx.input(j).dtype()), " but input ", i, " is ",
                      dtype_name(ctx.input(i).dtype())));
}

// Input i has the dtype and dims of `ref` (a gradient's dY); `what` names the input.
inline void check_same(const KernelContext& ctx, int i, const Tensor& ref, const char* what) {
  const Tensor& t = ctx.input(i);
  if (t.dtype() != ref.dtype() || t.dims() != ref.dims())
    ctx.error(str_cat(what, " ", t.describe(), " must match dY ", ref.describe()));
}

// Input i has the dtype and dims of `ref` (element-wise gradients); `what` names the input.
inline void check_like(const KernelContext& ctx, int i, const Tensor& ref, const char* what) {
  const Tensor& t = ctx.input(i);
  if (t.dtype() != ref.dtype() || t.dims() != ref.dims())
    ctx.error(str_cat("input ", i, " (", what, ") is ", t.describe(), ", expected ", ref.describe()));
}

// BiasGelu's / BiasGeluGrad's optional bias, input x + 1: 1-D of X's (input x) dtype (or float32
// for a half X) and last-axis length. Returns that length (the bias period along X's flat
// elements), 0 without a bias.
inline int64_t check_bias_gelu_bias(const KernelContext& ctx, int x) {
  if (!ctx.has_input(x + 1)) return 0;
  const Tensor &xt = ctx.input(x), &b = ctx.input(x + 1);
  const bool half_x = xt.dtype() == DataType::kFloat16 || xt.dtype() == DataType::kBFloat16;
  const bool type_ok = b.dtype() == xt.dtype() || (half_x && b.dtype() == DataType::kFloat32);
  if (!type_ok || b.dims().size() != 1 || xt.dims().empty() || b.dims()[0] != xt.dims().back())
    ctx.error(str_cat("bias ", b.describe(), " must be 1-D of X's last-axis length and X's dtype (or float32 for a ",
                      "half X), X ", xt.describe()));
  return b.dims()[0];
}

// BiasAdd's attribute `to` as a dtype, kUndefined when absent (then Y has X's type).
inline DataType bias_add_to_attr(const Node& n) {
  return n.has_attr("to") ? dtype_from_onnx(static_cast<int>(n.attr_i("to", 0))) : DataType::kUndefined;
}

// ai.otter.BiasAdd(X, bias) {to?}: the bias (required; X's type, or float32 for a half X; of X's
// trailing shape, rank >= 1) and the output type, `to` (kUndefined when the attribute is absent:
// X's type) checked to be X's type or float32 for a half X. Returns the bias's element count (the
// bias element of X's flat index j is bias[j % count]) and the output type.
inline std::pair<int64_t, DataType> check_bias_add(const KernelContext& ctx, DataType to_attr) {
  const Tensor& x = ctx.input(0);
  if (!ctx.has_input(1)) ctx.error("needs a bias");
  const Tensor& b = ctx.input(1);
  const bool half_x = x.dtype() == DataType::kFloat16 || x.dtype() == DataType::kBFloat16;
  const size_t br = b.dims().size(), xr = x.dims().size();
  bool shape_ok = br >= 1 && br <= xr && b.numel() > 0;
  for (size_t i = 1; shape_ok && i <= br; ++i) shape_ok = b.dims()[br - i] == x.dims()[xr - i];
  if (!(b.dtype() == x.dtype() || (half_x && b.dtype() == DataType::kFloat32)) || !shape_ok)
    ctx.error(str_cat("bias ", b.describe(),
                      " must have X's trailing shape and X's dtype (or float32 for a half X), X ", x.describe()));
  const int64_t cols = b.numel();
  const DataType to = to_attr == DataType::kUndefined ? x.dtype() : to_attr;
  if (to != x.dtype() && !(half_x && to == DataType::kFloat32))
    ctx.error(str_cat("to must be X's type, or float32 for a half X; got ", dtype_name(to), " for ", x.describe()));
  return {cols, to};
}

// Clip's optional inputs 1 (min) and 2 (max): scalars of input 0's dtype.
inline void check_clip_bounds(const KernelContext& ctx) {
  for (int i = 1; i <= 2; ++i) {
    if (!ctx.has_input(i)) continue;
    check_same_dtype(ctx, 0, i);
    if (ctx.input(i).numel() != 1)
      ctx.error(
          str_cat("input ", i, (i == 1 ? " (min)" : " (max)"), " must be a scalar, got ", ctx.input(i).describe()));
  }
}

// <Op>Grad(dY, X) of the math ops: X has dY's dtype and dims.
inline void check_derivative_inputs(const KernelContext& ctx) {
  const Tensor& dy = ctx.input(0);
  const Tensor& x = ctx.input(1);
  if (x.dtype() != dy.dtype() || x.dims() != dy.dims())
    ctx.error(str_cat("input 1 (X) is ", x.describe(), ", expected the type and shape of dY ", dy.describe()));
}

// Where(cond, x, y): cond is bool, x and y share a dtype.
inline void check_where_inputs(const KernelContext& ctx) {
  const Tensor& c = ctx.input(0);
  if (c.dtype() != DataType::kBool) ctx.error(str_cat("condition must be bool, got ", c.describe()));
  check_same_dtype(ctx, 1, 2);
}

// ClipGrad(dY, X, min?, max?): X like dY, min and max (where given) scalars of dY's dtype.
inline void check_clip_grad_inputs(const KernelContext& ctx) {
  const Tensor& dy = ctx.input(0);
  check_like(ctx, 1, dy, "X");
  for (int i = 2; i <= 3; ++i)
    if (ctx.has_input(i) && (ctx.input(i).numel() != 1 || ctx.input(i).dtype() != dy.dtype()))
      ctx.error(str_cat("input ", i, " must be a scalar of X's type, got ", ctx.input(i).describe()));
}

// AccumulateGrad(acc, g): checks g against the accumulator and makes output 0 share acc's buffer;
// returns that output.
inline Tensor accumulator_output(KernelContext& ctx) {
  const Tensor& acc = ctx.input(0);
  const Tensor& g = ctx.input(1);
  if (g.dims() != acc.dims())
    ctx.error(str_cat("gradient ", g.describe(), " does not match accumulator ", acc.describe()));
  ctx.alias_output(0, acc, acc.dims());
  return acc;
}

}  // namespace otter
