// Initial values of a model's initializers from a file (`otter-train --init FILE.npz`): base
// weights by their ONNX names, and LoRA adapters (`<W>.lora_A`, `<W>.lora_B`) that the lora pass
// then takes over instead of drawing its own (passes/lora.h).
#pragma once

#include <map>
#include <string>

#include "graph/ir.h"
#include "passes/lora.h"

namespace otter {

// Reads FILE.npz into a name -> tensor map (fails naming the file when it cannot).
std::map<std::string, Tensor> read_initial_values(const std::string& path);

// Sets the initializers of `g` (an imported model, before any pass) from `values`. An adapter name
// needs `lora` (null: LoRA is off) to select its weight, and a shape that fits rank and layout; it
// joins the graph as a trainable initializer. One clear error, naming `source` and the array, for
// an unknown name, a wrong dtype or a wrong shape.
void apply_initial_values(Graph& g, const std::map<std::string, Tensor>& values, const std::string& source,
                          const LoraOptions* lora);

}  // namespace otter
