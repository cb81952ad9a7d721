// ONNX import and export: converts ModelProto (binary or text syntax) to otter's Graph and back.
#include "graph/onnx_io.h"

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <set>
#include <sstream>
#include <unordered_map>
#include <unordered_set>

#include <onnx/defs/parser.h>
#include <onnx/onnx_pb.h>

#include "graph/error.h"
#include "graph/op_table.h"

namespace otter {

namespace {

static_assert(std::endian::native == std::endian::little,
              "raw_data is little-endian; otter copies it as is");

namespace fs = std::filesystem;

// Metadata keys through which export records what ONNX cannot say, so import restores it.
constexpr const char* kStateKey = "otter.state";
constexpr const char* kStateUpdatesKey = "otter.state_updates";
constexpr const char* kFrozenKey = "otter.frozen";
constexpr const char* kApplyNodesKey = "otter.apply_nodes";  // indices of apply-program nodes
constexpr const char* kGradientsKey = "otter.gradients";      // "param=grad,..." in order
constexpr const char* kLossSeedKey = "otter.loss_seed";
constexpr const char* kLossScaleKey = "otter.loss_scale";
constexpr const char* kOwnKeys[] = {kStateKey,     kStateUpdatesKey, kFrozenKey,   kApplyNodesKey,
                                    kGradientsKey, kLossSeedKey,     kLossScaleKey};
// Default-domain opset written when a graph built in code imports none.
constexpr int kDefaultExportOpset = 17;
// Upper bound on the bytes of one tensor (guards allocations against corrupt dims).
constexpr uint64_t kMaxTensorBytes = uint64_t{1} << 40;

std::string normalize_domain(const std::string& d) { return d == "ai.onnx" ? "" : d; }

std::string domain_label(const std::string& d) { return d.empty() ? "ai.onnx" : d; }

// The smallest IR version that may carry a default-domain opset (ONNX's versioning table).
int64_t ir_version_for_opset(int opset) {
  if (opset >= 21) return 10;
  if (opset >= 19) return 9;
  if (opset >= 15) return 8;
  return 7;
}

std::string join(const std::vector<std::string>& parts, const std::string& sep) {
  std::string out;
  for (size_t i = 0; i < parts.size(); ++i) out += (i ? sep : "") + parts[i];
  return out;
}

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  if (s.empty()) return out;
  size_t start = 0;
  while (true) {
    size_t pos = s.find(sep, start);
    out.push_back(s.substr(start, pos == std::string::npos ? std::string::npos : pos - start));
    if (pos == std::string::npos) break;
    start = pos + 1;
  }
  return out;
}

// How errors name a NodeProto before it becomes a Node (same form as Node::describe()).
std::string describe_proto(const onnx::NodeProto& n) {
  std::string d = normalize_domain(n.domain());
  d = d.empty() ? n.op_type() : d + "." + n.op_type();
  if (!n.name().empty()) return str_cat(d, " '", n.name(), "'");
  for (const auto& o : n.output())
    if (!o.empty()) return str_cat(d, " (output '", o, "')");
  return d + " (unnamed)";
}

// "node 'n1'" or "unnamed node, output 'y'": the node part of an unsupported-op entry.
std::string node_label(const onnx::NodeProto& n, int index) {
  if (!n.name().empty()) return str_cat("node '", n.name(), "'");
  for (const auto& o : n.output())
    if (!o.empty()) return str_cat("unnamed node, output '", o, "'");
  return str_cat("unnamed node #", index);
}

// ---- tensors ------------------------------------------------------------------------------------

std::vector<int64_t> tensor_dims(const onnx::TensorProto& p, DataType dt, const std::string& what) {
  std::vector<int64_t> dims(p.dims().begin(), p.dims().end());
  uint64_t n = 1;
  for (int64_t d : dims) {
    OTTER_CHECK(d >= 0, what, ": negative dimension in shape ", dims_to_string(dims));
    if (d == 0) return dims;
  }
  for (int64_t d : dims) {
    OTTER_CHECK(static_cast<uint64_t>(d) <= kMaxTensorBytes / n, what, ": shape ", dims_to_string(dims),
                " is too large");
    n *= static_cast<uint64_t>(d);
  }
  OTTER_CHECK(n * dtype_size(dt) <= kMaxTensorBytes, what, ": shape ", dims_to_string(dims), " is too large");
  return dims;
}

void read_external_data(const onnx::TensorProto& p, const std::string& what, const std::string& base_dir,
                        Tensor& t) {
  std::string location;
  uint64_t offset = 0;
  bool has_length = false;
  uint64_t length = 0;
  for (const auto& kv : p.external_data()) {
    auto parse_u64 = [&](const std::string& s) {
      uint64_t v = 0;
      OTTER_CHECK(!s.empty() && s.size() <= 19 && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; }), what,
                  ": external data ", kv.key(), " '", s, "' is not a non-negative integer");
      for (char c : s) v = v * 10 + static_cast<uint64_t>(c - '0');
      return v;
    };
    if (kv.key() == "location") location = kv.value();
    else if (kv.key() == "offset") offset = parse_u64(kv.value());
    else if (kv.key() == "length") { length = parse_u64(kv.value()); has_length = true; }
  }
  OTTER_CHECK(!location.empty(), what, ": external data without a location");
  fs::path file = fs::path(base_dir.empty() ? "." : base_dir) / location;
  const uint64_t need = t.nbytes();
  OTTER_CHECK(!has_length || length == need, what, ": external data length ", length, " does not match ",
              t.describe(), " (", need, " bytes)");
  std::error_code ec;
  if (!fs::is_regular_file(file, ec))
    fail(what, ": external data file '", file.string(), "' does not exist (location '", location,
         "', relative to the model's folder)");
  uint64_t size = fs::file_size(file, ec);
  OTTER_CHECK(!ec, what, ": cannot read the size of external data file '", file.string(), "': ", ec.message());
  if (offset > size || size - offset < need)
    fail(what, ": external data file '", file.string(), "' is too short: it holds ", size,
         " bytes, but offset ", offset, " + length ", need, " needs ", offset + need);
  if (need == 0) return;
  std::ifstream in(file, std::ios::binary);
  OTTER_CHECK(in, what, ": cannot open external data file '", file.string(), "': ", std::strerror(errno));
  in.seekg(static_cast<std::streamoff>(offset));
  in.read(static_cast<char*>(t.raw()), static_cast<std::streamsize>(need));
  OTTER_CHECK(in && static_cast<uint64_t>(in.gcount()) == need, what, ": cannot read ", need,
              " bytes at offset ", offset, " of external data file '", file.string(), "'");
}

// Copies a typed repeated field into the tensor, converting each element with `conv`.
template <typename Dst, typename Field, typename Conv>
void copy_typed(const Field& field, const char* field_name, const std::string& what, Tensor& t, Conv conv) {
  OTTER_CHECK(static_cast<int64_t>(field.size()) == t.numel(), what, ": ", field.size(), " values in ",
              field_name, " for shape ", dims_to_string(t.dims()), " (", t.numel(), " elements)");
  Dst* out = static_cast<Dst*>(t.raw());
  for (int i = 0; i < field.size(); ++i) out[i] = conv(field.Get(i));
}

Tensor tensor_from_proto(const onnx::TensorProto& p, const std::string& what, const std::string& base_dir) {
  DataType dt = dtype_from_onnx(p.data_type());
  if (dt == DataType::kUndefined)
    fail(what, ": unsupported tensor data type ", onnx_dtype_name(p.data_type()),
         " (otter supports FLOAT, DOUBLE, FLOAT16, BFLOAT16, INT64, INT32, INT8, UINT8, BOOL)");
  OTTER_CHECK(!p.has_segment(), what, ": segmented tensors are not supported");
  Tensor t(dt, tensor_dims(p, dt, what));
  if (p.has_data_location() && p.data_location() == onnx::TensorProto::EXTERNAL) {
    read_external_data(p, what, base_dir, t);
    return t;
  }
  if (p.has_raw_data()) {
    OTTER_CHECK(p.raw_data().size() == t.nbytes(), what, ": raw_data holds ", p.raw_data().size(),
                " bytes, but ", t.describe(), " needs ", t.nbytes());
    if (t.nbytes()) std::memcpy(t.raw(), p.raw_data().data(), t.nbytes());
    return t;
  }
  switch (dt) {
    case DataType::kFloat32:
      copy_typed<float>(p.float_data(), "float_data", what, t, [](float v) { return v; });
      break;
    case DataType::kFloat64:
      copy_typed<double>(p.double_data(), "double_data", what, t, [](double v) { return v; });
      break;
    case DataType::kInt64:
      copy_typed<int64_t>(p.int64_data(), "int64_data", what, t, [](int64_t v) { return v; });
      break;
    case DataType::kInt32:
      copy_typed<int32_t>(p.int32_data(), "int32_data", what, t, [](int32_t v) { return v; });
      break;
    case DataType::kInt8:
      copy_typed<int8_t>(p.int32_data(), "int32_data", what, t, [](int32_t v) { return static_cast<int8_t>(v); });
      break;
    case DataType::kUInt8:
      copy_typed<uint8_t>(p.int32_data(), "int32_data", what, t, [](int32_t v) { return static_cast<uint8_t>(v); });
      break;
    case DataType::kBool:
      copy_typed<uint8_t>(p.int32_data(), "int32_data", what, t, [](int32_t v) { return uint8_t{v != 0}; });
      break;
    case DataType::kFloat16:
    case DataType::kBFloat16:
      // The 16 bits of each element, held in the low half of an int32 (ONNX's packing).
      copy_typed<uint16_t>(p.int32_data(), "int32_data", what, t,
                           [](int32_t v) { return static_cast<uint16_t>(v & 0xFFFF); });
      break;
    case DataType::kUndefined:
      break;
  }
  return t;
}

void tensor_to_proto(const Tensor& t, const std::string& name, onnx::TensorProto* p) {
  if (!name.empty()) p->set_name(name);
  p->set_data_type(dtype_to_onnx(t.dtype()));
  for (int64_t d : t.dims()) p->add_dims(d);
  p->set_raw_data(std::string(static_cast<const char*>(t.raw()), t.nbytes()));
}

// ---- types --------------------------------------------------------------------------------------

struct DeclaredType {
  DataType dtype = DataType::kUndefined;
  Shape shape = Shape::unknown();
};

DataType elem_type_from_proto(int code, const std::string& what) {
  if (code == 0) return DataType::kUndefined;
  DataType dt = dtype_from_onnx(code);
  if (dt == DataType::kUndefined)
    fail(what, ": unsupported element type ", onnx_dtype_name(code),
         " (otter supports FLOAT, DOUBLE, FLOAT16, BFLOAT16, INT64, INT32, INT8, UINT8, BOOL)");
  return dt;
}

Shape shape_from_proto(const onnx::TensorShapeProto& s) {
  Shape out;
  for (const auto& d : s.dim()) {
    if (d.has_dim_value() && d.dim_value() >= 0) out.dims.emplace_back(d.dim_value());
    else if (d.has_dim_param() && !d.dim_param().empty()) out.dims.emplace_back(d.dim_param());
    else out.dims.emplace_back();
  }
  return out;
}

// The type of a graph input or output: must be a tensor (or left unset).
DeclaredType type_from_proto(const onnx::TypeProto& t, const std::string& what) {
  DeclaredType out;
  if (t.value_case() == onnx::TypeProto::VALUE_NOT_SET) return out;
  OTTER_CHECK(t.has_tensor_type(), what, ": only tensor types are supported (not sequences, maps, optionals"
              " or sparse tensors)");
  out.dtype = elem_type_from_proto(t.tensor_type().elem_type(), what);
  if (t.tensor_type().has_shape()) out.shape = shape_from_proto(t.tensor_type().shape());
  return out;
}

void type_to_proto(DataType dt, const Shape& s, onnx::TypeProto* t) {
  auto* tt = t->mutable_tensor_type();
  tt->set_elem_type(dtype_to_onnx(dt));
  if (!s.rank_known) return;
  auto* sp = tt->mutable_shape();
  for (const Dim& d : s.dims) {
    auto* dp = sp->add_dim();
    if (d.is_static()) dp->set_dim_value(d.value);
    else if (d.is_symbolic()) dp->set_dim_param(d.symbol);
  }
}

void value_info_to_proto(const Value& v, onnx::ValueInfoProto* p) {
  p->set_name(v.name());
  type_to_proto(v.dtype(), v.shape(), p->mutable_type());
}

// ---- attributes ---------------------------------------------------------------------------------

Attribute attr_from_proto(const onnx::AttributeProto& a, const std::string& node_desc, const std::string& base_dir) {
  std::string what = str_cat(node_desc, ": attribute '", a.name(), "'");
  OTTER_CHECK(a.ref_attr_name().empty(), what, " refers to a function attribute, which is not supported");
  auto type = a.type();
  if (type == onnx::AttributeProto::UNDEFINED) {
    // Very old exporters leave the type out; take it from the field that is set.
    if (a.has_f()) type = onnx::AttributeProto::FLOAT;
    else if (a.has_i()) type = onnx::AttributeProto::INT;
    else if (a.has_s()) type = onnx::AttributeProto::STRING;
    else if (a.has_t()) type = onnx::AttributeProto::TENSOR;
    else if (a.has_g()) type = onnx::AttributeProto::GRAPH;
    else if (a.floats_size()) type = onnx::AttributeProto::FLOATS;
    else if (a.ints_size()) type = onnx::AttributeProto::INTS;
    else if (a.strings_size()) type = onnx::AttributeProto::STRINGS;
  }
  switch (type) {
    case onnx::AttributeProto::FLOAT: return Attribute(a.f());
    case onnx::AttributeProto::INT: return Attribute(static_cast<int64_t>(a.i()));
    case onnx::AttributeProto::STRING: return Attribute(a.s());
    case onnx::AttributeProto::TENSOR: return Attribute(tensor_from_proto(a.t(), what, base_dir));
    case onnx::AttributeProto::FLOATS: return Attribute(std::vector<float>(a.floats().begin(), a.floats().end()));
    case onnx::AttributeProto::INTS: return Attribute(std::vector<int64_t>(a.ints().begin(), a.ints().end()));
    case onnx::AttributeProto::STRINGS:
      return Attribute(std::vector<std::string>(a.strings().begin(), a.strings().end()));
    case onnx::AttributeProto::GRAPH:
    case onnx::AttributeProto::GRAPHS:
      fail(what, " holds a subgraph; subgraph attributes (If, Loop, Scan) are not supported");
    case onnx::AttributeProto::TENSORS: fail(what, " holds a list of tensors, which is not supported");
    case onnx::AttributeProto::SPARSE_TENSOR:
    case onnx::AttributeProto::SPARSE_TENSORS: fail(what, " holds a sparse tensor, which is not supported");
    case onnx::AttributeProto::TYPE_PROTO:
    case onnx::AttributeProto::TYPE_PROTOS: fail(what, " holds a type, which is not supported");
    default: fail(what, " has no value");
  }
}

void attr_to_proto(const std::string& name, const Attribute& a, onnx::AttributeProto* p) {
  p->set_name(name);
  switch (a.kind()) {
    case Attribute::Kind::kFloat: p->set_type(onnx::AttributeProto::FLOAT); p->set_f(a.f()); break;
    case Attribute::Kind::kInt: p->set_type(onnx::AttributeProto::INT); p->set_i(a.i()); break;
    case Attribute::Kind::kString: p->set_type(onnx::AttributeProto::STRING); p->set_s(a.s()); break;
    case Attribute::Kind::kTensor:
      p->set_type(onnx::AttributeProto::TENSOR);
      tensor_to_proto(a.t(), "", p->mutable_t());
      break;
    case Attribute::Kind::kFloats:
      p->set_type(onnx::AttributeProto::FLOATS);
      for (float f : a.floats()) p->add_floats(f);
      break;
    case Attribute::Kind::kInts:
      p->set_type(onnx::AttributeProto::INTS);
      for (int64_t i : a.ints()) p->add_ints(i);
      break;
    case Attribute::Kind::kStrings:
      p->set_type(onnx::AttributeProto::STRINGS);
      for (const auto& s : a.strings()) p->add_strings(s);
      break;
  }
}

// ---- import -------------------------------------------------------------------------------------

// "14-21" style list of the opsets at which otter defines an op (clipped to the supported range).
std::string supported_opsets(const std::string& domain, const std::string& op) {
  std::vector<std::string> ranges;
  for (const OpDef* d : OpTable::instance().all()) {
    if (d->domain != domain || d->op_type != op) continue;
    int lo = d->since_version, hi = d->until_version;
    if (domain.empty()) {
      lo = std::max(lo, kMinOnnxOpset);
      hi = std::min(hi, kMaxOnnxOpset);
      if (lo > hi) continue;
    }
    ranges.push_back(lo == hi ? std::to_string(lo)
                     : hi >= (1 << 29) ? str_cat(lo, "+")
                                       : str_cat(lo, "-", hi));
  }
  return join(ranges, ", ");
}

// Fails with one message listing every node whose op otter cannot import.
void check_ops(const onnx::GraphProto& gp, const std::map<std::string, int>& imports, const std::string& what) {
  std::vector<std::string> bad;
  const OpTable& table = OpTable::instance();
  for (int i = 0; i < gp.node_size(); ++i) {
    const auto& n = gp.node(i);
    std::string domain = normalize_domain(n.domain());
    std::string label = node_label(n, i);
    std::string op = domain.empty() ? n.op_type() : domain + "." + n.op_type();
    if (!domain.empty() && domain != kOtterDomain) {
      bad.push_back(str_cat(op, " (", label, "; domain '", domain, "' is not supported)"));
      continue;
    }
    auto it = imports.find(domain);
    if (it == imports.end()) {
      bad.push_back(str_cat(op, " (", label, "; the model imports no opset of ", domain_label(domain), ")"));
      continue;
    }
    if (table.find(domain, n.op_type(), it->second)) continue;
    if (table.knows(domain, n.op_type())) {
      bad.push_back(str_cat(op, " (", label, "; not supported at ", domain_label(domain), " opset ", it->second,
                            ", only at opsets ", supported_opsets(domain, n.op_type()), ")"));
    } else {
      bad.push_back(str_cat(op, " (", label, ")"));
    }
  }
  if (!bad.empty()) fail(what, ": unsupported ops: ", join(bad, ", "));
}

// Names a cycle among nodes that Kahn's algorithm could not order.
[[noreturn]] void fail_cycle(const Graph& g, const std::string& what) {
  std::vector<Node*> nodes = g.node_list();
  std::unordered_map<Node*, int> pending;
  for (Node* n : nodes) {
    std::set<Node*> deps;
    for (Value* in : n->inputs())
      if (in && in->producer()) deps.insert(in->producer());
    pending[n] = static_cast<int>(deps.size());
  }
  // Peel off every node that is not on or after a cycle.
  std::vector<Node*> work;
  for (Node* n : nodes)
    if (pending[n] == 0) work.push_back(n);
  std::unordered_set<Node*> done;
  while (!work.empty()) {
    Node* n = work.back();
    work.pop_back();
    done.insert(n);
    std::set<Node*> users;
    for (Value* o : n->outputs())
      if (o)
        for (auto [u, k] : o->uses()) users.insert(u);
    for (Node* u : users)
      if (--pending[u] == 0) work.push_back(u);
  }
  // Walk backwards through unfinished producers until a node repeats: that loop is a cycle.
  Node* start = nullptr;
  for (Node* n : nodes)
    if (!done.count(n)) { start = n; break; }
  std::vector<Node*> path;
  std::unordered_map<Node*, size_t> pos;
  Node* cur = start;
  while (cur && !pos.count(cur)) {
    pos[cur] = path.size();
    path.push_back(cur);
    Node* next = nullptr;
    for (Value* in : cur->inputs())
      if (in && in->producer() && !done.count(in->producer())) { next = in->producer(); break; }
    cur = next;
  }
  std::vector<std::string> names;
  if (cur) {
    // path[pos[cur]..] walks producer-wards; print it in data-flow order.
    for (size_t i = path.size(); i-- > pos[cur];) names.push_back(path[i]->describe());
    names.push_back(path.back()->describe());
  }
  fail(what, ": graph '", g.name, "' has a cycle: ", join(names, " -> "));
}

std::set<std::string> name_set(const std::map<std::string, std::string>& meta, const char* key) {
  std::set<std::string> out;
  auto it = meta.find(key);
  if (it == meta.end()) return out;
  for (auto& s : split(it->second, ','))
    if (!s.empty()) out.insert(s);
  return out;
}

std::unique_ptr<Graph> import_model_unchecked(const onnx::ModelProto& m, const std::string& base_dir,
                                              const ImportOptions& opts, const std::string& what) {
  OTTER_CHECK(m.has_graph(), what, ": not an ONNX model (no graph)");
  const onnx::GraphProto& gp = m.graph();
  auto g = std::make_unique<Graph>();

  // Opsets: the default domain in 13..21, ai.otter at 1; other domains are refused where used.
  std::map<std::string, int> imports;
  for (const auto& op : m.opset_import()) {
    std::string domain = normalize_domain(op.domain());
    int64_t version = op.version();
    if (domain.empty()) {
      if (version < kMinOnnxOpset || version > kMaxOnnxOpset)
        fail(what, ": opset ", version, " of the default domain (ai.onnx) is not supported; otter supports opsets ",
             kMinOnnxOpset, " to ", kMaxOnnxOpset);
    } else if (domain == kOtterDomain) {
      OTTER_CHECK(version == 1, what, ": opset ", version, " of domain ai.otter is not supported (only 1)");
    }
    auto [it, fresh] = imports.emplace(domain, static_cast<int>(version));
    OTTER_CHECK(fresh || it->second == version, what, ": domain ", domain_label(domain),
                " is imported twice, at opsets ", it->second, " and ", version);
  }
  for (const auto& [d, v] : imports)
    if (d.empty() || d == kOtterDomain) g->opset_imports[d] = v;

  if (m.ir_version() > 0) g->ir_version = m.ir_version();
  g->producer_name = m.producer_name();
  g->producer_version = m.producer_version();
  g->doc_string = m.doc_string();
  std::map<std::string, std::string> otter_meta;
  for (const auto& kv : m.metadata_props()) {
    const std::string& k = kv.key();
    bool own = std::any_of(std::begin(kOwnKeys), std::end(kOwnKeys), [&](const char* o) { return k == o; });
    (own ? otter_meta : g->metadata)[k] = kv.value();
  }
  if (!gp.name().empty()) g->name = gp.name();

  check_ops(gp, imports, what);
  OTTER_CHECK(gp.sparse_initializer_size() == 0, what, ": sparse initializers are not supported");

  // Every name is defined once; `defined_by` says by what, for the duplicate message.
  std::unordered_map<std::string, std::string> defined_by;
  auto define = [&](const std::string& name, const std::string& by) {
    OTTER_CHECK(!name.empty(), what, ": ", by, " has no name");
    auto [it, fresh] = defined_by.emplace(name, by);
    if (!fresh) fail(what, ": duplicate value name '", name, "': defined by ", it->second, " and by ", by);
  };

  // Graph inputs that are also initializers (older exporters list both) are initializers.
  std::unordered_set<std::string> init_names;
  for (const auto& t : gp.initializer()) init_names.insert(t.name());
  for (int i = 0; i < gp.input_size(); ++i) {
    const auto& in = gp.input(i);
    if (!in.name().empty() && init_names.count(in.name())) continue;
    std::string by = str_cat("graph input '", in.name(), "'");
    define(in.name(), in.name().empty() ? str_cat("graph input #", i) : by);
    DeclaredType t = type_from_proto(in.type(), by);
    g->add_input(in.name(), t.dtype, t.shape);
  }

  const bool has_otter_state = otter_meta.count(kStateKey) != 0;
  const std::set<std::string> frozen = name_set(otter_meta, kFrozenKey);
  for (int i = 0; i < gp.initializer_size(); ++i) {
    const auto& tp = gp.initializer(i);
    define(tp.name(), tp.name().empty() ? str_cat("initializer #", i) : str_cat("initializer '", tp.name(), "'"));
    Tensor t = tensor_from_proto(tp, str_cat("initializer '", tp.name(), "'"), base_dir);
    bool trainable = opts.float_initializers_trainable && is_float(t.dtype()) && !frozen.count(tp.name());
    g->add_initializer(tp.name(), std::move(t), trainable);
  }

  // Nodes: create every output first, then wire inputs (ONNX files need not be sorted).
  std::vector<Node*> created;
  for (int i = 0; i < gp.node_size(); ++i) {
    const auto& np = gp.node(i);
    std::string desc = describe_proto(np);
    std::vector<std::string> outs;
    for (const auto& o : np.output()) {
      if (!o.empty()) define(o, str_cat("output of ", desc));
      outs.push_back(o);
    }
    std::string domain = normalize_domain(np.domain());
    Node* n = g->add_node(np.op_type(), {}, outs, domain);
    n->set_name(np.name());
    n->set_opset(imports.at(domain));
    for (const auto& a : np.attribute()) {
      OTTER_CHECK(!n->has_attr(a.name()), what, ": ", desc, ": attribute '", a.name(), "' is given twice");
      n->set_attr(a.name(), attr_from_proto(a, desc, base_dir));
    }
    created.push_back(n);
  }
  std::vector<std::string> undefined;
  for (int i = 0; i < gp.node_size(); ++i) {
    const auto& np = gp.node(i);
    for (const auto& in : np.input()) {
      if (in.empty()) { created[i]->add_input(nullptr); continue; }
      Value* v = g->find_value(in);
      if (!v) undefined.push_back(str_cat("'", in, "' (input of ", created[i]->describe(), ")"));
      created[i]->add_input(v);
    }
  }
  if (!undefined.empty()) fail(what, ": undefined values: ", join(undefined, ", "));
  if (auto it = otter_meta.find(kApplyNodesKey); it != otter_meta.end())
    for (const std::string& idx : split(it->second, ',')) {
      char* end = nullptr;
      long k = std::strtol(idx.c_str(), &end, 10);
      OTTER_CHECK(!idx.empty() && *end == '\0' && k >= 0 && k < static_cast<long>(created.size()), what,
                  ": metadata ", kApplyNodesKey, ": '", idx, "' is not a node index");
      created[k]->set_program(Program::kApply);
    }
  try {
    g->topo_sort();
  } catch (const Error&) {
    fail_cycle(*g, what);
  }

  // Graph outputs and the declared types of values (value_info first, graph outputs win).
  std::unordered_map<std::string, DeclaredType> declared;
  for (const auto& vi : gp.value_info()) {
    if (vi.type().has_tensor_type())
      declared[vi.name()] = type_from_proto(vi.type(), str_cat("value_info of '", vi.name(), "'"));
  }
  std::unordered_set<std::string> output_names;
  for (int i = 0; i < gp.output_size(); ++i) {
    const auto& o = gp.output(i);
    OTTER_CHECK(!o.name().empty(), what, ": graph output #", i, " has no name");
    Value* v = g->find_value(o.name());
    OTTER_CHECK(v, what, ": graph output '", o.name(), "' is not defined by any node, input or initializer");
    declared[o.name()] = type_from_proto(o.type(), str_cat("graph output '", o.name(), "'"));
    output_names.insert(o.name());
    g->add_output(v);
  }
  for (Node* n : g->node_list())
    for (Value* o : n->outputs()) {
      if (!o) continue;
      auto it = declared.find(o->name());
      if (it == declared.end()) continue;
      o->set_dtype(it->second.dtype);
      o->set_shape(it->second.shape);
    }

  // Parameters vs state: otter's own metadata when present, else BatchNorm's training mode.
  if (has_otter_state) {
    for (const std::string& s : name_set(otter_meta, kStateKey)) {
      Value* v = g->find_value(s);
      OTTER_CHECK(v && v->kind() == ValueKind::kInitializer, what, ": metadata ", kStateKey, " names '", s,
                  "', which is not an initializer");
      v->set_trainable(false);
      g->set_kind(v, ValueKind::kState);
    }
    auto it = otter_meta.find(kStateUpdatesKey);
    if (it != otter_meta.end())
      for (const std::string& entry : split(it->second, ',')) {
        if (entry.empty()) continue;
        size_t eq = entry.find('=');
        OTTER_CHECK(eq != std::string::npos, what, ": metadata ", kStateUpdatesKey, ": entry '", entry,
                    "' is not state=value");
        Value* s = g->find_value(entry.substr(0, eq));
        Value* u = g->find_value(entry.substr(eq + 1));
        bool target = s && (s->kind() == ValueKind::kState || s->kind() == ValueKind::kInitializer);
        OTTER_CHECK(target && u, what, ": metadata ", kStateUpdatesKey, ": entry '", entry,
                    "' does not name a state value or initializer and a value");
        g->state_updates[s] = u;
      }
  } else {
    for (Node* n : g->node_list()) {
      if (n->domain() != "" || n->op_type() != "BatchNormalization" || n->opset() < 14) continue;
      if (n->attr_i("training_mode", 0) != 1) continue;
      for (int i : {3, 4}) {
        Value* v = n->input(i);
        if (!v || v->kind() == ValueKind::kNode || v->kind() == ValueKind::kInput) continue;
        if (v->kind() == ValueKind::kInitializer) {
          v->set_trainable(false);
          g->set_kind(v, ValueKind::kState);
        }
        if (Value* upd = n->output(i - 2)) g->state_updates[v] = upd;
      }
    }
  }

  // Training facts recorded by otter's passes.
  if (auto it = otter_meta.find(kGradientsKey); it != otter_meta.end())
    for (const std::string& entry : split(it->second, ',')) {
      size_t eq = entry.find('=');
      Value* p = eq == std::string::npos ? nullptr : g->find_value(entry.substr(0, eq));
      Value* gr = eq == std::string::npos || eq + 1 == entry.size() ? nullptr : g->find_value(entry.substr(eq + 1));
      OTTER_CHECK(p && (gr || eq + 1 == entry.size()), what, ": metadata ", kGradientsKey, ": entry '", entry,
                  "' does not name a parameter and its gradient");
      g->gradients.emplace_back(p, gr);
    }
  for (auto [key, slot] : {std::pair{kLossSeedKey, &g->loss_seed}, std::pair{kLossScaleKey, &g->loss_scale}}) {
    auto it = otter_meta.find(key);
    if (it == otter_meta.end() || it->second.empty()) continue;
    *slot = g->find_value(it->second);
    OTTER_CHECK(*slot, what, ": metadata ", key, " names '", it->second, "', which is not a value");
  }

  if (opts.infer_shapes) {
    for (Node* n : g->node_list()) {
      try {
        infer_node(*n);
      } catch (const Error& e) {
        fail(what, ": shape inference failed: ", e.what());
      }
      for (Value* o : n->outputs()) {
        if (!o) continue;
        auto it = declared.find(o->name());
        if (it == declared.end()) continue;
        const DeclaredType& d = it->second;
        if (output_names.count(o->name()) && d.dtype != DataType::kUndefined &&
            o->dtype() != DataType::kUndefined && o->dtype() != d.dtype)
          fail(what, ": graph output '", o->name(), "' is declared ", dtype_name(d.dtype), " but ", n->describe(),
               " produces ", dtype_name(o->dtype()));
        if (o->dtype() == DataType::kUndefined) o->set_dtype(d.dtype);
        if (!o->shape().rank_known && d.shape.rank_known) o->set_shape(d.shape);
      }
    }
  }
  return g;
}

// Imports, prefixing every error with `what` (the file or text being read).
std::unique_ptr<Graph> import_model(const onnx::ModelProto& m, const std::string& base_dir,
                                    const ImportOptions& opts, const std::string& what) {
  try {
    return import_model_unchecked(m, base_dir, opts, what);
  } catch (const Error& e) {
    std::string msg = e.what();
    if (msg.rfind(what, 0) == 0) throw;
    fail(what, ": ", msg);
  }
}

std::string read_file(const std::string& path, const std::string& what) {
  std::error_code ec;
  if (!fs::exists(path, ec)) fail("cannot open ", what, " '", path, "': no such file");
  if (fs::is_directory(path, ec)) fail("cannot open ", what, " '", path, "': it is a directory");
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("cannot open ", what, " '", path, "': ", std::strerror(errno));
  std::ostringstream os;
  os << in.rdbuf();
  if (in.bad()) fail("cannot read ", what, " '", path, "'");
  return os.str();
}

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

std::unique_ptr<Graph> import_text(const std::string& text, const std::string& base_dir, const ImportOptions& opts,
                                   const std::string& what) {
  onnx::ModelProto m;
  try {
    auto status = onnx::OnnxParser::Parse(m, text.c_str());
    if (!status.IsOK()) fail(what, ": cannot parse ONNX text: ", status.ErrorMessage());
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {
    fail(what, ": cannot parse ONNX text: ", e.what());
  }
  return import_model(m, base_dir, opts, what);
}

// ---- export -------------------------------------------------------------------------------------

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
    OTTER_CHECK(v->has_data(), "export: ", v->kind() == ValueKind::kState ? "state '" : "initializer '",
                v->name(), "' has no data");
    tensor_to_proto(v->data(), v->name(), gp->add_initializer());
    if (v->kind() == ValueKind::kState) state.push_back(v->name());
    else if (is_float(v->dtype()) && !v->trainable()) frozen.push_back(v->name());
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
    auto* np = gp->add_node();
    np->set_op_type(n->op_type());
    np->set_domain(normalize_domain(n->domain()));
    if (!n->name().empty()) np->set_name(n->name());
    for (const Value* in : n->inputs()) np->add_input(in ? in->name() : "");
    for (const Value* o : n->outputs()) np->add_output(o ? o->name() : "");
    for (const auto& [k, a] : n->attrs()) attr_to_proto(k, a, np->add_attribute());
    for (const Value* o : n->outputs()) {
      if (!o || outputs.count(o)) continue;
      if (o->dtype() == DataType::kUndefined && !o->shape().rank_known) continue;
      value_info_to_proto(*o, gp->add_value_info());
    }
  }

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
  return m;
}

}  // namespace

std::unique_ptr<Graph> import_onnx_file(const std::string& path, const ImportOptions& opts) {
  std::string bytes = read_file(path, "model file");
  std::string what = str_cat("model '", path, "'");
  std::string dir = fs::path(path).parent_path().string();
  if (ends_with(path, ".onnxtxt") || ends_with(path, ".txt")) return import_text(bytes, dir, opts, what);
  OTTER_CHECK(!bytes.empty(), what, ": the file is empty");
  return import_onnx_bytes(bytes, dir, opts, what);
}

std::unique_ptr<Graph> import_onnx_bytes(const std::string& bytes, const std::string& base_dir,
                                         const ImportOptions& opts, const std::string& what) {
  OTTER_CHECK(!bytes.empty(), what, ": no bytes (an empty file is not an ONNX model)");
  onnx::ModelProto m;
  if (!m.ParseFromString(bytes))
    fail(what, ": not a valid ONNX model (protobuf parsing failed: the file is truncated or not .onnx)");
  return import_model(m, base_dir, opts, what);
}

std::unique_ptr<Graph> import_onnx_text(const std::string& text, const ImportOptions& opts) {
  return import_text(text, "", opts, "model text");
}

std::string export_onnx_bytes(const Graph& g) {
  onnx::ModelProto m = graph_to_model(g);
  std::string out;
  OTTER_CHECK(m.SerializeToString(&out), "export: cannot serialize graph '", g.name,
              "' (protobuf limits a model to 2 GiB)");
  return out;
}

void export_onnx_file(const Graph& g, const std::string& path) {
  std::string bytes = export_onnx_bytes(g);
  std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    OTTER_CHECK(out, "export: cannot write '", tmp, "': ", std::strerror(errno));
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    out.close();
    if (!out) {
      std::error_code ec;
      fs::remove(tmp, ec);
      fail("export: writing '", tmp, "' failed (disk full?)");
    }
  }
  std::error_code ec;
  fs::rename(tmp, path, ec);
  if (ec) {
    std::error_code ignored;
    fs::remove(tmp, ignored);
    fail("export: cannot rename '", tmp, "' to '", path, "': ", ec.message());
  }
}

Tensor read_tensor_pb_file(const std::string& path, std::string* name) {
  std::string bytes = read_file(path, "tensor file");
  OTTER_CHECK(!bytes.empty(), "tensor file '", path, "' is empty");
  onnx::TensorProto p;
  OTTER_CHECK(p.ParseFromString(bytes), "tensor file '", path, "' is not a valid TensorProto");
  if (name) *name = p.name();
  return tensor_from_proto(p, str_cat("tensor file '", path, "'"), fs::path(path).parent_path().string());
}

}  // namespace otter
