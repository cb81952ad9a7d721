// The interface gradient rules are written against: a rule sees one forward node, the gradients
// of its outputs, and emits backward nodes that produce the gradients of its inputs.
//
// Rules live in the op table next to their op (graph/ops/*.cc). They build ordinary ONNX ops and
// internal ai.otter gradient ops (graph/ops/internal.cc). Every emitted node is appended to the
// graph and type-inferred at once, so a rule can read the shapes of what it built.
// Names derive from the forward node's first output: "<y>.bwd<k>" with k counting within this rule
// only, so adding an unrelated node never renames anything. The autodiff pass renames the final
// gradient of a value x to "<x>.grad".
#pragma once

#include <map>
#include <string>
#include <vector>

#include "graph/ir.h"

namespace otter {

class GradContext {
 public:
  GradContext(Graph& g, Node& fwd, std::vector<Value*> grad_outputs, std::vector<bool> needs_grad);

  Graph& graph() { return graph_; }
  const Node& node() const { return fwd_; }
  Value* input(int i) const { return fwd_.input(i); }
  Value* output(int i) const { return fwd_.output(i); }
  // dLoss/d(output i), or nullptr when no gradient reaches that output.
  Value* grad_output(int i) const;
  // Whether input i wants a gradient (a float value on a path from a parameter).
  bool needs_grad(int i) const;
  // Records the gradient of input i. Its dtype must equal the input's; its shape must be the
  // input's (use sum_to_shape for broadcast operands).
  void set_grad_input(int i, Value* g);
  Value* grad_input(int i) const;

  // ---- builders ----------------------------------------------------------------------------------
  Value* emit(const std::string& op, const std::vector<Value*>& inputs,
              const std::map<std::string, Attribute>& attrs = {}, const std::string& domain = "");
  std::vector<Value*> emit_multi(const std::string& op, const std::vector<Value*>& inputs, int num_outputs,
                                 const std::map<std::string, Attribute>& attrs = {},
                                 const std::string& domain = "");
  // A non-trainable initializer.
  Value* constant(Tensor t);
  // A scalar of `like`'s dtype.
  Value* scalar_like(double v, const Value* like);
  // A 1-D int64 constant.
  Value* ints(const std::vector<int64_t>& v);
  // Shape(v), folded to a constant when v's shape is static.
  Value* shape_of(Value* v);
  // Sums `g` over broadcast axes so it takes `like`'s shape (numpy unbroadcasting): nothing when
  // shapes agree, ReduceSum + Reshape for static shapes, ai.otter.SumToShape when symbolic.
  Value* sum_to_shape(Value* g, Value* like);
  // Casts to `t` if needed.
  Value* cast(Value* v, DataType t);

 private:
  std::string fresh_name();
  Graph& graph_;
  Node& fwd_;
  std::vector<Value*> grad_outputs_;
  std::vector<bool> needs_grad_;
  std::vector<Value*> grad_inputs_;
  int counter_ = 0;
};

}  // namespace otter
