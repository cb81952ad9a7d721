// ONNX import and export: ModelProto <-> Graph for opsets 13-21 of the default domain (plus the
// internal ai.otter domain), initializers (typed fields, raw_data, external data), Constant nodes,
// value_info, graph inputs doubling as initializers, and metadata.
#pragma once

#include <memory>
#include <string>

#include "graph/ir.h"

namespace otter {

struct ImportOptions {
  // Run the op table's shape inference over the imported graph (value_info fills what it cannot).
  bool infer_shapes = true;
  // Float initializers become trainable parameters (BatchNorm running statistics become state).
  bool float_initializers_trainable = true;
};

// Reads a binary .onnx file (external data relative to its folder) or, for names ending in
// .onnxtxt / .txt, ONNX's textual syntax. Fails with one message naming the culprit(s).
std::unique_ptr<Graph> import_onnx_file(const std::string& path, const ImportOptions& opts = {});
// Parses serialized ModelProto bytes; `base_dir` resolves external data.
std::unique_ptr<Graph> import_onnx_bytes(const std::string& bytes, const std::string& base_dir,
                                         const ImportOptions& opts = {}, const std::string& what = "model");
// Parses a model in ONNX's textual syntax (libonnx's parser).
std::unique_ptr<Graph> import_onnx_text(const std::string& text, const ImportOptions& opts = {});

// Serializes the graph as a ModelProto (internal ops in domain ai.otter; state as initializers,
// recorded in metadata_props so that import restores it).
std::string export_onnx_bytes(const Graph& g);
// Writes to a temporary name, then renames.
void export_onnx_file(const Graph& g, const std::string& path);

// Reads one serialized TensorProto (the .pb files of ONNX's backend tests).
Tensor read_tensor_pb_file(const std::string& path, std::string* name = nullptr);

}  // namespace otter
