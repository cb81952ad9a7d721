// The PyTorch exports run on otter's CPU executor and match PyTorch's own forward pass (train()
// mode, recorded by models/make_forward_refs.py): logits, and the BatchNorm running statistics
// after the pass as the ONNX spec defines them (population variance; see models/README.md).
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <string>

#include "graph/onnx_io.h"
#include "passes/pass_manager.h"
#include "runtime/constant_eval.h"
#include "runtime/executor.h"
#include "runtime/npz.h"

namespace otter {
namespace {

std::string model_path(const std::string& rel) { return std::string(OTTER_SOURCE_DIR) + "/models/" + rel; }

// max |a - b| / max |b|: the relative error measure of the issues.
double rel_error(const Tensor& got, const Tensor& want) {
  EXPECT_EQ(got.dims(), want.dims());
  double diff = 0, scale = 0;
  for (int64_t i = 0; i < want.numel(); ++i) {
    diff = std::max(diff, std::abs(got.get_as_double(i) - want.get_as_double(i)));
    scale = std::max(scale, std::abs(want.get_as_double(i)));
  }
  return scale > 0 ? diff / scale : diff;
}

struct Case {
  std::string model, ref, input;
};

class ForwardRef : public ::testing::TestWithParam<Case> {};

TEST_P(ForwardRef, LogitsAndBatchNormStateMatchPyTorch) {
  const Case& c = GetParam();
  ASSERT_TRUE(std::filesystem::exists(model_path(c.model)))
      << model_path(c.model) << " is missing (scripts/setup.sh exports ResNet-18)";
  auto g = import_onnx_file(model_path(c.model));
  run_pipeline(*g, "canonicalize");
  NpzArchive ref = read_npz(model_path(c.ref));
  Executor ex(*g);
  auto out = ex.run({{c.input, ref.get(c.input)}});
  double logits_err = rel_error(out.at("logits"), ref.get("logits"));
  std::printf("%s: logits rel error %.3g\n", c.model.c_str(), logits_err);
  EXPECT_LT(logits_err, 1e-4);

  int stats = 0;
  double worst = 0;
  for (const auto& [state, update] : g->state_updates) {
    const std::string& name = state->name();  // bn1.running_mean
    const Tensor* want = ref.find((name.size() > 4 && name.ends_with("_var") ? "updated_onnx/" : "updated/") + name);
    ASSERT_NE(want, nullptr) << "no reference for state " << name;
    double e = rel_error(out.at(update->name()), *want);
    worst = std::max(worst, e);
    EXPECT_LT(e, 1e-4) << name;
    ++stats;
  }
  std::printf("%s: %d running statistics, worst rel error %.3g\n", c.model.c_str(), stats, worst);
  int bn_refs = 0;  // two running statistics per recorded BatchNorm
  for (const auto& [name, t] : ref.arrays) bn_refs += name.starts_with("updated_onnx/") ? 2 : 0;
  EXPECT_EQ(stats, bn_refs) << "every BatchNorm's running statistics are state updates";
}

INSTANTIATE_TEST_SUITE_P(Models, ForwardRef,
                         ::testing::Values(Case{"digits/mlp.onnx", "digits/mlp_forward_ref.npz", "x"},
                                           Case{"digits/cnn.onnx", "digits/cnn_forward_ref.npz", "x"},
                                           Case{"gpt/gpt.onnx", "gpt/gpt_forward_ref.npz", "tokens"},
                                           Case{"resnet18/resnet18.onnx", "resnet18/resnet18_forward_ref.npz", "x"}),
                         [](const auto& info) { return std::filesystem::path(info.param.model).stem().string(); });

}  // namespace
}  // namespace otter
