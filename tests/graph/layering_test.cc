// The layers point one way (docs/kernels-layering.md): no source under graph/ or passes/ includes a
// kernels/ header, so the IR and the passes build and link without any kernel target.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace {

std::vector<std::string> includes_of_kernels(const std::string& dir) {
  std::vector<std::string> bad;
  for (const auto& e : std::filesystem::recursive_directory_iterator(std::string(OTTER_SOURCE_DIR) + "/" + dir)) {
    const std::string ext = e.path().extension().string();
    if (!e.is_regular_file() || (ext != ".h" && ext != ".cc")) continue;
    std::ifstream f(e.path());
    std::string line;
    for (int n = 1; std::getline(f, line); ++n)
      if (line.rfind("#include \"kernels/", 0) == 0) bad.push_back(e.path().string() + ":" + std::to_string(n));
  }
  return bad;
}

TEST(Layering, GraphAndPassesIncludeNoKernelHeader) {
  for (const char* dir : {"graph", "passes"}) {
    const std::vector<std::string> bad = includes_of_kernels(dir);
    EXPECT_TRUE(bad.empty()) << dir << "/ includes kernels/ at " << ::testing::PrintToString(bad);
  }
}

}  // namespace
