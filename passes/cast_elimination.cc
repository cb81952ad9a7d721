// cast-elimination pass (see cast_elimination.h).
#include "passes/cast_elimination.h"

#include <map>
#include <tuple>

#include "graph/error.h"

namespace otter {

namespace {

bool is_cast(const Node* n) { return n && n->domain().empty() && n->op_type() == "Cast"; }

DataType cast_target(const Node& n) { return dtype_from_onnx(static_cast<int>(n.attr_i("to", 0))); }

// Values the graph holds on to by name or role: they keep their producer.
bool is_pinned(const Graph& g, const Value* v) {
  if (v->is_graph_output() || g.loss_seed == v) return true;
  for (const auto& [s, u] : g.state_updates)
    if (u == v) return true;
  for (const auto& [p, gr] : g.gradients)
    if (gr == v) return true;
  return false;
}

// Makes `n` read past Casts that are exact: Cast(Cast(x, B), C) = Cast(x, C).
void skip_exact_inputs(Node& n) {
  for (;;) {
    Node* inner = n.input(0)->producer();
    if (!is_cast(inner) || !cast_is_exact(inner->input(0)->dtype(), n.input(0)->dtype())) return;
    n.set_input(0, inner->input(0));
  }
}

// Removes Casts nobody reads; returns how many.
int64_t remove_dead_casts(Graph& g) {
  int64_t removed = 0;
  for (bool again = true; again;) {
    again = false;
    for (Node* n : g.node_list()) {
      if (!is_cast(n) || !n->output(0)->uses().empty() || is_pinned(g, n->output(0))) continue;
      g.remove_node(n);
      ++removed;
      again = true;
    }
  }
  return removed;
}

}  // namespace

bool cast_is_exact(DataType from, DataType to) {
  using T = DataType;
  if (from == to || from == T::kBool) return true;
  switch (from) {
    case T::kFloat16:
    case T::kBFloat16: return to == T::kFloat32 || to == T::kFloat64;
    case T::kFloat32: return to == T::kFloat64;
    case T::kInt8:
    case T::kUInt8: return to == T::kInt32 || to == T::kInt64 || to == T::kFloat32 || to == T::kFloat64;
    case T::kInt32: return to == T::kInt64 || to == T::kFloat64;
    default: return false;
  }
}

CastEliminationStats eliminate_casts(Graph& g) {
  CastEliminationStats st;
  std::map<std::tuple<Value*, DataType, Program>, Value*> first;
  for (Node* n : g.node_list()) {
    if (!is_cast(n)) continue;
    skip_exact_inputs(*n);
    Value* in = n->input(0);
    Value* out = n->output(0);
    if (is_pinned(g, out)) continue;
    const DataType to = cast_target(*n);
    if (in->dtype() == to) {
      g.replace_all_uses(out, in);
      continue;
    }
    auto [it, fresh] = first.emplace(std::make_tuple(in, to, n->program()), out);
    if (!fresh) {
      g.replace_all_uses(out, it->second);
      ++st.casts_merged;
    }
  }
  st.casts_removed = remove_dead_casts(g) - st.casts_merged;
  return st;
}

std::string CastEliminationPass::summary() const {
  return "drop Casts to the same type and exact round trips (f16->f32->f16), merge duplicate Casts";
}

void CastEliminationPass::run(Graph& g, PassContext&) {
  auto st = eliminate_casts(g);
  set_counters({{"casts_removed", st.casts_removed}, {"casts_merged", st.casts_merged}});
}

}  // namespace otter
