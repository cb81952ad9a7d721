// otter-train grad --precision fp16|bf16 writes unscaled fp32 gradients: run on the PyTorch
// gradient references' batch, its output matches PyTorch's fp32 gradients within half-precision
// tolerance (5e-2 fp16, 1e-1 bf16; max |otter - torch| / max |torch| per parameter), the fp16 run
// having scaled its loss by 65536 and divided it out (without the division the gradients would be
// 65536 times too large).
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>

#include "runtime/npz.h"

namespace otter {
namespace {

namespace fs = std::filesystem;

double max_abs(const Tensor& t) {
  double m = 0;
  for (int64_t i = 0; i < t.numel(); ++i) m = std::max(m, std::abs(t.get_as_double(i)));
  return m;
}

class GradPrecision : public ::testing::TestWithParam<std::pair<std::string, double>> {};

TEST_P(GradPrecision, WritesUnscaledFp32GradientsCloseToPyTorch) {
  const auto& [precision, tolerance] = GetParam();
  const std::string dir = std::string(OTTER_SOURCE_DIR) + "/models/digits/";
  fs::path out = fs::temp_directory_path() / ("otter_grad_" + precision + "_" + std::to_string(::getpid()) + ".npz");
  std::string cmd = std::string(OTTER_BINARY_DIR) + "/tools/otter-train grad " + dir + "mlp.onnx --data " + dir +
                    "mlp_grad_ref.npz --out " + out.string() + " --device cpu --precision " + precision;
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  NpzArchive got = read_npz(out.string()), ref = read_npz(dir + "mlp_grad_ref.npz");
  fs::remove(out);
  int checked = 0;
  for (const char* p : {"fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"}) {
    const Tensor& g = got.get(std::string("grad/") + p);
    const Tensor& r = ref.get(std::string("grad/") + p);
    ASSERT_EQ(g.dtype(), DataType::kFloat32) << p;
    ASSERT_EQ(g.dims(), r.dims()) << p;
    double diff = 0;
    for (int64_t i = 0; i < r.numel(); ++i) diff = std::max(diff, std::abs(g.get_as_double(i) - r.get_as_double(i)));
    EXPECT_LE(diff / max_abs(r), tolerance) << precision << ": gradient of " << p;
    ++checked;
  }
  EXPECT_EQ(checked, 4);
  EXPECT_NEAR(got.get("loss").get_as_double(0), ref.get("loss").get_as_double(0), 1e-3);
}

INSTANTIATE_TEST_SUITE_P(Mlp, GradPrecision,
                         ::testing::Values(std::make_pair(std::string("fp16"), 5e-2),
                                           std::make_pair(std::string("bf16"), 1e-1)),
                         [](const auto& info) { return info.param.first; });

}  // namespace
}  // namespace otter
