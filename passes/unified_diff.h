// Line-based unified diff (the format of `diff -u`), for otter-opt --diff between the printed graph
// before and after a pass. Myers' O(ND) algorithm after trimming the common prefix and suffix, so
// the cost follows the size of the change, not of the graph.
#pragma once

#include <string>

namespace otter {

// "" when the texts are equal; else "--- label_a\n+++ label_b\n@@ -l,n +l,n @@\n..." with
// `context` unchanged lines around each change.
std::string unified_diff(const std::string& a, const std::string& b, const std::string& label_a,
                         const std::string& label_b, int context = 3);

}  // namespace otter
