// ONNX protobuf <-> otter conversions of types and attributes, and the naming helpers shared by
// import and export (declared in graph/onnx_proto.h).
#include "graph/onnx_proto.h"

#include "graph/error.h"

namespace otter::onnx_detail {

std::string normalize_domain(const std::string& d) { return d == "ai.onnx" ? "" : d; }

std::string domain_label(const std::string& d) { return d.empty() ? "ai.onnx" : d; }

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

std::string describe_proto(const onnx::NodeProto& n) {
  std::string d = normalize_domain(n.domain());
  d = d.empty() ? n.op_type() : d + "." + n.op_type();
  if (!n.name().empty()) return str_cat(d, " '", n.name(), "'");
  for (const auto& o : n.output())
    if (!o.empty()) return str_cat(d, " (output '", o, "')");
  return d + " (unnamed)";
}

std::string node_label(const onnx::NodeProto& n, int index) {
  if (!n.name().empty()) return str_cat("node '", n.name(), "'");
  for (const auto& o : n.output())
    if (!o.empty()) return str_cat("unnamed node, output '", o, "'");
  return str_cat("unnamed node #", index);
}

// ---- types --------------------------------------------------------------------------------------

static DataType elem_type_from_proto(int code, const std::string& what) {
  if (code == 0) return DataType::kUndefined;
  DataType dt = dtype_from_onnx(code);
  if (dt == DataType::kUndefined)
    fail(what, ": unsupported element type ", onnx_dtype_name(code),
         " (otter supports FLOAT, DOUBLE, FLOAT16, BFLOAT16, INT64, INT32, INT8, UINT8, BOOL)");
  return dt;
}

static Shape shape_from_proto(const onnx::TensorShapeProto& s) {
  Shape out;
  for (const auto& d : s.dim()) {
    if (d.has_dim_value() && d.dim_value() >= 0) out.dims.emplace_back(d.dim_value());
    else if (d.has_dim_param() && !d.dim_param().empty()) out.dims.emplace_back(d.dim_param());
    else out.dims.emplace_back();
  }
  return out;
}

DeclaredType type_from_proto(const onnx::TypeProto& t, const std::string& what) {
  DeclaredType out;
  if (t.value_case() == onnx::TypeProto::VALUE_NOT_SET) return out;
  OTTER_CHECK(t.has_tensor_type(), what, ": only tensor types are supported (not sequences, maps, optionals"
              " or sparse tensors)");
  out.dtype = elem_type_from_proto(t.tensor_type().elem_type(), what);
  if (t.tensor_type().has_shape()) out.shape = shape_from_proto(t.tensor_type().shape());
  return out;
}

static void type_to_proto(DataType dt, const Shape& s, onnx::TypeProto* t) {
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
      fail(what, " holds a subgraph where none is expected");  // node attributes: node_attr_from_proto
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

}  // namespace otter::onnx_detail
