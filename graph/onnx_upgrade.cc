// Opset upgrade at import: a model of default-domain opset 1..12 is rewritten to opset 13 (otter's
// lowest) by ONNX's own C++ version converter (libonnx, onnx/version_converter/convert.h), which
// carries each op through the schema changes of those opsets (Reduce* and Squeeze/Unsqueeze axes,
// Split sizes, Pad and Clip attributes to inputs, Upsample to Resize, ...). The graph records the
// original opset, and the printer shows it (`ai.onnx 13 upgraded from 9`).
#include <onnx/defs/schema.h>
#include <onnx/version_converter/convert.h>

#include <map>
#include <unordered_set>

#include "graph/onnx_proto.h"
#include "graph/op_table.h"

namespace otter::onnx_detail {

// Oldest default-domain opset the version converter is asked to upgrade.
constexpr int kMinUpgradableOpset = 1;

int default_domain_opset(const onnx::ModelProto& m) {
  for (const auto& op : m.opset_import())
    if (normalize_domain(op.domain()).empty()) return static_cast<int>(op.version());
  return 0;
}

namespace {

// ONNX's version converter builds its own IR (onnx::graphProtoToGraph), which dereferences a null
// value when a node reads, or the graph returns, a name that nothing defines (found by fuzzing:
// tests/data/fuzz/onnx_model/crash-upgrade-undefined-output). So the structure it relies on is
// checked first: every name read is a graph input, an initializer, an earlier node's output or (in
// a subgraph) a name of an enclosing graph, and no name is defined twice.
void check_defined_before_upgrade(const onnx::GraphProto& g, std::unordered_set<std::string> scope,
                                  const std::string& what) {
  std::unordered_set<std::string> local;  // a subgraph may shadow a name of an enclosing graph
  auto define = [&](const std::string& name, const char* kind) {
    if (name.empty()) return;
    if (!local.insert(name).second)
      fail(what, ": graph '", g.name(), "': ", kind, " '", name, "' defines a name already defined");
    scope.insert(name);
  };
  for (const auto& i : g.input()) define(i.name(), "input");
  for (const auto& t : g.initializer())
    if (!local.count(t.name())) define(t.name(), "initializer");
  for (const auto& n : g.node()) {
    for (const auto& in : n.input())
      if (!in.empty() && !scope.count(in))
        fail(what, ": node '", n.name(), "' (", n.op_type(), ") reads '", in,
             "', which no graph input, initializer or earlier node defines");
    for (const auto& a : n.attribute()) {
      if (a.has_g()) check_defined_before_upgrade(a.g(), scope, what);
      for (const auto& sub : a.graphs()) check_defined_before_upgrade(sub, scope, what);
    }
    for (const auto& out : n.output()) define(out, "node output");
  }
  for (const auto& o : g.output())
    if (!scope.count(o.name()))
      fail(what, ": graph output '", o.name(), "' is not defined by any input, initializer or node");
}

// The converter's adapters also trust attribute types: an `axes` of floats made one allocate
// 0x4141414141414200 bytes (tests/data/fuzz/onnx_text/crash-upgrade-float-axes). So each attribute
// of a default-domain node must have the type its schema at `opset` declares.
void check_attribute_types(const onnx::GraphProto& g, int opset, const std::string& what) {
  for (const auto& n : g.node()) {
    for (const auto& a : n.attribute()) {
      if (a.has_g()) check_attribute_types(a.g(), opset, what);
      for (const auto& sub : a.graphs()) check_attribute_types(sub, opset, what);
    }
    if (!normalize_domain(n.domain()).empty()) continue;
    const onnx::OpSchema* schema = onnx::OpSchemaRegistry::Schema(n.op_type(), opset, "");
    if (!schema) continue;  // the converter names an op it does not know
    for (const auto& a : n.attribute()) {
      auto it = schema->attributes().find(a.name());
      if (a.type() == onnx::AttributeProto::UNDEFINED || it == schema->attributes().end()) continue;
      if (it->second.type != a.type())
        fail(what, ": node '", n.name(), "' (", n.op_type(), "): attribute '", a.name(), "' has type ",
             onnx::AttributeProto_AttributeType_Name(a.type()), ", but opset ", opset, " declares ",
             onnx::AttributeProto_AttributeType_Name(it->second.type));
    }
  }
}

// Scan before opset 9 has a batch axis 0 on every input and output; ONNX's Scan 8 -> 9 adapter
// (onnx/version_converter/adapters/scan_8_9.h) drops it from the declared types but not from the
// data, so a batch-1 model would be fed tensors one rank too high. The converted graph gets the
// batch axis back around each such Scan of the main graph (Squeeze before, Unsqueeze after, both
// on axis 0) and its inputs and outputs their declared types; batches above 1 are refused.
std::vector<int> batched_scans(const onnx::ModelProto& m, int from, const std::string& what) {
  std::vector<int> out;
  if (from >= 9) return out;
  const onnx::GraphProto& g = m.graph();
  std::map<std::string, const onnx::TypeProto*> declared;
  for (const auto& v : g.input()) declared[v.name()] = &v.type();
  for (int i = 0; i < g.node_size(); ++i) {
    const auto& n = g.node(i);
    if (n.op_type() != "Scan" || !normalize_domain(n.domain()).empty()) continue;
    for (int k = 1; k < n.input_size(); ++k) {
      auto it = declared.find(n.input(k));
      if (it == declared.end() || !it->second->tensor_type().has_shape()) continue;
      const auto& shape = it->second->tensor_type().shape();
      if (shape.dim_size() > 0 && shape.dim(0).has_dim_value() && shape.dim(0).dim_value() != 1)
        fail(what, ": Scan (output '", n.output_size() ? n.output(0) : "", "') at opset ", from,
             " has a batch of ", shape.dim(0).dim_value(), "; otter upgrades opset-8 Scan with batch 1 only");
    }
    out.push_back(i);
  }
  return out;
}

void restore_scan_batch(const onnx::ModelProto& original, const std::vector<int>& scans, onnx::ModelProto& m) {
  if (scans.empty()) return;
  onnx::GraphProto* g = m.mutable_graph();
  onnx::TensorProto* axes = g->add_initializer();
  axes->set_name("otter.scan8.axes");
  axes->set_data_type(onnx::TensorProto::INT64);
  axes->add_dims(1);
  axes->add_int64_data(0);
  std::unordered_set<std::string> touched;
  for (int i : scans) {
    const onnx::NodeProto& before = original.graph().node(i);
    onnx::NodeProto* scan = nullptr;
    for (auto& n : *g->mutable_node())
      if (n.op_type() == "Scan" && n.output_size() && n.output(0) == before.output(0)) scan = &n;
    if (!scan) continue;
    for (int k = 0; k < scan->input_size(); ++k) {
      std::string unbatched = scan->input(k) + ".otter.unbatched";
      onnx::NodeProto* sq = g->add_node();
      sq->set_op_type("Squeeze");
      sq->add_input(scan->input(k));
      sq->add_input(axes->name());
      sq->add_output(unbatched);
      touched.insert(scan->input(k));
      scan->set_input(k, unbatched);
    }
    for (int k = 0; k < scan->output_size(); ++k) {
      std::string batched = scan->output(k);
      scan->set_output(k, batched + ".otter.unbatched");
      onnx::NodeProto* un = g->add_node();
      un->set_op_type("Unsqueeze");
      un->add_input(scan->output(k));
      un->add_input(axes->name());
      un->add_output(batched);
      touched.insert(batched);
    }
  }
  // The declared types the adapter cut down go back to the original ones.
  auto restore = [&](google::protobuf::RepeatedPtrField<onnx::ValueInfoProto>* now,
                     const google::protobuf::RepeatedPtrField<onnx::ValueInfoProto>& was) {
    for (auto& v : *now)
      for (const auto& o : was)
        if (o.name() == v.name() && touched.count(v.name())) *v.mutable_type() = o.type();
  };
  restore(g->mutable_input(), original.graph().input());
  restore(g->mutable_output(), original.graph().output());
  auto* vi = g->mutable_value_info();
  for (int k = vi->size() - 1; k >= 0; --k)
    if (touched.count(vi->Get(k).name())) vi->DeleteSubrange(k, 1);
}

}  // namespace

std::optional<onnx::ModelProto> upgrade_opset(const onnx::ModelProto& m, const std::string& what) {
  int from = default_domain_opset(m);
  if (from == 0 || from >= kMinOnnxOpset) return std::nullopt;
  if (from < kMinUpgradableOpset)
    fail(what, ": opset ", from, " of the default domain (ai.onnx) is not supported; otter supports opsets ",
         kMinOnnxOpset, " to ", kMaxOnnxOpset, " and upgrades ", kMinUpgradableOpset, " to ", kMinOnnxOpset - 1,
         " at import");
  check_defined_before_upgrade(m.graph(), {}, what);
  check_attribute_types(m.graph(), from, what);
  const std::vector<int> scans = batched_scans(m, from, what);
  try {
    onnx::ModelProto up = onnx::version_conversion::ConvertVersion(m, kMinOnnxOpset);
    restore_scan_batch(m, scans, up);
    return up;
  } catch (const std::exception& e) {
    fail(what, ": upgrading opset ", from, " to ", kMinOnnxOpset, " with ONNX's version converter failed: ", e.what());
  }
}

}  // namespace otter::onnx_detail
