// Opset upgrade at import: a model of default-domain opset 1..12 is rewritten to opset 13 (otter's
// lowest) by ONNX's own C++ version converter (libonnx, onnx/version_converter/convert.h), which
// carries each op through the schema changes of those opsets (Reduce* and Squeeze/Unsqueeze axes,
// Split sizes, Pad and Clip attributes to inputs, Upsample to Resize, ...). The graph records the
// original opset, and the printer shows it (`ai.onnx 13 upgraded from 9`).
#include <onnx/defs/schema.h>
#include <onnx/version_converter/convert.h>

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
  try {
    return onnx::version_conversion::ConvertVersion(m, kMinOnnxOpset);
  } catch (const std::exception& e) {
    fail(what, ": upgrading opset ", from, " to ", kMinOnnxOpset, " with ONNX's version converter failed: ", e.what());
  }
}

}  // namespace otter::onnx_detail
