// fuse-add-layernorm pass (see fuse_add_layernorm.h).
#include "passes/fuse_add_layernorm.h"

#include <string>
#include <vector>

#include "graph/op_table.h"
#include "passes/pattern.h"

namespace otter {

const OptionTable<FuseAddLayerNormOptions>& FuseAddLayerNormOptions::table() {
  using S = FuseAddLayerNormOptions;
  static const OptionTable<S> t{
      option("enabled", &S::enabled, "fuse (false: leave the graph as it is)"),
  };
  return t;
}

namespace {

using pattern::is_op;

// v is 1-D of the static length `len` and of type t.
bool is_row(const Value* v, const Dim& len, DataType t) {
  const Shape& s = v->shape();
  return v->dtype() == t && s.rank_known && s.rank() == 1 && s.dims[0].is_static() && len.is_static() &&
         s.dims[0].value == len.value;
}

// The Add making LayerNormalization ln's X, when the pair fuses (see the header).
Node* fusable_add(const Node* ln) {
  if (!is_op(ln, "LayerNormalization") || ln->num_inputs() < 2 || ln->attr_i("stash_type", 1) != 1) return nullptr;
  for (int i = 1; i < ln->num_outputs(); ++i)
    if (!pattern::unread(ln->output(i))) return nullptr;
  Value* s = ln->input(0);
  Node* add = s->producer();
  if (!is_op(add, "Add") || !is_float(s->dtype())) return nullptr;
  const Shape& ss = s->shape();
  if (!ss.rank_known || ss.rank() < 1) return nullptr;
  const int64_t axis = ln->attr_i("axis", -1);
  if (axis != -1 && axis != ss.rank() - 1) return nullptr;
  const Dim& last = ss.dims[ss.rank() - 1];
  for (int i = 1; i < ln->num_inputs(); ++i) {
    Value* p = ln->input(i);
    // Parameters, not computed values: the fused op goes where the Add was, before their producers.
    if (p && (!is_row(p, last, s->dtype()) || p->producer())) return nullptr;
  }
  Value *x = add->input(0), *r = add->input(1);
  if (x == r) return nullptr;
  for (const Value* v : {x, r})
    if (v->dtype() != s->dtype() || !(v->shape() == ss)) return nullptr;
  return add;
}

// Whether S is read by anything besides the LayerNormalization `ln`.
bool sum_read_elsewhere(const Value* s, const Node* ln) {
  if (s->is_graph_output()) return true;
  for (const auto& use : s->uses())
    if (use.first != ln) return true;
  return false;
}

void replace(Graph& g, Node* add, Node* ln, bool keep_sum) {
  Value* s = add->output(0);
  Value* y = ln->output(0);
  const std::string y_name = y->name(), s_name = s->name();
  g.rename_value(y, g.unique_name(y_name + ".unfused"));
  std::vector<std::string> outs = {y_name};
  if (keep_sum) {
    g.rename_value(s, g.unique_name(s_name + ".unfused"));
    outs.push_back(s_name);
  }
  std::vector<Value*> ins = {add->input(0), add->input(1)};
  for (int i = 1; i < ln->num_inputs(); ++i)
    if (ln->input(i)) ins.push_back(ln->input(i));
  if (!g.opset_imports.count(kOtterDomain)) g.opset_imports[kOtterDomain] = 1;
  Node* f = g.add_node("AddLayerNorm", ins, outs, kOtterDomain, add);
  f->set_name(ln->name().empty() ? y_name : ln->name() + "/AddLayerNorm");
  f->set_attr("axis", Attribute(int64_t{-1}));
  f->set_attr("epsilon", Attribute(ln->attr_f("epsilon", 1e-5f)));
  infer_node(*f);
  g.replace_all_uses(y, f->output(0));
  if (keep_sum) g.replace_all_uses(s, f->output(1));
  g.remove_node(ln);
  g.remove_node(add);
}

}  // namespace

FuseAddLayerNormStats fuse_add_layernorm(Graph& g, const FuseAddLayerNormOptions& o) {
  FuseAddLayerNormStats st;
  if (!o.enabled) return st;
  // The LayerNormalizations first: replace() removes nodes a walk over the node list would then
  // read after they were freed. An Add feeds its LayerNormalization once, so each pair goes once.
  std::vector<Node*> lns;
  for (Node* n : g.node_list())
    if (is_op(n, "LayerNormalization")) lns.push_back(n);
  for (Node* ln : lns) {
    Node* add = fusable_add(ln);
    if (!add) continue;
    const bool keep_sum = sum_read_elsewhere(add->output(0), ln);
    replace(g, add, ln, keep_sum);
    ++st.fused;
    st.with_sum += keep_sum;
  }
  return st;
}

std::string FuseAddLayerNormPass::summary() const {
  return "replace a residual Add and the LayerNormalization reading it with ai.otter.AddLayerNorm (one pass over "
         "memory; the gradient adds the sum's other gradient inside LayerNormalizationGrad)";
}

std::string FuseAddLayerNormPass::unmet_precondition(const Graph& g) const { return before_autodiff(g); }

void FuseAddLayerNormPass::run(Graph& g, PassContext&) {
  reset_counters();
  FuseAddLayerNormStats st = fuse_add_layernorm(g, opts_);
  count("fused", st.fused);
  count("with_sum", st.with_sum);
}

}  // namespace otter
