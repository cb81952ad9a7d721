// Every node of the shipped models' training and evaluation graphs has a CUDA kernel: a registry
// query (check_kernels), so it runs without a GPU.
#include <gtest/gtest.h>

#include <cstdlib>

#include "graph/onnx_io.h"
#include "passes/pass_manager.h"
#include "passes/pipelines.h"
#include "runtime/constant_eval.h"
#include "runtime/executor.h"

namespace otter {
namespace {

// The source tree: OTTER_SOURCE_DIR from the environment (a copy of the tree on a GPU machine,
// see tools/gpu-check.sh), else the one this test was built from.
std::string source_dir() {
  const char* env = std::getenv("OTTER_SOURCE_DIR");
  return env && *env ? env : OTTER_SOURCE_DIR;
}

std::unique_ptr<Graph> through_pipeline(const std::string& model, const std::string& pipeline) {
  auto g = import_onnx_file(source_dir() + "/models/" + model);
  CpuConstantEvaluator evaluator;
  PassContext ctx;
  ctx.evaluator = &evaluator;
  PassManager pm(ctx);
  pm.add_pipeline(pipeline);
  pm.run(*g);
  return g;
}

std::string joined(const std::vector<std::string>& v) {
  std::string s;
  for (const std::string& x : v) s += "\n  " + x;
  return s;
}

class CudaCoverage : public ::testing::TestWithParam<std::string> {};

// The training pipeline with every optional part on: accumulation (GemmAccumulate and
// AccumulateGrad), clipping (GlobalNormSq), each optimizer, a schedule, and each precision (half
// Casts, half copies written by the updates, dynamic loss scaling with fp16).
TEST_P(CudaCoverage, EveryNodeOfTheTrainingGraphHasACudaKernel) {
#ifndef OTTER_HAVE_CUDA
  GTEST_SKIP() << "no CUDA device: this build of otter has no CUDA backend";
#endif
  for (const char* optimizer : {"adamw", "adam", "momentum", "sgd"}) {
    for (const char* precision : {"fp32", "fp16", "bf16"}) {
      TrainingPipelineOptions o;
      o.precision = parse_enum<Precision>(precision, "precision");
      o.accum = 2;
      o.optimizer.type = parse_enum<OptimizerType>(optimizer, "optimizer");
      o.optimizer.clip_norm = 1;
      o.optimizer.schedule = LrSchedule::kCosine;
      o.optimizer.total = 10;
      const std::string pipeline = training_pipeline(o);
      auto g = through_pipeline(GetParam(), pipeline);
      ASSERT_GT(g->nodes().size(), 0u);
      const auto missing = check_kernels(*g, DeviceType::kCuda);
      EXPECT_TRUE(missing.empty()) << GetParam() << " through " << pipeline << ":" << joined(missing);
    }
  }
}

TEST_P(CudaCoverage, EveryNodeOfTheEvalGraphHasACudaKernel) {
#ifndef OTTER_HAVE_CUDA
  GTEST_SKIP() << "no CUDA device: this build of otter has no CUDA backend";
#endif
  auto g = through_pipeline(GetParam(), eval_pipeline(TrainingPipelineOptions{}));
  const auto missing = check_kernels(*g, DeviceType::kCuda);
  EXPECT_TRUE(missing.empty()) << GetParam() << ":" << joined(missing);
}

INSTANTIATE_TEST_SUITE_P(Models, CudaCoverage,
                         ::testing::Values("digits/mlp.onnx", "digits/cnn.onnx", "gpt/gpt.onnx"),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           return info.param.substr(info.param.find('/') + 1, info.param.find('.') - info.param.find('/') - 1);
                         });

}  // namespace
}  // namespace otter
