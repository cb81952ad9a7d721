// The lora pass's adapter branch and merge_lora against a direct computation, for each way a
// weight reaches a GEMM: y = alpha * op(x) * W_eff (+ C), where W_eff, as an [in, out] matrix, is
// the base weight read in its layout plus (lora alpha / r) * (B A)^T. Both the adapted graph and the
// merged graph must give it; the PyTorch comparison of the GPT (Transpose -> MatMul) is in
// tests/runtime/lora_test.cc.
#include <gtest/gtest.h>

#include <random>

#include "graph/onnx_io.h"
#include "passes/lora.h"
#include "runtime/executor.h"

namespace otter {
namespace {

constexpr int64_t kIn = 5, kOut = 4, kRank = 2, kRows = 6;

struct Layout {
  const char* name;
  std::string body;  // the model's node(s); x's declared shape and W's in the header below
  std::string x_type, w_type;
  bool w_in_out, x_transposed;
  float gemm_alpha;
  bool bias;
};

Tensor random(std::vector<int64_t> dims, std::mt19937& gen) {
  Tensor t(DataType::kFloat32, dims);
  std::uniform_real_distribution<float> u(-1, 1);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = u(gen);
  return t;
}

std::unique_ptr<Graph> model(const Layout& l) {
  std::string text = "<ir_version: 8, opset_import: [\"\" : 17]>\nm (float" + l.x_type + " x) => (float y)\n  <float" +
                     l.w_type + " w = {";
  for (int64_t i = 0; i < kIn * kOut; ++i)
    text += (i ? "," : "") + std::to_string(0.05 * static_cast<double>(i % 7) - 0.1);
  text += "}, float[4] c = {1, 2, 3, 4}>\n{\n" + l.body + "\n}\n";
  return import_onnx_text(text);
}

// y[m, o] = gemm_alpha * sum_i X[m, i] W_eff[i, o] (+ c[o]), X as [rows, in].
std::vector<double> reference(const Layout& l, const Tensor& x, const Tensor& w, const Tensor& a, const Tensor& b,
                              double scale) {
  std::vector<double> y(kRows * kOut, 0.0);
  for (int64_t o = 0; o < kOut; ++o)
    for (int64_t i = 0; i < kIn; ++i) {
      double weff = w.get_as_double(l.w_in_out ? i * kOut + o : o * kIn + i);
      for (int64_t k = 0; k < kRank; ++k) weff += scale * b.get_as_double(o * kRank + k) * a.get_as_double(k * kIn + i);
      for (int64_t m = 0; m < kRows; ++m) {
        const double xv = x.get_as_double(l.x_transposed ? i * kRows + m : m * kIn + i);
        y[m * kOut + o] += l.gemm_alpha * xv * weff;
      }
    }
  if (l.bias)
    for (int64_t m = 0; m < kRows; ++m)
      for (int64_t o = 0; o < kOut; ++o) y[m * kOut + o] += static_cast<double>(o + 1);
  return y;
}

void expect_output(Graph& g, const Tensor& x, const std::vector<double>& want, const std::string& what) {
  ExecutorOptions eo;
  Executor ex(g, eo);
  Tensor y = ex.run({{"x", x}}).at("y");
  ASSERT_EQ(y.numel(), static_cast<int64_t>(want.size())) << what;
  for (int64_t i = 0; i < y.numel(); ++i) EXPECT_NEAR(y.get_as_double(i), want[i], 1e-5) << what << " element " << i;
}

const std::vector<Layout>& layouts() {
  static const std::vector<Layout> all = {
      {"Gemm transB=1, alpha 0.5, bias", "y = Gemm<transB = 1, alpha = 0.5>(x, w, c)", "[6,5]", "[4,5]", false, false,
       0.5f, true},
      {"Gemm transB=0", "y = Gemm(x, w)", "[6,5]", "[5,4]", true, false, 1.f, false},
      {"Gemm transA=1 transB=1", "y = Gemm<transA = 1, transB = 1>(x, w)", "[5,6]", "[4,5]", false, true, 1.f, false},
      {"MatMul 3-D x [in,out] weight", "y = MatMul(x, w)", "[2,3,5]", "[5,4]", true, false, 1.f, false},
      {"Transpose then MatMul", "wt = Transpose<perm = [1, 0]>(w)\n  y = MatMul(x, wt)", "[2,3,5]", "[4,5]", false,
       false, 1.f, false},
  };
  return all;
}

TEST(LoraLayouts, AdapterBranchAndMergedWeightEqualTheDirectProduct) {
  std::mt19937 gen(5);
  for (const Layout& l : layouts()) {
    SCOPED_TRACE(l.name);
    auto g = model(l);
    Tensor x = random(g->value("x")->shape().static_dims(), gen);
    Tensor a = random({kRank, kIn}, gen), b = random({kOut, kRank}, gen);
    LoraOptions o;
    o.rank = kRank;
    o.alpha = 3;
    o.targets = {"w"};
    const auto want = reference(l, x, g->value("w")->data(), a, b, o.scale());
    // Adapters given as initializers (as --init does): the pass takes them over.
    g->add_initializer("w.lora_A", a, true);
    g->add_initializer("w.lora_B", b, true);
    LoraResult r = add_lora(*g, o);
    ASSERT_EQ(r.adapters.size(), 1u);
    EXPECT_EQ(r.adapters[0].layout.in, kIn);
    EXPECT_EQ(r.adapters[0].layout.out, kOut);
    EXPECT_EQ(r.adapters[0].layout.in_out, l.w_in_out);
    EXPECT_FALSE(g->value("w")->trainable());
    expect_output(*g, x, want, "adapted graph");

    auto merged = model(l);
    EXPECT_EQ(merge_lora(*merged, {{"w.lora_A", a}, {"w.lora_B", b}}, o.scale()), 1);
    expect_output(*merged, x, want, "merged graph");
  }
}

// A fresh adapter: B = 0 (the adapted model starts as the base model), A within the
// Kaiming-uniform bound 1/sqrt(in), seeded by (seed, weight name).
TEST(LoraLayouts, DefaultInitialisation) {
  Tensor a1 = lora_init_a("w", 3, 25, DataType::kFloat32, 0);
  Tensor a2 = lora_init_a("w", 3, 25, DataType::kFloat32, 0);
  Tensor a3 = lora_init_a("w", 3, 25, DataType::kFloat32, 1);
  Tensor a4 = lora_init_a("v", 3, 25, DataType::kFloat32, 0);
  EXPECT_TRUE(a1.bitwise_equal(a2));
  EXPECT_FALSE(a1.bitwise_equal(a3));
  EXPECT_FALSE(a1.bitwise_equal(a4));
  double lo = 1, hi = -1, sum = 0;
  for (int64_t i = 0; i < a1.numel(); ++i) {
    lo = std::min(lo, a1.get_as_double(i));
    hi = std::max(hi, a1.get_as_double(i));
    sum += a1.get_as_double(i);
  }
  EXPECT_GE(lo, -0.2);
  EXPECT_LE(hi, 0.2);
  EXPECT_LT(lo, -0.1);  // spread over the interval (75 draws)
  EXPECT_GT(hi, 0.1);
  EXPECT_LT(std::fabs(sum / 75), 0.05);

  auto g = model(layouts()[0]);
  LoraOptions o;
  o.rank = 2;
  o.targets = {"w"};
  add_lora(*g, o);
  const Tensor& b = g->value("w.lora_B")->data();
  for (int64_t i = 0; i < b.numel(); ++i) EXPECT_EQ(b.get_as_double(i), 0.0);
}

}  // namespace
}  // namespace otter
