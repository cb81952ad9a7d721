// The graph as one line of JSON, for scripts (deterministic: same graph, same bytes).
//
//   {"name":"main","opset_imports":{"":17},
//    "values":[{"name":"x","kind":"input","dtype":"f32","shape":["N",64]}, ...],
//    "nodes":[{"op":"Gemm","domain":"","name":"fc1","program":"micro-step","part":"forward",
//              "inputs":["x","fc1.weight",null],"outputs":["h"],"attrs":{"transB":1}}, ...],
//    "outputs":["logits"],"state_updates":{"w.grad.acc":"w.grad.acc.new"},
//    "gradients":{"w":"w.grad.acc"},"loss_seed":"loss.grad","loss_scale":null}
//
// Value kinds: input, param, const, state, node. Unknown dims are null; a shape of unknown rank is
// null. Attribute values are numbers, strings or lists; tensors are {"dtype","dims"} (with "data"
// when at most 8 elements).
#pragma once

#include <ostream>

#include "graph/ir.h"

namespace otter {

class JsonWriter;

void print_graph_json(const Graph& g, std::ostream& os);  // ends with a newline
// Writes the graph object into a document under construction (for wrappers such as dumps).
void write_graph_json(const Graph& g, JsonWriter& w);

}  // namespace otter
