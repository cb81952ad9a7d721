// Deterministic graph printer.
#include "graph/printer.h"

#include <algorithm>
#include <sstream>
#include <tuple>

namespace otter {

namespace {

std::string ref(const Value* v) { return v ? "%" + v->name() : "_"; }

std::string decl(const Value* v) { return v ? str_cat("%", v->name(), ": ", v->type_string()) : "_"; }

std::string small_data(const Tensor& t) {
  if (t.numel() > 8) return "";
  std::ostringstream os;
  os << " = [";
  for (int64_t i = 0; i < t.numel(); ++i) {
    if (i) os << ",";
    double d = t.get_as_double(i);
    if (is_float(t.dtype())) os << Attribute(static_cast<float>(d)).to_string();
    else os << static_cast<int64_t>(d);
  }
  os << "]";
  return os.str();
}

}  // namespace

std::string node_to_string(const Node& n) {
  std::ostringstream os;
  for (int i = 0; i < n.num_outputs(); ++i) os << (i ? ", " : "") << decl(n.output(i));
  os << " = ";
  if (!n.domain().empty()) os << n.domain() << ".";
  os << n.op_type() << "(";
  const int formal = n.num_formal_inputs();
  for (int i = 0; i < formal; ++i) os << (i ? ", " : "") << ref(n.input(i));
  for (int i = formal; i < n.num_inputs(); ++i) os << (i > formal ? ", " : formal ? "; captures " : "captures ") << ref(n.input(i));
  os << ")";
  if (!n.attrs().empty()) {
    os << " {";
    bool first = true;
    for (const auto& [k, a] : n.attrs()) {
      os << (first ? "" : ", ") << k << "=" << a.to_string();
      first = false;
    }
    os << "}";
  }
  return os.str();
}

namespace {

// The graph's lines from its inputs to its outputs, each indented by `ind`; a node's subgraphs
// follow it, indented one level more.
void print_body(const Graph& g, std::ostream& os, const PrintOptions& opts, const std::string& ind) {
  for (const Value* v : g.captures()) os << ind << "capture " << decl(v) << "\n";
  for (const Value* v : g.inputs()) os << ind << "input " << decl(v) << "\n";
  for (const Value* v : g.values()) {
    if (v->kind() == ValueKind::kInitializer)
      os << ind << (v->trainable() ? "param " : "const ") << decl(v)
         << (v->trainable() ? "" : small_data(v->data())) << "\n";
    else if (v->kind() == ValueKind::kState)
      os << ind << "state " << decl(v) << "\n";
  }
  Program prog = Program::kMicroStep;
  for (const auto& n : g.nodes()) {
    if (n->program() != prog) {
      prog = n->program();
      os << ind << (prog == Program::kApply ? "// apply program (once per optimizer step)\n"
                                            : "// micro-step program\n");
    }
    os << ind << node_to_string(*n);
    if (opts.show_node_names && !n->name().empty()) os << "  # " << n->name();
    os << "\n";
    for (const auto& [k, a] : n->attrs()) {
      std::vector<const Graph*> subs;
      if (a.kind() == Attribute::Kind::kGraph) subs.push_back(a.g().get());
      if (a.kind() == Attribute::Kind::kGraphs)
        for (const auto& sg : a.graphs()) subs.push_back(sg.get());
      for (const Graph* sg : subs) {
        os << ind << "  " << k << ": graph " << sg->name << " {\n";
        print_body(*sg, os, opts, ind + "    ");
        os << ind << "  }\n";
      }
    }
  }
  std::vector<std::pair<std::string, std::string>> updates;
  for (const auto& [s, u] : g.state_updates) updates.emplace_back(s->name(), u ? u->name() : "_");
  std::sort(updates.begin(), updates.end());
  for (const auto& [s, u] : updates) os << ind << "update %" << s << " <- %" << u << "\n";
  for (const auto& [p, gr] : g.gradients) os << ind << "gradient %" << p->name() << " <- " << ref(gr) << "\n";
  for (const Value* v : g.outputs()) os << ind << "output " << ref(v) << "\n";
}

}  // namespace

void print_graph(const Graph& g, std::ostream& os, const PrintOptions& opts) {
  os << "graph " << g.name << " (";
  bool first = true;
  for (const auto& [d, v] : g.opset_imports) {
    os << (first ? "" : ", ") << (d.empty() ? "ai.onnx" : d) << " " << v;
    if (d.empty() && g.upgraded_from_opset) os << " upgraded from " << g.upgraded_from_opset;
    first = false;
  }
  os << ") {\n";
  print_body(g, os, opts, "  ");
  for (const auto& [p, plan] : g.memory_plans) {
    os << "  plan " << (p == Program::kApply ? "apply" : "micro-step") << ": arena " << plan.arena_bytes
       << " B (free-after-last-use peak " << plan.unplanned_peak_bytes << " B)\n";
    std::vector<std::tuple<int64_t, int, std::string>> order;  // by offset, then first node, then name
    for (const auto& [name, b] : plan.buffers) order.emplace_back(b.offset, b.first, name);
    std::sort(order.begin(), order.end());
    for (const auto& [off, first, name] : order) {
      const MemoryPlan::Buffer& b = plan.buffers.at(name);
      os << "    %" << name << " @" << b.offset << " " << b.bytes << " B [" << b.first << ".." << b.last << "]"
         << (b.reuses.empty() ? "" : " reuses %" + b.reuses) << "\n";
    }
  }
  os << "}\n";
}

std::string graph_to_string(const Graph& g, const PrintOptions& opts) {
  std::ostringstream os;
  print_graph(g, os, opts);
  return os.str();
}

}  // namespace otter
