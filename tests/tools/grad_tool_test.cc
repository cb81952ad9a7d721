// `otter-train grad` against the committed PyTorch gradients (models/make_grad_refs.py): the
// binary runs one forward and backward pass on the first batch and writes `loss` and
// `grad/<parameter>`; each must match PyTorch within 1e-4 relative (max |otter - torch| / max |torch|).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <set>

#include <unistd.h>

#include "runtime/npz.h"

namespace otter {
namespace {

namespace fs = std::filesystem;

const std::string kModels = std::string(OTTER_SOURCE_DIR) + "/models/";

// Runs otter-train grad with `flags`; returns the written archive.
NpzArchive run_grad(const std::string& model, const std::string& flags) {
  // One file per test and process: ctest runs the tests of this file in parallel.
  const std::string test = ::testing::UnitTest::GetInstance()->current_test_info()->name();
  fs::path out = fs::temp_directory_path() / ("otter_grad_" + fs::path(model).stem().string() + "_" + test + "_" +
                                              std::to_string(::getpid()) + ".npz");
  fs::remove(out);
  std::string cmd = std::string(OTTER_BINARY_DIR) + "/tools/otter-train grad '" + kModels + model + "' " + flags +
                    " --device cpu --out '" + out.string() + "' > /dev/null";
  EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
  NpzArchive a = read_npz(out.string());
  fs::remove(out);
  return a;
}

double relative_error(const Tensor& a, const Tensor& b) {
  EXPECT_EQ(a.dims(), b.dims());
  double diff = 0, scale = 0;
  for (int64_t i = 0; i < b.numel() && a.numel() == b.numel(); ++i) {
    diff = std::max(diff, std::abs(a.get_as_double(i) - b.get_as_double(i)));
    scale = std::max(scale, std::abs(b.get_as_double(i)));
  }
  return diff / scale;
}

// Every array of `got` ("loss", "grad/...") matches the reference; returns the set of gradients.
std::set<std::string> expect_matches(const NpzArchive& got, const std::string& ref_file) {
  NpzArchive ref = read_npz(kModels + ref_file);
  std::set<std::string> grads;
  double worst = 0;
  for (const auto& [name, t] : got.arrays) {
    double err = relative_error(t, ref.get(name));
    EXPECT_LE(err, 1e-4) << name;
    worst = std::max(worst, err);
    if (name != "loss") grads.insert(name);
  }
  std::cout << "[otter-train grad] " << ref_file << ": " << grads.size() << " gradients, worst relative error "
            << worst << "\n";
  return grads;
}

TEST(OtterTrainGrad, MlpMatchesPyTorch) {
  // The reference file holds the inputs and labels it was recorded with.
  auto grads = expect_matches(run_grad("digits/mlp.onnx", "--data '" + kModels + "digits/mlp_grad_ref.npz'"),
                              "digits/mlp_grad_ref.npz");
  EXPECT_EQ(grads, (std::set<std::string>{"grad/fc1.weight", "grad/fc1.bias", "grad/fc2.weight", "grad/fc2.bias"}));
}

TEST(OtterTrainGrad, FirstBatchOfADataFile) {
  // The reference was recorded on the first 16 test samples.
  expect_matches(run_grad("digits/mlp.onnx", "--data '" + kModels + "digits/test.npz' --batch-size 16"),
                 "digits/mlp_grad_ref.npz");
}

TEST(OtterTrainGrad, FrozenParametersAreLeftOut) {
  auto grads = expect_matches(run_grad("gpt/gpt.onnx", "--data '" + kModels + "gpt/gpt_grad_ref.npz' "
                                                       "--freeze 'blocks.*,tok_emb.weight'"),
                              "gpt/gpt_grad_ref.npz");
  EXPECT_EQ(grads, (std::set<std::string>{"grad/pos_emb.weight", "grad/ln_f.weight", "grad/ln_f.bias",
                                          "grad/head.weight"}));
}

}  // namespace
}  // namespace otter
