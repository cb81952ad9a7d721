// JSON form of a graph (see printer_json.h).
#include "graph/printer_json.h"

#include <algorithm>

#include "graph/graph_part.h"
#include "graph/json_writer.h"

namespace otter {

namespace {

const char* kind_name(const Value& v) {
  switch (v.kind()) {
    case ValueKind::kInput: return "input";
    case ValueKind::kInitializer: return v.trainable() ? "param" : "const";
    case ValueKind::kState: return "state";
    case ValueKind::kNode: break;
  }
  return "node";
}

void write_shape(const Shape& s, JsonWriter& w) {
  if (!s.rank_known) {
    w.null();
    return;
  }
  w.begin_array();
  for (const Dim& d : s.dims) {
    if (d.is_static()) w.value(d.value);
    else if (d.is_symbolic()) w.value(d.symbol);
    else w.null();
  }
  w.end_array();
}

void write_tensor(const Tensor& t, JsonWriter& w) {
  w.begin_object();
  w.field("dtype", dtype_name(t.dtype()));
  w.key("dims");
  w.begin_array();
  for (int64_t d : t.dims()) w.value(d);
  w.end_array();
  if (t.numel() <= 8 && t.on_host()) {
    w.key("data");
    w.begin_array();
    for (int64_t i = 0; i < t.numel(); ++i) {
      if (is_float(t.dtype())) w.value(t.get_as_double(i));
      else w.value(static_cast<int64_t>(t.get_as_double(i)));
    }
    w.end_array();
  }
  w.end_object();
}

template <typename T>
void write_list(const std::vector<T>& xs, JsonWriter& w) {
  w.begin_array();
  for (const T& x : xs) {
    if constexpr (std::is_same_v<T, float>) w.value(static_cast<double>(x));
    else w.value(x);
  }
  w.end_array();
}

void write_attr(const Attribute& a, JsonWriter& w) {
  switch (a.kind()) {
    case Attribute::Kind::kFloat: w.value(static_cast<double>(a.f())); break;
    case Attribute::Kind::kInt: w.value(a.i()); break;
    case Attribute::Kind::kString: w.value(a.s()); break;
    case Attribute::Kind::kTensor: write_tensor(a.t(), w); break;
    case Attribute::Kind::kFloats: write_list(a.floats(), w); break;
    case Attribute::Kind::kInts: write_list(a.ints(), w); break;
    case Attribute::Kind::kStrings: write_list(a.strings(), w); break;
    case Attribute::Kind::kGraph:
    case Attribute::Kind::kGraphs: w.value(a.to_string()); break;  // subgraphs by name only
  }
}

void write_ref(const Value* v, JsonWriter& w) {
  if (v) w.value(v->name());
  else w.null();
}

void write_values(const Graph& g, JsonWriter& w) {
  w.key("values");
  w.begin_array();
  for (const Value* v : g.values()) {
    w.begin_object();
    w.field("name", v->name());
    w.field("kind", kind_name(*v));
    w.field("dtype", dtype_name(v->dtype()));
    w.key("shape");
    write_shape(v->shape(), w);
    w.end_object();
  }
  w.end_array();
}

void write_nodes(const Graph& g, JsonWriter& w) {
  auto parts = classify_parts(g);
  w.key("nodes");
  w.begin_array();
  for (const auto& n : g.nodes()) {
    w.begin_object();
    w.field("op", n->op_type());
    w.field("domain", n->domain());
    w.field("name", n->name());
    w.field("program", n->program() == Program::kApply ? "apply" : "micro-step");
    w.field("part", graph_part_name(parts.at(n.get())));
    w.key("inputs");
    w.begin_array();
    for (const Value* v : n->inputs()) write_ref(v, w);
    w.end_array();
    w.key("outputs");
    w.begin_array();
    for (const Value* v : n->outputs()) write_ref(v, w);
    w.end_array();
    w.key("attrs");
    w.begin_object();
    for (const auto& [k, a] : n->attrs()) {
      w.key(k);
      write_attr(a, w);
    }
    w.end_object();
    w.end_object();
  }
  w.end_array();
}

void write_training_facts(const Graph& g, JsonWriter& w) {
  w.key("state_updates");
  w.begin_object();
  std::vector<std::pair<std::string, const Value*>> updates;
  for (const auto& [s, u] : g.state_updates) updates.emplace_back(s->name(), u);
  std::sort(updates.begin(), updates.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  for (const auto& [s, u] : updates) {
    w.key(s);
    write_ref(u, w);
  }
  w.end_object();
  w.key("gradients");
  w.begin_object();
  for (const auto& [p, gr] : g.gradients) {
    w.key(p->name());
    write_ref(gr, w);
  }
  w.end_object();
  w.key("loss_seed");
  write_ref(g.loss_seed, w);
  w.key("loss_scale");
  write_ref(g.loss_scale, w);
}

}  // namespace

void write_graph_json(const Graph& g, JsonWriter& w) {
  w.begin_object();
  w.field("name", g.name);
  w.key("opset_imports");
  w.begin_object();
  for (const auto& [d, v] : g.opset_imports) w.field(d, static_cast<int64_t>(v));
  w.end_object();
  write_values(g, w);
  write_nodes(g, w);
  w.key("outputs");
  w.begin_array();
  for (const Value* v : g.outputs()) write_ref(v, w);
  w.end_array();
  write_training_facts(g, w);
  w.end_object();
}

void print_graph_json(const Graph& g, std::ostream& os) {
  JsonWriter w(os);
  write_graph_json(g, w);
  os << "\n";
}

}  // namespace otter
