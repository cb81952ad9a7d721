// ONNX TensorProto <-> otter Tensor: typed fields, raw_data and external data files. Before a
// tensor is allocated, its size is checked against OTTER_MAX_TENSOR_BYTES (graph/limits.h) and
// against the bytes its source actually holds; external data must lie inside the model's folder.
#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "graph/error.h"
#include "graph/limits.h"
#include "graph/onnx_proto.h"

namespace otter::onnx_detail {

static_assert(std::endian::native == std::endian::little, "raw_data is little-endian; otter copies it as is");

namespace {

namespace fs = std::filesystem;

// The declared dims and their byte size, refused when negative, overflowing or over the limit.
std::vector<int64_t> tensor_dims(const onnx::TensorProto& p, DataType dt, const std::string& what, uint64_t& nbytes) {
  std::vector<int64_t> dims(p.dims().begin(), p.dims().end());
  int64_t n = checked_num_elements(dims, what);
  nbytes = checked_tensor_bytes(static_cast<uint64_t>(n), dtype_size(dt), what);
  return dims;
}

uint64_t parse_u64(const std::string& key, const std::string& s, const std::string& what) {
  OTTER_CHECK(
      !s.empty() && s.size() <= 19 && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; }),
      what, ": external data ", key, " '", s, "' is not a non-negative integer");
  uint64_t v = 0;
  for (char c : s) v = v * 10 + static_cast<uint64_t>(c - '0');
  return v;
}

struct ExternalData {
  fs::path file;
  uint64_t offset = 0;
};

// Resolves the location of external data: a relative path that stays inside the model's folder
// once every symbolic link is followed (no absolute paths, no '..' escapes, no links out).
fs::path confined_location(const std::string& location, const std::string& base_dir, const std::string& what) {
  OTTER_CHECK(!location.empty(), what, ": external data without a location");
  OTTER_CHECK(location.find('\0') == std::string::npos, what, ": external data location contains a NUL byte");
  fs::path rel(location);
  OTTER_CHECK(!rel.has_root_path(), what, ": external data location '", location,
              "' is an absolute path; it must be relative to the model's folder");
  std::error_code ec;
  fs::path base = fs::canonical(base_dir.empty() ? "." : base_dir, ec);
  OTTER_CHECK(!ec, what, ": cannot resolve the model's folder '", base_dir, "': ", ec.message());
  // weakly_canonical follows every link of the part that exists and normalizes the rest, so '..'
  // escapes and links out are caught whether or not the target exists.
  fs::path file = base / rel;
  fs::path real = fs::weakly_canonical(file, ec);
  OTTER_CHECK(!ec, what, ": cannot resolve external data file '", file.string(), "': ", ec.message());
  auto [b, r] = std::mismatch(base.begin(), base.end(), real.begin(), real.end());
  if (b != base.end())
    fail(what, ": external data location '", location, "' resolves to '", real.string(),
         "', outside the model's folder '", base.string(), "'; refusing to read it");
  if (!fs::is_regular_file(real, ec))
    fail(what, ": external data file '", file.string(), "' does not exist or is not a regular file (location '",
         location, "', relative to the model's folder)");
  return real;
}

ExternalData locate_external_data(const onnx::TensorProto& p, const std::string& what, const std::string& base_dir,
                                  uint64_t need) {
  std::string location;
  uint64_t offset = 0, length = 0;
  bool has_length = false;
  for (const auto& kv : p.external_data()) {
    if (kv.key() == "location")
      location = kv.value();
    else if (kv.key() == "offset")
      offset = parse_u64(kv.key(), kv.value(), what);
    else if (kv.key() == "length") {
      length = parse_u64(kv.key(), kv.value(), what);
      has_length = true;
    }
  }
  OTTER_CHECK(!location.empty(), what, ": external data without a location");
  OTTER_CHECK(!has_length || length == need, what, ": external data length ", length, " does not match the ", need,
              " bytes of its shape");
  fs::path file = confined_location(location, base_dir, what);
  std::error_code ec;
  uint64_t size = fs::file_size(file, ec);
  OTTER_CHECK(!ec, what, ": cannot read the size of external data file '", file.string(), "': ", ec.message());
  if (offset > size || size - offset < need)
    fail(what, ": external data file '", file.string(), "' is too short: it holds ", size, " bytes, but offset ",
         offset, " + length ", need, " runs past its end");
  return {file, offset};
}

void read_external_data(const ExternalData& ext, const std::string& what, Tensor& t) {
  const uint64_t need = t.nbytes();
  if (need == 0) return;
  std::ifstream in(ext.file, std::ios::binary);
  OTTER_CHECK(in, what, ": cannot open external data file '", ext.file.string(), "': ", std::strerror(errno));
  in.seekg(static_cast<std::streamoff>(ext.offset));
  in.read(static_cast<char*>(t.raw()), static_cast<std::streamsize>(need));
  OTTER_CHECK(in && static_cast<uint64_t>(in.gcount()) == need, what, ": cannot read ", need, " bytes at offset ",
              ext.offset, " of external data file '", ext.file.string(), "'");
}

// The number of values a typed field holds for `dt`, and its name.
std::pair<int64_t, const char*> typed_field_size(const onnx::TensorProto& p, DataType dt) {
  switch (dt) {
    case DataType::kFloat32:
      return {p.float_data_size(), "float_data"};
    case DataType::kFloat64:
      return {p.double_data_size(), "double_data"};
    case DataType::kInt64:
      return {p.int64_data_size(), "int64_data"};
    case DataType::kUInt32:
    case DataType::kUInt64:
      return {p.uint64_data_size(), "uint64_data"};
    default:
      return {p.int32_data_size(), "int32_data"};
  }
}

// Copies a typed repeated field into the tensor, converting each element with `conv`.
template <typename Dst, typename Field, typename Conv>
void copy_typed(const Field& field, Tensor& t, Conv conv) {
  Dst* out = static_cast<Dst*>(t.raw());
  for (int i = 0; i < field.size(); ++i) out[i] = conv(field.Get(i));
}

void copy_typed_fields(const onnx::TensorProto& p, Tensor& t) {
  switch (t.dtype()) {
    case DataType::kFloat32:
      copy_typed<float>(p.float_data(), t, [](float v) { return v; });
      break;
    case DataType::kFloat64:
      copy_typed<double>(p.double_data(), t, [](double v) { return v; });
      break;
    case DataType::kInt64:
      copy_typed<int64_t>(p.int64_data(), t, [](int64_t v) { return v; });
      break;
    case DataType::kInt32:
      copy_typed<int32_t>(p.int32_data(), t, [](int32_t v) { return v; });
      break;
    case DataType::kInt8:
      copy_typed<int8_t>(p.int32_data(), t, [](int32_t v) { return static_cast<int8_t>(v); });
      break;
    case DataType::kUInt8:
      copy_typed<uint8_t>(p.int32_data(), t, [](int32_t v) { return static_cast<uint8_t>(v); });
      break;
    case DataType::kBool:
      copy_typed<uint8_t>(p.int32_data(), t, [](int32_t v) { return uint8_t{v != 0}; });
      break;
    case DataType::kInt16:
      copy_typed<int16_t>(p.int32_data(), t, [](int32_t v) { return static_cast<int16_t>(v); });
      break;
    case DataType::kUInt16:
      copy_typed<uint16_t>(p.int32_data(), t, [](int32_t v) { return static_cast<uint16_t>(v); });
      break;
    case DataType::kUInt32:
      copy_typed<uint32_t>(p.uint64_data(), t, [](uint64_t v) { return static_cast<uint32_t>(v); });
      break;
    case DataType::kUInt64:
      copy_typed<uint64_t>(p.uint64_data(), t, [](uint64_t v) { return v; });
      break;
    case DataType::kFloat16:
    case DataType::kBFloat16:
      // The 16 bits of each element, held in the low half of an int32 (ONNX's packing).
      copy_typed<uint16_t>(p.int32_data(), t, [](int32_t v) { return static_cast<uint16_t>(v & 0xFFFF); });
      break;
    case DataType::kUndefined:
      break;
  }
}

}  // namespace

Tensor tensor_from_proto(const onnx::TensorProto& p, const std::string& what, const std::string& base_dir) {
  DataType dt = dtype_from_onnx(p.data_type());
  if (dt == DataType::kUndefined)
    fail(what, ": unsupported tensor data type ", onnx_dtype_name(p.data_type()),
         " (otter supports FLOAT, DOUBLE, FLOAT16, BFLOAT16, INT64, INT32, INT16, INT8, UINT64, UINT32, UINT16, UINT8, BOOL)");
  OTTER_CHECK(!p.has_segment(), what, ": segmented tensors are not supported");
  uint64_t nbytes = 0;
  std::vector<int64_t> dims = tensor_dims(p, dt, what, nbytes);
  const std::string type = str_cat(dtype_name(dt), dims_to_string(dims));
  if (p.has_data_location() && p.data_location() == onnx::TensorProto::EXTERNAL) {
    ExternalData ext = locate_external_data(p, what, base_dir, nbytes);
    Tensor t(dt, dims);
    read_external_data(ext, what, t);
    return t;
  }
  if (p.has_raw_data()) {
    OTTER_CHECK(p.raw_data().size() == nbytes, what, ": raw_data holds ", p.raw_data().size(), " bytes, but ", type,
                " needs ", nbytes);
    Tensor t(dt, dims);
    if (nbytes) std::memcpy(t.raw(), p.raw_data().data(), nbytes);
    return t;
  }
  auto [count, field] = typed_field_size(p, dt);
  OTTER_CHECK(static_cast<uint64_t>(count) * dtype_size(dt) == nbytes, what, ": ", count, " values in ", field,
              " for shape ", dims_to_string(dims), " (", nbytes / dtype_size(dt), " elements)");
  Tensor t(dt, dims);
  copy_typed_fields(p, t);
  return t;
}

void tensor_to_proto(const Tensor& t, const std::string& name, onnx::TensorProto* p) {
  if (!name.empty()) p->set_name(name);
  p->set_data_type(dtype_to_onnx(t.dtype()));
  for (int64_t d : t.dims()) p->add_dims(d);
  p->set_raw_data(std::string(static_cast<const char*>(t.raw()), t.nbytes()));
}

}  // namespace otter::onnx_detail
