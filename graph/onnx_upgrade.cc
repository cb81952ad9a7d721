// Opset upgrade at import: a model of default-domain opset 1..12 is rewritten to opset 13 (otter's
// lowest) by ONNX's own C++ version converter (libonnx, onnx/version_converter/convert.h), which
// carries each op through the schema changes of those opsets (Reduce* and Squeeze/Unsqueeze axes,
// Split sizes, Pad and Clip attributes to inputs, Upsample to Resize, ...). The graph records the
// original opset, and the printer shows it (`ai.onnx 13 upgraded from 9`).
#include <onnx/version_converter/convert.h>

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

std::optional<onnx::ModelProto> upgrade_opset(const onnx::ModelProto& m, const std::string& what) {
  int from = default_domain_opset(m);
  if (from == 0 || from >= kMinOnnxOpset) return std::nullopt;
  if (from < kMinUpgradableOpset)
    fail(what, ": opset ", from, " of the default domain (ai.onnx) is not supported; otter supports opsets ",
         kMinOnnxOpset, " to ", kMaxOnnxOpset, " and upgrades ", kMinUpgradableOpset, " to ", kMinOnnxOpset - 1,
         " at import");
  try {
    return onnx::version_conversion::ConvertVersion(m, kMinOnnxOpset);
  } catch (const std::exception& e) {
    fail(what, ": upgrading opset ", from, " to ", kMinOnnxOpset, " with ONNX's version converter failed: ", e.what());
  }
}

}  // namespace otter::onnx_detail
