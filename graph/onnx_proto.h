// Internal to the ONNX import/export files (graph/onnx_*.cc): conversions between ONNX protobuf
// messages and otter's tensors, types and attributes, the metadata keys otter records, and small
// naming helpers. Library users include graph/onnx_io.h instead.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <onnx/onnx_pb.h>

#include "graph/ir.h"
#include "graph/onnx_io.h"

namespace otter::onnx_detail {

// Metadata keys through which export records what ONNX cannot say, so import restores it.
constexpr const char* kStateKey = "otter.state";
constexpr const char* kStateUpdatesKey = "otter.state_updates";
constexpr const char* kFrozenKey = "otter.frozen";
constexpr const char* kApplyNodesKey = "otter.apply_nodes";  // indices of apply-program nodes
constexpr const char* kGradientsKey = "otter.gradients";     // "param=grad,..." in order
constexpr const char* kLossSeedKey = "otter.loss_seed";
constexpr const char* kLossScaleKey = "otter.loss_scale";
constexpr const char* kOwnKeys[] = {kStateKey,     kStateUpdatesKey, kFrozenKey,   kApplyNodesKey,
                                    kGradientsKey, kLossSeedKey,     kLossScaleKey};
// Default-domain opset written when a graph built in code imports none.
constexpr int kDefaultExportOpset = 17;

std::string normalize_domain(const std::string& d);
// The model's default-domain opset (0 when it imports none).
int default_domain_opset(const onnx::ModelProto& m);
// A model of default-domain opset 1..12 upgraded to otter's lowest opset by ONNX's version
// converter (graph/onnx_upgrade.cc); nullopt when the model needs no upgrade.
std::optional<onnx::ModelProto> upgrade_opset(const onnx::ModelProto& m, const std::string& what);
std::string domain_label(const std::string& d);
// The smallest IR version that may carry a default-domain opset (ONNX's versioning table).
int64_t ir_version_for_opset(int opset);
std::string join(const std::vector<std::string>& parts, const std::string& sep);
std::vector<std::string> split(const std::string& s, char sep);
// How errors name a NodeProto before it becomes a Node (same form as Node::describe()).
std::string describe_proto(const onnx::NodeProto& n);
// "node 'n1'" or "unnamed node, output 'y'": the node part of an unsupported-op entry.
std::string node_label(const onnx::NodeProto& n, int index);

// Tensors (graph/onnx_tensor.cc). Data is checked to be present, within OTTER_MAX_TENSOR_BYTES and,
// for external data, inside `base_dir`, before the tensor is allocated.
Tensor tensor_from_proto(const onnx::TensorProto& p, const std::string& what, const std::string& base_dir);
void tensor_to_proto(const Tensor& t, const std::string& name, onnx::TensorProto* p);

// Types and attributes (graph/onnx_proto.cc).
struct DeclaredType {
  DataType dtype = DataType::kUndefined;
  Shape shape = Shape::unknown();
};
// The type of a graph input or output: must be a tensor (or left unset).
DeclaredType type_from_proto(const onnx::TypeProto& t, const std::string& what);
void value_info_to_proto(const Value& v, onnx::ValueInfoProto* p);
Attribute attr_from_proto(const onnx::AttributeProto& a, const std::string& node_desc, const std::string& base_dir);
void attr_to_proto(const std::string& name, const Attribute& a, onnx::AttributeProto* p);

// Subgraphs (graph/onnx_subgraph.cc): what the importer of an enclosing graph passes down.
struct SubgraphContext {
  std::map<std::string, int> imports;  // domain -> opset, the model's
  std::string base_dir;
  std::string what;  // names the node holding the subgraph, for errors
  int depth = 1;     // nesting level of the subgraph being imported (graph/limits.h bounds it)
};
// A node attribute: subgraphs (GRAPH, GRAPHS) imported with import_subgraph, others as attr_from_proto.
Attribute node_attr_from_proto(const onnx::AttributeProto& a, const SubgraphContext& ctx);
std::shared_ptr<Graph> import_subgraph(const onnx::GraphProto& gp, const SubgraphContext& ctx);
// Appends the node's implicit inputs: the outer value of each capture of its subgraphs.
void wire_implicit_inputs(Node& n, const std::function<Value*(const std::string&)>& resolve);
// A node with its formal inputs only and its subgraphs written out; `name_of` names its inputs.
void node_to_proto(const Node& n, const std::function<std::string(const Value*)>& name_of, onnx::NodeProto* np);
// A subgraph whose captures read the outer values named `capture_names`.
void subgraph_to_proto(const Graph& g, const std::vector<std::string>& capture_names, onnx::GraphProto* gp);

// Export (graph/onnx_export.cc) and import (graph/onnx_import.cc) of a whole model.
onnx::ModelProto graph_to_model(const Graph& g);
// Imports, prefixing every error with `what` (the file or text being read).
std::unique_ptr<Graph> import_model(const onnx::ModelProto& m, const std::string& base_dir, const ImportOptions& opts,
                                    const std::string& what);

}  // namespace otter::onnx_detail
