// The op table: every op otter knows, defined once with its opset range, type/shape inference,
// mixed-precision class, in-place flag and gradient rule. Passes ask the table; they keep no op
// lists of their own.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "graph/ir.h"

namespace otter {

// Mixed-precision class (see docs/mixed-precision.md).
enum class PrecisionClass : uint8_t {
  kNone,    // no float math to speak of (shape ops on integers, comparisons' outputs...)
  kLow,     // run in the half type (GEMM-like)
  kFp32,    // numerically sensitive: run in fp32
  kFollow,  // run in the type of the inputs (widest float input where they disagree)
};
const char* precision_class_name(PrecisionClass c);

// What autodiff may do with an op.
enum class GradKind : uint8_t {
  kMissing,           // no rule yet: autodiff reports the op
  kRule,              // `grad` builds the backward nodes
  kNoGradient,        // outputs carry no gradient (integer/bool outputs, shape ops on shapes)
  kNotDifferentiable  // an error when a gradient must flow through it
};

// Given to a shape-inference function: the node, with its inputs' types and shapes already known,
// plus constant input data where the input is an initializer (or was folded).
class InferContext {
 public:
  explicit InferContext(Node& n) : node_(n) {}
  Node& node() { return node_; }
  int num_inputs() const { return node_.num_inputs(); }
  int num_outputs() const { return node_.num_outputs(); }
  bool has_input(int i) const { return node_.has_input(i); }
  bool has_output(int i) const { return node_.output(i) != nullptr; }
  DataType in_dtype(int i) const;
  const Shape& in_shape(int i) const;
  // Constant data of input i or nullptr.
  const Tensor* in_const(int i) const;
  // Known (possibly symbolic) contents of a 1-D or scalar integer input: from constant data, or
  // propagated from upstream shape arithmetic; nullopt when unknown.
  std::optional<std::vector<Dim>> in_sym_data(int i) const;
  void set_output(int i, DataType t, Shape s);
  void set_output_sym_data(int i, std::vector<Dim> d);
  [[noreturn]] void error(const std::string& msg) const;

 private:
  Node& node_;
};

using InferFn = std::function<void(InferContext&)>;

class GradContext;  // graph/gradient.h
using GradFn = std::function<void(GradContext&)>;

// How an op can add its result into an accumulator instead of writing a new value, so that the
// grad-accumulation pass fuses a weight gradient's accumulation into the op computing it.
enum class AccumulatingForm : uint8_t {
  kNone,
  kGemmAccumulate,     // a 2-D product (MatMul of rank-2 operands, Gemm without C) that
                       // ai.otter.GemmAccumulate(A, B, acc) {transA, transB, alpha} replaces
  kAccumulatorInput,   // the op itself takes the accumulator as an extra last input and returns it,
                       // updated in place, as output 1 (ConvGrad's dW)
};

struct OpDef {
  std::string domain;   // "" for ai.onnx, "ai.otter" for internal ops
  std::string op_type;
  int since_version = 1;
  int until_version = 1 << 30;  // inclusive
  InferFn infer;
  PrecisionClass precision = PrecisionClass::kNone;
  // The inputs that take the op's precision, sharing the output's ONNX type variable (the
  // mixed-precision pass casts these); empty: every float input. The others keep their own type,
  // such as BatchNormalization's scale, bias and running statistics (T1, T2) or Dropout's ratio.
  std::vector<int> precision_inputs;
  // Output 0 may reuse the buffer of input 0 (element-wise ops of equal shape and dtype).
  bool inplace = false;
  // (output, input) pairs where the kernel may return the output as a view of the input's buffer
  // (Reshape, Identity, in-place optimizer updates): memory planning keeps such a buffer alive
  // as long as its views.
  std::vector<std::pair<int, int>> views;
  AccumulatingForm accumulating_form = AccumulatingForm::kNone;
  GradKind grad_kind = GradKind::kMissing;
  GradFn grad;
  std::string summary;
};

class OpTable {
 public:
  static OpTable& instance();  // all built-in ops, registered on first use
  void add(OpDef def);
  // The definition of (domain, op_type) at opset `version`, or nullptr.
  const OpDef* find(const std::string& domain, const std::string& op_type, int version) const;
  const OpDef* find(const Node& n) const { return find(n.domain(), n.op_type(), n.opset()); }
  // Like find(), but fails with a message naming the node.
  const OpDef& get(const Node& n) const;
  // True where the op exists in some opset of the domain (to tell unknown from unsupported).
  bool knows(const std::string& domain, const std::string& op_type) const;
  std::vector<const OpDef*> all() const;
  OpDef* mutable_find(const std::string& domain, const std::string& op_type, int version);

 private:
  std::vector<OpDef> defs_;
};

// Registration functions of each op family (graph/ops/*.cc); called once by OpTable::instance().
void register_elementwise_ops(OpTable& t);
void register_nn_ops(OpTable& t);
void register_shape_ops(OpTable& t);
void register_reduce_ops(OpTable& t);
void register_internal_ops(OpTable& t);
void register_math_ops(OpTable& t);  // graph/ops/math.cc
void register_scan_ops(OpTable& t);  // graph/ops/scan.cc
void register_integer_ops(OpTable& t);  // graph/ops/integer.cc
void register_indexing_ops(OpTable& t);  // graph/ops/indexing.cc
void register_normalization_ops(OpTable& t);  // graph/ops/normalization.cc
void register_resize_ops(OpTable& t);  // graph/ops/resize.cc
void register_training_ops(OpTable& t);  // graph/ops/training.cc
void register_einsum_ops(OpTable& t);  // graph/ops/einsum.cc
void register_lrn_det_ops(OpTable& t);  // graph/ops/lrn_det.cc
void register_grid_sample_ops(OpTable& t);  // graph/ops/grid_sample.cc
void register_control_flow_ops(OpTable& t);  // graph/ops/control_flow.cc

// Runs shape/type inference for one node; fails with the node's name when the op is unknown.
void infer_node(Node& n);
// Runs inference over the whole graph in order.
void infer_graph(Graph& g);
// Fixes the sample axis (dim 0) of every graph input to b and re-runs inference, so a training
// graph gets static shapes (shape arithmetic folds, memory can be planned). Fails when an input's
// batch is fixed to another size.
void pin_batch(Graph& g, int64_t b);

// Supported opset range of the default domain.
constexpr int kMinOnnxOpset = 13;
constexpr int kMaxOnnxOpset = 21;
constexpr const char* kOtterDomain = "ai.otter";
// ONNX's training-preview domain: only its optimizers (Adagrad, Adam, Momentum) at opset 1.
constexpr const char* kTrainingDomain = "ai.onnx.preview.training";

// ---- helpers shared by the op families ----------------------------------------------------------
// Numpy-style broadcast of shapes; fails (via ctx.error) when incompatible.
Shape broadcast_shapes(InferContext& ctx, const std::vector<Shape>& shapes);
// Normalises a possibly negative axis against `rank`; fails with the node's name when out of range.
int64_t normalize_axis(InferContext& ctx, int64_t axis, int64_t rank);

}  // namespace otter
