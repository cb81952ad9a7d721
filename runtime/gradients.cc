// GradientEvaluator (see gradients.h).
#include "runtime/gradients.h"

#include <cmath>

#include "graph/error.h"
#include "graph/onnx_io.h"
#include "graph/op_table.h"
#include "runtime/constant_eval.h"
#include "runtime/initial_values.h"

namespace otter {

namespace {

// A gradient of the loss scaled by `scale`, divided back (exact: the scale is a power of two unless
// the user gave another); fails when the scaled gradient overflowed, as a training step would skip.
Tensor unscaled(const Tensor& g, double scale, const std::string& param) {
  Tensor out = g.clone();
  float* p = out.data<float>();
  for (int64_t i = 0; i < out.numel(); ++i) {
    if (!std::isfinite(p[i]))
      fail("grad: the gradient of '", param, "' overflowed at loss scale ", scale,
           " (a training step would be skipped); give a smaller --loss-scale VALUE");
    p[i] = static_cast<float>(p[i] / scale);
  }
  return out;
}

}  // namespace

GradientEvaluator::GradientEvaluator(const std::string& model_path, const TrainingPipelineOptions& o, Device& device,
                                     const GradientSetup& setup)
    : device_(device) {
  graph_ = import_onnx_file(model_path);
  const bool lora = !o.lora.targets.empty();
  apply_initial_values(*graph_, setup.init, setup.init_source, lora ? &o.lora : nullptr);
  // The parameter selection of TrainingSession::create (runtime/training_session.cc): batchnorm-mode
  // and freeze-unreachable are the head of gradient_pipeline(), as of the training pipeline.
  if (setup.batch > 0) pin_batch(*graph_, setup.batch);
  run_pipeline(*graph_, gradient_pipeline(o));
  loss_ = graph_->training_facts().loss;
  ExecutorOptions eo;
  eo.device = &device;
  executor_ = std::make_unique<Executor>(*graph_, eo);
}

GradientEvaluator::~GradientEvaluator() = default;

std::vector<const Value*> GradientEvaluator::data_inputs() const {
  return std::vector<const Value*>(graph_->inputs().begin(), graph_->inputs().end());
}

std::vector<std::pair<std::string, Tensor>> GradientEvaluator::run(const std::map<std::string, Tensor>& batch) {
  auto outputs = executor_->run(batch);
  std::vector<std::pair<std::string, Tensor>> out;
  out.emplace_back("loss", device_.to_host(outputs.at(loss_)));
  const double scale = graph_->loss_scale ? graph_->loss_scale->data().get_as_double(0) : 1.0;
  for (const auto& [param, grad] : graph_->gradients)
    out.emplace_back("grad/" + param->name(),
                     unscaled(device_.to_host(outputs.at(grad->name())), scale, param->name()));
  return out;
}

}  // namespace otter
