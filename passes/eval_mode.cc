// eval-mode pass (see eval_mode.h).
#include "passes/eval_mode.h"

#include <algorithm>

#include "graph/op_table.h"

namespace otter {

int64_t eval_mode(Graph& g) {
  int64_t changed = 0;
  for (Node* n : g.node_list()) {
    if (n->domain() == kOtterDomain && n->op_type() == "Attention" && n->attr_f("dropout", 0.f) > 0) {
      n->set_attr("dropout", Attribute(0.f));  // fuse-attention's dropout (passes/fuse_attention.h)
      ++changed;
    }
    if (!n->domain().empty()) continue;
    if (n->op_type() == "BatchNormalization" && n->attr_i("training_mode", 0) != 0) {
      std::vector<Value*> outs = g.outputs();
      for (int i = 1; i < n->num_outputs(); ++i) {
        Value* o = n->output(i);
        if (!o) continue;
        outs.erase(std::remove(outs.begin(), outs.end(), o), outs.end());
        for (auto it = g.state_updates.begin(); it != g.state_updates.end();)
          it = it->second == o ? g.state_updates.erase(it) : std::next(it);
      }
      g.set_outputs(outs);
      for (int i = 3; i <= 4; ++i)
        if (Value* s = n->input(i); s && s->kind() == ValueKind::kState) g.set_kind(s, ValueKind::kInitializer);
      Value* y = n->output(0);
      std::string y_name = y->name();
      g.rename_value(y, g.unique_name(y_name + ".train"));
      Node* bn = g.add_node("BatchNormalization", n->inputs(), {y_name}, "", n);
      bn->set_opset(n->opset());
      bn->set_name(n->name());
      for (const auto& [k, a] : n->attrs())
        if (k != "training_mode") bn->set_attr(k, a);
      infer_node(*bn);
      g.replace_all_uses(y, bn->output(0));
      bool used = false;
      for (Value* o : n->outputs()) used |= o && (!o->uses().empty() || o->is_graph_output());
      if (!used) g.remove_node(n);
      ++changed;
    } else if (n->op_type() == "Dropout" && n->has_input(2)) {
      n->set_input(2, nullptr);
      ++changed;
    }
  }
  g.remove_dead_nodes();
  for (Value* v : g.initializers())
    if (!v->trainable() && v->uses().empty() && !v->is_graph_output()) g.remove_value(v);
  return changed;
}

std::string EvalModePass::summary() const {
  return "inference form of a training export: BatchNorm on running statistics, Dropout off";
}

void EvalModePass::run(Graph& g, PassContext&) {
  reset_counters();
  count("nodes_changed", eval_mode(g));
}

}  // namespace otter
