// cast-elimination pass (see cast_elimination.h).
#include "passes/cast_elimination.h"

#include <map>
#include <tuple>

#include "graph/error.h"
#include "passes/cast_motion.h"

namespace otter {

const OptionTable<CastEliminationOptions>& CastEliminationOptions::table() {
  using S = CastEliminationOptions;
  static const OptionTable<S> t{
      option("enabled", &S::enabled, "eliminate (false: leave the graph as it is)"),
  };
  return t;
}

namespace {

bool is_cast(const Node* n) { return n && n->domain().empty() && n->op_type() == "Cast"; }

DataType cast_target(const Node& n) { return dtype_from_onnx(static_cast<int>(n.attr_i("to", 0))); }

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
      if (!is_cast(n) || !n->output(0)->uses().empty() || is_pinned_value(g, n->output(0))) continue;
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

namespace {

// Drops Casts to their input's type and exact round trips, and merges Casts of one value to one
// type in one program into the first; returns how many merged.
int64_t drop_and_merge(Graph& g) {
  int64_t merged = 0;
  std::map<std::tuple<Value*, DataType, Program>, Value*> first;
  for (Node* n : g.node_list()) {
    if (!is_cast(n)) continue;
    skip_exact_inputs(*n);
    Value* in = n->input(0);
    Value* out = n->output(0);
    if (is_pinned_value(g, out)) continue;
    const DataType to = cast_target(*n);
    if (in->dtype() == to) {
      g.replace_all_uses(out, in);
      continue;
    }
    auto [it, fresh] = first.emplace(std::make_tuple(in, to, n->program()), out);
    if (!fresh) {
      g.replace_all_uses(out, it->second);
      ++merged;
    }
  }
  return merged;
}

}  // namespace

CastEliminationStats eliminate_casts(Graph& g) {
  CastEliminationStats st;
  // Merged first, so that one Cast is left to move where several read one value; and again after
  // the moves and fusions, which leave round trips and Casts to a value's own type.
  st.reshapes_merged = merge_duplicate_reshapes(g);
  st.casts_merged = drop_and_merge(g);
  int64_t removed = remove_dead_casts(g);
  st.casts_moved = move_casts(g);
  st.casts_fused = fuse_casts(g);
  st.casts_merged += drop_and_merge(g);
  removed += remove_dead_casts(g);
  st.casts_removed = removed - st.casts_merged;
  return st;
}

std::string CastEliminationPass::summary() const {
  return "drop Casts to the same type and exact round trips (f16->f32->f16), merge duplicate Casts, move Casts "
         "so Reshape/Transpose run on the narrower type, take Casts into BiasGelu, bias Adds and bias sums; exact";
}

void CastEliminationPass::run(Graph& g, PassContext&) {
  if (!opts_.enabled) return;
  auto st = eliminate_casts(g);
  // A memory plan made before this pass may name values that are gone or read elsewhere now (a
  // Cast rewired past an exact one changes no counter), so none survives it.
  g.memory_plans.clear();
  set_counters({{"casts_removed", st.casts_removed},
                {"casts_merged", st.casts_merged},
                {"casts_moved", st.casts_moved},
                {"reshapes_merged", st.reshapes_merged},
                {"casts_fused", st.casts_fused}});
}

}  // namespace otter
