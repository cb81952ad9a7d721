// canonicalize pass (see canonicalize.h).
#include "passes/canonicalize.h"

#include "graph/error.h"
#include "graph/limits.h"
#include "graph/op_table.h"
#include "passes/control_flow.h"
#include "passes/recurrent.h"

#include <algorithm>

namespace otter {

namespace {

constexpr int64_t kMaxFoldElements = int64_t{1} << 20;

bool is_const(const Value* v) {
  return v && v->kind() == ValueKind::kInitializer && !v->trainable() && v->has_data();
}

// Replaces node output `out` by a constant initializer of the same name holding `t`.
void replace_with_constant(Graph& g, Value* out, Tensor t) {
  std::string name = out->name();
  g.rename_value(out, g.unique_name(name + ".folded"));
  Value* c = g.add_initializer(name, std::move(t), /*trainable=*/false);
  g.replace_all_uses(out, c);
}

bool deterministic(const Node& n) {
  return !(n.domain().empty() && (n.op_type() == "Dropout" || n.op_type().rfind("Random", 0) == 0));
}

// The value of Shape (with its start and end) or Size of a statically shaped input.
Tensor shape_constant(const Node& n) {
  std::vector<int64_t> dims = n.input(0)->shape().static_dims();
  if (n.op_type() == "Size") return Tensor::scalar<int64_t>(num_elements(dims));
  int64_t r = static_cast<int64_t>(dims.size());
  int64_t start = n.attr_i("start", 0), end = n.attr_i("end", r);
  if (start < 0) start += r;
  if (end < 0) end += r;
  start = std::clamp<int64_t>(start, 0, r);
  end = std::clamp<int64_t>(end, start, r);
  std::vector<int64_t> part(dims.begin() + start, dims.begin() + end);
  return Tensor::from_vector<int64_t>({static_cast<int64_t>(part.size())}, part);
}

// One forward sweep over the nodes there are now (those inlined from subgraphs wait for the next).
void sweep(Graph& g, ConstantEvaluator* evaluator, CanonicalizeStats& st) {
  for (Node* n : g.node_list()) {
    const bool onnx = n->domain().empty();
    if (onnx && n->op_type() == "Constant") {
      infer_node(*n);
      Value* out = n->output(0);
      // Inference computed the tensor's type; evaluate through the kernel or read the attribute.
      std::optional<std::vector<Tensor>> r;
      if (evaluator) r = evaluator->evaluate(*n, {});
      if (!r) {
        const Attribute* a = n->find_attr("value");
        OTTER_CHECK(a && a->kind() == Attribute::Kind::kTensor, n->describe(),
                    ": cannot fold this Constant without an evaluator");
        r = std::vector<Tensor>{a->t()};
      }
      replace_with_constant(g, out, (*r)[0]);
      g.remove_node(n);
      ++st.constant_nodes_lifted;
      continue;
    }
    infer_node(*n);
    if (inline_control_flow(g, n)) {
      ++st.control_flow_inlined;
      continue;
    }
    if (is_recurrent(*n)) {
      unroll_recurrent(g, n);
      ++st.recurrent_unrolled;
      continue;
    }
    if (onnx && n->op_type() == "Identity" && n->input(0)) {
      Value* in = n->input(0);
      Value* out = n->output(0);
      bool out_is_graph_output = out->is_graph_output();
      bool can_rename = in->kind() == ValueKind::kNode && !in->is_graph_output();
      if (!out_is_graph_output || can_rename) {
        std::string out_name = out->name();
        g.replace_all_uses(out, in);
        g.remove_node(n);
        if (out_is_graph_output) g.rename_value(in, out_name);
        ++st.identities_removed;
        continue;
      }
    }
    if (onnx && (n->op_type() == "Shape" || n->op_type() == "Size") && n->input(0) &&
        n->input(0)->shape().is_static()) {
      replace_with_constant(g, n->output(0), shape_constant(*n));
      g.remove_node(n);
      ++st.shapes_folded;
      continue;
    }
    if (!evaluator || !deterministic(*n) || n->num_inputs() == 0) continue;
    bool all_const = true;
    for (Value* in : n->inputs()) all_const &= (in == nullptr || is_const(in));
    if (!all_const) continue;
    bool small = true;
    for (Value* o : n->outputs()) small &= (!o || (o->shape().numel() >= 0 && o->shape().numel() <= kMaxFoldElements));
    if (!small) continue;
    std::vector<const Tensor*> ins;
    for (Value* in : n->inputs()) ins.push_back(in ? &in->data() : nullptr);
    auto r = evaluator->evaluate(*n, ins);
    if (!r) continue;
    for (int i = 0; i < n->num_outputs(); ++i)
      if (Value* o = n->output(i)) {
        if (o->uses().empty() && !o->is_graph_output()) continue;
        replace_with_constant(g, o, (*r)[i].clone());
      }
    bool unused = true;
    for (Value* o : n->outputs()) unused &= (!o || (o->uses().empty() && !o->is_graph_output()));
    if (unused) g.remove_node(n);
    ++st.constants_folded;
  }
}

}  // namespace

CanonicalizeStats canonicalize(Graph& g, ConstantEvaluator* evaluator) {
  CanonicalizeStats st;
  // Inlined branches and bodies are swept again: they may fold, and hold control flow themselves.
  for (int round = 0; round <= kMaxSubgraphDepth; ++round) {
    const int64_t inlined = st.control_flow_inlined;
    sweep(g, evaluator, st);
    if (st.control_flow_inlined == inlined) break;
  }
  st.nodes_removed = g.remove_dead_nodes();
  for (Value* v : g.initializers())
    if (!v->trainable() && v->uses().empty() && !v->is_graph_output()) {
      g.remove_value(v);
      ++st.initializers_removed;
    }
  return st;
}

std::string CanonicalizePass::summary() const {
  return "fold constants and static shape arithmetic, lift Constant nodes, drop Identity and dead nodes, unroll "
         "RNN/GRU/LSTM, inline If of constant condition, unroll Loop/Scan of static length";
}

void CanonicalizePass::run(Graph& g, PassContext& ctx) {
  const CanonicalizeStats st = canonicalize(g, ctx.evaluator);
  set_counters({{"constants_folded", st.constants_folded},
                {"constant_nodes_lifted", st.constant_nodes_lifted},
                {"shapes_folded", st.shapes_folded},
                {"identities_removed", st.identities_removed},
                {"nodes_removed", st.nodes_removed},
                {"initializers_removed", st.initializers_removed},
                {"recurrent_unrolled", st.recurrent_unrolled},
                {"control_flow_inlined", st.control_flow_inlined}});
}

}  // namespace otter
