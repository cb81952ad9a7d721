// Replays the fuzzing regression corpus, tests/data/fuzz/<target>/*, through the entry points the
// libFuzzer targets use (fuzz/entry_points.h), in the normal build: each input must be accepted or
// refused with otter::Error, never crash or throw anything else. Every input a fuzzing campaign
// found crashing is kept there, with seeds that cover the formats.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>

#include "fuzz/entry_points.h"

namespace otter::fuzz {
namespace {

namespace fs = std::filesystem;

class FuzzReplay : public ::testing::TestWithParam<Target> {};

TEST_P(FuzzReplay, EveryInputIsAcceptedOrRefusedWithAnError) {
  set_fuzzing_limits();
  const fs::path dir = fs::path(OTTER_SOURCE_DIR) / "tests" / "data" / "fuzz" / GetParam().name;
  ASSERT_TRUE(fs::is_directory(dir)) << dir << " is missing";
  int replayed = 0;
  for (const auto& entry : fs::directory_iterator(dir)) {
    if (!entry.is_regular_file()) continue;
    std::ifstream in(entry.path(), std::ios::binary);
    std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    SCOPED_TRACE(entry.path().string());
    EXPECT_NO_THROW(GetParam().run(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()));
    ++replayed;
  }
  EXPECT_GT(replayed, 0) << "no inputs in " << dir;
}

INSTANTIATE_TEST_SUITE_P(Corpus, FuzzReplay, ::testing::ValuesIn(targets()),
                         [](const auto& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace otter::fuzz
