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
#include "graph/op_table.h"

namespace otter {

// How an op-table entry declares its gradient: a rule, or an explicit "no gradient" /
// "not differentiable" (OpDef::grad_kind says what autodiff does with each).
struct GradSpec {
  GradKind kind = GradKind::kMissing;
  GradFn fn;
};
inline GradSpec grad_rule(GradFn f) { return {GradKind::kRule, std::move(f)}; }
inline GradSpec no_gradient() { return {GradKind::kNoGradient, {}}; }
inline GradSpec not_differentiable() { return {GradKind::kNotDifferentiable, {}}; }

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
  // Records the gradient of input i (nothing when g is null or input i needs none). Its dtype must
  // equal the input's; its shape must be the input's (use sum_to_shape for broadcast operands).
  void set_grad_input(int i, Value* g);
  Value* grad_input(int i) const;

  // ---- builders ----------------------------------------------------------------------------------
  Value* emit(const std::string& op, const std::vector<Value*>& inputs,
              const std::map<std::string, Attribute>& attrs = {}, const std::string& domain = "");
  std::vector<Value*> emit_multi(const std::string& op, const std::vector<Value*>& inputs, int num_outputs,
                                 const std::map<std::string, Attribute>& attrs = {},
                                 const std::string& domain = "");
  // Like emit_multi, but only the outputs marked in `want` exist (the others are omitted optional
  // outputs, nullptr in the result); trailing unwanted outputs are dropped.
  std::vector<Value*> emit_some(const std::string& op, const std::vector<Value*>& inputs,
                                const std::vector<bool>& want, const std::map<std::string, Attribute>& attrs = {},
                                const std::string& domain = "");
  // An internal gradient op of the ai.otter domain.
  Value* emit_otter(const std::string& op, const std::vector<Value*>& inputs,
                    const std::map<std::string, Attribute>& attrs = {}) {
    return emit(op, inputs, attrs, kOtterDomain);
  }
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
  // Reshape(g, Shape(like)) unless the shapes already agree.
  Value* reshape_like(Value* g, Value* like);
  // Expand(g, Shape(like)): g broadcast to like's shape.
  Value* expand_like(Value* g, Value* like);
  // Zeros of v's shape and dtype (ConstantOfShape).
  Value* zeros_like(Value* v);
  // Size of dimension `axis` of v as an int64 [1] tensor (a constant when static).
  Value* dim_of(Value* v, int64_t axis);
  // Concatenation of int64 [k] pieces into one 1-D shape tensor (a constant when all are).
  Value* concat_ints(const std::vector<Value*>& parts);
  // numel(num) / numel(den) as a scalar of like's dtype (a constant when both are static): the
  // scale of a mean's gradient.
  Value* numel_ratio(Value* num, Value* den, const Value* like);
  // Rank of v; fails with the node's name when unknown.
  int64_t rank_of(const Value* v) const;
  // The forward node's attributes with the given names (those that are set).
  std::map<std::string, Attribute> forward_attrs(const std::vector<std::string>& names) const;
  // Fails with a message naming the forward node.
  [[noreturn]] void unsupported(const std::string& why) const;

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
