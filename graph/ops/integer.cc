// Op-table rows of Mod, BitShift, Bitwise*, CastLike and Hardmax: Mod {fmod} of all numeric types
// including the wider integers (float remainders differentiate: dA = dY, dB = -dY * trunc(A / B)),
// BitShift {direction} of unsigned integers, BitwiseAnd / Or / Xor (numpy broadcasting) and
// BitwiseNot of every integer type (no gradient), CastLike (Cast to input 1's type; the gradient is cast
// back) and Hardmax (one-hot of the first maximum along 'axis'; piecewise constant, so no
// gradient). Kernels: kernels/cpu/elementwise.cc, kernels/cpu/scan.cc and their CUDA twins.
#include "graph/gradient.h"
#include "graph/op_table.h"
#include "graph/ops/infer_util.h"

namespace otter {
namespace {

using infer::add;
using infer::Types;
using P = PrecisionClass;

void infer_mod(InferContext& ctx) {
  infer::check_arity(ctx, 2, 2);
  infer::check_type(ctx, 0, Types::kNumeric);
  infer::check_same_type(ctx, 0, 1);
  if (is_float(ctx.in_dtype(0)) && ctx.node().attr_i("fmod", 0) == 0)
    ctx.error(str_cat("a float Mod needs attribute fmod = 1 (the ONNX spec), got fmod = 0 on ",
                      dtype_name(ctx.in_dtype(0)), " inputs"));
  ctx.set_output(0, ctx.in_dtype(0), broadcast_shapes(ctx, {ctx.in_shape(0), ctx.in_shape(1)}));
}

// Y = A - B * trunc(A / B): dA = dY, dB = -dY * trunc(A / B) = -dY * (A - Y) / B; each summed back
// over the axes it was broadcast along.
void grad_mod(GradContext& c) {
  Value *dy = c.grad_output(0), *a = c.input(0), *b = c.input(1);
  if (c.needs_grad(0)) c.set_grad_input(0, c.sum_to_shape(dy, a));
  if (c.needs_grad(1)) {
    Value* q = c.emit("Div", {c.emit("Sub", {a, c.output(0)}), b});
    c.set_grad_input(1, c.emit("Neg", {c.sum_to_shape(c.emit("Mul", {dy, q}), b)}));
  }
}

void infer_bitshift(InferContext& ctx) {
  infer::check_arity(ctx, 2, 2);
  infer::check_same_type(ctx, 0, 1);
  DataType t = ctx.in_dtype(0);
  if (infer::dtype_known(t) && t != DataType::kUInt8 && t != DataType::kUInt16 && t != DataType::kUInt32 &&
      t != DataType::kUInt64)
    ctx.error(
        str_cat(infer::input_desc(ctx, 0), " must be an unsigned integer type (u8 u16 u32 u64), got ", dtype_name(t)));
  std::string dir = ctx.node().attr_s("direction", "");
  if (dir != "LEFT" && dir != "RIGHT")
    ctx.error("attribute 'direction' must be \"LEFT\" or \"RIGHT\", got \"" + dir + "\"");
  ctx.set_output(0, t, broadcast_shapes(ctx, {ctx.in_shape(0), ctx.in_shape(1)}));
}

// BitwiseAnd / Or / Xor: two integer inputs of one type, broadcast.
void infer_bitwise(InferContext& ctx) {
  infer::check_arity(ctx, 2, 2);
  infer::check_type(ctx, 0, Types::kInteger);
  infer::check_same_type(ctx, 0, 1);
  ctx.set_output(0, ctx.in_dtype(0), broadcast_shapes(ctx, {ctx.in_shape(0), ctx.in_shape(1)}));
}

void infer_castlike(InferContext& ctx) {
  infer::check_arity(ctx, 2, 2);
  ctx.set_output(0, ctx.in_dtype(1), ctx.in_shape(0));
}

// The gradient of the input is cast back to its type; `target_type` carries only its type.
void grad_castlike(GradContext& c) {
  if (c.needs_grad(0)) c.set_grad_input(0, c.cast(c.grad_output(0), c.input(0)->dtype()));
}

void infer_hardmax(InferContext& ctx) {
  infer::check_arity(ctx, 1, 1);
  infer::check_type(ctx, 0, Types::kFloat);
  const Shape& x = ctx.in_shape(0);
  if (x.rank_known) normalize_axis(ctx, ctx.node().attr_i("axis", -1), x.rank());
  ctx.set_output(0, ctx.in_dtype(0), x);
}

}  // namespace

void register_integer_ops(OpTable& t) {
  // Mod 13; BitShift 11; CastLike 15 (19: saturate, for float8 only); Hardmax 13.
  add(t, "Mod", 13, infer_mod, P::kFollow, false, grad_rule(grad_mod),
      "remainder of A / B with numpy broadcasting {fmod: dividend's sign; else the divisor's}");
  add(t, "BitShift", 11, infer_bitshift, P::kNone, false, no_gradient(),
      "X shifted by Y bits {direction: LEFT or RIGHT}, unsigned integers");
  // BitwiseAnd, BitwiseOr, BitwiseXor, BitwiseNot 18.
  add(t, "BitwiseAnd", 18, infer_bitwise, P::kNone, false, no_gradient(), "A & B with numpy broadcasting, integers");
  add(t, "BitwiseOr", 18, infer_bitwise, P::kNone, false, no_gradient(), "A | B with numpy broadcasting, integers");
  add(t, "BitwiseXor", 18, infer_bitwise, P::kNone, false, no_gradient(), "A ^ B with numpy broadcasting, integers");
  add(t, "BitwiseNot", 18, infer::unary(Types::kInteger), P::kNone, false, no_gradient(),
      "~X (every bit flipped), integers");
  add(t, "CastLike", 15, infer_castlike, P::kNone, false, grad_rule(grad_castlike),
      "converts X to the type of input 'target_type'");
  add(t, "Hardmax", 13, infer_hardmax, P::kFollow, false, no_gradient(),
      "1 at the first maximum along 'axis', 0 elsewhere");
  register_quantization_ops(t);  // graph/ops/quantization.cc
}

}  // namespace otter
