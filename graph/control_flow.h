// The control-flow ops If, Loop and Scan: what their inference (graph/ops/control_flow.cc), the
// canonicalize pass (passes/control_flow.cc) and the CPU kernels (kernels/cpu/control_flow.cc)
// share about their subgraphs and attributes.
//
//   If(cond) {then_branch, else_branch}: both branches have no inputs and the node's outputs.
//   Loop(M?, cond?, v...) {body}: body(iter_num, cond, v...) -> (cond, v..., scan...); the node
//     returns the final v... and each scan output stacked along a new axis 0.
//   Scan(s..., x...) {body, num_scan_inputs, scan_input_axes/directions, scan_output_axes/
//     directions}: body(s..., x_t...) -> (s..., y_t...) over slices x_t of each scan input.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "graph/ir.h"

namespace otter {

// Sets the type of each capture of n's subgraphs to that of the outer value the node passes in.
void bind_captures(const Node& n);
// Constant data of a value: a non-trainable initializer or the output of a Constant node.
std::optional<Tensor> constant_value(const Value* v);
// A one-element constant bool, else nullopt.
std::optional<bool> constant_bool(const Value* v);

// The subgraph of a graph attribute, failing with the node's name when it is absent or not a graph.
Graph& subgraph_attr(const Node& n, const char* name);

// How many times a Loop runs, when that is known before it runs: its trip count M is a constant,
// its condition is absent or constant true, and its body returns the condition it was given (or a
// constant true) as its first output. nullopt otherwise.
std::optional<int64_t> loop_static_trip_count(const Node& loop);

// Scan's attributes, checked against the node (opset 9+ form: no sequence_lens input).
struct ScanSpec {
  int num_state = 0;  // N: state variables (the first inputs and outputs)
  int num_scan_inputs = 0;  // M
  int num_scan_outputs = 0;  // K
  std::vector<int64_t> input_axes, input_directions;  // per scan input (axes not yet normalised)
  std::vector<int64_t> output_axes, output_directions;  // per scan output
};
ScanSpec scan_spec(const Node& n);

}  // namespace otter
