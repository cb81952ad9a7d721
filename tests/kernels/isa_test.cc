// The AVX2 and AVX-512 variants of the CPU loops (kernels/cpu/isa.h) against the baseline one: the
// loops do the same float operations in the same order in every variant, so outputs must be
// bitwise equal, op by op and over whole training steps (fp32 AdamW, bf16 mixed precision). A
// variant this CPU lacks is skipped with the reason.
#include <gtest/gtest.h>

#include <random>

#include "kernels/common/half.h"
#include "kernels/cpu/gemm_bf16.h"
#include "kernels/cpu/isa.h"
#include "runtime/training_session.h"
#include "tests/kernels/kernel_test_util.h"
#include "tests/runtime/training_test_util.h"

namespace otter {
namespace {

using cpu::Isa;

Tensor random_tensor(std::vector<int64_t> dims, uint64_t seed, bool bf16 = false) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> d(0.f, 2.f);
  Tensor f(DataType::kFloat32, dims);
  for (int64_t i = 0; i < f.numel(); ++i) f.data<float>()[i] = d(rng);
  if (!bf16) return f;
  Tensor h(DataType::kBFloat16, dims);
  for (int64_t i = 0; i < f.numel(); ++i) h.data<BFloat16>()[i] = BFloat16{float_to_bf16(f.data<float>()[i])};
  return h;
}

bool same_bytes(const Tensor& a, const Tensor& b) { return a.bitwise_equal(b); }

// Restores the variant chosen from the environment after each test.
class IsaVariant : public ::testing::TestWithParam<Isa> {
 protected:
  void SetUp() override {
    if (static_cast<int>(GetParam()) > static_cast<int>(cpu::best_isa()))
      GTEST_SKIP() << "this CPU supports up to " << cpu::isa_name(cpu::best_isa()) << ", not "
                   << cpu::isa_name(GetParam());
  }
  void TearDown() override { cpu::set_active_isa(saved_); }
  Isa saved_ = cpu::active_isa();
};

std::vector<std::pair<std::string, testing::OpCall>> op_cases() {
  using testing::OpCall;
  const Tensor a = random_tensor({6, 37, 129}, 1), b = random_tensor({6, 37, 129}, 2), row = random_tensor({129}, 3);
  const Tensor col = random_tensor({6, 37, 1}, 4), scale = random_tensor({129}, 5), bias = random_tensor({129}, 6);
  const Tensor ah = random_tensor({6, 37, 129}, 7, true), bh = random_tensor({6, 37, 129}, 8, true);
  const Tensor chan = random_tensor({37}, 9), chan_bias = random_tensor({37}, 10);  // per channel of a [6, 37, 129]
  const Tensor a4 = random_tensor({6, 37, 129, 1}, 11);
  // BiasGelu's pre-activations through every branch of erf (|x| / sqrt 2 below 0.875, up to 2.2,
  // up to 3.92, beyond) and its edges: zeros, infinities, NaN, huge and tiny values.
  Tensor as = a.clone();  // a copy: the other cases keep their finite values
  const float special[] = {0.f, -0.f, INFINITY, -INFINITY, NAN, 3e38f, -3e38f, 1e-40f, 1.2374369f, 3.1112699f,
                           5.5437352f, -1.2374369f, -3.1112699f, -5.5437352f, 12.f, -12.f};
  for (int64_t i = 0; i < 16; ++i) as.data<float>()[i * 41] = special[i];
  const auto otter_op = [](const char* op, std::vector<Tensor> ins) {
    return OpCall{op, std::move(ins), {}, 1, 1, kOtterDomain};
  };
  return {
      {"BiasGelu f32", otter_op("BiasGelu", {as, row})},
      {"BiasGelu bf16 X, f32 bias", otter_op("BiasGelu", {ah, row})},
      {"BiasGeluGrad f32", otter_op("BiasGeluGrad", {b, as, row})},
      {"BiasGeluGrad bf16, f32 bias", otter_op("BiasGeluGrad", {bh, ah, row})},
      {"BiasGelu f32 without a bias", otter_op("BiasGelu", {as})},
      {"Add same shape", OpCall{"Add", {a, b}}},
      {"Mul by a row", OpCall{"Mul", {a, row}}},
      {"Div by a column", OpCall{"Div", {a, col}}},
      {"Sub scalar-like", OpCall{"Sub", {col, a}}},
      {"Relu", OpCall{"Relu", {a}}},
      {"Abs", OpCall{"Abs", {a}}},
      {"Softmax last axis", OpCall{"Softmax", {a}, {{"axis", Attribute(int64_t{-1})}}}},
      {"Softmax middle axis", OpCall{"Softmax", {a}, {{"axis", Attribute(int64_t{1})}}}},
      {"LogSoftmax", OpCall{"LogSoftmax", {a}, {{"axis", Attribute(int64_t{-1})}}}},
      {"LayerNormalization", OpCall{"LayerNormalization", {a, scale, bias}, {{"axis", Attribute(int64_t{-1})}}}},
      {"InstanceNormalization", OpCall{"InstanceNormalization", {a, chan, chan_bias}}},
      {"GroupNormalization", OpCall{"GroupNormalization", {a4, chan, chan_bias}, {{"num_groups", Attribute(int64_t{37})}},
                                    1, 18}},
      {"AddLayerNorm with the sum", OpCall{"AddLayerNorm", {a, b, scale, bias}, {}, 2, 1, kOtterDomain}},
      {"AddLayerNorm without the sum", otter_op("AddLayerNorm", {a, b, scale})},
      {"LayerNormalizationGrad with dResidual",
       OpCall{"LayerNormalizationGrad", {b, a, scale, a}, {}, 3, 1, kOtterDomain}},
      {"ReduceSum last axis", OpCall{"ReduceSum", {a, Tensor::from_vector<int64_t>({1}, {2})}}},
      {"ReduceSum middle axis", OpCall{"ReduceSum", {a, Tensor::from_vector<int64_t>({1}, {1})}}},
      {"ReduceMean all", OpCall{"ReduceMean", {a}, {{"keepdims", Attribute(int64_t{0})}}}},
      {"bf16 Softmax (widen, round)", OpCall{"Softmax", {ah}, {{"axis", Attribute(int64_t{-1})}}}},
      {"bf16 Add", OpCall{"Add", {ah, ah}}},
  };
}

TEST_P(IsaVariant, OpsBitwiseEqualToBaseline) {
  for (const auto& [what, call] : op_cases()) {
    cpu::set_active_isa(Isa::kBaseline);
    std::vector<Tensor> want = testing::run_op(call);
    cpu::set_active_isa(GetParam());
    std::vector<Tensor> got = testing::run_op(call);
    ASSERT_EQ(got.size(), want.size()) << what;
    for (size_t i = 0; i < got.size(); ++i)
      EXPECT_TRUE(same_bytes(got[i], want[i]))
          << what << ", output " << i << ": max relative difference " << testing::max_rel_diff(got[i], want[i]);
  }
}

// Losses and every parameter after three AdamW steps of `model`, with the loops of `isa`.
std::pair<std::vector<double>, std::map<std::string, Tensor>> train(const std::string& model, Isa isa,
                                                                    Precision precision) {
  cpu::set_active_isa(isa);
  TrainingOptions o;
  o.batch_size = 16;
  o.pipeline.precision = precision;
  o.pipeline.optimizer.type = OptimizerType::kAdamW;
  o.pipeline.optimizer.weight_decay = 0.01;
  auto s = TrainingSession::create(model_file(model), o);
  std::mt19937_64 rng(7);
  std::vector<double> losses;
  for (int step = 0; step < 3; ++step) {
    std::map<std::string, Tensor> batch;
    for (const Value* in : s->batch_inputs()) {
      std::vector<int64_t> dims = in->shape().static_dims();
      dims[0] = o.batch_size;
      Tensor t(in->dtype(), dims);
      for (int64_t i = 0; i < t.numel(); ++i) {
        if (in->dtype() == DataType::kInt64)
          t.data<int64_t>()[i] = static_cast<int64_t>(rng() % 10);
        else
          t.data<float>()[i] = std::uniform_real_distribution<float>(0, 1)(rng);
      }
      batch[in->name()] = t;
    }
    losses.push_back(s->train_step(batch).loss);
  }
  std::map<std::string, Tensor> params;
  for (const std::string& p : s->parameter_names()) params[p] = s->tensor(p);
  return {losses, params};
}

TEST_P(IsaVariant, TrainingStepsBitwiseEqualToBaseline) {
  struct Case {
    const char* model;
    Precision precision;
  };
  // The bf16 GEMMs on the CPU's dot-product units (avx512 only) sum in another order than the
  // widened sgemm of the other variants (tests/kernels/gemm_bf16_test.cc bounds both): here every
  // variant widens, so the loops are what is compared.
  cpu::set_bf16_gemm_widened(true);
  for (const Case& c : {Case{"gpt/gpt.onnx", Precision::kFp32}, Case{"digits/cnn.onnx", Precision::kFp32},
                        Case{"digits/mlp.onnx", Precision::kBf16}}) {
    auto [want_losses, want] = train(c.model, Isa::kBaseline, c.precision);
    auto [got_losses, got] = train(c.model, GetParam(), c.precision);
    EXPECT_EQ(got_losses, want_losses) << c.model;
    ASSERT_EQ(got.size(), want.size());
    for (const auto& [name, t] : want) EXPECT_TRUE(same_bytes(got.at(name), t)) << c.model << ": " << name;
  }
  cpu::set_bf16_gemm_widened(false);
}

INSTANTIATE_TEST_SUITE_P(Variants, IsaVariant, ::testing::Values(Isa::kAvx2, Isa::kAvx512),
                         [](const auto& info) { return std::string(cpu::isa_name(info.param)); });

TEST(Isa, ForcingAVariantTheCpuLacksFails) {
  if (cpu::best_isa() == Isa::kAvx512) GTEST_SKIP() << "this CPU has every variant";
  EXPECT_THROW(cpu::set_active_isa(Isa::kAvx512), Error);
}

}  // namespace
}  // namespace otter
