// CPU kernels of ai.otter.AddLayerNorm (kernels/cpu/add_layer_norm.cc) and LayerNormalizationGrad's
// dResidual input (kernels/cpu/nn_grad.cc) against the unfused ops they replace: Y and S are
// LayerNormalization(Add(X, R)) and Add(X, R) bit for bit in float32 and float64 (the fused kernel
// runs LayerNormalization's row code), in half types they are the float32 op on the widened inputs
// rounded once (the derived half kernels, kernels/cpu/half.cc); dX with dResidual is
// Add(LayerNormalizationGrad's dX, dResidual) bit for bit. 5*7*67 elements with threads: rows
// split over threads; with and without the S output (the per-thread sum row), with and without
// bias; the ISA variants are compared in tests/kernels/isa_test.cc.
#include <algorithm>
#include <chrono>
#include <cstring>
#include <iostream>
#include <memory>
#include <random>

#include "kernels/common/half.h"
#include "tests/kernels/kernel_test_util.h"

namespace otter::testing {
namespace {

Tensor random_tensor(DataType t, std::vector<int64_t> dims, uint64_t seed, double lo, double hi) {
  Tensor out(t, std::move(dims));
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(lo, hi);
  for (int64_t i = 0; i < out.numel(); ++i) {
    const double v = u(rng);
    if (t == DataType::kFloat64)
      out.data<double>()[i] = v;
    else if (t == DataType::kFloat32)
      out.data<float>()[i] = static_cast<float>(v);
    else if (t == DataType::kFloat16)
      static_cast<uint16_t*>(out.raw())[i] = float_to_half(static_cast<float>(v));
    else
      static_cast<uint16_t*>(out.raw())[i] = float_to_bf16(static_cast<float>(v));
  }
  return out;
}

bool same_bits(const Tensor& a, const Tensor& b) {
  return a.dtype() == b.dtype() && a.dims() == b.dims() && std::memcmp(a.raw(), b.raw(), a.nbytes()) == 0;
}

Tensor cast(const Tensor& x, DataType t) {
  return run_op({.op = "Cast", .inputs = {x}, .attrs = {{"to", Attribute(int64_t{dtype_to_onnx(t)})}}})[0];
}

TEST(AddLayerNormKernel, IsTheAddThenLayerNormalization) {
  const std::map<std::string, Attribute> attrs = {{"epsilon", Attribute(1e-3f)}};
  for (DataType t : {DataType::kFloat32, DataType::kFloat64}) {
    // An offset of 40 makes the mean large against the spread: the statistics' order shows.
    const Tensor x = random_tensor(t, {5, 7, 67}, 1, 38, 42), r = random_tensor(t, {5, 7, 67}, 2, -2, 2);
    const Tensor scale = random_tensor(t, {67}, 3, 0.5, 1.5), bias = random_tensor(t, {67}, 4, -1, 1);
    for (bool with_bias : {true, false}) {
      std::vector<Tensor> ins = {x, r, scale};
      if (with_bias) ins.push_back(bias);
      const Tensor s_ref = run_op({.op = "Add", .inputs = {x, r}})[0];
      std::vector<Tensor> ln_in = {s_ref, scale};
      if (with_bias) ln_in.push_back(bias);
      const Tensor y_ref = run_op({.op = "LayerNormalization", .inputs = ln_in, .attrs = attrs})[0];
      const auto both =
          run_op({.op = "AddLayerNorm", .inputs = ins, .attrs = attrs, .num_outputs = 2, .domain = "ai.otter"});
      const Tensor y_only = run_op({.op = "AddLayerNorm", .inputs = ins, .attrs = attrs, .domain = "ai.otter"})[0];
      const std::string what = str_cat(dtype_name(t), with_bias ? "" : " without bias");
      EXPECT_TRUE(same_bits(both[0], y_ref)) << what;
      EXPECT_TRUE(same_bits(both[1], s_ref)) << what;
      EXPECT_TRUE(same_bits(y_only, y_ref)) << what;
    }
  }
  // Half inputs: the float32 op on the widened inputs, Y and S rounded once.
  for (DataType t : {DataType::kFloat16, DataType::kBFloat16}) {
    const Tensor x = random_tensor(t, {5, 7, 67}, 5, -3, 3), r = random_tensor(t, {5, 7, 67}, 6, -3, 3);
    const Tensor scale = random_tensor(t, {67}, 7, 0.5, 1.5), bias = random_tensor(t, {67}, 8, -1, 1);
    // Shape inference types the outputs half, which the derived kernel rounds to.
    const auto got = run_op(
        {.op = "AddLayerNorm", .inputs = {x, r, scale, bias}, .num_outputs = 2, .domain = "ai.otter", .infer = true});
    ASSERT_EQ(got[0].dtype(), t);
    const auto f32 = run_op({.op = "AddLayerNorm",
                             .inputs = {cast(x, DataType::kFloat32), cast(r, DataType::kFloat32),
                                        cast(scale, DataType::kFloat32), cast(bias, DataType::kFloat32)},
                             .num_outputs = 2,
                             .domain = "ai.otter"});
    EXPECT_TRUE(same_bits(got[0], cast(f32[0], t))) << dtype_name(t);
    EXPECT_TRUE(same_bits(got[1], cast(f32[1], t))) << dtype_name(t);
  }
}

TEST(AddLayerNormKernel, RefusesABroadcastOrAnotherAxis) {
  const Tensor x = random_tensor(DataType::kFloat32, {4, 6}, 1, -1, 1),
               row = random_tensor(DataType::kFloat32, {6}, 2, -1, 1);
  EXPECT_NE(run_error({.op = "AddLayerNorm", .inputs = {x, row, row}, .domain = "ai.otter"}).find("R"),
            std::string::npos);
  EXPECT_NE(run_error({.op = "AddLayerNorm",
                       .inputs = {x, x, row},
                       .attrs = {{"axis", Attribute(int64_t{0})}},
                       .domain = "ai.otter"})
                .find("last axis"),
            std::string::npos);
}

TEST(AddLayerNormKernel, LayerNormGradAddsTheResidualAsAnAddWould) {
  for (DataType t : {DataType::kFloat32, DataType::kFloat64}) {
    const Tensor dy = random_tensor(t, {5, 7, 67}, 1, -1, 1), x = random_tensor(t, {5, 7, 67}, 2, -3, 3);
    const Tensor scale = random_tensor(t, {67}, 3, 0.5, 1.5), dres = random_tensor(t, {5, 7, 67}, 4, -1, 1);
    const auto plain =
        run_op({.op = "LayerNormalizationGrad", .inputs = {dy, x, scale}, .num_outputs = 3, .domain = "ai.otter"});
    const auto fused = run_op(
        {.op = "LayerNormalizationGrad", .inputs = {dy, x, scale, dres}, .num_outputs = 3, .domain = "ai.otter"});
    const Tensor dx_ref = run_op({.op = "Add", .inputs = {plain[0], dres}})[0];
    EXPECT_TRUE(same_bits(fused[0], dx_ref)) << dtype_name(t);
    EXPECT_FALSE(same_bits(fused[0], plain[0])) << dtype_name(t);
    EXPECT_TRUE(same_bits(fused[1], plain[1])) << dtype_name(t);  // dScale and dB do not see dResidual
    EXPECT_TRUE(same_bits(fused[2], plain[2])) << dtype_name(t);
  }
}

// One node's kernel, made once and run many times on the same inputs (fresh outputs each run).
class OpRunner {
 public:
  explicit OpRunner(const OpCall& c) : inputs_(c.inputs), num_outputs_(c.num_outputs) {
    g_.opset_imports[""] = c.opset;
    if (!c.domain.empty()) g_.opset_imports[c.domain] = 1;
    std::vector<Value*> ins;
    for (size_t i = 0; i < c.inputs.size(); ++i)
      ins.push_back(g_.add_input(str_cat("in", i), c.inputs[i].dtype(), Shape::of(c.inputs[i].dims())));
    std::vector<std::string> outs;
    for (int i = 0; i < c.num_outputs; ++i) outs.push_back(str_cat("out", i));
    node_ = g_.add_node(c.op, ins, outs, c.domain);
    for (const auto& [k, a] : c.attrs) node_->set_attr(k, a);
    infer_node(*node_);
    std::string why;
    const KernelDef* def = KernelRegistry::instance().find(*node_, DeviceType::kCpu, &why);
    if (!def) fail("no kernel: ", why);
    kernel_ = def->create(*node_);
  }
  // Seconds one run takes.
  double run() {
    std::vector<const Tensor*> in;
    for (const Tensor& t : inputs_) in.push_back(&t);
    std::vector<Tensor> results(num_outputs_);
    std::vector<Tensor*> out;
    for (Tensor& t : results) out.push_back(&t);
    KernelContext ctx(*node_, in, out, HostAllocator::instance());
    const auto t0 = std::chrono::steady_clock::now();
    kernel_->run(ctx);
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }

 private:
  Graph g_;
  Node* node_ = nullptr;
  std::unique_ptr<Kernel> kernel_;
  std::vector<Tensor> inputs_;
  int num_outputs_;
};

// Not a check: the fused kernels against the unfused pair on gpt_large's residual stream ([8, 128,
// 256] float32), best of 500 alternated runs each (a shared machine's noise only ever adds time).
// Run it with --gtest_also_run_disabled_tests --gtest_filter='*Timing*' (docs/performance.md,
// "Residual Add + LayerNorm fusion").
TEST(AddLayerNormKernel, DISABLED_Timing) {
  const DataType t = DataType::kFloat32;
  const Tensor x = random_tensor(t, {8, 128, 256}, 1, -2, 2), r = random_tensor(t, {8, 128, 256}, 2, -2, 2);
  const Tensor dy = random_tensor(t, {8, 128, 256}, 3, -1, 1), dres = random_tensor(t, {8, 128, 256}, 4, -1, 1);
  const Tensor scale = random_tensor(t, {256}, 5, 0.5, 1.5), bias = random_tensor(t, {256}, 6, -1, 1);
  const Tensor s = run_op({.op = "Add", .inputs = {x, r}})[0];
  const Tensor dx = run_op({.op = "LayerNormalizationGrad", .inputs = {dy, s, scale}, .domain = "ai.otter"})[0];
  OpRunner add({.op = "Add", .inputs = {x, r}});
  OpRunner ln({.op = "LayerNormalization", .inputs = {s, scale, bias}});
  OpRunner fused({.op = "AddLayerNorm", .inputs = {x, r, scale, bias}, .num_outputs = 2, .domain = "ai.otter"});
  OpRunner fused_y({.op = "AddLayerNorm", .inputs = {x, r, scale, bias}, .domain = "ai.otter"});
  OpRunner grad({.op = "LayerNormalizationGrad", .inputs = {dy, s, scale}, .num_outputs = 3, .domain = "ai.otter"});
  OpRunner grad_add({.op = "Add", .inputs = {dx, dres}});
  OpRunner grad_res(
      {.op = "LayerNormalizationGrad", .inputs = {dy, s, scale, dres}, .num_outputs = 3, .domain = "ai.otter"});
  double best[7] = {1e9, 1e9, 1e9, 1e9, 1e9, 1e9, 1e9};
  OpRunner* runners[7] = {&add, &ln, &fused, &fused_y, &grad, &grad_add, &grad_res};
  for (int i = 0; i < 500; ++i)
    for (int k = 0; k < 7; ++k) best[k] = std::min(best[k], runners[k]->run());
  auto us = [](double sec) { return sec * 1e6; };
  std::cout << "[timing, best of 500, us] forward: Add " << us(best[0]) << " + LayerNormalization " << us(best[1])
            << " = " << us(best[0] + best[1]) << "; AddLayerNorm with S " << us(best[2]) << ", without S "
            << us(best[3]) << "\n[timing] backward: LayerNormalizationGrad " << us(best[4]) << " + Add " << us(best[5])
            << " = " << us(best[4] + best[5]) << "; with dResidual " << us(best[6]) << "\n";
}

}  // namespace
}  // namespace otter::testing
