// Differential tests of the CUDA kernels against the CPU kernels, which are the specification: for
// every CUDA kernel and dtype, one-node graphs with seeded random inputs (broadcasting, odd sizes,
// empty tensors) run on the CPU executor and on the CUDA executor, and the outputs are compared
// (relative to the largest reference magnitude: f32 1e-5, f16 1e-2, bf16 5e-2, integers and bools
// exactly). Where the CPU has no kernel for a half type, the reference runs in f32 on the same
// (exactly widened) inputs.
//
// Without a device the comparisons skip with the reason. Everywhere, CudaDiffCases checks that
// every case is well formed (the graph infers, the CPU reference runs, a CUDA kernel is selected)
// and that every registered CUDA kernel and dtype has a case.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <map>
#include <random>
#include <set>

#include "graph/op_table.h"
#include "kernels/common/convert.h"
#include "kernels/device.h"
#include "runtime/executor.h"

namespace otter {
namespace {

// Why a test that needs a GPU skips ("no CUDA device: <driver message>").
std::string no_device() {
  const std::string r = cuda_unavailable_reason();
  return r.rfind("no CUDA device", 0) == 0 ? r : "no CUDA device: " + r;
}

constexpr DataType F32 = DataType::kFloat32, F16 = DataType::kFloat16, BF16 = DataType::kBFloat16,
                   I64 = DataType::kInt64, I32 = DataType::kInt32, I8 = DataType::kInt8, U8 = DataType::kUInt8,
                   BOOL = DataType::kBool;
const std::vector<DataType> kF = {F32, F16, BF16};
const std::vector<DataType> kNum = {F32, F16, BF16, I64, I32, I8, U8};
const std::vector<DataType> kSigned = {F32, F16, BF16, I64, I32, I8};
const std::vector<DataType> kFI = {F32, F16, BF16, I64, I32};
const std::vector<DataType> kMove = {F32, F16, I64, BOOL};  // element sizes 4, 2, 8, 1
const std::vector<DataType> kB = {BOOL};

// ---- inputs ------------------------------------------------------------------------------------

enum class Gen { kNormal, kUniform, kAwayFromZero, kValues, kAbsent };

struct In {
  std::optional<DataType> type;  // nullopt: the case's dtype T
  std::vector<int64_t> dims;
  Gen gen = Gen::kNormal;
  double lo = -1, hi = 1;
  std::vector<double> values;  // Gen::kValues
  bool constant = false;       // an initializer (shape-like inputs), not a fed input
};

In T(std::vector<int64_t> d) { return {std::nullopt, std::move(d)}; }
In Tu(std::vector<int64_t> d, double lo, double hi) { return {std::nullopt, std::move(d), Gen::kUniform, lo, hi}; }
In Tnz(std::vector<int64_t> d) { return {std::nullopt, std::move(d), Gen::kAwayFromZero}; }
In Tv(std::vector<int64_t> d, std::vector<double> v) { return {std::nullopt, std::move(d), Gen::kValues, 0, 0, std::move(v)}; }
In of(DataType t, std::vector<int64_t> d, Gen g = Gen::kNormal, double lo = -1, double hi = 1) {
  return {t, std::move(d), g, lo, hi};
}
In vals(DataType t, std::vector<int64_t> d, std::vector<double> v) {
  return {t, std::move(d), Gen::kValues, 0, 0, std::move(v)};
}
In scalar(DataType t, double v) { return vals(t, {}, {v}); }
// A constant int64 vector (a shape, axes, pads...).
In ints(std::vector<int64_t> v) {
  std::vector<double> d(v.begin(), v.end());
  In in = vals(I64, {static_cast<int64_t>(v.size())}, d);
  in.constant = true;
  return in;
}
In absent() { return {F32, {}, Gen::kAbsent}; }

// ---- cases -------------------------------------------------------------------------------------

struct Case {
  std::string label;  // unique, [A-Za-z0-9_]
  std::string op;
  std::vector<In> ins;
  std::vector<DataType> types;
  std::map<std::string, Attribute> attrs;
  int outputs = 1;
  std::string domain;
  int opset = 17;
  double tol = 1;               // multiplies the dtype's tolerance
  bool first_micro_step = true;
  bool to_is_T = false;         // Cast: attribute `to` is T
};

Case mk(std::string label, std::string op, std::vector<In> ins, std::vector<DataType> types,
        std::map<std::string, Attribute> attrs = {}, int outputs = 1) {
  Case c;
  c.label = std::move(label);
  c.op = std::move(op);
  c.ins = std::move(ins);
  c.types = std::move(types);
  c.attrs = std::move(attrs);
  c.outputs = outputs;
  return c;
}

Case train_op(std::string label, std::string op, std::vector<In> ins, std::vector<DataType> types,
              std::map<std::string, Attribute> attrs = {}, int outputs = 1) {
  Case c = mk(std::move(label), std::move(op), std::move(ins), std::move(types), std::move(attrs), outputs);
  c.domain = kOtterDomain;
  c.opset = 1;
  return c;
}

using Ints = std::vector<int64_t>;

std::vector<Case> elementwise_cases() {
  std::vector<Case> cs;
  for (const char* op : {"Add", "Sub", "Mul"}) {
    cs.push_back(mk(str_cat(op, "_broadcast"), op, {T({3, 5, 7}), T({5, 1})}, kNum));
    cs.push_back(mk(str_cat(op, "_scalar_odd"), op, {T({1}), T({33})}, kNum));
    cs.push_back(mk(str_cat(op, "_empty"), op, {T({0, 3}), T({3})}, kNum));
  }
  cs.push_back(mk("Div_broadcast", "Div", {T({2, 1, 4}), Tnz({3, 1})}, kNum));
  cs.push_back(mk("Pow_float", "Pow", {Tu({4, 6}, 0.1, 3), T({6})}, kF));
  cs.push_back(mk("Pow_int", "Pow", {Tu({4, 6}, -5, 5), Tu({6}, 0, 3)}, {I64, I32, I8, U8}));
  cs.push_back(mk("Pow_float_base_int_exponent", "Pow", {Tu({5}, 0.5, 2), vals(I64, {5}, {0, 1, 2, 3, -1})}, kF));
  for (const char* op : {"Min", "Max", "Sum"}) {
    cs.push_back(mk(str_cat(op, "_three"), op, {T({2, 3, 4}), T({4}), T({3, 1})}, kNum));
    cs.push_back(mk(str_cat(op, "_one"), op, {T({5, 2})}, kNum));
  }
  cs.push_back(mk("Mean_three", "Mean", {T({2, 3, 4}), T({4}), T({3, 1})}, kF));
  cs.push_back(mk("Mean_one", "Mean", {T({5, 2})}, kF));
  cs.push_back(mk("Max_nan", "Max", {Tv({3}, {NAN, 1, 2}), Tv({3}, {0, NAN, 1})}, kF));
  for (const char* op : {"Neg", "Abs", "Relu"}) {
    const std::vector<DataType>& types = std::string(op) == "Abs" ? kNum : kSigned;
    cs.push_back(mk(str_cat(op, "_odd"), op, {T({3, 5, 7})}, types));
    cs.push_back(mk(str_cat(op, "_empty"), op, {T({0})}, types));
  }
  for (const char* op : {"Sqrt", "Reciprocal", "Log"}) cs.push_back(mk(str_cat(op, "_positive"), op, {Tu({5, 9}, 0.05, 20)}, kF));
  for (const char* op : {"Exp", "Erf", "Tanh", "Sigmoid", "Softplus", "Softsign"}) {
    cs.push_back(mk(str_cat(op, "_wide"), op, {Tu({5, 9}, -12, 12)}, kF));
    cs.push_back(mk(str_cat(op, "_scalar"), op, {T({})}, kF));
  }
  cs.push_back(mk("LeakyRelu_alpha", "LeakyRelu", {T({4, 7})}, kF, {{"alpha", 0.2f}}));
  Case gelu = mk("Gelu_exact", "Gelu", {Tu({4, 7}, -5, 5)}, kF);
  gelu.opset = 20;
  cs.push_back(gelu);
  Case gelu_tanh = mk("Gelu_tanh", "Gelu", {Tu({4, 7}, -5, 5)}, kF, {{"approximate", "tanh"}});
  gelu_tanh.opset = 20;
  cs.push_back(gelu_tanh);
  cs.push_back(mk("Clip_both", "Clip", {Tu({4, 5}, -8, 8), Tv({}, {-3}), Tv({}, {5})}, kNum));
  cs.push_back(mk("Clip_max_only", "Clip", {Tu({4, 5}, -8, 8), absent(), Tv({}, {2})}, kNum));
  cs.push_back(mk("Clip_none", "Clip", {Tu({7}, -8, 8)}, kNum));
  cs.push_back(mk("Equal_broadcast", "Equal", {Tu({4, 5}, -2, 2), Tu({5}, -2, 2)}, {F32, F16, BF16, I64, I32, I8, U8, BOOL}));
  for (const char* op : {"Less", "Greater", "LessOrEqual", "GreaterOrEqual"})
    cs.push_back(mk(str_cat(op, "_broadcast"), op, {Tu({4, 5}, -2, 2), Tu({4, 1}, -2, 2)}, kNum));
  for (const char* op : {"And", "Or", "Xor"}) cs.push_back(mk(str_cat(op, "_broadcast"), op, {T({3, 4}), T({4})}, kB));
  cs.push_back(mk("Not_odd", "Not", {T({3, 7})}, kB));
  cs.push_back(mk("Where_broadcast", "Where", {of(BOOL, {3, 1}), T({1, 4}), T({3, 4})}, {F32, F16, BF16, I64, I32, U8, BOOL}));
  cs.push_back(mk("Where_empty", "Where", {of(BOOL, {0, 1}), T({1, 4}), T({4})}, {F32}));
  Case to_t = mk("Cast_from_f32", "Cast", {of(F32, {6, 5}, Gen::kUniform, -300, 300)}, {F32, F16, BF16, I64, I32, I8, U8, BOOL});
  to_t.to_is_T = true;
  cs.push_back(to_t);
  for (DataType from : {F16, BF16, I64, I32, I8, U8, BOOL}) {
    Case c = mk(str_cat("Cast_to_f32_from_", dtype_name(from)), "Cast", {of(from, {6, 5}, Gen::kUniform, -100, 100)}, {F32});
    c.to_is_T = true;
    cs.push_back(c);
  }
  Case half_to_bf16 = mk("Cast_f16_to_bf16", "Cast", {of(F16, {9})}, {BF16});
  half_to_bf16.to_is_T = true;
  cs.push_back(half_to_bf16);
  return cs;
}

std::vector<Case> reduce_cases() {
  std::vector<Case> cs;
  for (const char* op : {"ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceSumSquare", "ReduceL2"}) {
    const std::string o = op;
    const std::vector<DataType>& types = o == "ReduceSum" || o == "ReduceMax" || o == "ReduceMin" ? kFI : kF;
    Case inner = mk(str_cat(op, "_inner_keep"), op, {T({4, 6, 37}), ints({-1})}, types, {{"keepdims", int64_t{1}}});
    Case outer = mk(str_cat(op, "_outer"), op, {T({4, 6, 5}), ints({0, 2})}, types, {{"keepdims", int64_t{0}}});
    Case all = mk(str_cat(op, "_all"), op, {T({3, 1000})}, types);
    Case empty = mk(str_cat(op, "_empty_kept"), op, {T({0, 5}), ints({1})}, types);
    for (Case* c : {&inner, &outer, &all, &empty}) {
      c->opset = 18;
      if (c == &all) c->ins.push_back(absent());
      cs.push_back(*c);
    }
  }
  Case attr_axes = mk("ReduceMean_attr_axes_opset13", "ReduceMean", {T({2, 3, 4, 5})}, kF, {{"axes", Ints{2, 3}}});
  attr_axes.opset = 13;
  cs.push_back(attr_axes);
  // ai.otter.ReduceSumF32: a half input's sum written as float32 (cast-elimination).
  for (Case c : {train_op("ReduceSumF32_outer", "ReduceSumF32", {T({4, 6, 5}), ints({0, 1})}, {F32, F16, BF16},
                          {{"keepdims", int64_t{0}}}),
                 train_op("ReduceSumF32_all", "ReduceSumF32", {T({3, 1000}), ints({0, 1})}, {F32, F16, BF16})})
    cs.push_back(c);
  Case noop = mk("ReduceSum_noop_empty_axes", "ReduceSum", {T({3, 4}), ints({})}, kFI, {{"noop_with_empty_axes", int64_t{1}}});
  noop.opset = 18;
  cs.push_back(noop);
  return cs;
}

std::vector<Case> shape_cases() {
  std::vector<Case> cs;
  cs.push_back(mk("Reshape_infer", "Reshape", {T({2, 3, 4}), ints({4, -1})}, kMove));
  cs.push_back(mk("Reshape_copy_dim", "Reshape", {T({2, 3, 4}), ints({0, 12})}, kMove));
  cs.push_back(mk("Flatten_axis2", "Flatten", {T({2, 3, 4, 5})}, kMove, {{"axis", int64_t{2}}}));
  cs.push_back(mk("Squeeze_axes", "Squeeze", {T({3, 1, 4, 1}), ints({1, -1})}, kMove));
  cs.push_back(mk("Unsqueeze_axes", "Unsqueeze", {T({3, 4}), ints({0, 3})}, kMove));
  cs.push_back(mk("Identity_plain", "Identity", {T({3, 4})}, kMove));
  cs.push_back(mk("Transpose_perm", "Transpose", {T({3, 4, 5})}, kMove, {{"perm", Ints{2, 0, 1}}}));
  cs.push_back(mk("Transpose_default", "Transpose", {T({2, 3, 4, 5})}, kMove));
  cs.push_back(mk("Transpose_empty", "Transpose", {T({0, 3})}, kMove));
  cs.push_back(mk("Concat_axis1", "Concat", {T({2, 3}), T({2, 0}), T({2, 5})}, kMove, {{"axis", int64_t{1}}}));
  cs.push_back(mk("Concat_axis0", "Concat", {T({1, 3, 2}), T({4, 3, 2})}, kMove, {{"axis", int64_t{0}}}));
  cs.push_back(mk("Split_sizes", "Split", {T({6, 4}), ints({1, 2, 3})}, kMove, {{"axis", int64_t{0}}}, 3));
  Case uneven = mk("Split_num_outputs", "Split", {T({2, 7})}, kMove, {{"axis", int64_t{1}}, {"num_outputs", int64_t{3}}}, 3);
  uneven.opset = 18;
  cs.push_back(uneven);
  cs.push_back(mk("Slice_steps", "Slice", {T({10, 6}), ints({1, -1}), ints({8, -7}), ints({0, 1}), ints({2, -2})}, kMove));
  cs.push_back(mk("Slice_clamped", "Slice", {T({5, 4, 3}), ints({-100}), ints({100}), ints({2})}, kMove));
  cs.push_back(mk("Gather_axis0_i64", "Gather", {T({5, 4}), vals(I64, {2, 3}, {0, 4, -1, 2, -5, 3})}, kMove));
  cs.push_back(mk("Gather_axis1_i32", "Gather", {T({3, 6, 2}), vals(I32, {4}, {5, 0, -2, 3})}, kMove, {{"axis", int64_t{1}}}));
  cs.push_back(mk("Gather_scalar_index", "Gather", {T({3, 6}), vals(I64, {}, {2})}, kMove));
  cs.push_back(mk("Expand_broadcast", "Expand", {T({3, 1}), ints({2, 3, 4})}, kMove));
  cs.push_back(mk("Expand_ones", "Expand", {T({2, 3}), ints({1, 1})}, kMove));
  cs.push_back(mk("Tile_reps", "Tile", {T({2, 3}), ints({2, 3})}, kMove));
  cs.push_back(mk("Tile_empty", "Tile", {T({2, 3}), ints({0, 1})}, kMove));
  for (const char* mode : {"constant", "reflect", "edge", "wrap"}) {
    Case pad = mk(str_cat("Pad_", mode), "Pad", {T({3, 4}), ints({1, 2, 2, 1})}, kMove, {{"mode", mode}});
    pad.opset = 19;  // wrap from opset 19
    cs.push_back(pad);
  }
  Case axes = mk("Pad_value_axes_crop", "Pad", {T({3, 4, 5}), ints({1, -1, 0, 2}), Tv({}, {1}), ints({0, 2})}, kMove);
  axes.opset = 18;  // the axes input from opset 18
  cs.push_back(axes);
  In k = vals(I64, {}, {1});
  k.constant = true;
  Case trilu_up = mk("Trilu_upper_k1", "Trilu", {T({2, 4, 5}), k}, kMove);
  Case trilu_lo = mk("Trilu_lower", "Trilu", {T({3, 6})}, kMove, {{"upper", int64_t{0}}});
  trilu_up.opset = trilu_lo.opset = 14;
  cs.push_back(trilu_up);
  cs.push_back(trilu_lo);
  cs.push_back(mk("Shape_plain", "Shape", {T({3, 0, 2})}, kMove));
  cs.push_back(mk("Shape_start_end", "Shape", {T({3, 4, 2})}, kMove, {{"start", int64_t{1}}, {"end", int64_t{-1}}}));
  cs.push_back(mk("Size_plain", "Size", {T({3, 4, 2})}, kMove));
  cs.push_back(mk("Range_float", "Range", {Tv({}, {0.5}), Tv({}, {10}), Tv({}, {1.5})}, {F32}));
  cs.push_back(mk("Range_int", "Range", {Tv({}, {1}), Tv({}, {10}), Tv({}, {3})}, {I64, I32}));
  cs.push_back(mk("ConstantOfShape_f32", "ConstantOfShape", {ints({2, 3})}, {I64},
                  {{"value", Tensor::from_vector<float>({1}, {1.5f})}}));
  cs.push_back(mk("ConstantOfShape_i64", "ConstantOfShape", {ints({4})}, {I64},
                  {{"value", Tensor::from_vector<int64_t>({1}, {-7})}}));
  cs.push_back(mk("Constant_tensor", "Constant", {}, {},
                  {{"value", Tensor::from_vector<float>({2, 2}, {1.f, -2.f, 3.5f, 0.25f})}}));
  return cs;
}

std::vector<Case> matmul_cases() {
  std::vector<Case> cs;
  cs.push_back(mk("MatMul_2d", "MatMul", {T({7, 33}), T({33, 5})}, kF));
  cs.push_back(mk("MatMul_shared_b", "MatMul", {T({2, 3, 4}), T({4, 5})}, kF));
  cs.push_back(mk("MatMul_batched", "MatMul", {T({2, 3, 4}), T({2, 4, 5})}, kF));
  cs.push_back(mk("MatMul_broadcast_batch", "MatMul", {T({2, 1, 3, 4}), T({1, 5, 4, 2})}, kF));
  cs.push_back(mk("MatMul_vector_left", "MatMul", {T({4}), T({3, 4, 5})}, kF));
  cs.push_back(mk("MatMul_vector_right", "MatMul", {T({3, 4}), T({4})}, kF));
  cs.push_back(mk("MatMul_k0", "MatMul", {T({3, 0}), T({0, 4})}, kF));
  cs.push_back(mk("MatMul_empty_batch", "MatMul", {T({0, 3, 4}), T({4, 2})}, kF));
  cs.push_back(mk("Gemm_bias_transB", "Gemm", {T({6, 9}), T({5, 9}), T({5})}, kF, {{"transB", int64_t{1}}}));
  cs.push_back(mk("Gemm_transA_col_c", "Gemm", {T({9, 6}), T({9, 5}), T({6, 1})}, kF,
                  {{"transA", int64_t{1}}, {"alpha", 2.f}, {"beta", 0.5f}}));
  cs.push_back(mk("Gemm_full_c_both_trans", "Gemm", {T({9, 6}), T({5, 9}), T({6, 5})}, kF,
                  {{"transA", int64_t{1}}, {"transB", int64_t{1}}}));
  cs.push_back(mk("Gemm_scalar_c", "Gemm", {T({4, 3}), T({3, 2}), T({})}, kF, {{"beta", 2.f}}));
  cs.push_back(mk("Gemm_no_c", "Gemm", {T({4, 3}), T({3, 2})}, kF, {{"alpha", 0.5f}}));
  for (bool first : {true, false}) {
    Case c = train_op(str_cat("GemmAccumulate_", first ? "first" : "later"), "GemmAccumulate",
                      {T({5, 8}), T({5, 3}), of(F32, {8, 3})}, kF, {{"transA", int64_t{1}}, {"alpha", 0.5f}});
    c.first_micro_step = first;
    cs.push_back(c);
  }
  Case same = train_op("GemmAccumulate_same_type", "GemmAccumulate", {T({4, 6}), T({3, 6}), T({4, 3})}, kF,
                       {{"transB", int64_t{1}}});
  same.first_micro_step = false;
  cs.push_back(same);
  return cs;
}

std::vector<Case> conv_pool_cases() {
  std::vector<Case> cs;
  cs.push_back(mk("Conv_stride_pad_bias", "Conv", {T({2, 3, 9, 9}), T({4, 3, 3, 3}), T({4})}, kF,
                  {{"pads", Ints{1, 1, 1, 1}}, {"strides", Ints{2, 2}}}));
  cs.push_back(mk("Conv_depthwise", "Conv", {T({2, 3, 8, 8}), T({6, 1, 3, 3})}, kF,
                  {{"group", int64_t{3}}, {"pads", Ints{1, 1, 1, 1}}}));
  cs.push_back(mk("Conv_grouped_dilated", "Conv", {T({1, 4, 11, 10}), T({6, 2, 3, 2}), T({6})}, kF,
                  {{"group", int64_t{2}}, {"dilations", Ints{2, 1}}}));
  cs.push_back(mk("Conv_1d", "Conv", {T({2, 4, 10}), T({5, 4, 3})}, kF, {{"pads", Ints{2, 2}}}));
  cs.push_back(mk("Conv_3d", "Conv", {T({1, 2, 5, 6, 4}), T({3, 2, 3, 3, 3}), T({3})}, kF));
  cs.push_back(mk("Conv_pointwise", "Conv", {T({2, 8, 5, 5}), T({4, 8, 1, 1})}, kF));
  cs.push_back(mk("ConvTranspose_stride_pad_outpad_bias", "ConvTranspose", {T({2, 4, 5, 5}), T({4, 3, 3, 3}), T({3})},
                  kF, {{"pads", Ints{1, 1, 1, 1}}, {"strides", Ints{2, 2}}, {"output_padding", Ints{1, 1}}}));
  cs.push_back(mk("ConvTranspose_grouped_dilated", "ConvTranspose", {T({1, 4, 6, 5}), T({4, 2, 3, 2})}, kF,
                  {{"group", int64_t{2}}, {"dilations", Ints{2, 1}}}));
  cs.push_back(mk("ConvTranspose_1d", "ConvTranspose", {T({2, 3, 7}), T({3, 2, 4})}, kF, {{"strides", Ints{3}}}));
  cs.push_back(mk("ConvTranspose_3d", "ConvTranspose", {T({1, 2, 3, 4, 3}), T({2, 3, 2, 2, 2}), T({3})}, kF,
                  {{"strides", Ints{2, 1, 2}}}));
  cs.push_back(mk("MaxPool_pad_stride_indices", "MaxPool", {T({2, 3, 9, 9})}, kF,
                  {{"kernel_shape", Ints{3, 3}}, {"strides", Ints{2, 2}}, {"pads", Ints{1, 1, 1, 1}}}, 2));
  cs.push_back(mk("MaxPool_ceil_dilated_colmajor", "MaxPool", {T({1, 2, 10, 7})}, kF,
                  {{"kernel_shape", Ints{2, 3}}, {"strides", Ints{3, 2}}, {"dilations", Ints{2, 1}}, {"ceil_mode", int64_t{1}},
                   {"storage_order", int64_t{1}}},
                  2));
  cs.push_back(mk("MaxPool_1d", "MaxPool", {T({2, 3, 11})}, kF, {{"kernel_shape", Ints{4}}, {"strides", Ints{3}}}));
  cs.push_back(mk("MaxPool_3d", "MaxPool", {T({1, 2, 4, 5, 6})}, kF, {{"kernel_shape", Ints{2, 2, 3}}}));
  cs.push_back(mk("AveragePool_exclude_pad", "AveragePool", {T({2, 3, 7, 7})}, kF,
                  {{"kernel_shape", Ints{3, 3}}, {"pads", Ints{1, 1, 1, 1}}, {"strides", Ints{2, 2}}}));
  cs.push_back(mk("AveragePool_include_pad_ceil", "AveragePool", {T({1, 2, 6, 5})}, kF,
                  {{"kernel_shape", Ints{3, 2}}, {"pads", Ints{1, 0, 1, 1}}, {"count_include_pad", int64_t{1}},
                   {"ceil_mode", int64_t{1}}, {"strides", Ints{2, 2}}}));
  cs.push_back(mk("GlobalAveragePool_plain", "GlobalAveragePool", {T({2, 3, 5, 7})}, kF));
  cs.push_back(mk("GlobalMaxPool_plain", "GlobalMaxPool", {T({2, 3, 5, 7})}, kF));
  return cs;
}

std::vector<Case> nn_cases() {
  std::vector<Case> cs;
  Case bn_train = mk("BatchNormalization_training", "BatchNormalization",
                     {T({4, 3, 5, 5}), of(F32, {3}), of(F32, {3}), of(F32, {3}), of(F32, {3}, Gen::kUniform, 0.5, 2)},
                     kF, {{"training_mode", int64_t{1}}, {"momentum", 0.8f}}, 3);
  bn_train.opset = 15;
  cs.push_back(bn_train);
  Case bn_infer = mk("BatchNormalization_inference", "BatchNormalization",
                     {T({2, 4, 3}), T({4}), T({4}), T({4}), Tu({4}, 0.5, 2)}, kF, {{"epsilon", 1e-3f}});
  bn_infer.opset = 15;
  cs.push_back(bn_infer);
  Case bn9 = mk("BatchNormalization_opset9_saved_stats", "BatchNormalization",
                {T({3, 2, 4}), T({2}), T({2}), T({2}), Tu({2}, 0.5, 2)}, kF, {}, 5);
  bn9.opset = 9;
  cs.push_back(bn9);
  cs.push_back(mk("LayerNormalization_last_axis_stats", "LayerNormalization", {T({4, 6, 77}), T({77}), T({77})}, kF, {}, 3));
  cs.push_back(mk("LayerNormalization_axis1_broadcast_scale", "LayerNormalization", {T({3, 4, 5}), T({1, 5}), T({5})}, kF,
                  {{"axis", int64_t{1}}, {"epsilon", 1e-3f}}));
  cs.push_back(mk("LayerNormalization_no_bias", "LayerNormalization", {T({5, 300}), T({300})}, kF));
  for (const char* op : {"Softmax", "LogSoftmax"}) {
    cs.push_back(mk(str_cat(op, "_last_axis"), op, {Tu({5, 337}, -20, 20)}, kF));
    cs.push_back(mk(str_cat(op, "_inner_axis"), op, {T({2, 7, 3})}, kF, {{"axis", int64_t{1}}}));
    cs.push_back(mk(str_cat(op, "_neg_inf_row"), op, {Tv({2, 3}, {-INFINITY, -INFINITY, -INFINITY, 1, 2, 3})}, kF));
  }
  cs.push_back(mk("Dropout_inference_mask", "Dropout", {T({4, 5}), scalar(F32, 0.3), scalar(BOOL, 0)}, kF, {}, 2));
  cs.push_back(mk("Dropout_ratio0_training", "Dropout", {T({4, 5}), scalar(F32, 0), scalar(BOOL, 1)}, kF, {}, 1));
  const In labels = vals(I64, {6}, {0, 4, 2, 1, 2, 3});
  for (const char* red : {"none", "sum", "mean"}) {
    cs.push_back(mk(str_cat("SoftmaxCrossEntropyLoss_", red), "SoftmaxCrossEntropyLoss",
                    {Tu({6, 5}, -4, 4), labels, Tu({5}, 0.5, 1.5)}, kF, {{"reduction", red}, {"ignore_index", int64_t{2}}}, 2));
    cs.push_back(mk(str_cat("NegativeLogLikelihoodLoss_", red), "NegativeLogLikelihoodLoss",
                    {Tu({6, 5}, -4, 0), labels, Tu({5}, 0.5, 1.5)}, kF, {{"reduction", red}}));
  }
  cs.push_back(mk("SoftmaxCrossEntropyLoss_spatial_i32", "SoftmaxCrossEntropyLoss",
                  {T({2, 5, 3}), vals(I32, {2, 3}, {0, 4, 1, 3, 3, 2})}, kF));
  cs.push_back(mk("SoftmaxCrossEntropyLoss_wide", "SoftmaxCrossEntropyLoss",
                  {T({4, 1000}), vals(I64, {4}, {999, 0, 500, 3})}, kF));
  return cs;
}

std::vector<Case> train_cases() {
  std::vector<Case> cs;
  cs.push_back(train_op("SumToShape_broadcast", "SumToShape", {T({4, 3, 5}), T({3, 1})}, kF));
  cs.push_back(train_op("SumToShape_scalar", "SumToShape", {T({4, 3}), T({})}, kF));
  for (bool first : {true, false}) {
    Case mixed = train_op(str_cat("AccumulateGrad_f32_acc_", first ? "first" : "later"), "AccumulateGrad",
                          {of(F32, {7, 9}), T({7, 9})}, kF);
    mixed.first_micro_step = first;
    cs.push_back(mixed);
    Case same = train_op(str_cat("AccumulateGrad_same_", first ? "first" : "later"), "AccumulateGrad", {T({7, 9}), T({7, 9})}, kF);
    same.first_micro_step = first;
    cs.push_back(same);
  }
  cs.push_back(train_op("AllFinite_finite", "AllFinite", {T({100}), T({3, 4}), of(F32, {5})}, kF));
  cs.push_back(train_op("AllFinite_inf", "AllFinite", {T({100}), Tv({3}, {1, INFINITY, 2})}, kF));
  cs.push_back(train_op("AllFinite_nan", "AllFinite", {Tv({2}, {NAN, 0}), T({4})}, kF));
  cs.push_back(train_op("GlobalNormSq_several", "GlobalNormSq", {T({1000}), T({7, 3}), of(F32, {5})}, kF));
  cs.push_back(train_op("GradScale_clipped", "GradScale", {scalar(F32, 0.25), scalar(F32, 400)}, {}, {{"max_norm", 1.f}}));
  cs.push_back(train_op("GradScale_unclipped", "GradScale", {scalar(F32, 0.5)}, {}));
  cs.push_back(train_op("LearningRate_cosine", "LearningRate", {scalar(I64, 5)}, {},
                        {{"schedule", "cosine"}, {"lr", 0.1f}, {"warmup", int64_t{2}}, {"total", int64_t{20}}, {"min_lr", 0.01f}}));
  cs.push_back(train_op("LearningRate_warmup", "LearningRate", {scalar(I64, 1)}, {},
                        {{"schedule", "linear-warmup"}, {"lr", 0.1f}, {"warmup", int64_t{4}}, {"total", int64_t{10}}}));
  for (bool finite : {true, false}) {
    cs.push_back(train_op(str_cat("SGDUpdate_nesterov_", finite ? "finite" : "skipped"), "SGDUpdate",
                          {of(F32, {6, 7}), T({6, 7}), of(F32, {6, 7}), scalar(F32, 0.1), scalar(F32, 0.5), scalar(BOOL, finite)},
                          kF, {{"momentum", 0.9f}, {"weight_decay", 0.01f}, {"nesterov", int64_t{1}}}, 2));
    cs.push_back(train_op(str_cat("AdamUpdate_decoupled_", finite ? "finite" : "skipped"), "AdamUpdate",
                          {of(F32, {6, 7}), T({6, 7}), of(F32, {6, 7}, Gen::kUniform, -0.1, 0.1),
                           of(F32, {6, 7}, Gen::kUniform, 0, 0.1), scalar(I64, 3), scalar(F32, 0.01), scalar(F32, 0.5),
                           scalar(BOOL, finite)},
                          kF, {{"weight_decay", 0.01f}, {"decoupled", int64_t{1}}}, 3));
  }
  cs.push_back(train_op("SGDUpdate_plain", "SGDUpdate",
                        {of(F32, {10}), T({10}), absent(), scalar(F32, 0.1), scalar(F32, 1)}, kF, {}, 1));
  cs.push_back(train_op("AdamUpdate_l2", "AdamUpdate",
                        {of(F32, {10}), T({10}), of(F32, {10}), of(F32, {10}, Gen::kUniform, 0, 1), scalar(F32, 0),
                         scalar(F32, 0.001), scalar(F32, 1)},
                        kF, {{"weight_decay", 0.1f}}, 3));
  cs.push_back(train_op("StepCount_i64", "StepCount", {scalar(I64, 7), scalar(BOOL, 1)}, {}));
  cs.push_back(train_op("StepCount_f32_skipped", "StepCount", {scalar(F32, 7), scalar(BOOL, 0)}, {}));
  for (bool finite : {true, false})
    cs.push_back(train_op(str_cat("LossScaleUpdate_", finite ? "grow" : "backoff"), "LossScaleUpdate",
                          {scalar(F32, 1024), scalar(I64, 1999), scalar(BOOL, finite)}, {}, {{"interval", int64_t{2000}}}, 2));
  cs.push_back(train_op("LossScaleInverse_plain", "LossScaleInverse", {scalar(F32, 8)}, {}));
  cs.push_back(train_op("ScaleSeed_k4", "ScaleSeed", {scalar(F32, 65536)}, {}, {{"k", int64_t{4}}}));
  return cs;
}

std::vector<Case> grad_cases() {
  std::vector<Case> cs;
  auto grad = [&](std::string label, std::string op, std::vector<In> ins, std::map<std::string, Attribute> attrs = {},
                  int outputs = 1) {
    cs.push_back(train_op(std::move(label), std::move(op), std::move(ins), kF, std::move(attrs), outputs));
  };
  grad("ReluGrad_plain", "ReluGrad", {T({3, 5, 7}), T({3, 5, 7})});
  grad("LeakyReluGrad_alpha", "LeakyReluGrad", {T({4, 9}), T({4, 9})}, {{"alpha", 0.2f}});
  grad("SigmoidGrad_plain", "SigmoidGrad", {T({4, 9}), Tu({4, 9}, 0, 1)});
  grad("TanhGrad_plain", "TanhGrad", {T({4, 9}), Tu({4, 9}, -1, 1)});
  grad("GeluGrad_exact", "GeluGrad", {T({4, 9}), Tu({4, 9}, -5, 5)});
  grad("GeluGrad_tanh", "GeluGrad", {T({4, 9}), Tu({4, 9}, -5, 5)}, {{"approximate", "tanh"}});
  grad("ErfGrad_plain", "ErfGrad", {T({4, 9}), Tu({4, 9}, -3, 3)});
  // The fused bias + GELU (fuse-bias-gelu pass): the bias repeats every 9 (odd, so the per-element
  // bias index wraps inside a block of threads), and without a bias.
  grad("BiasGelu_bias", "BiasGelu", {Tu({3, 5, 9}, -5, 5), Tu({9}, -1, 1)});
  grad("BiasGelu_no_bias", "BiasGelu", {Tu({4, 9}, -5, 5)});
  grad("BiasGeluGrad_bias", "BiasGeluGrad", {T({3, 5, 9}), Tu({3, 5, 9}, -5, 5), Tu({9}, -1, 1)});
  grad("BiasGeluGrad_no_bias", "BiasGeluGrad", {T({4, 9}), Tu({4, 9}, -5, 5)});
  // A half X with a float32 bias (cast-elimination's form, passes/cast_elimination.h): Y half, dX float32.
  for (const char* op : {"BiasGelu", "BiasGeluGrad"}) {
    std::vector<In> ins = {Tu({3, 5, 9}, -5, 5), of(F32, {9}, Gen::kUniform, -1, 1)};
    if (std::string(op) == "BiasGeluGrad") ins.insert(ins.begin(), T({3, 5, 9}));
    cs.push_back(train_op(str_cat(op, "_f32_bias"), op, ins, {F16, BF16}));
  }
  grad("BiasAdd_same_type", "BiasAdd", {T({3, 5, 9}), T({9})});
  cs.push_back(train_op("BiasAdd_f32_bias", "BiasAdd", {T({3, 5, 9}), of(F32, {9})}, {F16, BF16}));
  cs.push_back(train_op("BiasAdd_to_f32", "BiasAdd", {T({3, 5, 9}), of(F32, {9})}, {F16, BF16},
                        {{"to", Attribute(int64_t{1})}}));
  // cast-elimination's gradient sums: a float32 operand of X's whole shape, or X's own half type.
  cs.push_back(train_op("BiasAdd_whole_f32", "BiasAdd", {T({3, 5, 9}), of(F32, {3, 5, 9})}, {F16, BF16},
                        {{"to", Attribute(int64_t{1})}}));
  cs.push_back(train_op("BiasAdd_whole_half", "BiasAdd", {T({3, 5, 9}), T({5, 9})}, {F16, BF16},
                        {{"to", Attribute(int64_t{1})}}));
  grad("SoftplusGrad_plain", "SoftplusGrad", {T({4, 9}), Tu({4, 9}, -10, 10)});
  grad("SoftsignGrad_plain", "SoftsignGrad", {T({4, 9}), Tu({4, 9}, -10, 10)});
  grad("AbsGrad_with_zeros", "AbsGrad", {T({5}), Tv({5}, {-2, 0, 3, 0, -1})});
  grad("ClipGrad_all_outputs", "ClipGrad", {T({4, 50}), Tu({4, 50}, -8, 8), Tv({}, {-3}), Tv({}, {5})}, {}, 3);
  grad("ClipGrad_min_only", "ClipGrad", {T({300}), Tu({300}, -8, 8), Tv({}, {-1})}, {}, 2);
  grad("DropoutGrad_training", "DropoutGrad", {T({6, 7}), of(BOOL, {6, 7}), scalar(F32, 0.25), scalar(BOOL, 1)});
  grad("DropoutGrad_inference", "DropoutGrad", {T({6, 7}), of(BOOL, {6, 7}), scalar(F32, 0.25), scalar(BOOL, 0)});
  grad("SoftmaxGrad_last_axis", "SoftmaxGrad", {T({5, 37}), Tu({5, 37}, 0, 1)});
  grad("SoftmaxGrad_inner_axis", "SoftmaxGrad", {T({2, 7, 3}), Tu({2, 7, 3}, 0, 1)}, {{"axis", int64_t{1}}});
  grad("LogSoftmaxGrad_last_axis", "LogSoftmaxGrad", {T({5, 37}), Tu({5, 37}, -6, 0)});
  grad("LogSoftmaxGrad_inner_axis", "LogSoftmaxGrad", {T({2, 7, 3}), Tu({2, 7, 3}, -6, 0)}, {{"axis", int64_t{1}}});
  // Fused attention (graph/ops/attention.cc): Q [2,2,5,4], Kt [2,2,4,7], V [2,2,7,3], an additive mask.
  const std::map<std::string, Attribute> attention{{"scale", 0.5f}, {"mask_mode", "add"}};
  grad("Attention_add_mask", "Attention", {T({2, 2, 5, 4}), T({2, 2, 4, 7}), T({2, 2, 7, 3}), T({5, 7})}, attention, 2);
  grad("AttentionGrad_add_mask", "AttentionGrad",
       {T({2, 2, 5, 3}), T({2, 2, 5, 4}), T({2, 2, 4, 7}), T({2, 2, 7, 3}), T({5, 7}), T({2, 2, 5, 3}),
        Tu({2, 2, 5}, 2, 3)},
       attention, 3);
  // dScores, the gradient of a trained additive mask (T5's position bias), as a fourth output.
  grad("AttentionGrad_mask_grad", "AttentionGrad",
       {T({2, 2, 5, 3}), T({2, 2, 5, 4}), T({2, 2, 4, 7}), T({2, 2, 7, 3}), T({2, 2, 5, 7}), T({2, 2, 5, 3}),
        Tu({2, 2, 5}, 2, 3)},
       attention, 4);
  // Dropout under a fixed seed (input 4 / 7): the same hash on both devices drops the same probabilities.
  std::map<std::string, Attribute> dropout = attention;
  dropout["dropout"] = 0.3f;
  grad("Attention_dropout", "Attention",
       {T({2, 2, 5, 4}), T({2, 2, 4, 7}), T({2, 2, 7, 3}), T({5, 7}), vals(I64, {}, {42})}, dropout, 3);
  grad("AttentionGrad_dropout", "AttentionGrad",
       {T({2, 2, 5, 3}), T({2, 2, 5, 4}), T({2, 2, 4, 7}), T({2, 2, 7, 3}), T({5, 7}), T({2, 2, 5, 3}),
        Tu({2, 2, 5}, 2, 3), vals(I64, {}, {42})},
       dropout, 3);
  // 1300 keys: two of the CUDA kernels' chunks of 1024 (kernels/cuda/attention.cu).
  grad("Attention_long_rows", "Attention", {T({1, 2, 3, 4}), T({1, 2, 4, 1300}), T({1, 2, 1300, 3}), T({3, 1300})},
       attention, 2);
  grad("AttentionGrad_long_rows", "AttentionGrad",
       {T({1, 2, 3, 3}), T({1, 2, 3, 4}), T({1, 2, 4, 1300}), T({1, 2, 1300, 3}), T({3, 1300}), T({1, 2, 3, 3}),
        Tu({1, 2, 3}, 7, 8)},
       attention, 4);
  const In labels = vals(I64, {6}, {0, 4, 2, 1, 2, 3});
  for (const char* red : {"none", "sum", "mean"}) {
    const In dl = std::string(red) == "none" ? T({6}) : Tv({}, {1.3});
    grad(str_cat("SoftmaxCrossEntropyLossGrad_", red), "SoftmaxCrossEntropyLossGrad",
         {dl, Tu({6, 5}, -4, 4), labels, Tu({5}, 0.5, 1.5)}, {{"reduction", red}, {"ignore_index", int64_t{2}}});
    grad(str_cat("NegativeLogLikelihoodLossGrad_", red), "NegativeLogLikelihoodLossGrad",
         {dl, Tu({6, 5}, -4, 0), labels}, {{"reduction", red}});
  }
  grad("SoftmaxCrossEntropyLossGrad_spatial", "SoftmaxCrossEntropyLossGrad",
       {Tv({}, {1}), T({2, 5, 3}), vals(I32, {2, 3}, {0, 4, 1, 3, 3, 2})});
  grad("BatchNormalizationGrad_training", "BatchNormalizationGrad",
       {T({4, 3, 5, 5}), T({4, 3, 5, 5}), T({3}), T({3}), Tu({3}, 0.5, 2)}, {{"training_mode", int64_t{1}}}, 3);
  grad("BatchNormalizationGrad_inference", "BatchNormalizationGrad",
       {T({2, 4, 3}), T({2, 4, 3}), T({4}), T({4}), Tu({4}, 0.5, 2)}, {{"training_mode", int64_t{0}}, {"epsilon", 1e-3f}}, 5);
  grad("LayerNormalizationGrad_last_axis", "LayerNormalizationGrad", {T({6, 77}), T({6, 77}), T({77})}, {}, 3);
  grad("LayerNormalizationGrad_axis1_broadcast", "LayerNormalizationGrad", {T({3, 4, 5}), T({3, 4, 5}), T({1, 5})},
       {{"axis", int64_t{1}}}, 3);
  // AddLayerNorm's gradient: the sum's gradient from its other readers added to dX (dResidual).
  grad("LayerNormalizationGrad_residual", "LayerNormalizationGrad", {T({6, 77}), T({6, 77}), T({77}), T({6, 77})}, {},
       3);
  // The fused residual Add + LayerNorm (fuse-add-layernorm pass): with the sum as an output and
  // without (nor a bias), rows longer than a block of threads.
  grad("AddLayerNorm_sum", "AddLayerNorm", {T({4, 6, 77}), T({4, 6, 77}), T({77}), T({77})}, {}, 2);
  grad("AddLayerNorm_no_sum_no_bias", "AddLayerNorm", {T({5, 300}), T({5, 300}), T({300})},
       {{"epsilon", 1e-3f}});
  grad("ConvGrad_stride_pad", "ConvGrad", {T({2, 4, 5, 5}), T({2, 3, 9, 9}), T({4, 3, 3, 3})},
       {{"pads", Ints{1, 1, 1, 1}}, {"strides", Ints{2, 2}}}, 3);
  grad("ConvGrad_depthwise", "ConvGrad", {T({2, 6, 8, 8}), T({2, 3, 8, 8}), T({6, 1, 3, 3})},
       {{"group", int64_t{3}}, {"pads", Ints{1, 1, 1, 1}}}, 3);
  grad("ConvGrad_1d_dilated", "ConvGrad", {T({2, 5, 8}), T({2, 4, 10}), T({5, 4, 2})}, {{"dilations", Ints{2}}}, 3);
  grad("MaxPoolGrad_pad_stride", "MaxPoolGrad", {T({2, 3, 5, 5}), T({2, 3, 9, 9})},
       {{"kernel_shape", Ints{3, 3}}, {"strides", Ints{2, 2}}, {"pads", Ints{1, 1, 1, 1}}});
  grad("MaxPoolGrad_ceil_dilated", "MaxPoolGrad", {T({1, 2, 4, 3}), T({1, 2, 10, 7})},
       {{"kernel_shape", Ints{2, 3}}, {"strides", Ints{3, 2}}, {"dilations", Ints{2, 1}}, {"ceil_mode", int64_t{1}}});
  grad("AveragePoolGrad_exclude_pad", "AveragePoolGrad", {T({2, 3, 4, 4}), T({2, 3, 7, 7})},
       {{"kernel_shape", Ints{3, 3}}, {"pads", Ints{1, 1, 1, 1}}, {"strides", Ints{2, 2}}});
  grad("AveragePoolGrad_include_pad_ceil", "AveragePoolGrad", {T({1, 2, 4, 3}), T({1, 2, 6, 5})},
       {{"kernel_shape", Ints{3, 2}}, {"pads", Ints{1, 0, 1, 1}}, {"count_include_pad", int64_t{1}},
        {"ceil_mode", int64_t{1}}, {"strides", Ints{2, 2}}});
  grad("SliceGrad_steps", "SliceGrad", {T({4, 3}), ints({10, 6}), ints({1, -1}), ints({8, -7}), ints({0, 1}), ints({2, -2})});
  grad("GatherGrad_repeated", "GatherGrad", {T({2, 3, 4}), ints({5, 4}), vals(I64, {2, 3}, {0, 4, -1, 2, 4, 3})});
  grad("GatherGrad_axis1_i32", "GatherGrad", {T({3, 4, 2}), ints({3, 6, 2}), vals(I32, {4}, {5, 0, -2, 5})},
       {{"axis", int64_t{1}}});
  for (const char* mode : {"constant", "reflect", "edge", "wrap"})
    grad(str_cat("PadGrad_", mode), "PadGrad", {T({6, 7}), ints({3, 4}), ints({1, 2, 2, 1})}, {{"mode", mode}});
  return cs;
}

// The math families (kernels/cuda/math.cu): every op and derivative on the domain it is defined on.
std::vector<Case> math_cases() {
  std::vector<Case> cs;
  const std::vector<std::pair<const char*, std::pair<double, double>>> ops = {
      {"Sin", {-6, 6}},       {"Cos", {-6, 6}},      {"Tan", {-1.4, 1.4}},   {"Asin", {-0.99, 0.99}},
      {"Acos", {-0.99, 0.99}}, {"Atan", {-9, 9}},    {"Sinh", {-6, 6}},      {"Cosh", {-6, 6}},
      {"Asinh", {-9, 9}},     {"Acosh", {1.05, 9}},    {"Atanh", {-0.95, 0.95}}, {"Ceil", {-9, 9}},
      {"Floor", {-9, 9}},     {"Round", {-9, 9}},    {"HardSigmoid", {-4, 4}}, {"HardSwish", {-5, 5}},
      {"Elu", {-4, 4}},       {"Selu", {-4, 4}},     {"Celu", {-4, 4}},      {"ThresholdedRelu", {-3, 3}},
      {"Mish", {-9, 9}},      {"Shrink", {-2, 2}}};
  for (const auto& [op, r] : ops) {
    Case c = mk(str_cat(op, "_range"), op, {Tu({5, 37}, r.first, r.second)}, kF);
    c.opset = 18;
    cs.push_back(c);
    if (std::string(op) == "Ceil" || std::string(op) == "Floor" || std::string(op) == "Round") continue;
    Case d = train_op(str_cat(op, "Grad_range"), str_cat(op, "Grad"), {T({5, 37}), Tu({5, 37}, r.first, r.second)}, kF);
    cs.push_back(d);
  }
  cs.push_back(mk("Round_halves", "Round", {Tv({8}, {-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 3.5, 0.49})}, kF));
  cs.push_back(mk("Elu_alpha", "Elu", {T({4, 7})}, kF, {{"alpha", 0.3f}}));
  cs.push_back(mk("HardSigmoid_attrs", "HardSigmoid", {T({4, 7})}, kF, {{"alpha", 0.3f}, {"beta", 0.4f}}));
  cs.push_back(train_op("HardSigmoidGrad_attrs", "HardSigmoidGrad", {T({4, 7}), Tu({4, 7}, -4, 4)}, kF,
                        {{"alpha", 0.3f}, {"beta", 0.4f}}));
  cs.push_back(mk("Shrink_attrs", "Shrink", {Tu({4, 7}, -3, 3)}, kF, {{"lambd", 1.f}, {"bias", 0.25f}}));
  cs.push_back(mk("Shrink_int", "Shrink", {Tu({4, 7}, -5, 5)}, {I64, I32, I8, U8}, {{"lambd", 1.5f}, {"bias", 1.f}}));
  cs.push_back(mk("Sign_numeric", "Sign", {Tu({5, 9}, -3, 3)}, kNum));
  cs.push_back(mk("Sign_zero_nan", "Sign", {Tv({4}, {0, -0.0, NAN, -1})}, kF));
  cs.push_back(mk("IsNaN_specials", "IsNaN", {Tv({5}, {NAN, 1, INFINITY, -INFINITY, 0})}, kF));
  cs.push_back(mk("IsInf_specials", "IsInf", {Tv({5}, {NAN, 1, INFINITY, -INFINITY, 0})}, kF));
  cs.push_back(mk("IsInf_negative_only", "IsInf", {Tv({5}, {NAN, 1, INFINITY, -INFINITY, 0})}, kF,
                  {{"detect_positive", int64_t{0}}}));
  cs.push_back(mk("PRelu_channel", "PRelu", {T({2, 3, 5, 7}), T({3, 1, 1})}, kNum));
  cs.push_back(mk("PRelu_scalar", "PRelu", {T({9, 4}), T({1})}, kNum));
  cs.push_back(mk("PRelu_empty", "PRelu", {T({0, 4}), T({4})}, kNum));
  // Along-one-axis ops (scan.cu) and the further reductions (reduce.cu).
  for (int64_t exclusive : {0, 1})
    for (int64_t reverse : {0, 1})
      cs.push_back(mk(str_cat("CumSum_e", exclusive, "_r", reverse), "CumSum", {T({3, 37, 5}), ints({1})}, kNum,
                      {{"exclusive", exclusive}, {"reverse", reverse}}));
  cs.push_back(mk("CumSum_last_axis", "CumSum", {T({4, 300}), vals(I32, {}, {-1})}, kNum));
  for (const char* op : {"ArgMax", "ArgMin"}) {
    cs.push_back(mk(str_cat(op, "_axis1"), op, {T({4, 33, 5})}, kNum, {{"axis", int64_t{1}}}));
    cs.push_back(mk(str_cat(op, "_ties_last"), op, {Tu({6, 9}, -2, 2)}, kNum,
                    {{"axis", int64_t{-1}}, {"keepdims", int64_t{0}}, {"select_last_index", int64_t{1}}}));
  }
  cs.push_back(mk("ReduceProd_axis", "ReduceProd", {Tu({4, 9, 3}, 0.5, 1.5), ints({1})}, kFI));
  cs.push_back(mk("ReduceL1_all", "ReduceL1", {T({4, 9, 3})}, kFI));
  cs.push_back(mk("ReduceLogSum_axes", "ReduceLogSum", {Tu({4, 9, 3}, 0.1, 2), ints({0, 2})}, kF));
  cs.push_back(mk("ReduceLogSumExp_axis", "ReduceLogSumExp", {Tu({4, 700, 3}, -30, 30), ints({1})}, kF));
  cs.push_back(mk("ReduceLogSumExp_big", "ReduceLogSumExp", {Tu({2, 5}, 200, 300)}, {F32}));
  for (Case& c : cs)
    if (c.op.rfind("Reduce", 0) == 0) c.opset = 18;
  return cs;
}

// Mod, BitShift, CastLike, Hardmax (graph/ops/integer.cc), the gathers and scatters, the block
// moves (graph/ops/indexing.cc), the group normalisations and Resize.
std::vector<Case> ops2_cases() {
  std::vector<Case> cs;
  cs.push_back(mk("Mod_fmod", "Mod", {T({3, 5}), Tu({5}, 0.5, 2)}, kF, {{"fmod", int64_t{1}}}));
  cs.push_back(mk("Mod_int_scalar", "Mod", {Tu({3, 5}, -9, 9), Tv({1}, {4})}, {I64}));
  cs.push_back(mk("Mod_int_sign", "Mod", {Tu({3, 5}, -9, 9), Tv({5}, {3, -3, 4, -4, 7})}, {I32, I8}));
  cs.push_back(mk("Mod_u8", "Mod", {Tu({3, 5}, 0, 200), Tv({5}, {3, 5, 4, 9, 7})}, {U8}));
  for (const char* dir : {"LEFT", "RIGHT"})
    cs.push_back(mk(str_cat("BitShift_", dir), "BitShift", {Tv({4}, {1, 2, 16, 200}), Tv({4}, {1, 3, 2, 0})},
                    {U8, DataType::kUInt16, DataType::kUInt32, DataType::kUInt64}, {{"direction", std::string(dir)}}));
  cs.push_back(mk("CastLike_to_f16", "CastLike", {of(F32, {3, 4}), T({1})}, kNum));
  cs.push_back(mk("Hardmax_axis1", "Hardmax", {T({3, 7, 2})}, kF, {{"axis", int64_t{1}}}));
  cs.push_back(mk("GatherElements_axis1", "GatherElements", {T({3, 4}), vals(I64, {3, 2}, {0, 3, -1, 1, 2, 2})}, kMove,
                  {{"axis", int64_t{1}}}));
  cs.push_back(mk("ScatterElements_none", "ScatterElements",
                  {T({3, 3}), vals(I32, {2, 3}, {1, 0, 2, 0, 2, 1}), T({2, 3})}, kMove));
  cs.push_back(mk("ScatterElements_add", "ScatterElements",
                  {T({3, 3}), vals(I64, {2, 3}, {1, 1, 2, 1, 1, 1}), T({2, 3})}, kNum,
                  {{"reduction", std::string("add")}}));
  cs.push_back(mk("GatherND_batch", "GatherND", {T({2, 3, 4}), vals(I64, {2, 1, 1}, {2, 0})}, kMove,
                  {{"batch_dims", int64_t{1}}}));
  cs.push_back(mk("ScatterND_mul", "ScatterND", {T({4, 3}), vals(I64, {3, 1}, {3, 1, 3}), T({3, 3})}, kNum,
                  {{"reduction", std::string("mul")}}));
  cs.push_back(mk("DepthToSpace_CRD", "DepthToSpace", {T({2, 8, 3, 2})}, kMove,
                  {{"blocksize", int64_t{2}}, {"mode", std::string("CRD")}}));
  cs.push_back(mk("SpaceToDepth", "SpaceToDepth", {T({2, 2, 4, 6})}, kMove, {{"blocksize", int64_t{2}}}));
  cs.push_back(mk("InstanceNormalization", "InstanceNormalization", {T({2, 3, 5, 4}), T({3}), T({3})}, kF));
  cs.push_back(mk("MeanVarianceNormalization", "MeanVarianceNormalization", {T({2, 3, 5, 4})}, kF));
  cs.push_back(mk("LpNormalization_p1", "LpNormalization", {Tnz({3, 6})}, kF, {{"p", int64_t{1}}}));
  cs.push_back(mk("Resize_linear", "Resize", {T({1, 2, 3, 4}), of(F32, {0}), vals(F32, {4}, {1, 1, 2, 1.5})}, kNum,
                  {{"mode", std::string("linear")}}));
  cs.push_back(mk("Resize_cubic_sizes", "Resize", {T({1, 2, 3, 4}), of(F32, {0}), of(F32, {0}), ints({1, 2, 5, 3})}, kF,
                  {{"mode", std::string("cubic")}}));
  cs.push_back(mk("TopK_smallest", "TopK", {Tu({3, 9}, -2, 2), ints({4})}, kNum, {{"largest", int64_t{0}}}, 2));
  cs.push_back(mk("NonZero", "NonZero", {Tu({3, 5}, -1, 1)}, kNum));
  cs.push_back(
      mk("Compress_axis1", "Compress", {T({3, 5}), vals(BOOL, {4}, {1, 0, 1, 1})}, kMove, {{"axis", int64_t{1}}}));
  cs.push_back(mk("OneHot", "OneHot", {vals(I64, {4}, {0, 3, -1, 7}), vals(I64, {}, {5}), Tv({2}, {-1, 2})}, kNum));
  cs.push_back(mk("EyeLike_k1", "EyeLike", {T({3, 4})}, kNum, {{"k", int64_t{1}}}));
  cs.push_back(mk("Einsum_batch", "Einsum", {T({2, 3, 4}), T({2, 4, 5})}, {F32}, {{"equation", std::string("bij,bjk->bik")}}));
  cs.push_back(mk("Det_batched", "Det", {T({2, 3, 3})}, {F32}));
  cs.push_back(mk("LRN_size3", "LRN", {T({2, 5, 3, 3})}, {F32}, {{"size", int64_t{3}}}));
  cs.push_back(train_op("LRNGrad_size3", "LRNGrad", {T({2, 5, 3}), T({2, 5, 3})}, {F32}, {{"size", int64_t{3}}}));
  for (const char* op : {"Adagrad", "Adam", "Momentum"}) {  // ai.onnx.preview.training, two tensors
    const bool adam = std::string(op) == "Adam";
    std::vector<In> ins = {scalar(F32, 0.1), scalar(I64, 3), T({3, 4}), T({5}), T({3, 4}), T({5}),
                           Tu({3, 4}, 0, 1), Tu({5}, 0, 1)};
    if (adam) ins.insert(ins.end(), {Tu({3, 4}, 0, 1), Tu({5}, 0, 1)});
    Case c = mk(str_cat(op, "_two"), op, ins, {F32}, {}, adam ? 6 : 4);
    if (std::string(op) == "Momentum")
      c.attrs = {{"mode", std::string("nesterov")}, {"alpha", 0.9f}, {"beta", 0.5f}, {"norm_coefficient", 0.01f}};
    c.domain = kTrainingDomain;
    c.opset = 1;
    cs.push_back(c);
  }
  // Quantization, detection and sequence ops, GroupNormalization and the bitwise ops: CPU kernels
  // on host copies (kernels/cuda/host_ops.cc); these cases check the copies and the upload.
  cs.push_back(mk("QuantizeLinear_axis", "QuantizeLinear", {T({2, 3}), vals(F32, {3}, {0.1, 0.05, 0.2}),
                  vals(U8, {3}, {128, 0, 10})}, {F32}));
  cs.push_back(mk("DequantizeLinear", "DequantizeLinear", {of(U8, {2, 3}, Gen::kUniform, 0, 255),
                  vals(F32, {}, {0.02}), vals(U8, {}, {100})}, {F32}));
  cs.push_back(mk("DynamicQuantizeLinear", "DynamicQuantizeLinear", {T({3, 4})}, {F32}, {}, 3));
  cs.push_back(mk("MatMulInteger", "MatMulInteger", {of(U8, {2, 3}, Gen::kUniform, 0, 255),
                  of(U8, {3, 4}, Gen::kUniform, 0, 255), vals(U8, {}, {12})}, {F32}));
  cs.push_back(mk("ConvInteger", "ConvInteger", {of(U8, {1, 2, 4, 4}, Gen::kUniform, 0, 255),
                  of(U8, {3, 2, 2, 2}, Gen::kUniform, 0, 255), vals(U8, {}, {7})}, {F32}));
  cs.push_back(mk("QLinearMatMul", "QLinearMatMul", {of(U8, {2, 3}, Gen::kUniform, 0, 255), vals(F32, {}, {0.05}),
                  vals(U8, {}, {110}), of(U8, {3, 2}, Gen::kUniform, 0, 255), vals(F32, {}, {0.02}),
                  vals(U8, {}, {120}), vals(F32, {}, {0.5}), vals(U8, {}, {128})}, {F32}));
  cs.push_back(mk("QLinearConv", "QLinearConv", {of(U8, {1, 2, 4, 4}, Gen::kUniform, 0, 255), vals(F32, {}, {0.05}),
                  vals(U8, {}, {110}), of(U8, {3, 2, 2, 2}, Gen::kUniform, 0, 255), vals(F32, {}, {0.02}),
                  vals(U8, {}, {120}), vals(F32, {}, {0.5}), vals(U8, {}, {128})}, {F32}));
  cs.push_back(mk("NonMaxSuppression", "NonMaxSuppression", {vals(F32, {1, 3, 4}, {0, 0, 1, 1, 0, 0.1, 1, 1.1, 0, 5,
                  1, 6}), vals(F32, {1, 1, 3}, {0.9, 0.8, 0.7}), ints({2}), vals(F32, {1}, {0.5})}, {F32}));
  cs.push_back(mk("Unique_sorted", "Unique", {Tv({6}, {2, 1, 2, 3, 1, 1})}, {F32, I64}, {}, 4));
  // 1-grams {2, 3, 4} and 2-grams {2 3}, {3 4}, skips up to 1, weighted TF-IDF of two rows.
  cs.push_back(mk("TfIdfVectorizer_tfidf", "TfIdfVectorizer", {Tv({2, 6}, {1, 2, 3, 2, 3, 4, 4, 2, 3, 1, 2, 3})},
                  {I64, I32},
                  {{"mode", std::string("TFIDF")},
                   {"min_gram_length", int64_t{1}},
                   {"max_gram_length", int64_t{2}},
                   {"max_skip_count", int64_t{1}},
                   {"ngram_counts", std::vector<int64_t>{0, 3}},
                   {"ngram_indexes", std::vector<int64_t>{0, 1, 2, 3, 4}},
                   {"pool_int64s", std::vector<int64_t>{2, 3, 4, 2, 3, 3, 4}},
                   {"weights", std::vector<float>{1.f, 0.5f, 2.f, 1.5f, 0.25f}}}));
  cs.push_back(mk("ReverseSequence", "ReverseSequence", {T({4, 2, 3}), vals(I64, {2}, {4, 2})}, kMove,
                  {{"batch_axis", int64_t{1}}, {"time_axis", int64_t{0}}}));
  cs.push_back(mk("MaxUnpool", "MaxUnpool", {T({1, 1, 2, 2}), vals(I64, {1, 1, 2, 2}, {5, 7, 13, 15})}, {F32},
                  {{"kernel_shape", std::vector<int64_t>{2, 2}}, {"strides", std::vector<int64_t>{2, 2}}}));
  cs.push_back(mk("RoiAlign", "RoiAlign", {T({1, 2, 5, 5}), vals(F32, {2, 4}, {0, 0, 3, 3, 1, 1, 4, 4}),
                  vals(I64, {2}, {0, 0})}, {F32}, {{"output_height", int64_t{2}}, {"output_width", int64_t{2}}}));
  Case gn = mk("GroupNormalization_21", "GroupNormalization", {T({2, 4, 3}), T({4}), T({4})}, kF,
               {{"num_groups", int64_t{2}}});
  gn.opset = 21;
  cs.push_back(gn);
  for (const char* op : {"BitwiseAnd", "BitwiseOr", "BitwiseXor"}) {
    Case c = mk(op, op, {Tu({3, 4}, 0, 100), Tu({4}, 0, 100)}, {I32, I64, U8, DataType::kUInt64});
    c.opset = 18;
    cs.push_back(c);
  }
  Case bnot = mk("BitwiseNot", "BitwiseNot", {Tu({3, 4}, 0, 100)}, {I32, I8, U8, DataType::kUInt16});
  bnot.opset = 18;
  cs.push_back(bnot);
  // GridSample and its gradient: CPU kernels on host copies; grid values in [-1.2, 1.2] reach the padding.
  Case gs = mk("GridSample_bicubic_reflection", "GridSample", {T({2, 3, 4, 5}), Tu({2, 3, 2, 2}, -1.2, 1.2)}, kF,
               {{"mode", std::string("bicubic")}, {"padding_mode", std::string("reflection")}});
  gs.opset = 16;
  cs.push_back(gs);
  Case gs5 = mk("GridSample_5d_linear_border", "GridSample", {T({1, 2, 2, 3, 4}), Tu({1, 2, 2, 3, 3}, -1.2, 1.2)}, kF,
                {{"mode", std::string("linear")},
                 {"padding_mode", std::string("border")},
                 {"align_corners", int64_t{1}}});
  gs5.opset = 20;
  cs.push_back(gs5);
  cs.push_back(train_op("GridSampleGrad_linear_zeros", "GridSampleGrad",
                        {T({2, 3, 3, 2}), T({2, 3, 4, 5}), Tu({2, 3, 2, 2}, -1.2, 1.2)}, kF,
                        {{"mode", std::string("linear")}}, 2));
  cs.push_back(train_op("ResizeGrad_linear", "ResizeGrad",
                        {T({1, 2, 6, 6}), ints({1, 2, 3, 4}), of(F32, {0}), vals(F32, {4}, {1, 1, 2, 1.5})}, kF,
                        {{"mode", std::string("linear")}}));
  return cs;
}

const std::vector<Case>& all_cases() {
  static const std::vector<Case> cases = [] {
    std::vector<Case> all;
    for (auto* family : {elementwise_cases, reduce_cases, shape_cases, matmul_cases, conv_pool_cases, nn_cases,
                         grad_cases, train_cases, math_cases, ops2_cases})
      for (Case& c : family()) all.push_back(std::move(c));
    for (Case& c : all)
      if (c.types.empty()) c.types = {F32};  // cases whose types are all fixed run once
    return all;
  }();
  return cases;
}

// ---- building and running ----------------------------------------------------------------------

std::vector<double> generate(const In& in, DataType t, std::mt19937_64& rng) {
  const int64_t n = num_elements(in.dims);
  if (in.gen == Gen::kValues) {
    OTTER_CHECK(static_cast<int64_t>(in.values.size()) == n, "case input has ", in.values.size(), " values for ",
                dims_to_string(in.dims));
    return in.values;
  }
  std::vector<double> v(static_cast<size_t>(n));
  std::normal_distribution<double> normal(0, 1);
  std::uniform_real_distribution<double> uni(in.lo, in.hi), mag(0.5, 2);
  for (double& x : v) {
    if (t == BOOL) {
      x = static_cast<double>(rng() & 1);
      continue;
    }
    switch (in.gen) {
      case Gen::kNormal: x = is_float(t) ? normal(rng) : std::round(normal(rng) * 8); break;
      case Gen::kUniform: x = is_float(t) ? uni(rng) : std::round(uni(rng)); break;
      case Gen::kAwayFromZero: x = (rng() & 1 ? 1 : -1) * (is_float(t) ? mag(rng) : 1 + static_cast<double>(rng() % 9)); break;
      default: break;
    }
    if (t == U8) x = std::fabs(x);
  }
  return v;
}

Tensor make_tensor(DataType t, const std::vector<int64_t>& dims, const std::vector<double>& v) {
  Tensor out(t, dims);
  for (size_t i = 0; i < v.size(); ++i) {
    void* p = out.raw();
    switch (t) {
      case F32: static_cast<float*>(p)[i] = static_cast<float>(v[i]); break;
      case DataType::kFloat64: static_cast<double*>(p)[i] = v[i]; break;
      case F16: static_cast<Half*>(p)[i] = store_value<Half>(static_cast<float>(v[i])); break;
      case BF16: static_cast<BFloat16*>(p)[i] = store_value<BFloat16>(static_cast<float>(v[i])); break;
      case I64: static_cast<int64_t*>(p)[i] = static_cast<int64_t>(v[i]); break;
      case I32: static_cast<int32_t*>(p)[i] = static_cast<int32_t>(v[i]); break;
      case I8: static_cast<int8_t*>(p)[i] = static_cast<int8_t>(std::clamp(v[i], -128.0, 127.0)); break;
      case U8: static_cast<uint8_t*>(p)[i] = static_cast<uint8_t>(std::clamp(v[i], 0.0, 255.0)); break;
      case BOOL: static_cast<bool*>(p)[i] = v[i] != 0; break;
      case DataType::kUInt16:
        static_cast<uint16_t*>(p)[i] = static_cast<uint16_t>(v[i]);
        break;
      case DataType::kUInt32:
        static_cast<uint32_t*>(p)[i] = static_cast<uint32_t>(v[i]);
        break;
      case DataType::kUInt64:
        static_cast<uint64_t*>(p)[i] = static_cast<uint64_t>(v[i]);
        break;
      default: fail("make_tensor: dtype ", dtype_name(t));
    }
  }
  return out;
}

// One case at one dtype, with its input values drawn once.
struct Instance {
  const Case* c;
  DataType t;
  std::vector<std::vector<double>> values;
};

Instance instantiate(const Case& c, DataType t) {
  Instance in{&c, t, {}};
  std::mt19937_64 rng(std::hash<std::string>{}(c.label + "/" + std::string(dtype_name(t))));
  for (const In& i : c.ins) in.values.push_back(i.gen == Gen::kAbsent ? std::vector<double>{} : generate(i, i.type.value_or(t), rng));
  return in;
}

struct Built {
  std::unique_ptr<Graph> g;
  Node* node = nullptr;
  std::map<std::string, Tensor> feeds;
};

// The one-node graph of an instance with T replaced by `t` (the instance's dtype, or f32 for a
// reference the CPU only computes in f32).
Built build(const Instance& inst, DataType t) {
  const Case& c = *inst.c;
  Built b;
  b.g = std::make_unique<Graph>();
  Graph& g = *b.g;
  g.opset_imports[""] = c.domain.empty() ? c.opset : 17;
  g.opset_imports[kOtterDomain] = 1;
  std::vector<Value*> ins;
  for (size_t i = 0; i < c.ins.size(); ++i) {
    const In& in = c.ins[i];
    if (in.gen == Gen::kAbsent) {
      ins.push_back(nullptr);
      continue;
    }
    const DataType dt = in.type.value_or(t);
    std::vector<double> values = inst.values[i];
    if (!in.type && t != inst.t) {  // the T-typed values as the instance's dtype holds them, widened exactly
      const Tensor narrow = make_tensor(inst.t, in.dims, values);
      for (int64_t k = 0; k < narrow.numel(); ++k) values[k] = narrow.get_as_double(k);
    }
    const Tensor v = make_tensor(dt, in.dims, values);
    const std::string name = str_cat("in", i);
    if (in.constant) {
      ins.push_back(g.add_initializer(name, v, false));
    } else {
      ins.push_back(g.add_input(name, dt, Shape::of(in.dims)));
      b.feeds[name] = v;
    }
  }
  std::vector<std::string> outs;
  for (int i = 0; i < c.outputs; ++i) outs.push_back(str_cat("out", i));
  b.node = g.add_node(c.op, ins, outs, c.domain);
  b.node->set_name(c.label);
  for (const auto& [k, a] : c.attrs) b.node->set_attr(k, a);
  if (c.to_is_T) b.node->set_attr("to", int64_t{dtype_to_onnx(inst.t)});
  infer_graph(g);
  for (Value* o : b.node->outputs()) g.add_output(o);
  return b;
}

bool has_half_inputs(const Case& c, DataType t) {
  if (t == F16 || t == BF16) return true;
  for (const In& in : c.ins)
    if (in.type == F16 || in.type == BF16) return true;
  return false;
}

std::map<std::string, Tensor> run_graph(const Built& b, Device* device, bool first_micro_step) {
  ExecutorOptions o;
  o.device = device;
  o.seed = 11;
  Executor ex(*b.g, o);
  ex.set_first_micro_step(first_micro_step);
  std::map<std::string, Tensor> feeds;
  for (const auto& [k, v] : b.feeds) feeds[k] = v.clone();  // in-place kernels write their inputs
  std::map<std::string, Tensor> out;
  for (auto& [k, v] : ex.run(feeds)) out[k] = device ? device->to_host(v) : v;
  return out;
}

// The CPU reference: in the instance's dtype where the CPU kernel takes it, else in f32.
std::map<std::string, Tensor> reference(const Instance& inst, std::string* how) {
  const Built native = build(inst, inst.t);
  std::string why;
  bool cpu_has = KernelRegistry::instance().find(*native.node, DeviceType::kCpu, &why) != nullptr;
  if (cpu_has) {
    try {
      *how = "cpu";
      return run_graph(native, nullptr, inst.c->first_micro_step);
    } catch (const Error& e) {
      if (!has_half_inputs(*inst.c, inst.t)) throw;
      why = e.what();
    }
  }
  if (!has_half_inputs(*inst.c, inst.t)) fail("no CPU reference for ", inst.c->label, ": ", why);
  *how = "cpu in f32";
  return run_graph(build(inst, F32), nullptr, inst.c->first_micro_step);
}

double tolerance(DataType t) {
  switch (t) {
    case F32: return 1e-5;
    case F16: return 1e-2;
    case BF16: return 5e-2;
    default: return 0;
  }
}

// Max |got - want| over max |want| (NaN and infinities must match exactly); integers exactly.
void expect_close(const std::string& what, const Tensor& got, const Tensor& want, double tol) {
  ASSERT_EQ(got.dims(), want.dims()) << what;
  const bool floats = is_float(got.dtype());
  if (!floats) {
    ASSERT_EQ(got.dtype(), want.dtype()) << what;
  }
  double worst = 0, scale = 0;
  int64_t worst_at = -1;
  for (int64_t i = 0; i < want.numel(); ++i) {
    const double w = want.get_as_double(i), g = got.get_as_double(i);
    if (std::isnan(w) || std::isnan(g)) {
      ASSERT_TRUE(std::isnan(w) && std::isnan(g)) << what << " element " << i << ": got " << g << ", want " << w;
      continue;
    }
    if (std::isinf(w) || std::isinf(g)) {
      ASSERT_EQ(g, w) << what << " element " << i;
      continue;
    }
    if (!floats) {
      ASSERT_EQ(g, w) << what << " element " << i;
      continue;
    }
    scale = std::max(scale, std::fabs(w));
    if (std::fabs(g - w) > worst) {
      worst = std::fabs(g - w);
      worst_at = i;
    }
  }
  if (!floats || worst == 0) return;
  const double rel = worst / std::max(scale, 1e-30);
  EXPECT_LE(rel, tol) << what << ": worst difference " << worst << " at element " << worst_at << " (got "
                      << got.get_as_double(worst_at) << ", want " << want.get_as_double(worst_at) << "), relative "
                      << rel << " > " << tol;
}

std::string case_name(const ::testing::TestParamInfo<Case>& info) { return info.param.label; }
void PrintTo(const Case& c, std::ostream* os) { *os << c.label; }

Device* cuda() {
  static std::unique_ptr<Device> d = cuda_available() ? make_cuda_device() : nullptr;
  return d.get();
}

// ---- the tests ---------------------------------------------------------------------------------

class CudaDiff : public ::testing::TestWithParam<Case> {};

TEST_P(CudaDiff, MatchesCpu) {
  if (!cuda_available()) GTEST_SKIP() << no_device();
  const Case& c = GetParam();
  for (DataType t : c.types) {
    SCOPED_TRACE(str_cat(c.label, " in ", dtype_name(t)));
    const Instance inst = instantiate(c, t);
    std::string how;
    const auto want = reference(inst, &how);
    const auto got = run_graph(build(inst, t), cuda(), c.first_micro_step);
    for (const auto& [name, w] : want) {
      ASSERT_TRUE(got.count(name)) << name;
      const Tensor& g = got.at(name);
      const double tol = tolerance(is_float(g.dtype()) ? g.dtype() : t) * c.tol;
      expect_close(str_cat(name, " (reference: ", how, ")"), g, w, tol);
    }
  }
}

// Runs everywhere: the graph infers, the CPU reference runs, and the CUDA registry selects a kernel.
class CudaDiffCases : public ::testing::TestWithParam<Case> {};

TEST_P(CudaDiffCases, AreWellFormed) {
  const Case& c = GetParam();
  for (DataType t : c.types) {
    SCOPED_TRACE(str_cat(c.label, " in ", dtype_name(t)));
    const Instance inst = instantiate(c, t);
    std::string how;
    try {
      reference(inst, &how);
    } catch (const Error& e) {
      FAIL() << "the CPU reference fails: " << e.what();
    }
#ifdef OTTER_HAVE_CUDA
    const Built b = build(inst, t);
    std::string why;
    EXPECT_NE(KernelRegistry::instance().find(*b.node, DeviceType::kCuda, &why), nullptr) << why;
#endif
  }
}

INSTANTIATE_TEST_SUITE_P(All, CudaDiff, ::testing::ValuesIn(all_cases()), case_name);
INSTANTIATE_TEST_SUITE_P(All, CudaDiffCases, ::testing::ValuesIn(all_cases()), case_name);

#ifdef OTTER_HAVE_CUDA
// Every registered CUDA kernel has a differential case in every dtype it is registered for.
TEST(CudaDiffCoverage, EveryCudaKernelAndDtypeHasACase) {
  std::map<std::pair<std::string, std::string>, std::set<DataType>> covered;
  for (const Case& c : all_cases()) {
    auto& s = covered[{c.domain, c.op}];
    for (DataType t : c.types) {
      const Instance inst = instantiate(c, t);
      s.insert(kernel_dtype(*build(inst, t).node));
    }
  }
  int kernels = 0;
  for (const KernelDef& d : KernelRegistry::instance().all()) {
    if (d.device != DeviceType::kCuda) continue;
    // A collective (and ZeRO-1's Shard, which reads the rank) needs a communicator of several
    // ranks, not a one-process differential case: the distributed tests (ctest label distributed)
    // run the CPU ones under mpirun; the NCCL ones need a GPU job under mpirun.
    if (d.op_type == "AllReduce" || d.op_type == "ReduceScatter" || d.op_type == "Shard" || d.op_type == "AllGather")
      continue;
    ++kernels;
    auto it = covered.find({d.domain, d.op_type});
    ASSERT_NE(it, covered.end()) << "no differential case for the CUDA kernel " << d.op_type;
    for (DataType t : d.dtypes)
      EXPECT_TRUE(it->second.count(t)) << "no differential case for the CUDA kernel " << d.op_type << " in "
                                       << dtype_name(t);
  }
  EXPECT_GT(kernels, 0) << "this CUDA build registered no CUDA kernels";
}
#endif

// ---- Dropout in training mode: masks differ from the CPU's generator, so check what they mean ---

TEST(CudaDropout, TrainingMasksAreDeterministicScaledAndAtTheRatio) {
  if (!cuda_available()) GTEST_SKIP() << no_device();
  for (DataType t : kF) {
    SCOPED_TRACE(dtype_name(t));
    Case c = mk("Dropout_training", "Dropout", {Tu({64, 1001}, 1, 2), scalar(F32, 0.25), scalar(BOOL, 1)}, {t}, {}, 2);
    const Instance inst = instantiate(c, t);
    const Built b = build(inst, t);
    const auto first = run_graph(b, cuda(), true);
    const auto again = run_graph(b, cuda(), true);  // a fresh executor with the same seed
    EXPECT_TRUE(first.at("out0").bitwise_equal(again.at("out0"))) << "same seed, same output";
    EXPECT_TRUE(first.at("out1").bitwise_equal(again.at("out1"))) << "same seed, same mask";
    const Tensor& y = first.at("out0");
    const Tensor& mask = first.at("out1");
    const Tensor& x = b.feeds.at("in0");
    int64_t dropped = 0;
    for (int64_t i = 0; i < x.numel(); ++i) {
      const bool keep = mask.data<bool>()[i];
      dropped += !keep;
      const double want = keep ? x.get_as_double(i) / 0.75 : 0.0;
      ASSERT_NEAR(y.get_as_double(i), want, std::fabs(want) * tolerance(t)) << "element " << i;
    }
    const double frac = static_cast<double>(dropped) / static_cast<double>(x.numel());
    EXPECT_NEAR(frac, 0.25, 0.01) << dropped << " of " << x.numel() << " dropped";
  }
}

}  // namespace
}  // namespace otter
