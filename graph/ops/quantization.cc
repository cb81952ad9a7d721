// Op-table rows of the ONNX quantization ops: QuantizeLinear and DequantizeLinear (per-tensor or
// per-axis scale and zero point, int8/uint8; DequantizeLinear also int32), DynamicQuantizeLinear,
// MatMulInteger, ConvInteger, QLinearMatMul and QLinearConv. Integer and fixed-point ops: precision
// class NONE (the mixed-precision pass leaves them alone) and not differentiable (autodiff reports
// them when a gradient must flow through one). Registered by register_integer_ops. Kernels:
// kernels/cpu/quantization.cc; on CUDA the CPU kernels run on host copies (kernels/cuda/host_ops.cc).
#include "graph/gradient.h"
#include "graph/op_table.h"
#include "graph/ops/infer_util.h"

namespace otter {
namespace {

using infer::add;
using infer::Types;
using P = PrecisionClass;

bool is_8bit(DataType t) { return t == DataType::kInt8 || t == DataType::kUInt8; }

// Fails unless input i (when present and known) is int8 or uint8 (or int32 where `int32_ok`).
void check_8bit(InferContext& ctx, int i, bool int32_ok = false) {
  if (!ctx.has_input(i)) return;
  const DataType t = ctx.in_dtype(i);
  if (!infer::dtype_known(t) || is_8bit(t) || (int32_ok && t == DataType::kInt32)) return;
  ctx.error(str_cat(infer::input_desc(ctx, i), " has type ", dtype_name(t), ", expected i8 or u8",
                    int32_ok ? " or i32" : "", " (otter's quantized types)"));
}

// The scale (input s) and zero point (input z, optional) of a quantized tensor (input x): a scalar
// or one element (per tensor), or 1-D along x's axis `axis` (per axis; axis < 0: per tensor only).
// The zero point has the scale's shape. Blocked scales (rank > 1, opset 21's block_size) are
// reported as unsupported.
void check_qparams(InferContext& ctx, int x, int s, int z, int64_t axis) {
  infer::check_type(ctx, s, Types::kFloat);
  const Shape& ss = ctx.in_shape(s);
  if (!ss.rank_known) return;
  if (ss.rank() > 1)
    ctx.error(str_cat(infer::input_desc(ctx, s), " has shape ", ss.to_string(),
                      "; otter supports per-tensor (scalar) and per-axis (1-D) scales, not blocked ones"));
  if (ss.rank() == 1 && !(ss.dims[0].is_static() && ss.dims[0].value == 1)) {
    if (axis < 0)
      ctx.error(
          str_cat(infer::input_desc(ctx, s), " has shape ", ss.to_string(), "; it must be a scalar (per tensor)"));
    infer::check_dims_match(ctx, ss.dims[0], infer::dim_at(ctx.in_shape(x), axis),
                            str_cat(infer::input_desc(ctx, s), " must have one element per index of axis ", axis,
                                    " of ", infer::input_desc(ctx, x), " ", ctx.in_shape(x).to_string()));
  }
  if (z >= 0 && ctx.has_input(z)) {
    const Shape& zs = ctx.in_shape(z);
    if (zs.rank_known && (zs.rank() != ss.rank() || (zs.rank() == 1 && zs.dims[0].is_static() &&
                                                     ss.dims[0].is_static() && zs.dims[0].value != ss.dims[0].value)))
      ctx.error(str_cat(infer::input_desc(ctx, z), " has shape ", zs.to_string(), " but ", infer::input_desc(ctx, s),
                        " has shape ", ss.to_string(), " (they must match)"));
  }
}

// The 'axis' attribute of QuantizeLinear / DequantizeLinear, normalised against input 0's rank;
// -1 where the rank is unknown or the scale (input 1) is not known to be per axis (the axis, 1 by
// default, only matters for a 1-D scale of more than one element). block_size (opset 21) must be
// absent or 0.
int64_t quant_axis(InferContext& ctx) {
  if (ctx.node().attr_i("block_size", 0) != 0)
    ctx.error("attribute 'block_size' (blocked quantization) is not supported");
  const Shape& x = ctx.in_shape(0);
  const Shape& s = ctx.in_shape(1);
  if (!x.rank_known || x.rank() == 0 || !s.rank_known || s.rank() != 1) return -1;
  if (s.dims[0].is_static() && s.dims[0].value == 1) return -1;
  return normalize_axis(ctx, ctx.node().attr_i("axis", 1), x.rank());
}

// QuantizeLinear(x, y_scale, y_zero_point?) {axis, block_size, output_dtype, saturate} -> y.
void infer_quantize(InferContext& ctx) {
  infer::check_arity(ctx, 2, 3);
  const DataType xt = ctx.in_dtype(0);
  if (infer::dtype_known(xt) && !is_float(xt) && xt != DataType::kInt32)
    ctx.error(str_cat("input 0 (x) has type ", dtype_name(xt), ", expected a float type or i32"));
  check_8bit(ctx, 2);
  check_qparams(ctx, 0, 1, 2, quant_axis(ctx));
  DataType yt = DataType::kUInt8;
  const int64_t out_attr = ctx.node().attr_i("output_dtype", 0);
  if (out_attr != 0) {
    yt = dtype_from_onnx(static_cast<int>(out_attr));
    if (!is_8bit(yt)) ctx.error(str_cat("attribute 'output_dtype' = ", out_attr, " is not int8 or uint8"));
  }
  if (ctx.has_input(2)) {
    if (out_attr != 0 && infer::dtype_known(ctx.in_dtype(2)) && ctx.in_dtype(2) != yt)
      ctx.error("attribute 'output_dtype' differs from the type of input 2 (y_zero_point)");
    yt = ctx.in_dtype(2);
  }
  ctx.set_output(0, yt, ctx.in_shape(0));
}

// DequantizeLinear(x, x_scale, x_zero_point?) {axis, block_size} -> y of the scale's type.
void infer_dequantize(InferContext& ctx) {
  infer::check_arity(ctx, 2, 3);
  check_8bit(ctx, 0, true);
  infer::check_same_type(ctx, 0, 2);
  check_qparams(ctx, 0, 1, 2, quant_axis(ctx));
  ctx.set_output(0, ctx.in_dtype(1), ctx.in_shape(0));
}

// DynamicQuantizeLinear(x f32) -> y u8, y_scale f32 scalar, y_zero_point u8 scalar.
void infer_dynamic_quantize(InferContext& ctx) {
  infer::check_arity(ctx, 1, 1, 3, 3);
  if (infer::dtype_known(ctx.in_dtype(0)) && ctx.in_dtype(0) != DataType::kFloat32)
    ctx.error(str_cat("input 0 (x) has type ", dtype_name(ctx.in_dtype(0)), ", expected f32"));
  ctx.set_output(0, DataType::kUInt8, ctx.in_shape(0));
  ctx.set_output(1, DataType::kFloat32, Shape(std::vector<Dim>{}));
  ctx.set_output(2, DataType::kUInt8, Shape(std::vector<Dim>{}));
}

// Axis `from_end` (1: last, 2: second to last) of input i, or -1 where it has no such axis.
int64_t axis_from_end(InferContext& ctx, int i, int64_t from_end) {
  const Shape& s = ctx.in_shape(i);
  return s.rank_known && s.rank() >= from_end ? s.rank() - from_end : -1;
}

// MatMulInteger(A, B, a_zero_point?, b_zero_point?) -> Y i32: zero points per tensor, or per row
// of A / per column of B.
void infer_matmul_integer(InferContext& ctx) {
  infer::check_arity(ctx, 2, 4);
  for (int i = 0; i < 4; ++i) check_8bit(ctx, i);
  infer::check_same_type(ctx, 0, 2);
  infer::check_same_type(ctx, 1, 3);
  ctx.set_output(0, DataType::kInt32, infer::matmul_shape(ctx, 0, 1));
}

// ConvInteger(x, w, x_zero_point?, w_zero_point?) {Conv's window attributes} -> y i32: x's zero
// point per tensor, w's per tensor or per output channel.
void infer_conv_integer(InferContext& ctx) {
  infer::check_arity(ctx, 2, 4);
  for (int i = 0; i < 4; ++i) check_8bit(ctx, i);
  infer::check_same_type(ctx, 0, 2);
  infer::check_same_type(ctx, 1, 3);
  ctx.set_output(0, DataType::kInt32, infer::conv_shape(ctx, 0, 1, -1));
}

// QLinearMatMul(a, a_scale, a_zero_point, b, b_scale, b_zero_point, y_scale, y_zero_point) -> y:
// a's parameters per tensor or per row, b's per tensor or per column, y's per tensor.
void infer_qlinear_matmul(InferContext& ctx) {
  infer::check_arity(ctx, 8, 8);
  for (int i : {0, 2, 3, 5, 7}) check_8bit(ctx, i);
  infer::check_same_type(ctx, 0, 2);
  infer::check_same_type(ctx, 3, 5);
  check_qparams(ctx, 0, 1, 2, axis_from_end(ctx, 0, 2));
  check_qparams(ctx, 3, 4, 5, axis_from_end(ctx, 3, 1));
  check_qparams(ctx, 0, 6, 7, -1);
  ctx.set_output(0, ctx.in_dtype(7), infer::matmul_shape(ctx, 0, 3));
}

// QLinearConv(x, x_scale, x_zero_point, w, w_scale, w_zero_point, y_scale, y_zero_point, B?)
// {Conv's window attributes} -> y: w's parameters per tensor or per output channel, B i32.
void infer_qlinear_conv(InferContext& ctx) {
  infer::check_arity(ctx, 8, 9);
  for (int i : {0, 2, 3, 5, 7}) check_8bit(ctx, i);
  infer::check_same_type(ctx, 0, 2);
  infer::check_same_type(ctx, 3, 5);
  if (ctx.has_input(8) && infer::dtype_known(ctx.in_dtype(8)) && ctx.in_dtype(8) != DataType::kInt32)
    ctx.error(str_cat("input 8 (B) has type ", dtype_name(ctx.in_dtype(8)), ", expected i32"));
  check_qparams(ctx, 0, 1, 2, -1);
  check_qparams(ctx, 3, 4, 5, 0);
  check_qparams(ctx, 0, 6, 7, -1);
  ctx.set_output(0, ctx.in_dtype(7), infer::conv_shape(ctx, 0, 3, 8));
}

}  // namespace

void register_quantization_ops(OpTable& t) {
  // QuantizeLinear / DequantizeLinear 13 (19: half types, saturate for float8; 21: block_size,
  // output_dtype, 4- and 16-bit types; otter: 8-bit, per tensor or per axis); DynamicQuantizeLinear
  // 11; MatMulInteger, ConvInteger, QLinearConv 10; QLinearMatMul 10 (21: half scales).
  const GradSpec kNotDiff = not_differentiable();
  add(t, "QuantizeLinear", 13, infer_quantize, P::kNone, false, kNotDiff,
      "saturate(round_half_even(x / y_scale) + y_zero_point), per tensor or along 'axis'");
  add(t, "DequantizeLinear", 13, infer_dequantize, P::kNone, false, kNotDiff,
      "(x - x_zero_point) * x_scale, per tensor or along 'axis'");
  add(t, "DynamicQuantizeLinear", 11, infer_dynamic_quantize, P::kNone, false, kNotDiff,
      "uint8 quantization of x with a scale and zero point from its range (including 0)");
  add(t, "MatMulInteger", 10, infer_matmul_integer, P::kNone, false, kNotDiff,
      "int32 numpy matmul of (A - a_zero_point) and (B - b_zero_point)");
  add(t, "ConvInteger", 10, infer_conv_integer, P::kNone, false, kNotDiff,
      "int32 convolution of (x - x_zero_point) and (w - w_zero_point)");
  add(t, "QLinearMatMul", 10, infer_qlinear_matmul, P::kNone, false, kNotDiff,
      "quantized matmul: int32 product of the dequantized operands, requantized to y's scale and zero point");
  add(t, "QLinearConv", 10, infer_qlinear_conv, P::kNone, false, kNotDiff,
      "quantized convolution (+ int32 bias B), requantized to y's scale and zero point");
}

}  // namespace otter
