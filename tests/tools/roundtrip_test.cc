// The real PyTorch exports round-trip through `otter-opt -o`: the written model imports to a graph
// that prints identically (same ops, attributes, every value with its dtype and shape) and keeps
// every initializer bit for bit.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <sstream>

#include "graph/onnx_io.h"
#include "graph/printer.h"

namespace otter {
namespace {

namespace fs = std::filesystem;

std::string printed(const Graph& g) {
  std::ostringstream os;
  print_graph(g, os);
  return os.str();
}

class RoundTrip : public ::testing::TestWithParam<std::string> {};

TEST_P(RoundTrip, ThroughOtterOptKeepsGraphAndWeights) {
  std::string model = std::string(OTTER_SOURCE_DIR) + "/models/" + GetParam();
  ASSERT_TRUE(fs::exists(model)) << model << " is missing (scripts/setup.sh exports ResNet-18)";
  fs::path out = fs::temp_directory_path() /
                ("otter_roundtrip_" + fs::path(model).stem().string() + "_" + std::to_string(::getpid()) + ".onnx");
  std::string cmd = std::string(OTTER_BINARY_DIR) + "/tools/otter-opt '" + model + "' -o '" + out.string() + "'";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  auto a = import_onnx_file(model);
  auto b = import_onnx_file(out.string());
  fs::remove(out);
  std::string pa = printed(*a), pb = printed(*b);
  EXPECT_EQ(pa, pb);
  EXPECT_NE(pa.find(": f32["), std::string::npos);  // values print with dtype and shape
  auto ia = a->initializers(), ib = b->initializers();
  ASSERT_EQ(ia.size(), ib.size());
  int64_t values = 0;
  for (size_t i = 0; i < ia.size(); ++i) {
    EXPECT_EQ(ia[i]->name(), ib[i]->name());
    EXPECT_EQ(ia[i]->trainable(), ib[i]->trainable()) << ia[i]->name();
    EXPECT_TRUE(ia[i]->data().bitwise_equal(ib[i]->data())) << ia[i]->name();
    values += ia[i]->data().numel();
  }
  auto sa = a->state(), sb = b->state();
  ASSERT_EQ(sa.size(), sb.size());
  for (size_t i = 0; i < sa.size(); ++i) EXPECT_TRUE(sa[i]->data().bitwise_equal(sb[i]->data())) << sa[i]->name();
  std::printf("%s: %zu initializers (%lld values), %zu state tensors identical after the round trip\n",
              GetParam().c_str(), ia.size(), static_cast<long long>(values), sa.size());
}

INSTANTIATE_TEST_SUITE_P(Models, RoundTrip,
                         ::testing::Values("digits/mlp.onnx", "digits/cnn.onnx", "gpt/gpt.onnx",
                                           "resnet18/resnet18.onnx"),
                         [](const auto& info) { return fs::path(info.param).stem().string(); });

}  // namespace
}  // namespace otter
