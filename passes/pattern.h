// Small graph-matching predicates and builders shared by the rewriting passes (fuse-attention,
// fuse-bias-gelu, mixed-precision, cast-elimination).
#pragma once

#include <optional>
#include <string>

#include "graph/ir.h"
#include "graph/op_table.h"

namespace otter::pattern {

// n is the default-domain op `op`.
inline bool is_op(const Node* n, const char* op) { return n && n->domain().empty() && n->op_type() == op; }

// n is the ai.otter op `op`.
inline bool is_otter_op(const Node* n, const char* op) {
  return n && n->domain() == kOtterDomain && n->op_type() == op;
}

// v feeds exactly one node and is not a graph output, so a fusion may absorb its producer.
inline bool single_use(const Value* v) { return v && v->uses().size() == 1 && !v->is_graph_output(); }

// v is absent or read by nothing: no node uses it and it is no graph output.
inline bool unread(const Value* v) { return !v || (v->uses().empty() && !v->is_graph_output()); }

// The value of a frozen initializer with one element.
inline std::optional<double> const_scalar(const Value* v) {
  if (!v || v->kind() != ValueKind::kInitializer || v->trainable() || !v->has_data() || v->data().numel() != 1)
    return std::nullopt;
  return v->data().get_as_double(0);
}

// A value name with a dtype suffix: "x" -> "x.bf16".
inline std::string suffixed(const std::string& name, DataType t) { return name + "." + std::string(dtype_name(t)); }

// Cast(v, to) named `name`, placed before `before` and in its program (at the end when null).
inline Node* add_cast(Graph& g, Value* v, DataType to, const std::string& name, Node* before) {
  Node* c = g.add_node("Cast", {v}, {name}, "", before);
  c->set_attr("to", Attribute(static_cast<int64_t>(dtype_to_onnx(to))));
  if (before) c->set_program(before->program());
  infer_node(*c);
  return c;
}

}  // namespace otter::pattern
