// Predictor: runs a model for inference, as `otter-train predict` does: the model is imported and
// canonicalized once, then fed arrays named after its inputs, whole or a batch of samples at a time.
//
//   Predictor p("mlp.onnx", cpu_device());
//   auto outputs = p.run(p.inputs_from(read_npz("x.npz")), /*batch=*/256);   // [("logits", ...)]
#pragma once

#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "graph/ir.h"
#include "kernels/device.h"
#include "runtime/executor.h"
#include "runtime/npz.h"

namespace otter {

class Predictor {
 public:
  // `device` must outlive the predictor.
  Predictor(const std::string& model_path, Device& device);
  ~Predictor();
  // The arrays of `data` named after the model's inputs; fails naming the file, the missing array
  // and the arrays the file has.
  std::map<std::string, Tensor> inputs_from(const NpzArchive& data) const;
  // The model's outputs in graph order, on the host. batch > 0: `batch` samples at a time (every
  // input needs the same number of samples); outputs with a sample axis are concatenated, others
  // (statistics) are those of the last batch. batch == 0: all samples at once.
  std::vector<std::pair<std::string, Tensor>> run(const std::map<std::string, Tensor>& inputs, int64_t batch = 0);
  const Graph& graph() const { return *graph_; }

 private:
  std::unique_ptr<Graph> graph_;
  std::unique_ptr<Executor> executor_;
  Device& device_;
};

// Rows [begin, end) of a tensor along axis 0 (a copy), and rows of several tensors stacked.
Tensor slice_rows(const Tensor& t, int64_t begin, int64_t end);
Tensor concat_rows(const std::vector<Tensor>& parts);

}  // namespace otter
