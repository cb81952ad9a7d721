// otter-bench's models and batches (tools/otter-bench.cc): which files a MODEL argument names, and
// seeded random samples that are valid inputs of a training session.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "runtime/training_session.h"

namespace otter {

struct BenchModel {
  std::string name, path;
  int64_t batch;
  // Exported by models/export_models.py from a PyTorch module that models/bench/torch_bench.py can
  // build (--vs-torch); zoo models and other files are not (their modules need other environments).
  bool torch = true;
};

// The models `want` names ("all", a benchmark model, "zoo", zoo:NAME, or an ONNX file), checked to
// exist; with vs_torch, each must be a benchmark model (BenchModel::torch).
std::vector<BenchModel> models_to_run(const std::string& want, const std::string& root, bool vs_torch);

// `count` seeded random samples for every batch input of `s`: floats uniform in [0, 1); of the int64
// inputs, the labels uniform in [0, classes), token ids (inputs an embedding Gather reads) uniform
// in [0, its rows), and masks (a name containing "mask": attention_mask) all ones. Any other input
// fails with its name: its valid values cannot be told from the graph.
std::map<std::string, Tensor> random_samples(const TrainingSession& s, int64_t count, uint64_t seed);

// Rows [begin, begin + count) of every array, as views.
std::map<std::string, Tensor> rows(const std::map<std::string, Tensor>& data, int64_t begin, int64_t count);

}  // namespace otter
