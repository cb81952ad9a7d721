// Graphviz DOT form of a graph (see printer_dot.h).
#include "graph/printer_dot.h"

#include <unordered_map>

#include "graph/graph_part.h"

namespace otter {

namespace {

constexpr const char* kHalfColor = "#e8590c";
constexpr const char* kHalfFill = "#ffd8a8";

bool is_half(const Value* v) {
  return v && (v->dtype() == DataType::kFloat16 || v->dtype() == DataType::kBFloat16);
}

std::string escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out;
}

std::string value_line(const Value* v) { return escape(str_cat("%", v->name(), ": ", v->type_string())); }

struct ClusterStyle {
  GraphPart part;
  const char* label;
  const char* border;
  const char* fill;
};
constexpr ClusterStyle kClusters[] = {
    {GraphPart::kForward, "forward (micro-step)", "#4a78c2", "#eef3fc"},
    {GraphPart::kBackward, "backward (micro-step)", "#c0504d", "#fcefee"},
    {GraphPart::kApply, "apply (once per optimizer step)", "#3a8a4f", "#edf7ef"},
};

// A source value (input, parameter, constant, state) as a DOT node statement.
std::string source_statement(const std::string& id, const Value* v) {
  const char* role = "input";
  const char* shape = "ellipse";
  if (v->kind() == ValueKind::kInitializer) {
    role = v->trainable() ? "param" : "const";
    shape = v->trainable() ? "box" : "plaintext";
  } else if (v->kind() == ValueKind::kState) {
    role = "state";
    shape = "cylinder";
  }
  std::string style = v->kind() == ValueKind::kInitializer && v->trainable() ? "rounded" : "solid";
  std::string extra = is_half(v) ? str_cat(", color=\"", kHalfColor, "\", fontcolor=\"", kHalfColor, "\"") : "";
  return str_cat(id, " [label=\"", role, " ", value_line(v), "\", shape=", shape, ", style=", style, extra, "];");
}

std::string node_statement(const std::string& id, const Node& n) {
  std::string label = escape((n.domain().empty() ? "" : n.domain() + ".") + n.op_type());
  bool half = false;
  for (const Value* o : n.outputs()) {
    if (!o) continue;
    label += "\\n" + value_line(o);
    half |= is_half(o);
  }
  return str_cat(id, " [label=\"", label, "\", fillcolor=\"", half ? kHalfFill : "white", "\"];");
}

}  // namespace

void print_graph_dot(const Graph& g, std::ostream& os) {
  std::unordered_map<const Value*, std::string> source_id;
  std::unordered_map<const Node*, std::string> node_id;
  os << "// otter graph " << g.name << ": clusters are the forward, backward and apply parts; orange marks\n"
     << "// values in half precision (f16, bf16); dashed edges write state.\n";
  os << "digraph \"" << escape(g.name) << "\" {\n"
     << "  rankdir=TB;\n"
     << "  graph [fontname=\"Helvetica\"];\n"
     << "  node [fontname=\"Helvetica\", fontsize=10, shape=box, style=filled];\n"
     << "  edge [fontname=\"Helvetica\", fontsize=9];\n";
  for (const Value* v : g.values()) {
    if (v->kind() == ValueKind::kNode) continue;
    std::string id = str_cat("v", source_id.size());
    source_id[v] = id;
    os << "  " << source_statement(id, v) << "\n";
  }
  auto parts = classify_parts(g);
  for (const ClusterStyle& c : kClusters) {
    bool any = false;
    for (const auto& n : g.nodes()) {
      if (parts.at(n.get()) != c.part) continue;
      if (!any)
        os << "  subgraph cluster_" << graph_part_name(c.part) << " {\n    label=\"" << c.label << "\"; color=\""
           << c.border << "\"; style=filled; fillcolor=\"" << c.fill << "\";\n";
      any = true;
      std::string id = str_cat("n", node_id.size());
      node_id[n.get()] = id;
      os << "    " << node_statement(id, *n) << "\n";
    }
    if (any) os << "  }\n";
  }
  auto id_of = [&](const Value* v) { return v->producer() ? node_id.at(v->producer()) : source_id.at(v); };
  auto edge_attrs = [](const Value* v) {
    return is_half(v) ? str_cat(" [color=\"", kHalfColor, "\", penwidth=2]") : std::string();
  };
  for (const auto& n : g.nodes())
    for (const Value* in : n->inputs())
      if (in) os << "  " << id_of(in) << " -> " << node_id.at(n.get()) << edge_attrs(in) << ";\n";
  for (size_t k = 0; k < g.outputs().size(); ++k) {
    const Value* v = g.outputs()[k];
    os << "  out" << k << " [label=\"output " << escape("%" + v->name()) << "\", shape=oval, style=bold];\n";
    os << "  " << id_of(v) << " -> out" << k << edge_attrs(v) << ";\n";
  }
  for (const Value* v : g.values()) {  // creation order: deterministic
    auto it = g.state_updates.find(const_cast<Value*>(v));
    if (it == g.state_updates.end() || !it->second) continue;
    os << "  " << id_of(it->second) << " -> " << source_id.at(v)
       << " [style=dashed, constraint=false, label=\"update\"];\n";
  }
  os << "}\n";
}

}  // namespace otter
