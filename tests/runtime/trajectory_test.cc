// otter's float32 AdamW trajectory against a float64 one (models/trajectory_f64.py): after 1, 5 and
// 10 steps on the digits MLP, each parameter is as close to PyTorch's float64 run as PyTorch's own
// float32 run is (within a factor of 2). A formula computed at a lower precision than torch.optim's
// (bias correction, the lr, eps, weight decay) or a lossy summation would show up here as an error
// many times PyTorch's.
#include <gtest/gtest.h>

#include <cstdio>

#include "runtime/npz.h"
#include "runtime/training_session.h"
#include "tests/runtime/training_test_util.h"

namespace otter {
namespace {

TEST(Float64Trajectory, AdamWStaysAsCloseAsPyTorchFloat32) {
  const NpzArchive refs = read_npz(model_file("digits/mlp_adamw_f64_refs.npz"));
  auto hp = [&](const std::string& k) { return refs.get("hp/" + k).get_as_double(0); };
  TrainingOptions o;
  o.batch_size = static_cast<int64_t>(hp("batch"));
  o.pipeline.optimizer.type = OptimizerType::kAdamW;
  o.pipeline.optimizer.lr = hp("lr");
  o.pipeline.optimizer.weight_decay = hp("weight_decay");
  auto s = TrainingSession::create(model_file("digits/mlp.onnx"), o);
  Dataset train = Dataset::from_npz(model_file("digits/train.npz"), s->batch_inputs());
  DataLoader loader(train, s->global_batch(), /*shuffle=*/false, 0);
  int checked = 0;
  for (int64_t step = 1; step <= static_cast<int64_t>(hp("steps")); ++step) {
    ASSERT_FALSE(s->train_step(loader.next()).skipped);
    const std::string prefix = str_cat("step", step, "/");
    for (const auto& [name, f64] : refs.arrays) {
      if (name.rfind(prefix, 0) != 0) continue;
      const std::string param = name.substr(prefix.size());
      const double ours = rel_err(s->tensor(param), f64);
      const double torch32 = rel_err(refs.get(str_cat("torch32/", name)), f64);
      std::printf("step %2lld %-12s otter %.2e  torch fp32 %.2e\n", static_cast<long long>(step), param.c_str(), ours,
                  torch32);
      EXPECT_LE(ours, 2 * torch32) << name << ": otter " << ours << ", PyTorch float32 " << torch32;
      ++checked;
    }
  }
  EXPECT_EQ(checked, 12);  // 4 parameters at steps 1, 5 and 10
}

}  // namespace
}  // namespace otter
