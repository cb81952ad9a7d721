// Subgraphs (the GRAPH / GRAPHS attributes of If, Loop and Scan) between ONNX and otter's IR. A
// subgraph is imported on its own: its inputs, constants, nodes and outputs; every name it reads
// but does not define becomes one of its captures (graph/ir.h), and the node that holds it takes
// the outer values of those names as implicit inputs, resolved by the enclosing graph's importer
// (graph/onnx_import.cc) the way it resolves the node's own inputs. Export writes the captured
// values back under the outer names.
#include <unordered_set>

#include "graph/error.h"
#include "graph/limits.h"
#include "graph/onnx_proto.h"

namespace otter::onnx_detail {

namespace {

// Finds `name` in the subgraph, or makes it a capture (typed later, by the holder's inference).
Value* resolve_or_capture(Graph& g, const std::string& name) {
  if (Value* v = g.find_value(name)) return v;
  return g.add_capture(name, DataType::kUndefined, Shape::unknown());
}

void add_sub_inputs(Graph& g, const onnx::GraphProto& gp, const std::string& what,
                    std::unordered_set<std::string>& defined, const std::string& base_dir) {
  auto define = [&](const std::string& name, const std::string& by) {
    OTTER_CHECK(!name.empty(), what, ": ", by, " has no name");
    OTTER_CHECK(defined.insert(name).second, what, ": value '", name, "' is defined twice");
  };
  for (int i = 0; i < gp.input_size(); ++i) {
    const auto& in = gp.input(i);
    define(in.name(), str_cat("input #", i));
    DeclaredType t = type_from_proto(in.type(), str_cat(what, ": input '", in.name(), "'"));
    g.add_input(in.name(), t.dtype, t.shape);
  }
  for (int i = 0; i < gp.initializer_size(); ++i) {
    const auto& tp = gp.initializer(i);
    define(tp.name(), str_cat("initializer #", i));
    g.add_initializer(tp.name(), tensor_from_proto(tp, str_cat(what, ": initializer '", tp.name(), "'"), base_dir),
                      false);
  }
  OTTER_CHECK(gp.sparse_initializer_size() == 0, what, ": sparse initializers are not supported");
}

}  // namespace

void wire_implicit_inputs(Node& n, const std::function<Value*(const std::string&)>& resolve) {
  for (Graph* sub : n.subgraphs())
    for (Value* c : sub->captures()) n.add_input(resolve(c->name()));
}

std::shared_ptr<Graph> import_subgraph(const onnx::GraphProto& gp, const SubgraphContext& ctx) {
  const std::string what = str_cat(ctx.what, ": subgraph '", gp.name(), "'");
  OTTER_CHECK(ctx.depth <= kMaxSubgraphDepth, what, ": subgraphs nest deeper than ", kMaxSubgraphDepth, " levels");
  auto g = std::make_shared<Graph>();
  g->name = gp.name().empty() ? "body" : gp.name();
  g->opset_imports = ctx.imports;
  std::unordered_set<std::string> defined;
  add_sub_inputs(*g, gp, what, defined, ctx.base_dir);
  std::vector<Node*> created;
  for (const auto& np : gp.node()) {
    std::string desc = str_cat(what, ": ", describe_proto(np));
    std::vector<std::string> outs;
    for (const auto& o : np.output()) {
      OTTER_CHECK(o.empty() || defined.insert(o).second, desc, ": value '", o, "' is defined twice");
      outs.push_back(o);
    }
    std::string domain = normalize_domain(np.domain());
    auto it = ctx.imports.find(domain);
    OTTER_CHECK(it != ctx.imports.end(), desc, ": the model imports no opset of ", domain_label(domain));
    Node* n = g->add_node(np.op_type(), {}, outs, domain);
    n->set_name(np.name());
    n->set_opset(it->second);
    SubgraphContext inner = ctx;
    inner.what = desc;
    inner.depth = ctx.depth + 1;
    for (const auto& a : np.attribute()) {
      OTTER_CHECK(!n->has_attr(a.name()), desc, ": attribute '", a.name(), "' is given twice");
      n->set_attr(a.name(), node_attr_from_proto(a, inner));
    }
    created.push_back(n);
  }
  // Node outputs exist before any input is wired (files need not be sorted); then captures.
  for (int i = 0; i < gp.node_size(); ++i) {
    for (const auto& in : gp.node(i).input()) created[i]->add_input(in.empty() ? nullptr : resolve_or_capture(*g, in));
    wire_implicit_inputs(*created[i], [&](const std::string& name) { return resolve_or_capture(*g, name); });
  }
  for (int i = 0; i < gp.output_size(); ++i) {
    const auto& o = gp.output(i);
    OTTER_CHECK(!o.name().empty(), what, ": output #", i, " has no name");
    Value* v = resolve_or_capture(*g, o.name());
    DeclaredType t = type_from_proto(o.type(), str_cat(what, ": output '", o.name(), "'"));
    if (v->dtype() == DataType::kUndefined) v->set_dtype(t.dtype);
    if (!v->shape().rank_known) v->set_shape(t.shape);
    g->add_output(v);
  }
  try {
    g->topo_sort();
  } catch (const Error& e) {
    fail(what, ": ", e.what());
  }
  return g;
}

Attribute node_attr_from_proto(const onnx::AttributeProto& a, const SubgraphContext& ctx) {
  auto type = a.type();
  if (type == onnx::AttributeProto::UNDEFINED && a.has_g()) type = onnx::AttributeProto::GRAPH;
  if (type == onnx::AttributeProto::GRAPH) {
    OTTER_CHECK(a.has_g(), ctx.what, ": attribute '", a.name(), "' is a graph but holds none");
    return Attribute(import_subgraph(a.g(), ctx));
  }
  if (type == onnx::AttributeProto::GRAPHS) {
    std::vector<Attribute::GraphPtr> gs;
    for (const auto& g : a.graphs()) gs.push_back(import_subgraph(g, ctx));
    return Attribute(std::move(gs));
  }
  return attr_from_proto(a, ctx.what, ctx.base_dir);
}

void subgraph_to_proto(const Graph& g, const std::vector<std::string>& capture_names, onnx::GraphProto* gp) {
  OTTER_CHECK(capture_names.size() == g.captures().size(), "export: subgraph '", g.name, "' captures ",
              g.captures().size(), " values but its node passes ", capture_names.size());
  std::unordered_map<const Value*, std::string> renamed;
  for (size_t i = 0; i < capture_names.size(); ++i) renamed[g.captures()[i]] = capture_names[i];
  auto name_of = [&](const Value* v) {
    auto it = renamed.find(v);
    return it == renamed.end() ? v->name() : it->second;
  };
  gp->set_name(g.name);
  for (const Value* v : g.inputs()) value_info_to_proto(*v, gp->add_input());
  for (const Value* v : g.initializers()) tensor_to_proto(v->data(), v->name(), gp->add_initializer());
  for (const auto& n : g.nodes()) node_to_proto(*n, name_of, gp->add_node());
  for (const Value* o : g.outputs()) {
    value_info_to_proto(*o, gp->add_output());
    gp->mutable_output(gp->output_size() - 1)->set_name(name_of(o));
  }
}

void node_to_proto(const Node& n, const std::function<std::string(const Value*)>& name_of, onnx::NodeProto* np) {
  np->set_op_type(n.op_type());
  np->set_domain(normalize_domain(n.domain()));
  if (!n.name().empty()) np->set_name(n.name());
  const int formal = n.num_formal_inputs();
  for (int i = 0; i < formal; ++i) np->add_input(n.input(i) ? name_of(n.input(i)) : "");
  for (const Value* o : n.outputs()) np->add_output(o ? o->name() : "");
  int next = formal;  // the captures of each subgraph follow the formal inputs, in subgraphs() order
  auto sub_proto = [&](const Graph& g, onnx::GraphProto* gp) {
    std::vector<std::string> names;
    for (size_t i = 0; i < g.captures().size(); ++i) names.push_back(name_of(n.input(next++)));
    subgraph_to_proto(g, names, gp);
  };
  for (const auto& [k, a] : n.attrs()) {
    auto* ap = np->add_attribute();
    if (a.kind() == Attribute::Kind::kGraph) {
      ap->set_name(k);
      ap->set_type(onnx::AttributeProto::GRAPH);
      sub_proto(*a.g(), ap->mutable_g());
    } else if (a.kind() == Attribute::Kind::kGraphs) {
      ap->set_name(k);
      ap->set_type(onnx::AttributeProto::GRAPHS);
      for (const auto& g : a.graphs()) sub_proto(*g, ap->add_graphs());
    } else {
      attr_to_proto(k, a, ap);
    }
  }
}

}  // namespace otter::onnx_detail
