// BatchNorm trained as PyTorch trains it (passes/batchnorm_mode.h), against PyTorch: an eval-mode
// export of a small Conv + BatchNorm model (models/bn_train/make_bn_refs.py) trains exactly
// PyTorch's parameter set, and two SGD steps in the default mode give PyTorch's parameters and
// running statistics after model.train(); --batchnorm frozen keeps the exported statistics.
#include <gtest/gtest.h>

#include <set>

#include "graph/onnx_io.h"
#include "runtime/npz.h"
#include "runtime/training_session.h"
#include "tests/runtime/training_test_util.h"

namespace otter {
namespace {

const std::string kModel = model_file("bn_train/bn_cnn.onnx");

std::unique_ptr<TrainingSession> session(const std::string& batchnorm) {
  TrainingOptions o;
  o.batch_size = 8;
  o.device = "cpu";
  o.pipeline.optimizer.type = OptimizerType::kSgd;
  o.pipeline.optimizer.lr = 0.1;
  o.pipeline.batchnorm.mode = parse_enum<BatchNormMode>(batchnorm, "batchnorm mode");
  return TrainingSession::create(kModel, o);
}

// Two steps on rows [0, 8) and [8, 16) of the reference data.
void train_two_steps(TrainingSession& s, const NpzArchive& ref) {
  for (int64_t step = 0; step < 2; ++step)
    s.train_step({{"x", rows_copy(ref.get("x"), 8 * step, 8)}, {"labels", rows_copy(ref.get("labels"), 8 * step, 8)}});
}

// max |a - b| within 1e-4 of the reference's scale, or 1e-6 absolute: bn1.bias gets no gradient
// in exact arithmetic (bn2 in training mode removes any per-channel shift), so both sides hold only
// rounding noise there.
void expect_close(const Tensor& got, const Tensor& want, const std::string& what) {
  double d = 0;
  for (int64_t i = 0; i < want.numel(); ++i) d = std::max(d, std::fabs(got.get_as_double(i) - want.get_as_double(i)));
  EXPECT_LE(d, 1e-6 + 1e-4 * max_abs(want)) << what;
}

std::set<std::string> with_prefix(const NpzArchive& ref, const std::string& prefix) {
  std::set<std::string> out;
  for (const auto& [name, t] : ref.arrays)
    if (name.rfind(prefix, 0) == 0) out.insert(name.substr(prefix.size()));
  return out;
}

TEST(BatchNormTrain, EvalExportTrainsPyTorchsParametersAndRunningStatistics) {
  const NpzArchive ref = read_npz(model_file("bn_train/bn_refs.npz"));
  auto s = session("train");
  std::set<std::string> trained;
  for (const auto& [p, g] : s->graph().gradients) trained.insert(p->name());
  EXPECT_EQ(trained, with_prefix(ref, "param/")) << "the parameter set must be PyTorch's";
  train_two_steps(*s, ref);
  for (const std::string& name : with_prefix(ref, "param/"))
    expect_close(s->tensor(name), ref.get("param/" + name), name);
  for (const std::string& name : with_prefix(ref, "stat/"))
    EXPECT_LT(rel_err(s->tensor(name), ref.get("stat/" + name)), 1e-5) << name << " after two model.train() steps";
}

TEST(BatchNormTrain, FrozenKeepsTheExportedStatistics) {
  const NpzArchive ref = read_npz(model_file("bn_train/bn_refs.npz"));
  auto exported = import_onnx_file(kModel);
  auto s = session("frozen");
  for (const auto& [p, g] : s->graph().gradients)
    EXPECT_EQ(p->name().find("running"), std::string::npos) << p->name() << " must not be trained";
  train_two_steps(*s, ref);
  for (const std::string& name : with_prefix(ref, "stat/")) {
    const Value* v = s->graph().find_value(name);
    // Frozen statistics are constants (canonicalize may fold them into the BatchNorm's inputs).
    if (v) {
      EXPECT_EQ(rel_err(v->data(), exported->value(name)->data()), 0) << name;
    }
  }
  EXPECT_LT(rel_err(s->tensor("fc2.weight"), exported->value("fc2.weight")->data()), 1)
      << "training still moves the weights";
  EXPECT_GT(rel_err(s->tensor("fc2.weight"), exported->value("fc2.weight")->data()), 0);
}

TEST(BatchNormTrain, BadModeIsOneClearError) {
  EXPECT_NE(error_of([] { session("eval"); }).find("batchnorm mode must be train or frozen, got 'eval'"), std::string::npos);
}

}  // namespace
}  // namespace otter
