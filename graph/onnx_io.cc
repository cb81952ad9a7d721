// ONNX import/export (placeholder until it lands).
#include "graph/onnx_io.h"
#include "graph/error.h"

namespace otter {
std::unique_ptr<Graph> import_onnx_file(const std::string& path, const ImportOptions&) { fail("import not built"); }
std::unique_ptr<Graph> import_onnx_bytes(const std::string&, const std::string&, const ImportOptions&, const std::string&) { fail("import not built"); }
std::unique_ptr<Graph> import_onnx_text(const std::string&, const ImportOptions&) { fail("import not built"); }
std::string export_onnx_bytes(const Graph&) { fail("export not built"); }
void export_onnx_file(const Graph&, const std::string&) { fail("export not built"); }
Tensor read_tensor_pb_file(const std::string&, std::string*) { fail("not built"); }
}  // namespace otter
