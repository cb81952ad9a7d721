// float16 and bfloat16 CPU kernels against the float32 kernel on the same (rounded) inputs, per op:
// every half output must be the float32 result rounded once, to within one unit in the last place
// of the half type (the kernels compute in float32; a second rounding or a half accumulator would
// show as several ulps), and every other output (indices, masks, fp32 statistics and accumulators)
// must equal the float32 kernel's bit for bit. Also: Cast's round-to-nearest-even, the
// accumulation of half gradients into fp32 accumulators and the optimizer's half copy.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "graph/op_table.h"
#include "kernels/common/half.h"
#include "kernels/cpu/gemm_bf16.h"
#include "kernels/cpu/half.h"
#include "kernels/kernel.h"

namespace otter {
namespace {

struct Call {
  std::string op;
  std::vector<Tensor> inputs;  // an undefined Tensor() is an omitted optional input
  std::map<std::string, Attribute> attrs;
  int num_outputs = 1;
  int opset = 17;
  std::string domain;
  bool first_micro_step = true;
};

// Runs one node through the registry's CPU kernel, with the node's types inferred as in a graph.
std::vector<Tensor> run(const Call& c) {
  Graph g;
  g.opset_imports[""] = c.opset;
  g.opset_imports[kOtterDomain] = 1;
  std::vector<Value*> ins;
  for (size_t i = 0; i < c.inputs.size(); ++i)
    ins.push_back(c.inputs[i].defined()
                      ? g.add_input("in" + std::to_string(i), c.inputs[i].dtype(), Shape::of(c.inputs[i].dims()))
                      : nullptr);
  std::vector<std::string> outs;
  for (int i = 0; i < c.num_outputs; ++i) outs.push_back("out" + std::to_string(i));
  Node* n = g.add_node(c.op, ins, outs, c.domain);
  for (const auto& [k, a] : c.attrs) n->set_attr(k, a);
  infer_node(*n);
  std::string why;
  const KernelDef* def = KernelRegistry::instance().find(*n, DeviceType::kCpu, &why);
  if (!def) fail("no kernel: ", why);
  auto kernel = def->create(*n);
  std::vector<const Tensor*> in_ptrs;
  for (const Tensor& t : c.inputs) in_ptrs.push_back(t.defined() ? &t : nullptr);
  std::vector<Tensor> results(c.num_outputs);
  std::vector<Tensor*> out_ptrs;
  for (Tensor& t : results) out_ptrs.push_back(&t);
  KernelContext ctx(*n, in_ptrs, out_ptrs, HostAllocator::instance());
  std::mt19937_64 rng(7);
  ctx.rng = &rng;
  ctx.first_micro_step = c.first_micro_step;
  kernel->run(ctx);
  return results;
}

Tensor random(std::vector<int64_t> dims, uint64_t seed, float scale = 1.f) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> d(0.f, scale);
  Tensor t(DataType::kFloat32, std::move(dims));
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = d(rng);
  return t;
}

Tensor bools(const std::vector<int>& v) {
  Tensor t(DataType::kBool, {static_cast<int64_t>(v.size())});
  for (size_t i = 0; i < v.size(); ++i) t.data<bool>()[i] = v[i] != 0;
  return t;
}

Tensor bool_scalar(bool b) {
  Tensor t(DataType::kBool, {});
  t.data<bool>()[0] = b;
  return t;
}

uint16_t round_bits(float f, DataType t) { return t == DataType::kFloat16 ? float_to_half(f) : float_to_bf16(f); }
float half_value(uint16_t b, DataType t) { return t == DataType::kFloat16 ? half_to_float(b) : bf16_to_float(b); }

Tensor round_to(const Tensor& f, DataType t) {
  Tensor h(t, f.dims());
  for (int64_t i = 0; i < f.numel(); ++i) static_cast<uint16_t*>(h.raw())[i] = round_bits(f.data<float>()[i], t);
  return h;
}

Tensor widen(const Tensor& h) {
  Tensor f(DataType::kFloat32, h.dims());
  for (int64_t i = 0; i < h.numel(); ++i) f.data<float>()[i] = static_cast<float>(h.get_as_double(i));
  return f;
}

// One unit in the last place of the half type at |x| (subnormal spacing below the normal range).
double ulp(double x, DataType t) {
  const int mant = t == DataType::kFloat16 ? 10 : 7;
  const int min_exp = t == DataType::kFloat16 ? -14 : -126;
  int e = x == 0 ? min_exp : std::max(static_cast<int>(std::floor(std::log2(std::abs(x)))), min_exp);
  return std::ldexp(1.0, e - mant);
}

// Runs `c` with the inputs listed in `half_inputs` rounded to `t`, and the float32 kernel on those
// rounded values widened back; compares every output as the header says. Returns the half outputs.
std::vector<Tensor> check_against_fp32(Call c, const std::vector<int>& half_inputs, DataType t) {
  Call ref = c;
  // Own copies of the other inputs: a kernel that updates one in place (GemmAccumulate's
  // accumulator) must not write into the reference run's input, nor return the same storage.
  for (size_t i = 0; i < ref.inputs.size(); ++i)
    if (ref.inputs[i].defined()) ref.inputs[i] = ref.inputs[i].clone();
  for (int i : half_inputs) {
    c.inputs[i] = round_to(c.inputs[i], t);
    ref.inputs[i] = widen(c.inputs[i]);
  }
  std::vector<Tensor> got = run(c), want = run(ref);
  for (size_t k = 0; k < got.size(); ++k) {
    if (!want[k].defined()) continue;
    EXPECT_EQ(got[k].dims(), want[k].dims()) << c.op << " output " << k;
    if (want[k].dtype() == DataType::kFloat32 && got[k].dtype() == t) {
      double worst = 0;
      for (int64_t i = 0; i < want[k].numel(); ++i) {
        double r = want[k].data<float>()[i], h = got[k].get_as_double(i);
        worst = std::max(worst, std::abs(h - r) / ulp(r, t));
      }
      EXPECT_LE(worst, 1.0) << c.op << " " << dtype_name(t) << " output " << k << ": " << worst << " ulp";
    } else {
      EXPECT_EQ(got[k].dtype(), want[k].dtype()) << c.op << " output " << k;
      EXPECT_TRUE(got[k].bitwise_equal(want[k])) << c.op << " " << dtype_name(t) << " output " << k
                                                  << " differs from the float32 kernel's";
    }
  }
  return got;
}

class HalfKernelTest : public ::testing::TestWithParam<DataType> {};

TEST_P(HalfKernelTest, GemmFamily) {
  DataType t = GetParam();
  // MatMul: batched A against a shared B (one GEMM), and broadcast batches.
  check_against_fp32({"MatMul", {random({2, 3, 5, 70}, 1), random({70, 4}, 2)}}, {0, 1}, t);
  check_against_fp32({"MatMul", {random({2, 1, 5, 7}, 3), random({3, 7, 4}, 4)}}, {0, 1}, t);
  check_against_fp32({"Gemm",
                      {random({70, 5}, 5), random({4, 70}, 6), random({4}, 7)},
                      {{"transA", Attribute(int64_t{1})}, {"transB", Attribute(int64_t{1})},
                       {"alpha", Attribute(0.5f)}, {"beta", Attribute(2.f)}}},
                     {0, 1, 2}, t);
}

TEST_P(HalfKernelTest, ConvolutionAndPooling) {
  DataType t = GetParam();
  check_against_fp32({"Conv",
                      {random({2, 3, 7, 7}, 8), random({4, 3, 3, 3}, 9), random({4}, 10)},
                      {{"pads", Attribute(std::vector<int64_t>{1, 1, 1, 1})},
                       {"strides", Attribute(std::vector<int64_t>{2, 2})}}},
                     {0, 1, 2}, t);
  check_against_fp32({"Conv", {random({1, 4, 5, 5}, 11), random({4, 1, 3, 3}, 12)}, {{"group", Attribute(int64_t{4})}}},
                     {0, 1}, t);
  check_against_fp32({"ConvTranspose",
                      {random({2, 4, 4, 3}, 60), random({4, 3, 3, 3}, 61), random({3}, 62)},
                      {{"pads", Attribute(std::vector<int64_t>{1, 0, 1, 0})},
                       {"strides", Attribute(std::vector<int64_t>{2, 2})},
                       {"output_padding", Attribute(std::vector<int64_t>{1, 0})}}},
                     {0, 1, 2}, t);
  check_against_fp32({"MaxPool",
                      {random({2, 3, 6, 6}, 13)},
                      {{"kernel_shape", Attribute(std::vector<int64_t>{2, 2})},
                       {"strides", Attribute(std::vector<int64_t>{2, 2})}},
                      2},
                     {0}, t);
  check_against_fp32({"AveragePool",
                      {random({2, 3, 6, 6}, 14)},
                      {{"kernel_shape", Attribute(std::vector<int64_t>{3, 3})},
                       {"pads", Attribute(std::vector<int64_t>{1, 1, 1, 1})}}},
                     {0}, t);
  check_against_fp32({"GlobalAveragePool", {random({2, 3, 4, 4}, 15)}}, {0}, t);
}

TEST_P(HalfKernelTest, NormalisationSoftmaxDropoutLoss) {
  DataType t = GetParam();
  // Training-mode BatchNorm: half X, fp32 scale, bias and running statistics (which stay fp32).
  Tensor var = random({3}, 19);
  for (int64_t i = 0; i < 3; ++i) var.data<float>()[i] = 1.f + std::abs(var.data<float>()[i]);
  auto bn = check_against_fp32({"BatchNormalization",
                                {random({4, 3, 5, 5}, 16, 3.f), random({3}, 17), random({3}, 18), random({3}, 20), var},
                                {{"training_mode", Attribute(int64_t{1})}},
                                3,
                                15},
                               {0}, t);
  EXPECT_EQ(bn[0].dtype(), t);
  EXPECT_EQ(bn[1].dtype(), DataType::kFloat32);
  check_against_fp32({"LayerNormalization", {random({4, 16}, 21), random({16}, 22), random({16}, 23)}}, {0, 1, 2}, t);
  check_against_fp32({"Softmax", {random({3, 10}, 24, 4.f)}}, {0}, t);
  check_against_fp32({"LogSoftmax", {random({3, 10}, 25, 4.f)}}, {0}, t);
  auto dropout = check_against_fp32({"Dropout",
                                     {random({4, 32}, 26), Tensor::scalar<float>(0.3f), bool_scalar(true)},
                                     {},
                                     2},
                                    {0}, t);
  EXPECT_EQ(dropout[1].dtype(), DataType::kBool);
  Tensor labels = Tensor::from_vector<int64_t>({6}, {0, 4, 2, 2, 1, 3});
  check_against_fp32({"SoftmaxCrossEntropyLoss", {random({6, 5}, 27), labels}}, {0}, t);
}

TEST_P(HalfKernelTest, ElementwiseReduceAndDataMovement) {
  DataType t = GetParam();
  Tensor a = random({4, 6}, 30), b = random({6}, 31);
  for (const char* op : {"Add", "Sub", "Mul", "Div"}) check_against_fp32({op, {a, b}}, {0, 1}, t);
  Tensor positive = random({4, 6}, 32);
  for (int64_t i = 0; i < positive.numel(); ++i) positive.data<float>()[i] = std::abs(positive.data<float>()[i]);
  for (const char* op : {"Relu", "Erf", "Tanh", "Sigmoid", "Exp"}) check_against_fp32({op, {a}}, {0}, t);
  check_against_fp32({"Sqrt", {positive}}, {0}, t);
  check_against_fp32({"Gelu", {a}, {}, 1, 20}, {0}, t);
  Tensor cond = bools({1, 0, 1, 1, 0, 0});
  check_against_fp32({"Where", {cond, a, b}}, {1, 2}, t);
  Tensor axes = Tensor::from_vector<int64_t>({1}, {1});
  check_against_fp32({"ReduceMean", {random({4, 300}, 33), axes}, {}, 1, 18}, {0}, t);
  check_against_fp32({"ReduceSum", {random({4, 300}, 34), axes}}, {0}, t);
  check_against_fp32({"Transpose", {a}, {{"perm", Attribute(std::vector<int64_t>{1, 0})}}}, {0}, t);
  check_against_fp32({"Concat", {a, random({2, 6}, 35)}, {{"axis", Attribute(int64_t{0})}}}, {0, 1}, t);
  check_against_fp32({"Gather", {a, Tensor::from_vector<int64_t>({3}, {3, 0, 3})}}, {0}, t);
  check_against_fp32({"Reshape", {a, Tensor::from_vector<int64_t>({2}, {3, 8})}}, {0}, t);
}

TEST_P(HalfKernelTest, GradientOps) {
  DataType t = GetParam();
  const std::map<std::string, Attribute> conv{{"kernel_shape", Attribute(std::vector<int64_t>{3, 3})},
                                              {"pads", Attribute(std::vector<int64_t>{1, 1, 1, 1})}};
  check_against_fp32({"ConvGrad", {random({2, 4, 5, 5}, 40), random({2, 3, 5, 5}, 41), random({4, 3, 3, 3}, 42)}, conv,
                      3, 17, kOtterDomain},
                     {0, 1, 2}, t);
  const std::map<std::string, Attribute> pool{{"kernel_shape", Attribute(std::vector<int64_t>{2, 2})},
                                              {"strides", Attribute(std::vector<int64_t>{2, 2})}};
  check_against_fp32({"MaxPoolGrad", {random({2, 3, 3, 3}, 43), random({2, 3, 6, 6}, 44)}, pool, 1, 17, kOtterDomain},
                     {0, 1}, t);
  check_against_fp32({"AveragePoolGrad", {random({2, 3, 3, 3}, 45), random({2, 3, 6, 6}, 46)}, pool, 1, 17,
                      kOtterDomain},
                     {0, 1}, t);
  Tensor var = Tensor::from_vector<float>({3}, {1.f, 2.f, 0.5f});
  check_against_fp32({"BatchNormalizationGrad",
                      {random({4, 3, 5, 5}, 47), random({4, 3, 5, 5}, 48, 2.f), random({3}, 49), random({3}, 50), var},
                      {{"training_mode", Attribute(int64_t{1})}},
                      3,
                      17,
                      kOtterDomain},
                     {0, 1}, t);
  check_against_fp32({"ReluGrad", {random({4, 6}, 51), random({4, 6}, 52)}, {}, 1, 17, kOtterDomain}, {0, 1}, t);
  check_against_fp32({"SumToShape", {random({4, 300}, 53), random({1, 300}, 54)}, {}, 1, 17, kOtterDomain}, {0, 1}, t);
}

// Half gradients reach fp32 accumulators: the weight-gradient GEMM sums half products in fp32 into
// the accumulator (first micro-step writes, later ones add), AccumulateGrad widens and adds.
TEST_P(HalfKernelTest, AccumulateIntoFp32) {
  DataType t = GetParam();
  // The float32 accumulator is compared bitwise with the float32 kernel's, so bf16 takes the
  // widening GEMM here (the same sgemm); tests/kernels/conv_bf16_test.cc bounds the native path.
  cpu::set_bf16_gemm_widened(true);
  Tensor acc = random({5, 4}, 60);
  for (bool first : {true, false}) {
    Call c{"GemmAccumulate", {random({70, 5}, 61), random({70, 4}, 62), acc.clone()}, {{"transA", Attribute(int64_t{1})}},
           1, 17, kOtterDomain, first};
    auto got = check_against_fp32(c, {0, 1}, t);
    EXPECT_EQ(got[0].dtype(), DataType::kFloat32);
    Call add{"AccumulateGrad", {acc.clone(), random({5, 4}, 63)}, {}, 1, 17, kOtterDomain, first};
    check_against_fp32(add, {1}, t);
  }
  cpu::set_bf16_gemm_widened(false);
}

INSTANTIATE_TEST_SUITE_P(Types, HalfKernelTest, ::testing::Values(DataType::kFloat16, DataType::kBFloat16),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

// The bulk conversions of the half kernels (F16C where the CPU has it) give exactly the values of
// half.h's functions: every half widens to the same float; every float near a rounding decision
// (each half value, each midpoint between neighbours, one float ulp either side, beyond the range,
// subnormals) rounds to the same half, for float16 and bfloat16. NaNs stay NaNs.
TEST(HalfBulkConversionTest, MatchesTheScalarFunctions) {
  for (DataType t : {DataType::kFloat16, DataType::kBFloat16}) {
    Tensor all(t, {65536});
    for (uint32_t i = 0; i < 65536; ++i) static_cast<uint16_t*>(all.raw())[i] = static_cast<uint16_t>(i);
    Tensor wide = cpu::widen_to_float(all);
    std::vector<float> probes;
    for (uint32_t i = 0; i < 65536; ++i) {
      float f = half_value(static_cast<uint16_t>(i), t), w = wide.data<float>()[i];
      if (std::isnan(f)) {
        ASSERT_TRUE(std::isnan(w)) << std::hex << i;
        continue;
      }
      ASSERT_EQ(w, f) << dtype_name(t) << " " << std::hex << i;
      float next = half_value(static_cast<uint16_t>(i + 1), t);
      probes.push_back(f);
      if (i + 1 < 65536 && std::isfinite(next) && std::isfinite(f) && (i & 0x7fff) != 0x7fff) {
        float mid = f + (next - f) / 2;
        probes.insert(probes.end(), {mid, std::nextafter(mid, -INFINITY), std::nextafter(mid, INFINITY)});
      }
    }
    probes.insert(probes.end(), {1e30f, -1e30f, INFINITY, -INFINITY, 65520.f, 65519.99f, 1e-9f, -3e-8f});
    Tensor src = Tensor::from_vector<float>({static_cast<int64_t>(probes.size())}, probes);
    Tensor dst(t, src.dims());
    cpu::round_into(src, dst);
    for (size_t k = 0; k < probes.size(); ++k)
      ASSERT_EQ(static_cast<const uint16_t*>(dst.raw())[k], round_bits(probes[k], t))
          << dtype_name(t) << " " << std::hexfloat << probes[k];
  }
}

TEST(HalfCastTest, RoundsToNearestEvenAndSaturatesToInf) {
  // 1 + 2^-11 is a tie between 1 and 1 + 2^-10 in fp16 (even: 1); 1 + 3 * 2^-11 rounds up (even).
  Tensor x = Tensor::from_vector<float>({6}, {1.f + std::ldexp(1.f, -11), 1.f + 3 * std::ldexp(1.f, -11), 65520.f,
                                              65519.f, std::ldexp(1.f, -25), -0.f});
  Tensor h = run({"Cast", {x}, {{"to", Attribute(int64_t{10})}}})[0];
  std::vector<uint16_t> want = {0x3c00, 0x3c02, 0x7c00, 0x7bff, 0x0000, 0x8000};
  for (int i = 0; i < 6; ++i) EXPECT_EQ(static_cast<const uint16_t*>(h.raw())[i], want[i]) << i;
  // bf16: 1 + 2^-8 is a tie (even: 1); 1 + 3 * 2^-8 rounds up to 1 + 2^-6.
  Tensor y = Tensor::from_vector<float>({2}, {1.f + std::ldexp(1.f, -8), 1.f + 3 * std::ldexp(1.f, -8)});
  Tensor b = run({"Cast", {y}, {{"to", Attribute(int64_t{16})}}})[0];
  EXPECT_EQ(static_cast<const uint16_t*>(b.raw())[0], 0x3f80);
  EXPECT_EQ(static_cast<const uint16_t*>(b.raw())[1], 0x3f82);
}

// The optimizer's update writes round(new weight) into the half copy, and nothing when skipped.
TEST(HalfCopyTest, UpdateWritesTheRoundedWeightUnlessSkipped) {
  for (DataType t : {DataType::kFloat16, DataType::kBFloat16}) {
    for (bool finite : {true, false}) {
      Tensor p = random({300}, 70), g = random({300}, 71);
      Tensor half = round_to(p, t);
      Tensor before = half.clone();
      Tensor m(DataType::kFloat32, {300}), v(DataType::kFloat32, {300});
      Call adam{"AdamUpdate",
                {p, g, m, v, Tensor::scalar<int64_t>(0), Tensor::scalar<float>(0.1f), Tensor::scalar<float>(0.5f),
                 bool_scalar(finite), half},
                {},
                4,
                17,
                kOtterDomain};
      auto out = run(adam);
      ASSERT_EQ(out[3].dtype(), t);
      EXPECT_EQ(out[3].raw(), half.raw()) << "the half copy is updated in place";
      for (int64_t i = 0; i < 300; ++i) {
        uint16_t want = finite ? round_bits(out[0].data<float>()[i], t) : static_cast<uint16_t*>(before.raw())[i];
        ASSERT_EQ(static_cast<const uint16_t*>(out[3].raw())[i], want) << dtype_name(t) << " element " << i;
      }
      if (finite) {
        EXPECT_FALSE(out[3].bitwise_equal(before)) << "the step moved the weights";
      }
      Tensor p2 = random({300}, 72), h2 = round_to(p2, t);
      Call sgd{"SGDUpdate",
               {p2, g, Tensor(), Tensor::scalar<float>(0.1f), Tensor::scalar<float>(1.f), bool_scalar(finite),
                h2},
               {},
               3,
               17,
               kOtterDomain};
      auto s = run(sgd);
      for (int64_t i = 0; i < 300; ++i)
        ASSERT_EQ(half_value(static_cast<const uint16_t*>(s[2].raw())[i], t),
                  half_value(round_bits(s[0].data<float>()[i], t), t));
    }
  }
}

}  // namespace
}  // namespace otter
