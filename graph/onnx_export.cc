// ONNX export: Graph -> ModelProto. Internal ops go to domain ai.otter; state, frozen parameters,
// apply-program nodes, gradients, loss seed and loss scale are recorded in metadata_props so that
// import (graph/onnx_import.cc) restores them.
#include <algorithm>
#include <map>
#include <unordered_set>

#include "graph/error.h"
#include "graph/onnx_proto.h"
#include "graph/op_table.h"

namespace otter {

namespace onnx_detail {

// otter's metadata keys (what ONNX cannot say) next to the graph's own metadata.
static void add_metadata(const Graph& g, const std::vector<std::string>& state, const std::vector<std::string>& frozen,
                         const std::vector<std::string>& updates, const std::vector<std::string>& apply_nodes,
                         onnx::ModelProto& m) {
  std::vector<std::string> gradients;
  for (const auto& [p, gr] : g.gradients) {
    OTTER_CHECK(p, "export: graph '", g.name, "' records a gradient of a null parameter");
    gradients.push_back(p->name() + "=" + (gr ? gr->name() : ""));
  }

  std::map<std::string, std::string> meta = g.metadata;
  for (const char* k : kOwnKeys) meta.erase(k);
  meta[kStateKey] = join(state, ",");
  meta[kStateUpdatesKey] = join(updates, ",");
  meta[kFrozenKey] = join(frozen, ",");
  if (!apply_nodes.empty()) meta[kApplyNodesKey] = join(apply_nodes, ",");
  if (!gradients.empty()) meta[kGradientsKey] = join(gradients, ",");
  if (g.loss_seed) meta[kLossSeedKey] = g.loss_seed->name();
  if (g.loss_scale) meta[kLossScaleKey] = g.loss_scale->name();
  for (const auto& [k, v] : meta) {
    auto* p = m.add_metadata_props();
    p->set_key(k);
    p->set_value(v);
  }
}

onnx::ModelProto graph_to_model(const Graph& g) {
  onnx::ModelProto m;
  std::map<std::string, int> imports;
  for (const auto& [d, v] : g.opset_imports) imports[normalize_domain(d)] = v;
  for (const auto& n : g.nodes()) {
    const std::string d = normalize_domain(n->domain());
    if (!imports.count(d)) imports[d] = d == kOtterDomain ? 1 : (d.empty() ? kDefaultExportOpset : n->opset());
  }
  if (!imports.count("")) imports[""] = kDefaultExportOpset;
  for (const auto& [d, v] : imports) {
    auto* op = m.add_opset_import();
    op->set_domain(d);
    op->set_version(v);
  }
  m.set_ir_version(std::max<int64_t>(g.ir_version, ir_version_for_opset(imports.at(""))));
  if (!g.producer_name.empty()) m.set_producer_name(g.producer_name);
  if (!g.producer_version.empty()) m.set_producer_version(g.producer_version);
  if (!g.doc_string.empty()) m.set_doc_string(g.doc_string);

  onnx::GraphProto* gp = m.mutable_graph();
  gp->set_name(g.name.empty() ? "main" : g.name);
  for (const Value* v : g.inputs()) value_info_to_proto(*v, gp->add_input());
  std::vector<std::string> state, frozen, updates;
  for (const Value* v : g.values()) {
    if (v->kind() != ValueKind::kInitializer && v->kind() != ValueKind::kState) continue;
    OTTER_CHECK(v->has_data(), "export: ", v->kind() == ValueKind::kState ? "state '" : "initializer '", v->name(),
                "' has no data");
    tensor_to_proto(v->data(), v->name(), gp->add_initializer());
    if (v->kind() == ValueKind::kState)
      state.push_back(v->name());
    else if (is_float(v->dtype()) && !v->trainable())
      frozen.push_back(v->name());
  }
  for (const Value* s : g.values()) {  // state and parameters updated in place, in creation order
    auto it = g.state_updates.find(const_cast<Value*>(s));
    if (it != g.state_updates.end() && it->second) updates.push_back(s->name() + "=" + it->second->name());
  }
  std::unordered_set<const Value*> outputs;
  for (const Value* o : g.outputs()) {
    OTTER_CHECK(o, "export: graph '", g.name, "' has a null output");
    outputs.insert(o);
    value_info_to_proto(*o, gp->add_output());
  }
  std::vector<std::string> apply_nodes;
  for (const auto& n : g.nodes()) {
    if (n->program() == Program::kApply) apply_nodes.push_back(std::to_string(gp->node_size()));
    node_to_proto(*n, [](const Value* v) { return v->name(); }, gp->add_node());
    for (const Value* o : n->outputs()) {
      if (!o || outputs.count(o)) continue;
      if (o->dtype() == DataType::kUndefined && !o->shape().rank_known) continue;
      value_info_to_proto(*o, gp->add_value_info());
    }
  }

  add_metadata(g, state, frozen, updates, apply_nodes, m);
  return m;
}

}  // namespace onnx_detail

std::string export_onnx_bytes(const Graph& g) {
  onnx::ModelProto m = onnx_detail::graph_to_model(g);
  std::string out;
  OTTER_CHECK(m.SerializeToString(&out), "export: cannot serialize graph '", g.name,
              "' (protobuf limits a model to 2 GiB)");
  return out;
}

}  // namespace otter
