// Structural verifier: SSA (one producer per value, defined before use), no dangling uses,
// known ops with shape/type agreement with the op table's inference.
#pragma once

#include <string>
#include <vector>

#include "graph/ir.h"

namespace otter {

struct VerifyOptions {
  // Re-run shape inference on every node and compare dtype and shape with the stored ones.
  bool check_types = true;
};

// Returns every problem found (empty when the graph is valid).
std::vector<std::string> verify_graph(const Graph& g, const VerifyOptions& opts = {});
// Fails with all problems listed, prefixed with `context` (a pass name, "import", ...).
void verify_or_throw(const Graph& g, const std::string& context, const VerifyOptions& opts = {});

}  // namespace otter
