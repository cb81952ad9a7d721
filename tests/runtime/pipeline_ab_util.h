// A/B checks of an optional forward-graph pass (fuse-bias-gelu, fold-transpose) on the shipped
// GPT: the loss and every parameter's gradient on one batch, and the losses of 5 AdamW steps, with
// the pass off and on.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "runtime/gradients.h"
#include "runtime/npz.h"
#include "runtime/training_session.h"
#include "tests/runtime/training_test_util.h"

namespace otter::testing {

// Sets the pass under test on or off in the pipeline options.
using PassSwitch = std::function<void(TrainingPipelineOptions&, bool on)>;

// Token ids and next-token labels [n, 16] for the GPT (vocabulary 64), from a fixed formula.
inline std::pair<Tensor, Tensor> gpt_batch(int64_t n, int64_t mul, int64_t shift) {
  std::vector<int64_t> tokens, labels;
  for (int64_t i = 0; i < n; ++i)
    for (int64_t t = 0; t < 16; ++t) {
      tokens.push_back((i * mul + t * t) % 64);
      labels.push_back((i * mul + t * t + shift) % 64);
    }
  return {Tensor::from_vector<int64_t>({n, 16}, tokens), Tensor::from_vector<int64_t>({n, 16}, labels)};
}

// The loss and gradients of the GPT on (tok, lab) with the pass off ([0]) and on ([1]); `inspect`
// sees each graph first. Fails unless every value agrees within abs_tol + rel_tol * |off value|;
// prints the largest difference under `tag`.
inline void expect_same_gpt_gradients(const PassSwitch& set, const Tensor& tok, const Tensor& lab, double abs_tol,
                                      double rel_tol, const std::string& tag,
                                      const std::function<void(const Graph&, bool on)>& inspect = {}) {
  std::vector<std::pair<std::string, Tensor>> grads[2];
  for (bool on : {false, true}) {
    TrainingPipelineOptions p;
    set(p, on);
    GradientEvaluator ge(model_file("gpt/gpt.onnx"), p, cpu_device(), {.batch = tok.dim(0)});
    if (inspect) inspect(ge.graph(), on);
    grads[on] = ge.run({{"tokens", tok}, {"labels", lab}});
  }
  ASSERT_EQ(grads[0].size(), grads[1].size());
  double worst = 0;
  for (size_t i = 0; i < grads[0].size(); ++i) {
    const auto& [name, a] = grads[0][i];
    const Tensor& b = grads[1][i].second;
    ASSERT_EQ(grads[1][i].first, name);
    ASSERT_EQ(a.dims(), b.dims()) << name;
    for (int64_t k = 0; k < a.numel(); ++k) {
      const double d = std::abs(a.get_as_double(k) - b.get_as_double(k));
      worst = std::max(worst, d);
      ASSERT_LE(d, abs_tol + rel_tol * std::abs(a.get_as_double(k))) << name << " element " << k;
    }
  }
  std::cout << "[" << tag << "] largest |off - on| over the loss and " << grads[0].size() - 1
            << " gradients: " << worst << "\n";
}

// A training run of `model` (the shipped GPT by default) with the pass off ([0]) and on ([1]):
// `steps` AdamW steps (lr 3e-3, `precision`, batches of `batch` in the loader's seed-0 order) on
// (tok, lab). The sessions stay open for their state tensors and graphs.
struct TrainedBothWays {
  std::unique_ptr<TrainingSession> sessions[2];
  std::vector<double> losses[2];
};

struct TrainSpec {
  int steps = 5;
  Precision precision = Precision::kFp32;
  std::string model = model_file("gpt/gpt.onnx");
  int64_t batch = 8;
};

inline TrainedBothWays train_both_ways(const PassSwitch& set, const Tensor& tok, const Tensor& lab,
                                       const TrainSpec& spec = {}) {
  TempDir dir;
  const std::string data = dir.path + "/seq.npz";
  write_npz(data, {{"tokens", tok}, {"labels", lab}});
  TrainedBothWays r;
  for (bool on : {false, true}) {
    TrainingOptions o;
    o.batch_size = spec.batch;
    o.pipeline.precision = spec.precision;
    o.pipeline.optimizer.lr = 3e-3;
    set(o.pipeline, on);
    r.sessions[on] = TrainingSession::create(spec.model, o);
    Dataset train = Dataset::from_npz(data, r.sessions[on]->batch_inputs());
    DataLoader loader(train, spec.batch, true, 0);
    for (int i = 0; i < spec.steps; ++i) r.losses[on].push_back(r.sessions[on]->train_step(loader.next()).loss);
  }
  return r;
}

// The losses of 5 AdamW steps (lr 3e-3, batches of 8) with the pass off and on agree within tol,
// and the GPT does train.
inline void expect_same_gpt_losses(const PassSwitch& set, const Tensor& tok, const Tensor& lab, double tol) {
  const TrainedBothWays r = train_both_ways(set, tok, lab);
  EXPECT_LT(r.losses[0].back(), r.losses[0].front());  // it does train
  for (int i = 0; i < 5; ++i) EXPECT_NEAR(r.losses[1][i], r.losses[0][i], tol) << "step " << i;
}

}  // namespace otter::testing
