// fold-transpose pass (see fold_transpose.h).
#include "passes/fold_transpose.h"

#include <vector>

#include "graph/error.h"
#include "graph/op_table.h"
#include "passes/pattern.h"

namespace otter {

const OptionTable<FoldTransposeOptions>& FoldTransposeOptions::table() {
  using S = FoldTransposeOptions;
  static const OptionTable<S> t{
      option("enabled", &S::enabled, "fold (false: leave the graph as it is)"),
  };
  return t;
}

namespace {

using pattern::is_op;

// W when t = Transpose(W) swaps the two axes of a rank-2 W with a static second dim.
Value* transposed_matrix(const Value* t) {
  const Node* n = t ? t->producer() : nullptr;
  if (!is_op(n, "Transpose") || n->num_inputs() != 1) return nullptr;
  Value* w = n->input(0);
  const Shape& s = w->shape();
  if (!s.rank_known || s.rank() != 2 || !s.dims[1].is_static()) return nullptr;
  if (n->has_attr("perm") && n->attr_ints("perm") != std::vector<int64_t>{1, 0}) return nullptr;
  return w;
}

// Y's dims as a Reshape target: static dims as they are, the one dynamic dim -1. Empty when Y's
// rank is unknown, two dims are dynamic, or a dim is 0 (Reshape would read it as "copy").
std::vector<int64_t> reshape_target(const Value* y) {
  const Shape& s = y->shape();
  if (!s.rank_known) return {};
  std::vector<int64_t> t;
  int dynamic = 0;
  for (const Dim& d : s.dims) {
    if (!d.is_static()) ++dynamic;
    if (d.is_static() && d.value == 0) return {};
    t.push_back(d.is_static() ? d.value : -1);
  }
  return dynamic <= 1 ? t : std::vector<int64_t>{};
}

Value* ints_constant(Graph& g, const std::string& base, const std::vector<int64_t>& v) {
  return g.add_initializer(g.unique_name(base), Tensor::from_vector<int64_t>({static_cast<int64_t>(v.size())}, v),
                           /*trainable=*/false);
}

// A Gemm {transB=1} of a and w named `out_name`, before `before`.
Node* gemm_trans_b(Graph& g, Value* a, Value* w, const std::string& out_name, const std::string& node_name,
                   Node* before) {
  Node* gemm = g.add_node("Gemm", {a, w}, {out_name}, "", before);
  gemm->set_attr("transB", Attribute(int64_t{1}));
  gemm->set_name(node_name + "/Gemm");
  infer_node(*gemm);
  return gemm;
}

bool fold(Graph& g, Node* mm) {
  Value *x = mm->input(0), *y = mm->output(0);
  Value* w = transposed_matrix(mm->input(1));
  const Shape& xs = x->shape();
  // Gemm is a float op (an integer MatMul stays as it is).
  if (!w || !xs.rank_known || xs.rank() < 2 || x->dtype() != w->dtype() || !is_float(x->dtype())) return false;
  const std::vector<int64_t> target = xs.rank() == 2 ? std::vector<int64_t>{} : reshape_target(y);
  if (xs.rank() > 2 && target.empty()) return false;
  const std::string name = y->name();
  const std::string node_name = mm->name().empty() ? name : mm->name();
  g.rename_value(y, g.unique_name(name + ".matmul"));
  Value* out = nullptr;
  if (xs.rank() == 2) {
    out = gemm_trans_b(g, x, w, name, node_name, mm)->output(0);
  } else {
    const int64_t k = w->shape().dims[1].value;
    Node* rows = g.add_node("Reshape", {x, ints_constant(g, name + ".rows_shape", {-1, k})},
                            {g.unique_name(name + ".rows")}, "", mm);
    rows->set_name(node_name + "/rows");
    infer_node(*rows);
    Node* gemm = gemm_trans_b(g, rows->output(0), w, g.unique_name(name + ".gemm"), node_name, mm);
    Node* back = g.add_node("Reshape", {gemm->output(0), ints_constant(g, name + ".shape", target)}, {name}, "", mm);
    back->set_name(node_name + "/unrows");
    infer_node(*back);
    out = back->output(0);
    out->set_shape(y->shape());  // the same dims, symbols included (inference sees only the -1)
  }
  g.replace_all_uses(y, out);
  Node* transpose = mm->input(1)->producer();
  g.remove_node(mm);
  if (transpose->output(0)->uses().empty() && !transpose->output(0)->is_graph_output()) g.remove_node(transpose);
  return true;
}

}  // namespace

FoldTransposeStats fold_transpose(Graph& g, const FoldTransposeOptions& o) {
  FoldTransposeStats st;
  if (!o.enabled) return st;
  for (Node* n : g.node_list())
    if (is_op(n, "MatMul") && n->num_inputs() == 2 && fold(g, n)) ++st.folded;
  return st;
}

std::string FoldTransposePass::summary() const {
  return "multiply by a 2-D Transpose's input through Gemm {transB=1} instead of transposing it (no Transpose "
         "forward, none for the weight gradient)";
}

std::string FoldTransposePass::unmet_precondition(const Graph& g) const { return before_autodiff(g); }

void FoldTransposePass::run(Graph& g, PassContext&) {
  reset_counters();
  count("folded", fold_transpose(g, opts_).folded);
}

}  // namespace otter
