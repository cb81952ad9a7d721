// ONNX import and export at the level of files, bytes and text (graph/onnx_io.h). The work is in
// graph/onnx_import.cc, graph/onnx_export.cc, graph/onnx_tensor.cc and graph/onnx_proto.cc.
#include "graph/onnx_io.h"

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <onnx/defs/parser.h>
#include <onnx/onnx_pb.h>

#include "graph/error.h"
#include "graph/onnx_proto.h"

namespace otter {

namespace {

namespace fs = std::filesystem;
using onnx_detail::import_model;

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
  return onnx_detail::tensor_from_proto(p, str_cat("tensor file '", path, "'"), fs::path(path).parent_path().string());
}
}  // namespace otter
