// Tests of the op table: every op's type and shape inference against hand-computed (and, for
// convolution/pooling windows, PyTorch-computed) shapes, symbolic shape-data propagation through
// exported shape arithmetic, error messages, and the opset coverage of the whole op list.
#include <gtest/gtest.h>

#include <limits>
#include <map>
#include <set>
#include <sstream>

#include "graph/error.h"
#include "graph/ir.h"
#include "graph/op_table.h"

namespace otter {
namespace {

constexpr DataType kF32 = DataType::kFloat32;
constexpr DataType kF16 = DataType::kFloat16;
constexpr DataType kI64 = DataType::kInt64;
constexpr DataType kI32 = DataType::kInt32;
constexpr DataType kBool = DataType::kBool;
constexpr int64_t kInt64Max = std::numeric_limits<int64_t>::max();

using Attrs = std::map<std::string, Attribute>;

// Builds small graphs node by node; op() infers at once, add() leaves inference to the test.
class Builder {
 public:
  explicit Builder(int opset = 13) { g.opset_imports[""] = opset; }
  Value* in(const std::string& name, DataType t, Shape s) { return g.add_input(name, t, std::move(s)); }
  Value* f32(const std::string& name, Shape s) { return in(name, kF32, std::move(s)); }
  Value* ints(const std::string& name, const std::vector<int64_t>& v) {
    return g.add_initializer(name, Tensor::from_vector<int64_t>({static_cast<int64_t>(v.size())}, v), false);
  }
  Value* scalar(const std::string& name, int64_t v) { return g.add_initializer(name, Tensor::scalar<int64_t>(v), false); }
  Value* fscalar(const std::string& name, float v) { return g.add_initializer(name, Tensor::scalar<float>(v), false); }
  // A constant bool tensor (1-D, or a scalar when `scalar`).
  Value* bools(const std::string& name, const std::vector<int>& v, bool scalar = false) {
    Tensor t(kBool, scalar ? std::vector<int64_t>{} : std::vector<int64_t>{static_cast<int64_t>(v.size())});
    for (size_t i = 0; i < v.size(); ++i) static_cast<uint8_t*>(t.raw())[i] = v[i] != 0;
    return g.add_initializer(name, t, false);
  }
  Node* add(const std::string& op, const std::vector<Value*>& ins, int n_out = 1, const Attrs& attrs = {}) {
    std::vector<std::string> outs;
    int k = counter_++;
    for (int i = 0; i < n_out; ++i) outs.push_back(str_cat("v", k, "_", i));
    Node* n = g.add_node(op, ins, outs);
    n->set_name(str_cat(op, "_", k));
    for (const auto& [key, a] : attrs) n->set_attr(key, a);
    return n;
  }
  Node* op(const std::string& op, const std::vector<Value*>& ins, int n_out = 1, const Attrs& attrs = {}) {
    Node* n = add(op, ins, n_out, attrs);
    infer_node(*n);
    return n;
  }
  // Type of output i of a node built with op(): "f32[N,16]".
  Value* out(Node* n, int i = 0) { return n->output(i); }

  Graph g;

 private:
  int counter_ = 0;
};

std::string ty(Node* n, int i = 0) { return n->output(i)->type_string(); }

// The symbolic data of a value as text: "[N,16,?]" or "none".
std::string sym(Value* v) {
  if (!v->sym_data()) return "none";
  return Shape(*v->sym_data()).to_string();
}
std::string sym(Node* n, int i = 0) { return sym(n->output(i)); }

// Runs inference on a node expected to fail and returns the message.
std::string error_of(Node* n) {
  try {
    infer_node(*n);
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}

Shape S(std::vector<Dim> d) { return Shape(std::move(d)); }

// ---- the op list and its opsets ------------------------------------------------------------------

const std::vector<std::string>& op_list() {
  static const std::vector<std::string> kOps = {
      "Add", "Sub", "Mul", "Div", "Pow", "Sqrt", "Reciprocal", "Exp", "Log", "Neg", "Abs", "Erf", "Tanh",
      "Sigmoid", "Relu", "LeakyRelu", "Gelu", "Softplus", "Clip", "Min", "Max", "Where", "Equal", "Less",
      "Greater", "Not", "And", "Cast", "MatMul", "Gemm", "Conv", "MaxPool", "AveragePool", "GlobalAveragePool",
      "BatchNormalization", "LayerNormalization", "Softmax", "LogSoftmax", "Dropout", "SoftmaxCrossEntropyLoss",
      "NegativeLogLikelihoodLoss", "Reshape", "Transpose", "Flatten", "Squeeze", "Unsqueeze", "Concat", "Split",
      "Slice", "Gather", "Expand", "Shape", "Size", "ConstantOfShape", "Constant", "Range", "Trilu", "Identity",
      "Tile", "Pad", "ReduceSum", "ReduceMean", "ReduceMax"};
  return kOps;
}

TEST(OpTableRegistry, EveryOpExistsAtEveryOpsetFrom13To21) {
  const OpTable& t = OpTable::instance();
  for (const std::string& op : op_list()) {
    // Where an op first appears in ONNX after opset 13.
    int first = op == "Gelu" ? 20 : op == "LayerNormalization" ? 17 : op == "Trilu" ? 14 : kMinOnnxOpset;
    for (int v = kMinOnnxOpset; v <= kMaxOnnxOpset; ++v) {
      const OpDef* d = t.find("", op, v);
      if (v < first) {
        EXPECT_EQ(d, nullptr) << op << " should not exist at opset " << v;
        continue;
      }
      ASSERT_NE(d, nullptr) << op << " missing at opset " << v;
      EXPECT_TRUE(d->infer) << op << " has no inference";
      EXPECT_FALSE(d->summary.empty()) << op;
      EXPECT_LE(d->since_version, v);
      EXPECT_GE(d->until_version, v);
    }
    EXPECT_EQ(t.find("", op, kMaxOnnxOpset + 1), nullptr) << op << " must not claim opset 22";
    EXPECT_TRUE(t.knows("", op));
  }
}

TEST(OpTableRegistry, DefinitionsSplitWhereInputsReplaceAttributes) {
  const OpTable& t = OpTable::instance();
  for (const char* op : {"Split", "ReduceMean", "ReduceMax"}) {
    const OpDef* a = t.find("", op, 17);
    const OpDef* b = t.find("", op, 18);
    ASSERT_TRUE(a && b) << op;
    EXPECT_NE(a, b) << op;
    EXPECT_EQ(a->until_version, 17) << op;
    EXPECT_EQ(b->since_version, 18) << op;
  }
  EXPECT_EQ(t.find("", "ReduceSum", 13), t.find("", "ReduceSum", 21));  // axes input since 13
  EXPECT_EQ(t.find("", "Gelu", 20)->since_version, 20);
  EXPECT_EQ(t.find("", "LayerNormalization", 17)->since_version, 17);
}

TEST(OpTableRegistry, PrecisionClassesFollowTheAmpPolicy) {
  const OpTable& t = OpTable::instance();
  auto cls = [&](const char* op) { return t.find("", op, 21)->precision; };
  for (const char* op : {"MatMul", "Gemm", "Conv", "ConvTranspose"}) EXPECT_EQ(cls(op), PrecisionClass::kLow) << op;
  for (const char* op : {"Exp", "Log", "Pow", "Reciprocal", "Softplus", "LayerNormalization", "Softmax", "LogSoftmax",
                         "ReduceSum", "SoftmaxCrossEntropyLoss", "NegativeLogLikelihoodLoss"})
    EXPECT_EQ(cls(op), PrecisionClass::kFp32) << op;
  for (const char* op : {"Relu", "Gelu", "Erf", "Sqrt", "Sigmoid", "Tanh", "Add", "Sub", "Mul", "Div", "Where",
                         "Concat", "Reshape", "Transpose", "Slice", "Gather", "Split", "Flatten", "Squeeze",
                         "Unsqueeze", "Expand", "MaxPool", "AveragePool", "GlobalAveragePool", "ReduceMean",
                         "ReduceMax", "BatchNormalization", "Dropout", "Identity", "Neg", "Abs", "Clip", "Min", "Max",
                         "LeakyRelu", "Tile", "Pad", "Trilu"})
    EXPECT_EQ(cls(op), PrecisionClass::kFollow) << op;
  for (const char* op : {"Shape", "Size", "Equal", "Less", "Greater", "Not", "And", "ConstantOfShape", "Constant",
                         "Range", "Cast"})
    EXPECT_EQ(cls(op), PrecisionClass::kNone) << op;
  EXPECT_EQ(t.find("", "ReduceMean", 13)->precision, PrecisionClass::kFollow);
}

TEST(OpTableRegistry, GradientKindsAndInplaceFlags) {
  const OpTable& t = OpTable::instance();
  for (const char* op : {"Shape", "Size", "Equal", "Less", "Greater", "Not", "And", "ConstantOfShape", "Constant",
                         "Range"})
    EXPECT_EQ(t.find("", op, 13)->grad_kind, GradKind::kNoGradient) << op;
  for (const char* op : {"Add", "MatMul", "Conv", "Reshape", "Cast", "ReduceSum", "Softmax"})
    EXPECT_NE(t.find("", op, 13)->grad_kind, GradKind::kNoGradient) << op;
  for (const char* op : {"Relu", "Sigmoid", "Exp", "Add", "Mul", "Neg", "Sqrt"})
    EXPECT_TRUE(t.find("", op, 13)->inplace) << op;
  for (const char* op : {"MatMul", "Conv", "Softmax", "Reshape", "Equal", "Cast", "Where", "Concat"})
    EXPECT_FALSE(t.find("", op, 13)->inplace) << op;
}

TEST(OpTableRegistry, UnknownOpsAndOpsetsAreNamed) {
  Builder b(12);
  Node* n = b.add("Squeeze", {b.f32("x", Shape::of({1, 3}))});
  EXPECT_NE(error_of(n).find("opset 12 of Squeeze is not supported"), std::string::npos) << error_of(n);
  Builder c(13);
  Node* m = c.add("Frobnicate", {c.f32("x", Shape::of({1}))});
  EXPECT_NE(error_of(m).find("Frobnicate 'Frobnicate_0': unsupported op Frobnicate"), std::string::npos)
      << error_of(m);
}

// ---- element-wise ----------------------------------------------------------------------------------

TEST(OpTableElementwise, UnaryOpsKeepTypeAndShape) {
  for (const char* op : {"Sqrt", "Reciprocal", "Exp", "Log", "Neg", "Abs", "Erf", "Tanh", "Sigmoid", "Relu",
                         "LeakyRelu", "Softplus", "Identity"}) {
    Builder b(13);
    Node* n = b.op(op, {b.in("x", kF16, S({"N", 7}))});
    EXPECT_EQ(ty(n), "f16[N,7]") << op;
  }
  Builder b(20);
  EXPECT_EQ(ty(b.op("Gelu", {b.f32("x", S({"B", "T", 64}))}, 1, {{"approximate", "tanh"}})), "f32[B,T,64]");
}

TEST(OpTableElementwise, BinaryOpsBroadcast) {
  for (const char* op : {"Add", "Sub", "Mul", "Div", "Pow"}) {
    Builder b;
    Node* n = b.op(op, {b.f32("a", S({"N", 1, 5})), b.f32("b", S({4, 1}))});
    EXPECT_EQ(ty(n), "f32[N,4,5]") << op;
  }
  Builder b;
  EXPECT_EQ(ty(b.op("Min", {b.f32("a", S({3, 1})), b.f32("b", S({1, 4})), b.f32("c", S({4}))})), "f32[3,4]");
  EXPECT_EQ(ty(b.op("Max", {b.f32("d", S({"N", 2}))})), "f32[N,2]");
  // Pow's exponent may have another type.
  EXPECT_EQ(ty(b.op("Pow", {b.f32("e", S({2, 3})), b.in("p", kI64, Shape())})), "f32[2,3]");
  // Symbol against 1 keeps the symbol; a symbol against a static size takes the size.
  EXPECT_EQ(ty(b.op("Add", {b.f32("f", S({"N", 1})), b.f32("g", S({1, "M"}))})), "f32[N,M]");
  EXPECT_EQ(ty(b.op("Mul", {b.f32("h", S({"N", 8})), b.f32("i", S({3, 8}))})), "f32[3,8]");
}

TEST(OpTableElementwise, ClipWhereComparisonsLogic) {
  Builder b;
  Value* x = b.f32("x", S({"N", 4}));
  EXPECT_EQ(ty(b.op("Clip", {x, b.fscalar("lo", 0.f), b.fscalar("hi", 6.f)})), "f32[N,4]");
  EXPECT_EQ(ty(b.op("Clip", {x})), "f32[N,4]");
  Value* c = b.in("c", kBool, S({"N", 1}));
  EXPECT_EQ(ty(b.op("Where", {c, x, b.f32("y", S({4}))})), "f32[N,4]");
  for (const char* op : {"Equal", "Less", "Greater"})
    EXPECT_EQ(ty(b.op(op, {x, b.f32(str_cat("z", op), S({1}))})), "bool[N,4]") << op;
  EXPECT_EQ(ty(b.op("Not", {c})), "bool[N,1]");
  EXPECT_EQ(ty(b.op("And", {c, b.in("d", kBool, S({3, 1, 4}))})), "bool[3,N,4]");
}

TEST(OpTableElementwise, CastTakesTheTargetType) {
  Builder b;
  Value* x = b.f32("x", S({"N", 3}));
  EXPECT_EQ(ty(b.op("Cast", {x}, 1, {{"to", 10}})), "f16[N,3]");
  EXPECT_EQ(ty(b.op("Cast", {x}, 1, {{"to", 7}})), "i64[N,3]");
  EXPECT_EQ(ty(b.op("Cast", {x}, 1, {{"to", 16}})), "bf16[N,3]");
  EXPECT_EQ(ty(b.op("Cast", {x}, 1, {{"to", 9}})), "bool[N,3]");
  Node* bad = b.add("Cast", {x}, 1, {{"to", 8}});  // STRING
  EXPECT_NE(error_of(bad).find("Cast 'Cast_4': attribute 'to' = 8"), std::string::npos) << error_of(bad);
  Node* none = b.add("Cast", {x});
  EXPECT_NE(error_of(none).find("attribute 'to' is required"), std::string::npos);
  Builder c(21);
  EXPECT_EQ(ty(c.op("Cast", {c.in("y", kI64, S({2}))}, 1, {{"to", 1}})), "f32[2]");
}

// ---- MatMul, Gemm ------------------------------------------------------------------------------------

TEST(OpTableNn, MatMulBatchingAndVectorPromotion) {
  Builder b;
  EXPECT_EQ(ty(b.op("MatMul", {b.f32("a", S({"N", "T", 64})), b.f32("w", S({64, 32}))})), "f32[N,T,32]");
  EXPECT_EQ(ty(b.op("MatMul", {b.f32("b", S({2, 1, 3, 4})), b.f32("c", S({5, 4, 6}))})), "f32[2,5,3,6]");
  EXPECT_EQ(ty(b.op("MatMul", {b.f32("v", S({4})), b.f32("u", S({4}))})), "f32[]");
  EXPECT_EQ(ty(b.op("MatMul", {b.f32("p", S({4})), b.f32("q", S({"N", 4, 8}))})), "f32[N,8]");
  EXPECT_EQ(ty(b.op("MatMul", {b.f32("r", S({"N", 3, 4})), b.f32("s", S({4}))})), "f32[N,3]");
  EXPECT_EQ(ty(b.op("MatMul", {b.in("h", kF16, S({"B", 8, "K"})), b.in("k", kF16, S({"K", 2}))})), "f16[B,8,2]");
  Node* bad = b.add("MatMul", {b.f32("x", S({3, 4})), b.f32("y", S({5, 6}))});
  EXPECT_NE(error_of(bad).find("MatMul 'MatMul_6': inner dimensions differ"), std::string::npos) << error_of(bad);
  Node* mixed = b.add("MatMul", {b.f32("m1", S({3, 4})), b.in("m2", kF16, S({4, 6}))});
  EXPECT_NE(error_of(mixed).find("has type f16"), std::string::npos) << error_of(mixed);
}

TEST(OpTableNn, GemmTransposes) {
  Builder b;
  Value* bias = b.f32("bias", S({32}));
  EXPECT_EQ(ty(b.op("Gemm", {b.f32("x", S({"N", 64})), b.f32("w", S({32, 64})), bias}, 1, {{"transB", 1}})),
            "f32[N,32]");
  EXPECT_EQ(ty(b.op("Gemm", {b.f32("xt", S({64, "N"})), b.f32("w2", S({64, 32}))}, 1, {{"transA", 1}})),
            "f32[N,32]");
  Node* bad = b.add("Gemm", {b.f32("x3", S({8, 64})), b.f32("w3", S({32, 64}))});
  EXPECT_NE(error_of(bad).find("inner dimensions differ"), std::string::npos);
  Node* badc = b.add("Gemm", {b.f32("x4", S({8, 64})), b.f32("w4", S({64, 32})), b.f32("c4", S({31}))});
  EXPECT_NE(error_of(badc).find("does not broadcast to [8,32]"), std::string::npos) << error_of(badc);
}

// ---- convolution and pooling (expected sizes from torch.nn.functional) ------------------------------

TEST(OpTableNn, ConvOutputSizes) {
  Builder b;
  Value* x = b.f32("x", S({"N", 3, 32, 32}));
  Value* w = b.f32("w", S({16, 3, 3, 3}));
  EXPECT_EQ(ty(b.op("Conv", {x, w}, 1, {{"pads", std::vector<int64_t>{1, 1, 1, 1}}})), "f32[N,16,32,32]");
  EXPECT_EQ(ty(b.op("Conv", {x, w, b.f32("bias", S({16}))}, 1,
                    {{"pads", std::vector<int64_t>{1, 1, 1, 1}}, {"strides", std::vector<int64_t>{2, 2}}})),
            "f32[N,16,16,16]");
  EXPECT_EQ(ty(b.op("Conv", {x, w}, 1, {{"dilations", std::vector<int64_t>{2, 2}}})), "f32[N,16,28,28]");
  EXPECT_EQ(ty(b.op("Conv", {b.f32("xg", S({1, 8, 10, 10})), b.f32("wg", S({8, 2, 3, 3}))}, 1, {{"group", 4}})),
            "f32[1,8,8,8]");
  // pads = [h_begin, w_begin, h_end, w_end]
  EXPECT_EQ(ty(b.op("Conv", {b.f32("xa", S({1, 3, 10, 10})), b.f32("wa", S({4, 3, 3, 3}))}, 1,
                    {{"pads", std::vector<int64_t>{0, 1, 2, 3}}})),
            "f32[1,4,10,12]");
  EXPECT_EQ(ty(b.op("Conv", {b.f32("x1", S({1, 2, 17})), b.f32("w1", S({5, 2, 3}))}, 1,
                    {{"pads", std::vector<int64_t>{2, 2}}, {"strides", std::vector<int64_t>{3}},
                     {"dilations", std::vector<int64_t>{2}}})),
            "f32[1,5,6]");
  Value* x33 = b.f32("x33", S({"N", 3, 33, 33}));
  EXPECT_EQ(ty(b.op("Conv", {x33, w}, 1, {{"auto_pad", "SAME_UPPER"}, {"strides", std::vector<int64_t>{2, 2}}})),
            "f32[N,16,17,17]");
  EXPECT_EQ(ty(b.op("Conv", {x33, w}, 1, {{"auto_pad", "SAME_LOWER"}})), "f32[N,16,33,33]");
  EXPECT_EQ(ty(b.op("Conv", {x33, w}, 1, {{"auto_pad", "VALID"}, {"strides", std::vector<int64_t>{2, 2}}})),
            "f32[N,16,16,16]");
  // Symbolic spatial sizes survive where the window preserves them.
  Value* xs = b.f32("xs", S({"N", 3, "H", "W"}));
  EXPECT_EQ(ty(b.op("Conv", {xs, w}, 1, {{"pads", std::vector<int64_t>{1, 1, 1, 1}}})), "f32[N,16,H,W]");
  EXPECT_EQ(ty(b.op("Conv", {xs, w}, 1, {{"auto_pad", "SAME_UPPER"}})), "f32[N,16,H,W]");
  EXPECT_EQ(ty(b.op("Conv", {xs, w}, 1, {{"strides", std::vector<int64_t>{2, 2}}})), "f32[N,16,?,?]");
  EXPECT_EQ(ty(b.op("Conv", {xs, b.f32("w11", S({6, 3, 1, 1}))})), "f32[N,6,H,W]");
  // kernel_shape given explicitly and W of unknown shape.
  EXPECT_EQ(ty(b.op("Conv", {x, b.f32("wu", Shape::unknown())}, 1, {{"kernel_shape", std::vector<int64_t>{5, 5}}})),
            "f32[N,?,28,28]");
}

TEST(OpTableNn, ConvErrors) {
  Builder b;
  Value* x = b.f32("x", S({"N", 3, 8, 8}));
  Node* ch = b.add("Conv", {x, b.f32("w", S({4, 2, 3, 3}))});
  EXPECT_NE(error_of(ch).find("Conv 'Conv_0': X has 3 channels but W expects 2"), std::string::npos) << error_of(ch);
  Node* big = b.add("Conv", {x, b.f32("w2", S({4, 3, 9, 9}))});
  EXPECT_NE(error_of(big).find("smaller than the (dilated) kernel size 9"), std::string::npos) << error_of(big);
  Node* pads = b.add("Conv", {x, b.f32("w3", S({4, 3, 3, 3}))}, 1, {{"pads", std::vector<int64_t>{1, 1}}});
  EXPECT_NE(error_of(pads).find("attribute 'pads' has 2 values, expected 4"), std::string::npos) << error_of(pads);
  Node* ap = b.add("Conv", {x, b.f32("w4", S({4, 3, 3, 3}))}, 1, {{"auto_pad", "SAME"}});
  EXPECT_NE(error_of(ap).find("auto_pad"), std::string::npos);
  Node* grp = b.add("Conv", {b.f32("x5", S({1, 4, 8, 8})), b.f32("w5", S({6, 1, 3, 3}))}, 1, {{"group", 4}});
  EXPECT_NE(error_of(grp).find("not divisible by group = 4"), std::string::npos) << error_of(grp);
  Node* kb = b.add("Conv", {x, b.f32("w6", S({4, 3, 3, 3}))}, 1, {{"kernel_shape", std::vector<int64_t>{5, 5}}});
  EXPECT_NE(error_of(kb).find("does not match W's shape"), std::string::npos) << error_of(kb);
}

// ConvTranspose: sizes from torch.nn.functional.conv_transpose{1,2,3}d, and for output_shape and
// auto_pad from the shapes of ONNX's test_convtranspose_output_shape / _autopad_same data.
TEST(OpTableNn, ConvTransposeOutputSizes) {
  Builder b;
  using V = std::vector<int64_t>;
  Value* x = b.f32("x", S({"N", 3, 8, 8}));
  Value* w = b.f32("w", S({3, 4, 3, 3}));
  EXPECT_EQ(ty(b.op("ConvTranspose", {x, w, b.f32("bias", S({4}))}, 1,
                    {{"strides", V{2, 2}}, {"pads", V{1, 1, 1, 1}}, {"output_padding", V{1, 1}}})),
            "f32[N,4,16,16]");
  EXPECT_EQ(ty(b.op("ConvTranspose", {b.f32("xg", S({1, 4, 5, 5})), b.f32("wg", S({4, 3, 2, 2}))}, 1,
                    {{"group", 2}, {"dilations", V{2, 1}}, {"strides", V{1, 3}}})),
            "f32[1,6,7,14]");
  EXPECT_EQ(ty(b.op("ConvTranspose", {b.f32("x1", S({1, 2, 7})), b.f32("w1", S({2, 5, 3}))}, 1,
                    {{"strides", V{3}}, {"pads", V{2, 2}}, {"dilations", V{2}}})),
            "f32[1,5,19]");
  EXPECT_EQ(ty(b.op("ConvTranspose", {b.f32("x3", S({1, 2, 3, 4, 5})), b.f32("w3", S({2, 2, 3, 3, 3}))})),
            "f32[1,2,5,6,7]");
  EXPECT_EQ(ty(b.op("ConvTranspose", {b.f32("xp", S({1, 2, 3, 3})), b.f32("wp", S({2, 2, 3, 3}))}, 1,
                    {{"pads", V{0, 1, 0, 1}}})),
            "f32[1,2,5,3]");
  Value* xo = b.f32("xo", S({1, 1, 3, 3}));
  Value* wo = b.f32("wo", S({1, 2, 3, 3}));
  EXPECT_EQ(ty(b.op("ConvTranspose", {xo, wo}, 1, {{"strides", V{3, 2}}, {"output_shape", V{10, 8}}})),
            "f32[1,2,10,8]");
  EXPECT_EQ(ty(b.op("ConvTranspose", {xo, wo}, 1, {{"strides", V{2, 2}}, {"auto_pad", "SAME_UPPER"}})), "f32[1,2,6,6]");
  // Symbolic spatial sizes: kept where the size is the input's, unknown where it depends on it.
  Value* xs = b.f32("xs", S({"N", 3, "H", "W"}));
  EXPECT_EQ(ty(b.op("ConvTranspose", {xs, w}, 1, {{"auto_pad", "SAME_LOWER"}})), "f32[N,4,H,W]");
  EXPECT_EQ(ty(b.op("ConvTranspose", {xs, w}, 1, {{"strides", V{2, 2}}})), "f32[N,4,?,?]");
  EXPECT_EQ(ty(b.op("ConvTranspose", {xs, w}, 1, {{"output_shape", V{20, 30}}})), "f32[N,4,20,30]");
}

TEST(OpTableNn, ConvTransposeErrors) {
  Builder b;
  using V = std::vector<int64_t>;
  Value* x = b.f32("x", S({"N", 3, 8, 8}));
  Node* ch = b.add("ConvTranspose", {x, b.f32("w", S({2, 4, 3, 3}))});
  EXPECT_NE(error_of(ch).find("X's channels differ from W's first dimension"), std::string::npos) << error_of(ch);
  Node* op =
      b.add("ConvTranspose", {x, b.f32("w2", S({3, 4, 3, 3}))}, 1, {{"strides", V{2, 2}}, {"output_padding", V{2, 0}}});
  EXPECT_NE(error_of(op).find("output_padding 2 on spatial axis 0 must be smaller than the stride 2"),
            std::string::npos)
      << error_of(op);
  Node* bias = b.add("ConvTranspose", {x, b.f32("w3", S({3, 4, 3, 3})), b.f32("b3", S({3}))});
  EXPECT_NE(error_of(bias).find("input 2 (B) size differs from the output channels"), std::string::npos)
      << error_of(bias);
  Node* pads = b.add("ConvTranspose", {b.f32("x4", S({1, 3, 1, 1})), b.f32("w4", S({3, 4, 1, 1}))}, 1,
                     {{"pads", V{1, 1, 1, 1}}});
  EXPECT_NE(error_of(pads).find("pads 1+1 exceed the full output size 1"), std::string::npos) << error_of(pads);
  Node* grp = b.add("ConvTranspose", {x, b.f32("w5", S({3, 4, 3, 3}))}, 1, {{"group", 2}});
  EXPECT_NE(error_of(grp).find("not divisible by group = 2"), std::string::npos) << error_of(grp);
  Node* os = b.add("ConvTranspose", {x, b.f32("w6", S({3, 4, 3, 3}))}, 1, {{"output_shape", V{1, 2, 3}}});
  EXPECT_NE(error_of(os).find("attribute 'output_shape' has 3 values, expected 2"), std::string::npos) << error_of(os);
}

TEST(OpTableNn, PoolingOutputSizes) {
  Builder b;
  Value* x = b.f32("x", S({"N", 3, 32, 32}));
  auto k = [](std::vector<int64_t> v) { return Attribute(std::move(v)); };
  Node* mp = b.op("MaxPool", {x}, 2, {{"kernel_shape", k({2, 2})}, {"strides", k({2, 2})}});
  EXPECT_EQ(ty(mp), "f32[N,3,16,16]");
  EXPECT_EQ(ty(mp, 1), "i64[N,3,16,16]");
  EXPECT_EQ(ty(b.op("MaxPool", {x}, 1, {{"kernel_shape", k({3, 3})}, {"strides", k({2, 2})}})), "f32[N,3,15,15]");
  EXPECT_EQ(ty(b.op("MaxPool", {x}, 1, {{"kernel_shape", k({3, 3})}, {"strides", k({2, 2})}, {"ceil_mode", 1}})),
            "f32[N,3,16,16]");
  // ceil_mode drops a last window that would start in the end padding (PyTorch's rule).
  EXPECT_EQ(ty(b.op("MaxPool", {b.f32("x5", S({1, 1, 5}))}, 1,
                    {{"kernel_shape", k({2})}, {"strides", k({3})}, {"pads", k({1, 1})}, {"ceil_mode", 1}})),
            "f32[1,1,2]");
  EXPECT_EQ(ty(b.op("AveragePool", {b.f32("x6", S({1, 1, 6}))}, 1,
                    {{"kernel_shape", k({3})}, {"strides", k({2})}, {"pads", k({1, 1})}, {"ceil_mode", 1}})),
            "f32[1,1,4]");
  EXPECT_EQ(ty(b.op("MaxPool", {b.f32("x10", S({1, 1, 10}))}, 1, {{"kernel_shape", k({3})}, {"dilations", k({2})}})),
            "f32[1,1,6]");
  EXPECT_EQ(ty(b.op("AveragePool", {b.f32("x3d", S({1, 1, 7, 8, 9}))}, 1,
                    {{"kernel_shape", k({2, 2, 2})}, {"strides", k({2, 2, 2})}, {"ceil_mode", 1}})),
            "f32[1,1,4,4,5]");
  EXPECT_EQ(ty(b.op("AveragePool", {b.f32("xs", S({"N", 8, "H", "W"}))}, 1,
                    {{"kernel_shape", k({3, 3})}, {"pads", k({1, 1, 1, 1})}, {"count_include_pad", 1}})),
            "f32[N,8,H,W]");
  EXPECT_EQ(ty(b.op("MaxPool", {b.f32("xsame", S({"N", 8, 9, 9}))}, 1,
                    {{"kernel_shape", k({3, 3})}, {"strides", k({2, 2})}, {"auto_pad", "SAME_UPPER"}})),
            "f32[N,8,5,5]");
  EXPECT_EQ(ty(b.op("GlobalAveragePool", {b.f32("g", S({"N", 64, 7, 7}))})), "f32[N,64,1,1]");
  EXPECT_EQ(ty(b.op("GlobalAveragePool", {b.f32("g1", S({"N", 64, "L"}))})), "f32[N,64,1]");
  Node* nok = b.add("MaxPool", {x});
  EXPECT_NE(error_of(nok).find("'kernel_shape' is required"), std::string::npos);
  Node* pad = b.add("MaxPool", {x}, 1, {{"kernel_shape", k({2, 2})}, {"pads", k({2, 0, 0, 0})}});
  EXPECT_NE(error_of(pad).find("smaller than the kernel size"), std::string::npos) << error_of(pad);
  Node* rank = b.add("AveragePool", {x}, 1, {{"kernel_shape", k({2})}});
  EXPECT_NE(error_of(rank).find("2 spatial axes"), std::string::npos) << error_of(rank);
}

// ---- normalisation, softmax, dropout, losses ------------------------------------------------------

TEST(OpTableNn, BatchNormalizationOutputsPerOpset) {
  Builder b(15);
  Value* x = b.f32("x", S({"N", 8, 4, 4}));
  std::vector<Value*> ins = {x, b.f32("s", S({8})), b.f32("bb", S({8})), b.f32("m", S({8})), b.f32("v", S({8}))};
  EXPECT_EQ(ty(b.op("BatchNormalization", ins)), "f32[N,8,4,4]");
  Node* tr = b.op("BatchNormalization", ins, 3, {{"training_mode", 1}});
  EXPECT_EQ(ty(tr, 0), "f32[N,8,4,4]");
  EXPECT_EQ(ty(tr, 1), "f32[8]");
  EXPECT_EQ(ty(tr, 2), "f32[8]");
  Node* bad = b.add("BatchNormalization", ins, 3);
  EXPECT_NE(error_of(bad).find("training_mode=1"), std::string::npos) << error_of(bad);
  Builder c(13);  // BatchNormalization-9: up to five outputs
  std::vector<Value*> ins13 = {c.f32("x", S({"N", 3})), c.f32("s", S({3})), c.f32("bb", S({3})), c.f32("m", S({3})),
                               c.f32("v", S({3}))};
  Node* n13 = c.op("BatchNormalization", ins13, 5);
  EXPECT_EQ(ty(n13, 0), "f32[N,3]");
  EXPECT_EQ(ty(n13, 4), "f32[3]");
  Node* ch = c.add("BatchNormalization", {ins13[0], c.f32("s4", S({4})), ins13[2], ins13[3], ins13[4]});
  EXPECT_NE(error_of(ch).find("input 1 (scale) size differs"), std::string::npos) << error_of(ch);
}

TEST(OpTableNn, LayerNormalizationSoftmaxDropout) {
  Builder b(17);
  Value* x = b.f32("x", S({"B", "T", 64}));
  Node* ln = b.op("LayerNormalization", {x, b.f32("g", S({64})), b.f32("bt", S({64}))}, 3);
  EXPECT_EQ(ty(ln, 0), "f32[B,T,64]");
  EXPECT_EQ(ty(ln, 1), "f32[B,T,1]");
  EXPECT_EQ(ty(ln, 2), "f32[B,T,1]");
  Node* ln1 = b.op("LayerNormalization", {b.in("h", kF16, S({"B", 4, 8})), b.in("g2", kF16, S({4, 8}))}, 2,
                   {{"axis", 1}});
  EXPECT_EQ(ty(ln1, 0), "f16[B,4,8]");
  EXPECT_EQ(ty(ln1, 1), "f32[B,1,1]");  // stash_type float
  Node* badg = b.add("LayerNormalization", {x, b.f32("g3", S({32}))});
  EXPECT_NE(error_of(badg).find("does not broadcast"), std::string::npos) << error_of(badg);
  EXPECT_EQ(ty(b.op("Softmax", {x})), "f32[B,T,64]");
  EXPECT_EQ(ty(b.op("LogSoftmax", {x}, 1, {{"axis", 1}})), "f32[B,T,64]");
  Node* ax = b.add("Softmax", {x}, 1, {{"axis", 3}});
  EXPECT_NE(error_of(ax).find("Softmax 'Softmax_5': axis 3 is out of range for rank 3"), std::string::npos)
      << error_of(ax);
  Node* d = b.op("Dropout", {x, b.fscalar("ratio", 0.1f), b.bools("tm", {1}, true)}, 2);
  EXPECT_EQ(ty(d, 0), "f32[B,T,64]");
  EXPECT_EQ(ty(d, 1), "bool[B,T,64]");
  Node* badr = b.add("Dropout", {x, b.fscalar("r2", 1.5f)});
  EXPECT_NE(error_of(badr).find("ratio 1.5 must be in [0, 1)"), std::string::npos) << error_of(badr);
}

TEST(OpTableNn, LossOps) {
  Builder b;
  Value* s2 = b.f32("scores", S({"N", 10}));
  Value* y = b.in("labels", kI64, S({"N"}));
  Node* mean = b.op("SoftmaxCrossEntropyLoss", {s2, y}, 2);
  EXPECT_EQ(ty(mean, 0), "f32[]");
  EXPECT_EQ(ty(mean, 1), "f32[N,10]");
  Value* s4 = b.f32("s4", S({"N", 5, "H", 7}));
  Value* y3 = b.in("y3", kI32, S({"N", "H", 7}));
  EXPECT_EQ(ty(b.op("SoftmaxCrossEntropyLoss", {s4, y3, b.f32("w", S({5}))}, 1,
                    {{"reduction", "none"}, {"ignore_index", -100}})),
            "f32[N,H,7]");
  EXPECT_EQ(ty(b.op("SoftmaxCrossEntropyLoss", {s2, y}, 1, {{"reduction", "sum"}})), "f32[]");
  EXPECT_EQ(ty(b.op("NegativeLogLikelihoodLoss", {s4, y3}, 1, {{"reduction", "none"}})), "f32[N,H,7]");
  EXPECT_EQ(ty(b.op("NegativeLogLikelihoodLoss", {s2, y})), "f32[]");
  Node* bad = b.add("SoftmaxCrossEntropyLoss", {s2, y}, 1, {{"reduction", "avg"}});
  EXPECT_NE(error_of(bad).find("'reduction' must be none, mean or sum"), std::string::npos);
  Node* rank = b.add("NegativeLogLikelihoodLoss", {s4, y});
  EXPECT_NE(error_of(rank).find("labels must be scores' shape without axis 1"), std::string::npos) << error_of(rank);
  Node* fl = b.add("SoftmaxCrossEntropyLoss", {s2, b.f32("yf", S({"N"}))});
  EXPECT_NE(error_of(fl).find("expected i32 or i64"), std::string::npos) << error_of(fl);
}

// ---- shape ops --------------------------------------------------------------------------------------

TEST(OpTableShape, ReshapeWithConstantShapes) {
  Builder b;
  Value* x = b.f32("x", S({"N", 16, 32}));
  EXPECT_EQ(ty(b.op("Reshape", {x, b.ints("s1", {0, -1})})), "f32[N,512]");
  EXPECT_EQ(ty(b.op("Reshape", {x, b.ints("s2", {-1, 32})})), "f32[16*N,32]");
  EXPECT_EQ(ty(b.op("Reshape", {x, b.ints("s3", {0, 0, 4, 8})})), "f32[N,16,4,8]");
  EXPECT_EQ(ty(b.op("Reshape", {x, b.ints("s4", {0, 4, -1, 2})})), "f32[N,4,64,2]");
  Value* st = b.f32("st", S({6, 4}));
  EXPECT_EQ(ty(b.op("Reshape", {st, b.ints("s5", {3, -1})})), "f32[3,8]");
  EXPECT_EQ(ty(b.op("Reshape", {st, b.ints("s6", {24})})), "f32[24]");
  EXPECT_EQ(ty(b.op("Reshape", {b.f32("y", S({"B", "T", 64})), b.ints("s7", {-1, 64})})), "f32[B*T,64]");
  EXPECT_EQ(ty(b.op("Reshape", {x, b.in("dyn", kI64, S({3}))})), "f32[?,?,?]");
  EXPECT_EQ(ty(b.op("Reshape", {x, b.in("dyn2", kI64, S({"K"}))})), "f32[...]");
  Node* bad = b.add("Reshape", {st, b.ints("s8", {5, -1})});
  EXPECT_NE(error_of(bad).find("24 is not a multiple of 5"), std::string::npos) << error_of(bad);
  Node* count = b.add("Reshape", {st, b.ints("s9", {5, 5})});
  EXPECT_NE(error_of(count).find("(25 elements)"), std::string::npos) << error_of(count);
  Node* two = b.add("Reshape", {x, b.ints("s10", {-1, -1})});
  EXPECT_NE(error_of(two).find("more than one -1"), std::string::npos);
  // allowzero (opset 14+): 0 is a real size.
  Builder c(14);
  EXPECT_EQ(ty(c.op("Reshape", {c.f32("z", Shape::of({0, 4})), c.ints("s", {4, 0})}, 1, {{"allowzero", 1}})), "f32[4,0]");
  EXPECT_EQ(ty(c.op("Reshape", {c.f32("w", S({2, 4})), c.ints("t", {0, 2, 2})})), "f32[2,2,2]");
  Node* az = c.add("Reshape", {c.f32("v", S({2, 4})), c.ints("u", {0, -1})}, 1, {{"allowzero", 1}});
  EXPECT_NE(error_of(az).find("both 0 and -1"), std::string::npos);
}

TEST(OpTableShape, PyTorchShapeChainKeepsTheSymbolicBatch) {
  // x.view(x.size(0), 16, 4, 8) as exported: Shape -> Gather -> Unsqueeze -> Concat -> Reshape.
  for (int opset : {13, 17, 18, 21}) {
    Builder b(opset);
    Value* x = b.f32("x", S({"N", 16, 32}));
    Node* shape = b.op("Shape", {x});
    EXPECT_EQ(ty(shape), "i64[3]");
    EXPECT_EQ(sym(shape), "[N,16,32]");
    Node* g0 = b.op("Gather", {shape->output(0), b.scalar("zero", 0)}, 1, {{"axis", 0}});
    EXPECT_EQ(ty(g0), "i64[]");
    EXPECT_EQ(sym(g0), "[N]");
    Node* u0 = b.op("Unsqueeze", {g0->output(0), b.ints("ax0", {0})});
    EXPECT_EQ(ty(u0), "i64[1]");
    EXPECT_EQ(sym(u0), "[N]");
    Node* cat = b.op("Concat", {u0->output(0), b.ints("c16", {16}), b.ints("c4", {4}), b.ints("c8", {8})}, 1,
                     {{"axis", 0}});
    EXPECT_EQ(ty(cat), "i64[4]");
    EXPECT_EQ(sym(cat), "[N,16,4,8]");
    Node* r = b.op("Reshape", {x, cat->output(0)});
    EXPECT_EQ(ty(r), "f32[N,16,4,8]") << "opset " << opset;
    // x.view(x.size(0), -1): the -1 entry is lost in the symbolic data but fixed by the element count.
    Node* cat2 = b.op("Concat", {u0->output(0), b.ints("m1", {-1})}, 1, {{"axis", 0}});
    EXPECT_EQ(ty(b.op("Reshape", {x, cat2->output(0)})), "f32[N,512]");
  }
}

TEST(OpTableShape, ShapeArithmeticOnSymbolicData) {
  Builder b(13);
  Value* x = b.f32("x", S({"B", "T", 10}));
  Value* s = b.op("Shape", {x})->output(0);
  Value* bdim = b.op("Gather", {s, b.scalar("i0", 0)})->output(0);
  Value* tdim = b.op("Gather", {s, b.scalar("i1", 1)})->output(0);
  Node* last = b.op("Gather", {s, b.scalar("im1", -1)});
  EXPECT_EQ(sym(last), "[10]");
  Node* bt = b.op("Mul", {bdim, tdim});
  EXPECT_EQ(sym(bt), "[B*T]");
  Node* div = b.op("Div", {bt->output(0), tdim});
  EXPECT_EQ(sym(div), "[B]");
  Node* add = b.op("Add", {tdim, b.scalar("one", 1)});
  EXPECT_EQ(sym(add), "[?]");
  Node* sub = b.op("Sub", {tdim, tdim});
  EXPECT_EQ(sym(sub), "[0]");
  // logits.view(-1, logits.size(-1))
  Node* u = b.op("Unsqueeze", {last->output(0), b.ints("a0", {0})});
  Node* cat = b.op("Concat", {b.ints("neg", {-1}), u->output(0)}, 1, {{"axis", 0}});
  EXPECT_EQ(ty(b.op("Reshape", {x, cat->output(0)})), "f32[B*T,10]");
  // x.view(B*T, 10) through the Mul.
  Node* ubt = b.op("Unsqueeze", {bt->output(0), b.ints("a1", {0})});
  Node* cat2 = b.op("Concat", {ubt->output(0), b.ints("ten", {10})}, 1, {{"axis", 0}});
  EXPECT_EQ(ty(b.op("Reshape", {x, cat2->output(0)})), "f32[B*T,10]");
  // shape[1:], shape[:-1], reversed.
  Node* tail = b.op("Slice", {s, b.ints("st", {1}), b.ints("en", {kInt64Max})});
  EXPECT_EQ(ty(tail), "i64[2]");
  EXPECT_EQ(sym(tail), "[T,10]");
  Node* head = b.op("Slice", {s, b.ints("st2", {0}), b.ints("en2", {-1})});
  EXPECT_EQ(sym(head), "[B,T]");
  Node* rev = b.op("Slice", {s, b.ints("st3", {-1}), b.ints("en3", {std::numeric_limits<int64_t>::min()}),
                             b.ints("ax3", {0}), b.ints("sp3", {-1})});
  EXPECT_EQ(sym(rev), "[10,T,B]");
  // Cast to int32 and back keeps the data; Squeeze of a 1-vector gives the scalar.
  Node* c32 = b.op("Cast", {tail->output(0)}, 1, {{"to", 6}});
  EXPECT_EQ(ty(c32), "i32[2]");
  EXPECT_EQ(sym(c32), "[T,10]");
  Node* sq = b.op("Squeeze", {u->output(0), b.ints("a2", {0})});
  EXPECT_EQ(ty(sq), "i64[]");
  EXPECT_EQ(sym(sq), "[10]");
  // Size and Gather with a vector of indices.
  Node* size = b.op("Size", {x});
  EXPECT_EQ(ty(size), "i64[]");
  EXPECT_EQ(sym(size), "[10*B*T]");
  Node* gv = b.op("Gather", {s, b.ints("idx", {2, 0})});
  EXPECT_EQ(sym(gv), "[10,B]");
  // mask[:T, :T] with T from the shape: the symbolic end equals the dim.
  Value* tvec = b.op("Unsqueeze", {tdim, b.ints("a3", {0})})->output(0);
  Node* mask = b.op("Slice", {b.f32("mask", S({"T", "T"})), b.ints("z0", {0}), tvec, b.ints("ax0", {0})});
  EXPECT_EQ(ty(mask), "f32[T,T]");
  Node* mask2 = b.op("Slice", {b.f32("mask2", S({"T", 64})), b.ints("z1", {0}), tvec, b.ints("ax1", {1})});
  EXPECT_EQ(ty(mask2), "f32[T,?]");  // min(T, 64)
  // Shape-driven constructors.
  EXPECT_EQ(ty(b.op("ConstantOfShape", {s})), "f32[B,T,10]");
  EXPECT_EQ(ty(b.op("Expand", {b.f32("row", S({1, 10})), s})), "f32[B,T,10]");
  Node* ar = b.op("Range", {b.scalar("r0", 0), tdim, b.scalar("r1", 1)});
  EXPECT_EQ(ty(ar), "i64[T]");
  // Expand(y, Where(Equal(shape, -1), 1, shape)) as exported for expand_as with -1 handling.
  Node* eq = b.op("Equal", {s, b.ints("m1", {-1})});
  EXPECT_EQ(sym(eq), "[0,0,0]");  // a dim is never -1
  Node* eq2 = b.op("Equal", {tail->output(0), b.ints("m2", {10, 10})});
  EXPECT_EQ(sym(eq2), "[?,1]");
  Node* wh = b.op("Where", {eq2->output(0), b.ints("ones", {1, 1}), tail->output(0)});
  EXPECT_EQ(sym(wh), "[?,1]");
  Node* wh2 = b.op("Where", {b.bools("cnd", {0, 1}),
                             b.ints("o2", {7, 7}), tail->output(0)});
  EXPECT_EQ(sym(wh2), "[T,7]");
  // Split of a shape vector.
  Node* sp = b.op("Split", {s, b.ints("parts", {1, 2})}, 2);
  EXPECT_EQ(sym(sp, 0), "[B]");
  EXPECT_EQ(sym(sp, 1), "[T,10]");
  // Identity and Reshape pass the data on.
  EXPECT_EQ(sym(b.op("Identity", {s})), "[B,T,10]");
  EXPECT_EQ(sym(b.op("Reshape", {bdim, b.ints("one1", {1})})), "[B]");
  // Constants carry their data.
  Node* k = b.op("Constant", {}, 1, {{"value_ints", std::vector<int64_t>{3, 4}}});
  EXPECT_EQ(ty(k), "i64[2]");
  EXPECT_EQ(sym(k), "[3,4]");
  Node* cs = b.op("ConstantOfShape", {b.ints("three", {3})}, 1, {{"value", Tensor::from_vector<int64_t>({1}, {1})}});
  EXPECT_EQ(ty(cs), "i64[3]");
  EXPECT_EQ(sym(cs), "[1,1,1]");
  // Floats carry no symbolic data.
  EXPECT_EQ(sym(b.op("Cast", {s}, 1, {{"to", 1}})), "none");
}

TEST(OpTableShape, ConstantNodesCountAsConstantInputs) {
  // Before canonicalize lifts Constant nodes, their attributes still give exact values, -1 included.
  Builder b(13);
  Value* x = b.f32("x", S({"N", 16, 32}));
  auto constant = [&](std::vector<int64_t> v) {
    return b.op("Constant", {}, 1, {{"value", Tensor::from_vector<int64_t>({static_cast<int64_t>(v.size())}, v)}})
        ->output(0);
  };
  EXPECT_EQ(ty(b.op("Reshape", {x, constant({-1, 32})})), "f32[16*N,32]");
  EXPECT_EQ(ty(b.op("ReduceSum", {x, constant({-1})}, 1, {{"keepdims", 0}})), "f32[N,16]");
  // Layer-norm expansion: ConstantOfShape(Neg(axis)) gives as many 1s as reduced axes.
  Node* neg = b.op("Neg", {constant({-2})});
  EXPECT_EQ(sym(neg), "[2]");
  Node* ones = b.op("ConstantOfShape", {neg->output(0)}, 1, {{"value", Tensor::from_vector<int64_t>({1}, {1})}});
  EXPECT_EQ(ty(ones), "i64[2]");
  EXPECT_EQ(sym(ones), "[1,1]");
  Node* prefix = b.op("Slice", {b.op("Shape", {x})->output(0), constant({0}), constant({-2})});
  EXPECT_EQ(sym(prefix), "[N]");
  Node* cat = b.op("Concat", {prefix->output(0), ones->output(0)}, 1, {{"axis", 0}});
  EXPECT_EQ(ty(b.op("Reshape", {b.f32("m", S({"N", 1})), cat->output(0)})), "f32[N,1,1]");
  Node* add = b.op("Add", {constant({-1}), b.op("Size", {x})->output(0)});
  EXPECT_EQ(sym(add), "[?]");  // 512*N - 1 has no Dim form
  Node* add2 = b.op("Add", {constant({3}), constant({-1})});
  EXPECT_EQ(sym(add2), "[2]");
}

TEST(OpTableShape, TransposeFlattenTileTrilu) {
  Builder b;
  Value* x = b.f32("x", S({"N", 3, 4, 5}));
  EXPECT_EQ(ty(b.op("Transpose", {x}, 1, {{"perm", std::vector<int64_t>{0, 2, 3, 1}}})), "f32[N,4,5,3]");
  EXPECT_EQ(ty(b.op("Transpose", {x})), "f32[5,4,3,N]");
  Node* bad = b.add("Transpose", {x}, 1, {{"perm", std::vector<int64_t>{0, 1, 1, 2}}});
  EXPECT_NE(error_of(bad).find("is not a permutation"), std::string::npos);
  EXPECT_EQ(ty(b.op("Flatten", {x})), "f32[N,60]");
  EXPECT_EQ(ty(b.op("Flatten", {x}, 1, {{"axis", 0}})), "f32[1,60*N]");
  EXPECT_EQ(ty(b.op("Flatten", {x}, 1, {{"axis", -1}})), "f32[12*N,5]");
  EXPECT_EQ(ty(b.op("Flatten", {x}, 1, {{"axis", 4}})), "f32[60*N,1]");
  Node* fl = b.add("Flatten", {x}, 1, {{"axis", 5}});
  EXPECT_NE(error_of(fl).find("axis 5 is out of range"), std::string::npos);
  EXPECT_EQ(ty(b.op("Tile", {x, b.ints("r", {1, 2, 1, 3})})), "f32[N,6,4,15]");
  EXPECT_EQ(ty(b.op("Tile", {x, b.ints("r2", {2, 1, 1, 1})})), "f32[2*N,3,4,5]");
  EXPECT_EQ(ty(b.op("Tile", {x, b.in("rd", kI64, S({4}))})), "f32[?,?,?,?]");
  Node* tl = b.add("Tile", {x, b.ints("r3", {2, 2})});
  EXPECT_NE(error_of(tl).find("has 2 entries but the input has rank 4"), std::string::npos);
  Builder c(14);
  EXPECT_EQ(ty(c.op("Trilu", {c.f32("m", S({"B", 8, 8})), c.scalar("k", 1)}, 1, {{"upper", 0}})), "f32[B,8,8]");
}

TEST(OpTableShape, SqueezeAndUnsqueezeTakeAxesInputs) {
  for (int opset : {13, 21}) {
    Builder b(opset);
    Value* x = b.f32("x", S({"N", 1, 4, 1}));
    EXPECT_EQ(ty(b.op("Squeeze", {x, b.ints("a", {1})})), "f32[N,4,1]");
    EXPECT_EQ(ty(b.op("Squeeze", {x, b.ints("b", {-1, 1})})), "f32[N,4]");
    EXPECT_EQ(ty(b.op("Squeeze", {b.f32("s", S({1, 3, 1}))})), "f32[3]");
    EXPECT_EQ(ty(b.op("Squeeze", {x})), "f32[...]");  // N might be 1
    EXPECT_EQ(ty(b.op("Squeeze", {x, b.in("dyn", kI64, S({2}))})), "f32[?,?]");
    EXPECT_EQ(ty(b.op("Unsqueeze", {x, b.ints("c", {0, -1})})), "f32[1,N,1,4,1,1]");
    EXPECT_EQ(ty(b.op("Unsqueeze", {b.f32("v", S({"T"})), b.ints("d", {1})})), "f32[T,1]");
    EXPECT_EQ(ty(b.op("Unsqueeze", {b.f32("sc", Shape()), b.ints("e", {0})})), "f32[1]");
    EXPECT_EQ(ty(b.op("Unsqueeze", {x, b.in("dyn2", kI64, S({1}))})), "f32[?,?,?,?,?]");
    Node* bad = b.add("Squeeze", {x, b.ints("f", {2})});
    EXPECT_NE(error_of(bad).find("cannot squeeze axis 2 of size 4"), std::string::npos) << error_of(bad);
    Node* rng = b.add("Unsqueeze", {x, b.ints("g", {6})});
    EXPECT_NE(error_of(rng).find("axis 6 is out of range for rank 5"), std::string::npos) << error_of(rng);
    Node* dup = b.add("Unsqueeze", {x, b.ints("h", {0, 0})});
    EXPECT_NE(error_of(dup).find("repeated"), std::string::npos);
  }
}

TEST(OpTableShape, ConcatShapes) {
  Builder b;
  Value* a = b.f32("a", S({"N", 3, 8}));
  EXPECT_EQ(ty(b.op("Concat", {a, b.f32("b", S({"N", 5, 8}))}, 1, {{"axis", 1}})), "f32[N,8,8]");
  EXPECT_EQ(ty(b.op("Concat", {a, b.f32("c", S({"M", 3, 8}))}, 1, {{"axis", 0}})), "f32[?,3,8]");
  EXPECT_EQ(ty(b.op("Concat", {a, b.f32("d", S({"N", 3, "K"}))}, 1, {{"axis", -1}})), "f32[N,3,?]");
  EXPECT_EQ(ty(b.op("Concat", {a, b.f32("e", S({2, 3, 1}))}, 1, {{"axis", 2}})), "f32[2,3,9]");
  Node* bad = b.add("Concat", {a, b.f32("f", S({"N", 4, 8}))}, 1, {{"axis", 2}});
  EXPECT_NE(error_of(bad).find("Concat 'Concat_4': input 1 ('f') differs on axis 1"), std::string::npos)
      << error_of(bad);
  Node* noax = b.add("Concat", {a, a});
  EXPECT_NE(error_of(noax).find("attribute 'axis' is required"), std::string::npos);
  Node* rank = b.add("Concat", {a, b.f32("g", S({3, 8}))}, 1, {{"axis", 0}});
  EXPECT_NE(error_of(rank).find("of rank 2, other inputs have rank 3"), std::string::npos) << error_of(rank);
}

TEST(OpTableShape, SplitAcrossOpsets) {
  Builder b(13);
  Value* x = b.f32("x", S({"N", 10, 6}));
  Node* s = b.op("Split", {x, b.ints("sz", {3, 7})}, 2, {{"axis", 1}});
  EXPECT_EQ(ty(s, 0), "f32[N,3,6]");
  EXPECT_EQ(ty(s, 1), "f32[N,7,6]");
  Node* even = b.op("Split", {x}, 3, {{"axis", -1}});
  EXPECT_EQ(ty(even, 2), "f32[N,10,2]");
  Node* sym_axis = b.op("Split", {x}, 2);
  EXPECT_EQ(ty(sym_axis, 0), "f32[?,10,6]");
  Node* uneven = b.add("Split", {x}, 3, {{"axis", 1}});
  EXPECT_NE(error_of(uneven).find("does not split evenly into 3 outputs"), std::string::npos) << error_of(uneven);
  Node* sum = b.add("Split", {x, b.ints("sz2", {3, 3})}, 2, {{"axis", 1}});
  EXPECT_NE(error_of(sum).find("split sizes add up to 6 but axis 1 has size 10"), std::string::npos);
  Node* num13 = b.add("Split", {x}, 2, {{"num_outputs", 2}});
  EXPECT_NE(error_of(num13).find("'num_outputs' needs opset 18"), std::string::npos);

  Builder c(18);
  Value* y = c.f32("y", S({"N", 10}));
  Node* n3 = c.op("Split", {y}, 3, {{"axis", 1}, {"num_outputs", 3}});
  EXPECT_EQ(ty(n3, 0), "f32[N,4]");
  EXPECT_EQ(ty(n3, 1), "f32[N,4]");
  EXPECT_EQ(ty(n3, 2), "f32[N,2]");
  Node* in18 = c.op("Split", {y, c.ints("sz", {1, 9})}, 2, {{"axis", 1}});
  EXPECT_EQ(ty(in18, 1), "f32[N,9]");
  Node* neither = c.add("Split", {y}, 2, {{"axis", 1}});
  EXPECT_NE(error_of(neither).find("needs input 'split' or attribute 'num_outputs'"), std::string::npos);
  Node* count = c.add("Split", {y}, 2, {{"axis", 1}, {"num_outputs", 3}});
  EXPECT_NE(error_of(count).find("'num_outputs' = 3 but the node has 2 outputs"), std::string::npos);
  Node* both = c.add("Split", {y, c.ints("sz3", {5, 5})}, 2, {{"axis", 1}, {"num_outputs", 2}});
  EXPECT_NE(error_of(both).find("not both"), std::string::npos);
}

TEST(OpTableShape, SliceShapes) {
  Builder b;
  Value* x = b.f32("x", S({"N", 10, 8}));
  EXPECT_EQ(ty(b.op("Slice", {x, b.ints("s1", {1, 0}), b.ints("e1", {-1, kInt64Max}), b.ints("a1", {1, 2})})),
            "f32[N,8,8]");
  EXPECT_EQ(ty(b.op("Slice", {x, b.ints("s2", {0}), b.ints("e2", {8}), b.ints("a2", {-1}), b.ints("t2", {3})})),
            "f32[N,10,3]");
  EXPECT_EQ(ty(b.op("Slice", {x, b.ints("s3", {-1}), b.ints("e3", {-kInt64Max}), b.ints("a3", {1}), b.ints("t3", {-2})})),
            "f32[N,5,8]");
  EXPECT_EQ(ty(b.op("Slice", {x, b.ints("s4", {20}), b.ints("e4", {30}), b.ints("a4", {1})})), "f32[N,0,8]");
  EXPECT_EQ(ty(b.op("Slice", {x, b.ints("s5", {0}), b.ints("e5", {kInt64Max}), b.ints("a5", {0})})), "f32[N,10,8]");
  EXPECT_EQ(ty(b.op("Slice", {x, b.ints("s6", {0}), b.ints("e6", {2}), b.ints("a6", {0})})), "f32[?,10,8]");
  // Without axes the first len(starts) axes are sliced.
  EXPECT_EQ(ty(b.op("Slice", {x, b.ints("s7", {0, 2}), b.ints("e7", {kInt64Max, 5})})), "f32[N,3,8]");
  // Unknown starts with known axes: only those axes are unknown.
  EXPECT_EQ(ty(b.op("Slice", {x, b.in("sd", kI64, S({1})), b.ints("e8", {5}), b.ints("a8", {2})})), "f32[N,10,?]");
  EXPECT_EQ(ty(b.op("Slice", {x, b.in("sd2", kI64, S({1})), b.ints("e9", {5}), b.in("ad", kI64, S({1}))})),
            "f32[?,?,?]");
  Node* step0 = b.add("Slice", {x, b.ints("s10", {0}), b.ints("e10", {5}), b.ints("a10", {1}), b.ints("t10", {0})});
  EXPECT_NE(error_of(step0).find("'steps' contains 0"), std::string::npos);
  Node* len = b.add("Slice", {x, b.ints("s11", {0, 0}), b.ints("e11", {5}), b.ints("a11", {1})});
  EXPECT_NE(error_of(len).find("'ends' has 1 entries but 'starts' has 2"), std::string::npos) << error_of(len);
  Node* ax = b.add("Slice", {x, b.ints("s12", {0}), b.ints("e12", {5}), b.ints("a12", {3})});
  EXPECT_NE(error_of(ax).find("axis 3 is out of range for rank 3"), std::string::npos) << error_of(ax);
}

TEST(OpTableShape, GatherShapes) {
  Builder b;
  Value* emb = b.f32("emb", S({1000, 64}));
  EXPECT_EQ(ty(b.op("Gather", {emb, b.in("tok", kI64, S({"B", "T"}))})), "f32[B,T,64]");
  Value* x = b.f32("x", S({"N", 5, 7}));
  EXPECT_EQ(ty(b.op("Gather", {x, b.scalar("i", 2)}, 1, {{"axis", 1}})), "f32[N,7]");
  EXPECT_EQ(ty(b.op("Gather", {x, b.ints("iv", {0, -1})}, 1, {{"axis", -1}})), "f32[N,5,2]");
  EXPECT_EQ(ty(b.op("Gather", {x, b.in("i32", kI32, S({3, 2}))}, 1, {{"axis", 0}})), "f32[3,2,5,7]");
  Node* oob = b.add("Gather", {x, b.scalar("big", 5)}, 1, {{"axis", 1}});
  EXPECT_NE(error_of(oob).find("index 5 is out of range for axis 1 of size 5"), std::string::npos) << error_of(oob);
  Node* ax = b.add("Gather", {x, b.scalar("z", 0)}, 1, {{"axis", 3}});
  EXPECT_NE(error_of(ax).find("axis 3 is out of range for rank 3"), std::string::npos);
  Node* ft = b.add("Gather", {x, b.f32("fi", S({2}))});
  EXPECT_NE(error_of(ft).find("input 1 ('fi') has type f32"), std::string::npos) << error_of(ft);
}

TEST(OpTableShape, ExpandPadShapeSizeConstants) {
  Builder b(13);
  EXPECT_EQ(ty(b.op("Expand", {b.f32("x", S({"N", 1, 4})), b.ints("s", {3, 1})})), "f32[N,3,4]");
  EXPECT_EQ(ty(b.op("Expand", {b.f32("y", S({3, 1})), b.ints("s2", {2, 1, 6})})), "f32[2,3,6]");
  EXPECT_EQ(ty(b.op("Expand", {b.f32("z", S({3, 1})), b.in("sd", kI64, S({3}))})), "f32[?,3,?]");
  Node* be = b.add("Expand", {b.f32("w", S({3, 2})), b.ints("s3", {4})});
  EXPECT_NE(error_of(be).find("shapes cannot broadcast: dimension 2 vs 4"), std::string::npos) << error_of(be);
  Value* p = b.f32("p", S({"N", 3, 4}));
  EXPECT_EQ(ty(b.op("Pad", {p, b.ints("pads", {0, 1, 2, 0, 1, -1})})), "f32[N,5,5]");
  EXPECT_EQ(ty(b.op("Pad", {p, b.ints("pads2", {1, 0, 0, 0, 0, 0})}, 1, {{"mode", "reflect"}})), "f32[?,3,4]");
  EXPECT_EQ(ty(b.op("Pad", {p, b.in("pd", kI64, S({6})), b.fscalar("cv", 0.5f)})), "f32[?,?,?]");
  Node* wrap = b.add("Pad", {p, b.ints("pads3", {0, 0, 0, 0, 0, 0})}, 1, {{"mode", "wrap"}});
  EXPECT_NE(error_of(wrap).find("attribute 'mode' must be constant, reflect, edge, got 'wrap'"), std::string::npos)
      << error_of(wrap);
  Node* plen = b.add("Pad", {p, b.ints("pads4", {1, 1})});
  EXPECT_NE(error_of(plen).find("has 2 entries, expected 6"), std::string::npos) << error_of(plen);
  Node* shp = b.add("Shape", {p}, 1, {{"start", 1}});
  EXPECT_NE(error_of(shp).find("need opset 15"), std::string::npos);
  EXPECT_EQ(ty(b.op("Size", {p})), "i64[]");
  EXPECT_EQ(ty(b.op("Constant", {}, 1, {{"value", Tensor::from_vector<float>({2, 3}, {1, 2, 3, 4, 5, 6})}})),
            "f32[2,3]");
  EXPECT_EQ(ty(b.op("Constant", {}, 1, {{"value_float", 2.5f}})), "f32[]");
  EXPECT_EQ(ty(b.op("Constant", {}, 1, {{"value_floats", std::vector<float>{1, 2}}})), "f32[2]");
  EXPECT_EQ(ty(b.op("Constant", {}, 1, {{"value_int", 7}})), "i64[]");
  Node* two = b.add("Constant", {}, 1, {{"value_int", 7}, {"value_float", 1.f}});
  EXPECT_NE(error_of(two).find("needs exactly one of"), std::string::npos);
  Node* str = b.add("Constant", {}, 1, {{"value_string", "hi"}});
  EXPECT_NE(error_of(str).find("not supported"), std::string::npos);
  EXPECT_EQ(ty(b.op("ConstantOfShape", {b.ints("cs", {2, 3})}, 1, {{"value", Tensor::from_vector<float>({1}, {1})}})),
            "f32[2,3]");
  EXPECT_EQ(ty(b.op("ConstantOfShape", {b.in("csd", kI64, S({2}))})), "f32[?,?]");
  EXPECT_EQ(ty(b.op("ConstantOfShape", {b.ints("empty", {})})), "f32[]");
  EXPECT_EQ(ty(b.op("Range", {b.scalar("a", 2), b.scalar("l", 11), b.scalar("d", 3)})), "i64[3]");
  EXPECT_EQ(ty(b.op("Range", {b.fscalar("fa", 1.f), b.fscalar("fl", 0.f), b.fscalar("fd", -0.25f)})), "f32[4]");
  EXPECT_EQ(ty(b.op("Range", {b.scalar("a2", 5), b.scalar("l2", 1), b.scalar("d2", 1)})), "i64[0]");
  Node* d0 = b.add("Range", {b.scalar("a3", 0), b.scalar("l3", 4), b.scalar("d3", 0)});
  EXPECT_NE(error_of(d0).find("delta is 0"), std::string::npos);

  Builder c(18);
  Value* q = c.f32("q", S({"N", 3, 4}));
  EXPECT_EQ(ty(c.op("Pad", {q, c.ints("pads", {1, 2}), nullptr, c.ints("axes", {-1})})), "f32[N,3,7]");
  EXPECT_EQ(ty(c.op("Pad", {q, c.ints("pads2", {1, 1, 2, 2}), c.fscalar("cv", 0.f), c.ints("axes2", {1, 2})})),
            "f32[N,6,7]");
  Builder d(19);
  EXPECT_EQ(ty(d.op("Pad", {d.f32("r", S({2, 3})), d.ints("pads", {1, 1, 1, 1})}, 1, {{"mode", "wrap"}})), "f32[4,5]");
  Builder e(15);
  Value* t = e.f32("t", S({"N", 3, 4}));
  Node* tail = e.op("Shape", {t}, 1, {{"start", 1}});
  EXPECT_EQ(ty(tail), "i64[2]");
  EXPECT_EQ(sym(tail), "[3,4]");
  Node* mid = e.op("Shape", {t}, 1, {{"start", -2}, {"end", -1}});
  EXPECT_EQ(sym(mid), "[3]");
  Node* none = e.op("Shape", {t}, 1, {{"start", 5}});
  EXPECT_EQ(ty(none), "i64[0]");
}

// ---- reductions ---------------------------------------------------------------------------------------

TEST(OpTableReduce, AxesAttributeBeforeOpset18AndInputAfter) {
  Builder b(13);
  Value* x = b.f32("x", S({"N", 4, 5}));
  EXPECT_EQ(ty(b.op("ReduceMean", {x}, 1, {{"axes", std::vector<int64_t>{-1}}})), "f32[N,4,1]");
  EXPECT_EQ(ty(b.op("ReduceMax", {x}, 1, {{"axes", std::vector<int64_t>{1, 2}}, {"keepdims", 0}})), "f32[N]");
  EXPECT_EQ(ty(b.op("ReduceMean", {x})), "f32[1,1,1]");
  EXPECT_EQ(ty(b.op("ReduceSum", {x, b.ints("ax", {0})}, 1, {{"keepdims", 0}})), "f32[4,5]");
  EXPECT_EQ(ty(b.op("ReduceSum", {x}, 1, {{"keepdims", 0}})), "f32[]");
  EXPECT_EQ(ty(b.op("ReduceSum", {x, b.ints("none", {})}, 1, {{"noop_with_empty_axes", 1}})), "f32[N,4,5]");
  EXPECT_EQ(ty(b.op("ReduceSum", {x, b.in("dyn", kI64, S({2}))}, 1, {{"keepdims", 0}})), "f32[?]");
  EXPECT_EQ(ty(b.op("ReduceSum", {x, b.in("dyn2", kI64, S({2}))})), "f32[?,?,?]");
  Node* in13 = b.add("ReduceMean", {x, b.ints("ax2", {1})});
  EXPECT_NE(error_of(in13).find("expects 1 input, got 2"), std::string::npos) << error_of(in13);
  Node* dup = b.add("ReduceMax", {x}, 1, {{"axes", std::vector<int64_t>{1, -2}}});
  EXPECT_NE(error_of(dup).find("ReduceMax 'ReduceMax_9': axes: axis -2 is repeated"), std::string::npos)
      << error_of(dup);
  Node* rng = b.add("ReduceSum", {x, b.ints("ax3", {3})});
  EXPECT_NE(error_of(rng).find("axis 3 is out of range for rank 3"), std::string::npos);

  for (int opset : {18, 20, 21}) {
    Builder c(opset);
    Value* y = c.f32("y", S({"N", 4, 5}));
    EXPECT_EQ(ty(c.op("ReduceMean", {y, c.ints("a", {1})})), "f32[N,1,5]");
    EXPECT_EQ(ty(c.op("ReduceMax", {y, c.ints("b", {0, 2})}, 1, {{"keepdims", 0}})), "f32[4]");
    EXPECT_EQ(ty(c.op("ReduceMean", {y}, 1, {{"keepdims", 0}})), "f32[]");
    EXPECT_EQ(ty(c.op("ReduceMax", {y}, 1, {{"noop_with_empty_axes", 1}})), "f32[N,4,5]");
    Node* attr = c.add("ReduceMean", {y}, 1, {{"axes", std::vector<int64_t>{1}}});
    EXPECT_NE(error_of(attr).find("attribute 'axes' is not allowed at opset"), std::string::npos) << error_of(attr);
  }
}

// ---- generic errors --------------------------------------------------------------------------------

TEST(OpTableErrors, MessagesNameTheNode) {
  Builder b;
  Node* bc = b.add("Add", {b.f32("a", S({"N", 3})), b.f32("b", S({4}))});
  EXPECT_NE(error_of(bc).find("Add 'Add_0': shapes cannot broadcast: dimension 3 vs 4"), std::string::npos)
      << error_of(bc);
  Node* ty_mismatch = b.add("Mul", {b.f32("c", S({3})), b.in("d", kF16, S({3}))});
  EXPECT_NE(error_of(ty_mismatch).find("Mul 'Mul_1': input 1 ('d') has type f16 but input 0 ('c') has type f32"),
            std::string::npos)
      << error_of(ty_mismatch);
  Node* arity = b.add("Relu", {b.f32("e", S({3})), b.f32("f", S({3}))});
  EXPECT_NE(error_of(arity).find("Relu 'Relu_2': expects 1 input, got 2"), std::string::npos) << error_of(arity);
  Node* itype = b.add("Sqrt", {b.in("g", kI64, S({3}))});
  EXPECT_NE(error_of(itype).find("input 0 ('g') has type i64, expected a float type"), std::string::npos)
      << error_of(itype);
  Node* cond = b.add("Where", {b.f32("h", S({3})), b.f32("i", S({3})), b.f32("j", S({3}))});
  EXPECT_NE(error_of(cond).find("has type f32, expected bool"), std::string::npos) << error_of(cond);
  Builder c(20);
  Node* gelu = c.add("Gelu", {c.f32("x", S({3}))}, 1, {{"approximate", "fast"}});
  EXPECT_NE(error_of(gelu).find("Gelu 'Gelu_0': attribute 'approximate' must be"), std::string::npos)
      << error_of(gelu);
  Node* attr_kind = c.add("Softmax", {c.f32("y", S({3}))}, 1, {{"axis", "last"}});
  EXPECT_NE(error_of(attr_kind).find("attribute 'axis' must be an int"), std::string::npos) << error_of(attr_kind);
}

TEST(OpTableErrors, UnknownShapesPropagateWithoutErrors) {
  Builder b;
  Value* u = b.f32("u", Shape::unknown());
  EXPECT_EQ(ty(b.op("Relu", {u})), "f32[...]");
  EXPECT_EQ(ty(b.op("Add", {u, b.f32("v", S({3}))})), "f32[...]");
  EXPECT_EQ(ty(b.op("MatMul", {u, b.f32("w", S({3, 4}))})), "f32[...]");
  EXPECT_EQ(ty(b.op("Reshape", {u, b.ints("s", {2, -1})})), "f32[2,?]");
  EXPECT_EQ(ty(b.op("Shape", {u})), "i64[?]");
  EXPECT_EQ(ty(b.op("Flatten", {u})), "f32[?,?]");
  EXPECT_EQ(ty(b.op("Gemm", {u, b.f32("w2", S({4, 5}))})), "f32[?,5]");
  EXPECT_EQ(ty(b.op("Conv", {b.f32("x", S({"N", 3, 8, 8})), u}, 1, {})), "f32[N,?,?,?]");
}

}  // namespace
}  // namespace otter
