// The graph as Graphviz DOT (deterministic): one box per node in a cluster per part of the training
// step (forward, backward, apply), graph inputs, parameters, constants and state as their own
// shapes outside the clusters, state updates as dashed edges back to the state they write, and
// values in half precision (f16, bf16) drawn in orange with bold edges.
//
//   digraph "main" {
//     v0 [label="input %x\nf32[N,64]", shape=ellipse];
//     subgraph cluster_forward { label="forward"; n0 [label="Gemm\n%h: f32[N,64]"]; }
//     v0 -> n0;
//   }
#pragma once

#include <ostream>
#include <string>

#include "graph/ir.h"

namespace otter {

void print_graph_dot(const Graph& g, std::ostream& os);

}  // namespace otter
