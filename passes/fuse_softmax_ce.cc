// fuse-softmax-ce pass (see fuse_softmax_ce.h).
#include "passes/fuse_softmax_ce.h"

#include <vector>

#include "graph/error.h"
#include "graph/op_table.h"
#include "passes/pattern.h"

namespace otter {

const OptionTable<FuseSoftmaxCeOptions>& FuseSoftmaxCeOptions::table() {
  using S = FuseSoftmaxCeOptions;
  static const OptionTable<S> t{
      option("enabled", &S::enabled, "fuse (false: leave the graph as it is)"),
  };
  return t;
}

namespace {

using pattern::is_op;
using pattern::single_use;

struct Match {
  Value* x = nullptr;        // the scores
  std::vector<Node*> chain;  // the NLL's producers, consumer first: LogSoftmax, or Log then Softmax
};

// A (Log)Softmax of opset >= 13 over the class axis 1 of its float input.
bool over_class_axis(const Node* softmax) {
  const Value* x = softmax->input(0);
  const Shape& s = x->shape();
  if (softmax->opset() < 13 || !is_float(x->dtype()) || !s.rank_known || s.rank() < 2) return false;
  int64_t axis = softmax->attr_i("axis", -1);
  if (axis < 0) axis += s.rank();
  return axis == 1;
}

// The chain before NegativeLogLikelihoodLoss `nll`, when it fuses.
bool match(const Node* nll, Match& m) {
  if (!is_op(nll, "NegativeLogLikelihoodLoss") || nll->opset() < 13 || nll->num_outputs() != 1) return false;
  Value* lp = nll->input(0);
  if (!single_use(lp)) return false;
  Node* p = lp->producer();
  if (is_op(p, "LogSoftmax")) {
    m.chain = {p};
  } else if (is_op(p, "Log") && single_use(p->input(0)) && is_op(p->input(0)->producer(), "Softmax")) {
    m.chain = {p, p->input(0)->producer()};
  } else {
    return false;
  }
  Node* softmax = m.chain.back();
  if (!over_class_axis(softmax)) return false;
  m.x = softmax->input(0);
  return lp->dtype() == m.x->dtype() && lp->shape() == m.x->shape();
}

void replace(Graph& g, Node* nll, const Match& m) {
  Value* loss = nll->output(0);
  const std::string name = loss->name();
  g.rename_value(loss, g.unique_name(name + ".unfused"));
  std::vector<Value*> ins{m.x, nll->input(1)};
  if (nll->has_input(2)) ins.push_back(nll->input(2));
  Node* f = g.add_node("SoftmaxCrossEntropyLoss", ins, {name}, "", nll);
  for (const auto& [k, a] : nll->attrs()) f->set_attr(k, a);  // reduction, ignore_index: the same meaning
  f->set_name(nll->name().empty() ? name : nll->name() + "/SoftmaxCrossEntropyLoss");
  f->set_program(nll->program());
  infer_node(*f);
  g.replace_all_uses(loss, f->output(0));
  g.remove_node(nll);
  for (Node* n : m.chain) g.remove_node(n);  // consumer first: each node's output is unused when it goes
}

}  // namespace

FuseSoftmaxCeStats fuse_softmax_ce(Graph& g, const FuseSoftmaxCeOptions& o) {
  FuseSoftmaxCeStats st;
  if (!o.enabled) return st;
  // The losses first: replace() removes nodes a walk over the node list would then read after they
  // were freed. A chain holds one loss, and no loss is another's chain.
  std::vector<Node*> losses;
  for (Node* n : g.node_list())
    if (is_op(n, "NegativeLogLikelihoodLoss")) losses.push_back(n);
  for (Node* n : losses) {
    Match m;
    if (!match(n, m)) continue;
    st.log_of_softmax += m.chain.size() == 2;
    replace(g, n, m);
    ++st.fused;
  }
  return st;
}

std::string FuseSoftmaxCePass::summary() const {
  return "replace NegativeLogLikelihoodLoss of LogSoftmax (or of Log(Softmax)) over the class axis with "
         "SoftmaxCrossEntropyLoss (the gradient recomputes the softmax; no log-probabilities kept)";
}

std::string FuseSoftmaxCePass::unmet_precondition(const Graph& g) const { return before_autodiff(g); }

void FuseSoftmaxCePass::run(Graph& g, PassContext&) {
  reset_counters();
  FuseSoftmaxCeStats st = fuse_softmax_ce(g, opts_);
  count("fused", st.fused);
  count("log_of_softmax", st.log_of_softmax);
}

}  // namespace otter
