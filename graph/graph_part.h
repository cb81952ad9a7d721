// Which part of a training step each node belongs to: forward, backward (both in the micro-step
// program) or apply. Used by the DOT and JSON printers and by the graph statistics.
//
// The IR records only the program of a node; the forward/backward split is derived: a micro-step
// node is backward when it depends on the backward seed (Graph::loss_seed) or when nothing but the
// backward needs it (e.g. a Shape feeding a gradient's unbroadcast); every other micro-step node
// is forward. A graph without a seed is all forward.
#pragma once

#include <string_view>
#include <unordered_map>

#include "graph/ir.h"

namespace otter {

enum class GraphPart : uint8_t { kForward, kBackward, kApply };

std::string_view graph_part_name(GraphPart p);  // "forward", "backward", "apply"

std::unordered_map<const Node*, GraphPart> classify_parts(const Graph& g);

}  // namespace otter
