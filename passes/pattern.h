// Small graph-matching predicates shared by the fusion passes (fuse-attention, fuse-bias-gelu).
#pragma once

#include <optional>

#include "graph/ir.h"

namespace otter::pattern {

// n is the default-domain op `op`.
inline bool is_op(const Node* n, const char* op) { return n && n->domain().empty() && n->op_type() == op; }

// v feeds exactly one node and is not a graph output, so a fusion may absorb its producer.
inline bool single_use(const Value* v) { return v && v->uses().size() == 1 && !v->is_graph_output(); }

// The value of a frozen initializer with one element.
inline std::optional<double> const_scalar(const Value* v) {
  if (!v || v->kind() != ValueKind::kInitializer || v->trainable() || !v->has_data() || v->data().numel() != 1)
    return std::nullopt;
  return v->data().get_as_double(0);
}

}  // namespace otter::pattern
