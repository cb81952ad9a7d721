// Numeric before/after tests of mixed-precision and cast-elimination: on seeded random inputs, the
// float16/bfloat16 graph of each shipped model (MLP, CNN, GPT) computes what its float32 graph
// computes within half-precision tolerance, and removing exact Cast pairs changes no value.
#include <gtest/gtest.h>

#include <random>

#include "graph/onnx_io.h"
#include "graph/op_table.h"
#include "graph/printer.h"
#include "passes/cast_elimination.h"
#include "passes/mixed_precision.h"
#include "passes/pass_manager.h"
#include "runtime/constant_eval.h"
#include "runtime/executor.h"

namespace otter {
namespace {

std::string model_path(const std::string& rel) { return std::string(OTTER_SOURCE_DIR) + "/models/" + rel; }

std::unique_ptr<Graph> build(const std::string& model, const std::string& pipeline) {
  auto g = import_onnx_file(model_path(model));
  run_pipeline(*g, pipeline);
  return g;
}

// Standard-normal floats; integers uniform in [0, int_bound).
std::map<std::string, Tensor> random_feeds(const Graph& g, int64_t batch, int64_t int_bound, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal;
  std::uniform_int_distribution<int64_t> uniform(0, int_bound - 1);
  std::map<std::string, Tensor> feeds;
  for (const Value* in : g.inputs()) {
    std::vector<int64_t> dims;
    for (const Dim& d : in->shape().dims) dims.push_back(d.is_static() ? d.value : batch);
    Tensor t(in->dtype(), dims);
    for (int64_t i = 0; i < t.numel(); ++i) {
      if (in->dtype() == DataType::kFloat32) t.data<float>()[i] = normal(rng);
      else t.data<int64_t>()[i] = uniform(rng);
    }
    feeds[in->name()] = t;
  }
  return feeds;
}

double max_rel_diff(const Tensor& a, const Tensor& b) {
  EXPECT_EQ(a.dims(), b.dims());
  double num = 0, den = 1e-30;
  for (int64_t i = 0; i < a.numel(); ++i) {
    num = std::max(num, std::abs(a.get_as_double(i) - b.get_as_double(i)));
    den = std::max(den, std::abs(b.get_as_double(i)));
  }
  return num / den;
}

struct ModelCase {
  std::string model;
  int64_t int_bound;  // classes / vocabulary
};

class MixedPrecisionNumericTest : public ::testing::TestWithParam<std::tuple<ModelCase, std::string>> {};

// The forward graph (model, loss, BatchNorm statistics) in fp32 and in half on the same inputs.
TEST_P(MixedPrecisionNumericTest, HalfGraphComputesWhatFp32GraphComputes) {
  const auto& [mc, dtype] = GetParam();
  const std::string base = "canonicalize,add-loss{type=ce}";
  auto ref = build(mc.model, base);
  auto half = build(mc.model, base + ",mixed-precision{dtype=" + dtype + "}");
  auto feeds = random_feeds(*ref, 8, mc.int_bound, 42);
  auto want = Executor(*ref).run(feeds);
  auto got = Executor(*half).run(feeds);
  // Rounding of one half operand is 2^-11 (fp16) or 2^-8 (bf16) relative; through a few layers
  // (and the GPT's residual stream) the logits move by a small multiple of that.
  const double tol = dtype == "fp16" ? 3e-3 : 2.5e-2;
  ASSERT_EQ(want.size(), got.size());
  for (const auto& [name, w] : want) {
    const Tensor& h = got.at(name);
    EXPECT_EQ(h.dtype(), w.dtype()) << name;  // outputs and state updates keep their types
    double d = max_rel_diff(h, w);
    std::printf("  %s %s %-40s max rel diff %.3g\n", mc.model.c_str(), dtype.c_str(), name.c_str(), d);
    EXPECT_LT(d, tol) << name;
    EXPECT_GT(d, 0.0) << name << ": identical results, so the half graph did not compute in half";
  }
}

INSTANTIATE_TEST_SUITE_P(Models, MixedPrecisionNumericTest,
                         ::testing::Combine(::testing::Values(ModelCase{"digits/mlp.onnx", 10},
                                                              ModelCase{"digits/cnn.onnx", 10},
                                                              ModelCase{"gpt/gpt.onnx", 64}),
                                            ::testing::Values("fp16", "bf16")));

// Graph outputs keep their names and types, and the op counters add up.
TEST(MixedPrecisionTest, CountersAndOutputTypes) {
  auto g = build("digits/mlp.onnx", "canonicalize,add-loss{type=ce}");
  MixedPrecisionOptions o;
  auto st = mixed_precision(*g, o);
  EXPECT_EQ(st.casts_inserted, 6);  // x, two weights, two biases, logits back to fp32
  EXPECT_EQ(st.ops_half, 3);        // Gemm, Relu, Gemm
  EXPECT_EQ(st.ops_fp32, 1);        // the loss
  EXPECT_EQ(g->value("logits")->dtype(), DataType::kFloat32);
  EXPECT_EQ(g->value("logits.f16")->dtype(), DataType::kFloat16);
  EXPECT_EQ(g->outputs()[1]->name(), "logits");
}

TEST(MixedPrecisionTest, RunsBeforeAutodiffOnly) {
  auto g = build("digits/mlp.onnx", "canonicalize,add-loss{type=ce}");
  g->loss_seed = g->add_initializer("loss.grad", Tensor::scalar<float>(1.f), false);
  try {
    mixed_precision(*g, {});
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("before autodiff"), std::string::npos) << e.what();
  }
}

TEST(MixedPrecisionTest, ConvertFloatTensorRoundsToNearestEven) {
  Tensor t = Tensor::from_vector<float>({4}, {1.0f + 1.0f / 2048, 1.0f + 3.0f / 2048, 70000.f, 1e-8f});
  Tensor h = convert_float_tensor(t, DataType::kFloat16);
  const uint16_t* p = static_cast<const uint16_t*>(h.raw());
  EXPECT_EQ(p[0], 0x3c00);  // tie: to even (1.0)
  EXPECT_EQ(p[1], 0x3c02);  // tie: to even (1 + 2^-9)
  EXPECT_EQ(p[2], 0x7c00);  // overflow: inf
  EXPECT_EQ(p[3], 0x0000);  // below half the smallest subnormal: zero
  Tensor b = convert_float_tensor(t, DataType::kBFloat16);
  EXPECT_EQ(b.get_as_double(2), 70144.0);  // 8 significant bits
}

// cast-elimination keeps every value: the fp16 MLP with an extra exact round trip and a duplicate.
TEST(CastEliminationTest, RemovingExactPairsChangesNoValue) {
  auto g = build("digits/mlp.onnx", "canonicalize,add-loss{type=ce},mixed-precision{dtype=fp16}");
  auto feeds = random_feeds(*g, 8, 10, 7);
  auto want = Executor(*g).run(feeds);
  // Relu reads h + h, each h through an exact round trip f16 -> f32 -> f16, the second one
  // starting with a duplicate of the first's f16 -> f32 Cast.
  Node* relu = g->value("/Relu_output_0")->producer();
  Value* h = relu->input(0);
  auto cast = [&](Value* v, DataType t, const std::string& name) {
    Node* c = g->add_node("Cast", {v}, {name}, "", relu);
    c->set_attr("to", Attribute(static_cast<int64_t>(dtype_to_onnx(t))));
    infer_node(*c);
    return c->output(0);
  };
  Value* down = cast(cast(h, DataType::kFloat32, "h.up"), DataType::kFloat16, "h.down");
  Value* down2 = cast(cast(h, DataType::kFloat32, "h.up2"), DataType::kFloat16, "h.down2");
  Node* add = g->add_node("Add", {down, down2}, {"h.sum"}, "", relu);
  infer_node(*add);
  relu->set_input(0, add->output(0));
  auto before = Executor(*g).run(feeds);
  for (const auto& [name, t] : want) EXPECT_FALSE(before.at(name).bitwise_equal(t)) << name << " (h + h differs)";
  auto st = eliminate_casts(*g);
  EXPECT_EQ(st.casts_removed, 3);  // h.up, h.down, h.down2
  EXPECT_EQ(st.casts_merged, 1);   // h.up2 into h.up
  EXPECT_EQ(add->input(0), h);
  EXPECT_EQ(add->input(1), h);
  auto after = Executor(*g).run(feeds);
  for (const auto& [name, t] : before) EXPECT_TRUE(after.at(name).bitwise_equal(t)) << name;
}

TEST(CastEliminationTest, ExactCasts) {
  using T = DataType;
  EXPECT_TRUE(cast_is_exact(T::kFloat16, T::kFloat32));
  EXPECT_TRUE(cast_is_exact(T::kBFloat16, T::kFloat64));
  EXPECT_TRUE(cast_is_exact(T::kFloat32, T::kFloat32));
  EXPECT_FALSE(cast_is_exact(T::kFloat32, T::kFloat16));
  EXPECT_FALSE(cast_is_exact(T::kFloat16, T::kBFloat16));
  EXPECT_FALSE(cast_is_exact(T::kBFloat16, T::kFloat16));
  EXPECT_FALSE(cast_is_exact(T::kInt64, T::kFloat32));
}

}  // namespace
}  // namespace otter
