// Whole training steps on CUDA against the CPU backend: the same model, options and batches (file
// order) run a few optimizer steps in a CPU and in a CUDA TrainingSession; the loss of every step
// and every persistent tensor afterwards (parameters, momentum buffers, BatchNorm statistics,
// counters) are compared. Skips visibly without a device.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>

#include "runtime/npz.h"
#include "runtime/training_session.h"

namespace otter {
namespace {

std::string no_device() {
  const std::string r = cuda_unavailable_reason();
  return r.rfind("no CUDA device", 0) == 0 ? r : "no CUDA device: " + r;
}

std::string model_path(const std::string& rel) {
  const char* env = std::getenv("OTTER_SOURCE_DIR");
  return std::string(env && *env ? env : OTTER_SOURCE_DIR) + "/models/" + rel;
}

Tensor rows(const Tensor& t, int64_t begin, int64_t n) {
  std::vector<int64_t> dims = t.dims();
  const size_t row = t.nbytes() / static_cast<size_t>(dims[0]);
  dims[0] = n;
  Tensor out(t.dtype(), dims);
  std::memcpy(out.raw(), static_cast<const char*>(t.raw()) + begin * row, out.nbytes());
  return out;
}

// max |a - b| / max |b|.
double rel_err(const Tensor& a, const Tensor& b) {
  double d = 0, scale = 0;
  for (int64_t i = 0; i < b.numel(); ++i) {
    d = std::max(d, std::fabs(a.get_as_double(i) - b.get_as_double(i)));
    scale = std::max(scale, std::fabs(b.get_as_double(i)));
  }
  return scale > 0 ? d / scale : d;
}

// Next-token prediction on counting sequences (as the GPT training test): tokens and labels [n,16].
NpzArchive counting_data(int64_t n) {
  std::vector<int64_t> tokens, labels;
  for (int64_t i = 0; i < n; ++i)
    for (int64_t t = 0; t < 16; ++t) {
      tokens.push_back((i * 7 + t) % 64);
      labels.push_back((i * 7 + t + 1) % 64);
    }
  NpzArchive a;
  a.arrays.emplace_back("tokens", Tensor::from_vector<int64_t>({n, 16}, tokens));
  a.arrays.emplace_back("labels", Tensor::from_vector<int64_t>({n, 16}, labels));
  return a;
}

struct StepCase {
  std::string name, model, data;  // data: an .npz under models/, or "counting" for the GPT
  int64_t batch, accum;
  std::string optimizer;
  double lr;
  int steps;
  double tol;  // on losses and on every persistent tensor after the steps
  std::string precision = "fp32";  // fp16 runs with dynamic loss scaling (the default for fp16)
};

void PrintTo(const StepCase& c, std::ostream* os) { *os << c.name; }

class CudaTraining : public ::testing::TestWithParam<StepCase> {};

TEST_P(CudaTraining, StepsMatchTheCpuBackend) {
  if (!cuda_available()) GTEST_SKIP() << no_device();
  const StepCase& c = GetParam();
  TrainingOptions o;
  o.batch_size = c.batch;
  o.pipeline.accum = c.accum;
  o.pipeline.optimizer.type = parse_enum<OptimizerType>(c.optimizer, "optimizer");
  o.pipeline.optimizer.lr = c.lr;
  o.pipeline.precision = parse_enum<Precision>(c.precision, "precision");
  o.device = "cpu";
  auto cpu = TrainingSession::create(model_path(c.model), o);
  o.device = "cuda";
  auto gpu = TrainingSession::create(model_path(c.model), o);
  const NpzArchive data = c.data == "counting" ? counting_data(64) : read_npz(model_path(c.data));
  const int64_t global = cpu->global_batch();
  for (int step = 0; step < c.steps; ++step) {
    std::map<std::string, Tensor> batch;
    for (const Value* v : cpu->batch_inputs()) batch[v->name()] = rows(data.get(v->name()), step * global, global);
    const StepResult want = cpu->train_step(batch);
    const StepResult got = gpu->train_step(batch);
    EXPECT_NEAR(got.loss, want.loss, c.tol * std::max(1.0, std::fabs(want.loss))) << "step " << step;
    EXPECT_EQ(got.skipped, want.skipped) << "step " << step;
    EXPECT_DOUBLE_EQ(got.lr, want.lr) << "step " << step;
    EXPECT_EQ(got.loss_scale, want.loss_scale) << "step " << step;
  }
  double worst = 0;
  std::string worst_name;
  for (const std::string& name : cpu->state_names()) {
    const Tensor want = cpu->tensor(name), got = gpu->tensor(name);
    ASSERT_EQ(got.dims(), want.dims()) << name;
    ASSERT_EQ(got.dtype(), want.dtype()) << name;
    const double e = rel_err(got, want);
    EXPECT_LE(e, c.tol) << name;
    if (e >= worst) {
      worst = e;
      worst_name = name;
    }
  }
  std::printf("[ %s ] %d steps: worst relative difference %.3g (%s), peak device memory %zu bytes\n", c.name.c_str(),
              c.steps, worst, worst_name.c_str(), gpu->device().peak_bytes());
}

// Every model in fp32, fp16 (dynamic loss scaling) and bf16, with K = 1 and K = 4 micro-batches.
// Both backends compute half-precision ops in fp32 and round each output once; what differs is
// the summation order, so half runs get the half types' tolerances.
std::vector<StepCase> step_cases() {
  struct Model {
    std::string name, model, data, optimizer;
    int64_t batch;
    double lr;
  };
  const std::vector<Model> models = {{"mlp", "digits/mlp.onnx", "digits/train.npz", "adamw", 16, 1e-3},
                                     {"cnn", "digits/cnn.onnx", "digits/train_img.npz", "momentum", 8, 5e-2},
                                     {"gpt", "gpt/gpt.onnx", "counting", "adam", 4, 1e-2}};
  std::vector<StepCase> out;
  for (const Model& m : models)
    for (const char* precision : {"fp32", "fp16", "bf16"})
      for (int64_t k : {1, 4}) {
        const std::string p = precision;
        const double tol = p == "fp32" ? (m.name == "gpt" ? 1e-3 : 1e-4) : p == "fp16" ? 2e-2 : 6e-2;
        out.push_back({m.name + "_" + p + "_k" + std::to_string(k), m.model, m.data, m.batch, k, m.optimizer, m.lr, 3,
                       tol, p});
      }
  out.push_back({"mlp_sgd_fp32_k1", "digits/mlp.onnx", "digits/train.npz", 32, 1, "momentum", 5e-2, 4, 1e-4});
  return out;
}

INSTANTIATE_TEST_SUITE_P(Models, CudaTraining, ::testing::ValuesIn(step_cases()),
                         [](const ::testing::TestParamInfo<StepCase>& info) { return info.param.name; });

}  // namespace
}  // namespace otter
