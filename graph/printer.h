// The deterministic text form of a graph (same graph, same bytes), used by otter-opt and golden tests.
//
//   graph main (ai.onnx 17) {
//     input %x: f32[N,784]
//     param %fc.weight: f32[10,784]
//     const %shape: i64[2] = [1,-1]
//     %y: f32[N,10] = Gemm(%x, %fc.weight, %fc.bias) {transB=1}
//     output %y
//   }
#pragma once

#include <ostream>
#include <string>

#include "graph/ir.h"

namespace otter {

struct PrintOptions {
  bool show_node_names = false;  // append "  # name" to each node line
};

void print_graph(const Graph& g, std::ostream& os, const PrintOptions& opts = {});
std::string graph_to_string(const Graph& g, const PrintOptions& opts = {});
std::string node_to_string(const Node& n);

}  // namespace otter
