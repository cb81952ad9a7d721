// grad-accumulation pass (see grad_accumulation.h).
#include "passes/grad_accumulation.h"

#include <algorithm>

#include "graph/error.h"
#include "graph/op_table.h"
#include "passes/backward_seed.h"

namespace otter {

namespace {

// A half gradient that autodiff widened for the fp32 accumulator (the gradient of mixed
// precision's Cast of the weight) is read directly: the accumulating kernels widen it exactly,
// so the Cast goes. `grad` must be unused (it has left the graph outputs).
Value* unwiden(Graph& g, Value* grad) {
  Node* c = grad->producer();
  if (!c || !c->domain().empty() || c->op_type() != "Cast" || !grad->uses().empty() || grad->is_graph_output())
    return grad;
  Value* src = c->input(0);
  if (!is_half(src->dtype()) || grad->dtype() != DataType::kFloat32) return grad;
  g.remove_node(c);
  return src;
}

// The op table's accumulating form of the node computing `grad` (kNone when `grad` has other uses
// or is a graph output: then the gradient itself must stay).
AccumulatingForm accumulating_form(const Value* grad) {
  Node* n = grad->producer();
  if (!n || !grad->uses().empty() || grad->is_graph_output()) return AccumulatingForm::kNone;
  const OpDef* d = OpTable::instance().find(*n);
  return d ? d->accumulating_form : AccumulatingForm::kNone;
}

bool is_2d(const Value* v) { return v->shape().rank_known && v->shape().rank() == 2; }

// A 2-D weight-gradient product (no C) that can accumulate into `acc` itself: in the accumulator's
// type, or in half into an fp32 accumulator (products summed in fp32).
bool fusable(const Value* grad, const Value* acc) {
  if (accumulating_form(grad) != AccumulatingForm::kGemmAccumulate) return false;
  if (grad->dtype() != acc->dtype() && !(is_half(grad->dtype()) && acc->dtype() == DataType::kFloat32)) return false;
  const Node* n = grad->producer();
  return !n->has_input(2) && is_2d(n->input(0)) && is_2d(n->input(1));
}

}  // namespace

std::string grad_accumulation_precondition(const Graph& g) {
  if (g.gradients.empty() || !g.loss_seed) return "the graph has no gradients: run autodiff first";
  for (const auto& [p, grad] : g.gradients)
    if (grad && grad->kind() == ValueKind::kState)
      return str_cat("the gradient of '", p->name(), "' is already accumulated state (grad-accumulation ran before)");
  return "";
}

// A weight gradient (output 1) in the accumulator's type of an op that takes the accumulator as
// an extra last input (ConvGrad's dW_acc, after dY, X, W): the filter GEMM (cuDNN's backward
// filter) then runs with beta 0 on the first micro-step and 1 after, and no gradient buffer or copy
// remains.
bool accumulator_input_fusable(const Value* grad, const Value* acc) {
  if (accumulating_form(grad) != AccumulatingForm::kAccumulatorInput) return false;
  const Node* n = grad->producer();
  return n->num_inputs() == 3 && n->num_outputs() > 1 && n->output(1) == grad && grad->dtype() == acc->dtype() &&
         n->input(2)->dtype() == acc->dtype();
}

const OptionTable<GradAccumulationOptions>& GradAccumulationOptions::table() {
  using S = GradAccumulationOptions;
  static const OptionTable<S> t{
      option("steps", &S::steps, "micro-batches per optimizer step (K)").at_least(1).always(),
  };
  return t;
}

GradAccumulationStats grad_accumulation(Graph& g, const GradAccumulationOptions& o) {
  GradAccumulationOptions::table().check(o, "grad-accumulation");
  const int64_t steps = o.steps;
  std::string unmet = grad_accumulation_precondition(g);
  OTTER_CHECK(unmet.empty(), "grad-accumulation: ", unmet);
  GradAccumulationStats st;
  g.opset_imports.emplace(kOtterDomain, 1);
  TrainingFacts facts = g.training_facts();
  facts.accumulation_steps = steps;
  g.set_training_facts(facts);
  update_backward_seed(g, "grad-accumulation");
  std::vector<Value*> outputs = g.outputs();
  for (auto& [p, grad] : g.gradients) {
    OTTER_CHECK(p->shape().is_static(), "grad-accumulation: parameter '", p->name(), "' has no static shape");
    std::string acc_name = g.unique_name(p->name() + ".grad.acc");
    // fp32 accumulators (float64 parameters, as in gradient checks, keep float64).
    DataType acc_type = p->dtype() == DataType::kFloat64 ? DataType::kFloat64 : DataType::kFloat32;
    Value* acc = g.add_state(acc_name, Tensor(acc_type, p->shape().static_dims()));
    Value* result = nullptr;
    outputs.erase(std::remove(outputs.begin(), outputs.end(), grad), outputs.end());
    g.set_outputs(outputs);
    grad = unwiden(g, grad);
    if (fusable(grad, acc)) {
      Node* mm = grad->producer();
      const bool ta = mm->attr_i("transA", 0) != 0, tb = mm->attr_i("transB", 0) != 0;
      const float alpha = mm->attr_f("alpha", 1.f);
      Node* fused = g.add_node("GemmAccumulate", {mm->input(0), mm->input(1), acc}, {g.unique_name(acc_name + ".new")},
                               kOtterDomain, mm);
      if (ta) fused->set_attr("transA", Attribute(int64_t{1}));
      if (tb) fused->set_attr("transB", Attribute(int64_t{1}));
      if (alpha != 1.f) fused->set_attr("alpha", Attribute(alpha));
      infer_node(*fused);
      result = fused->output(0);
      g.remove_node(mm);
      ++st.grads_fused;
    } else if (accumulator_input_fusable(grad, acc)) {
      Node* cg = grad->producer();
      cg->add_input(acc);
      infer_node(*cg);
      result = grad;
      ++st.grads_fused;
    } else {
      Node* a = g.add_node("AccumulateGrad", {acc, grad}, {g.unique_name(acc_name + ".new")}, kOtterDomain);
      infer_node(*a);
      result = a->output(0);
    }
    g.state_updates[acc] = result;
    grad = acc;
    ++st.accumulators;
  }
  g.set_outputs(outputs);
  return st;
}

std::string GradAccumulationPass::summary() const {
  return "accumulate gradients of K micro-batches in fp32 state, fused into weight-gradient GEMMs and ConvGrad";
}

std::string GradAccumulationPass::unmet_precondition(const Graph& g) const {
  return grad_accumulation_precondition(g);
}

void GradAccumulationPass::run(Graph& g, PassContext&) {
  auto st = grad_accumulation(g, opts_);
  set_counters({{"accumulators", st.accumulators}, {"grads_fused", st.grads_fused}});
}

}  // namespace otter
