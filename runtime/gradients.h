// GradientEvaluator: the loss and every trainable parameter's gradient on one batch, in fp32 and
// unscaled, as `otter-train grad` writes them. The parameter set is a training session's
// (runtime/training_session.cc, passes/batchnorm_mode.h): BatchNorm running statistics are never
// trainable, BatchNorm runs in the mode TrainingPipelineOptions::batchnorm asks ("train": batch
// statistics, as model.train(), the default; "frozen": the exported statistics), and initializers
// that reach no output are left out (the passes batchnorm-mode and freeze-unreachable).
// Then the model goes through the gradient pipeline (passes/pipelines.h: the loss, mixed precision
// when asked, autodiff with the freeze globs, a fixed loss scale S when scaling is on), runs once,
// and each gradient is divided by S.
//
//   TrainingPipelineOptions p;  p.precision = Precision::kFp16;
//   GradientEvaluator ge("mlp.onnx", p, cpu_device(), {.batch = 16});
//   auto arrays = ge.run(batch);   // ("loss", ...), ("grad/fc1.weight", ...), ...
#pragma once

#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "graph/ir.h"
#include "kernels/device.h"
#include "passes/pipelines.h"
#include "runtime/executor.h"

namespace otter {

// How the evaluator builds its graph besides the pipeline options.
struct GradientSetup {
  int64_t batch = 0;                // pins the batch dimension (0: left symbolic; BatchNorm in train mode needs it)
  // Initial values of initializers by name (runtime/initial_values.h), named `init_source` in errors.
  std::map<std::string, Tensor> init;
  std::string init_source = "initial values";
};

class GradientEvaluator {
 public:
  // `device` must outlive the evaluator.
  GradientEvaluator(const std::string& model_path, const TrainingPipelineOptions& o, Device& device,
                    const GradientSetup& setup = {});
  ~GradientEvaluator();
  // The graph inputs a batch provides (model inputs and labels).
  std::vector<const Value*> data_inputs() const;
  // "loss", then "grad/<parameter>" per trained parameter in graph order. Fails naming the
  // parameter whose scaled gradient overflowed (a training step would be skipped there).
  std::vector<std::pair<std::string, Tensor>> run(const std::map<std::string, Tensor>& batch);
  const Graph& graph() const { return *graph_; }

 private:
  std::unique_ptr<Graph> graph_;
  std::unique_ptr<Executor> executor_;
  Device& device_;
  std::string loss_;
};

}  // namespace otter
