// Unified diff: golden hunks for small cases, and on random texts a minimal edit script (checked
// against an LCS by dynamic programming) that `patch` applies to give the new text.
#include "passes/unified_diff.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <random>
#include <sstream>
#include <vector>

namespace otter {
namespace {

TEST(UnifiedDiff, EqualTextsGiveNothing) { EXPECT_EQ(unified_diff("a\nb\n", "a\nb\n", "x", "y"), ""); }

TEST(UnifiedDiff, InsertionWithContext) {
  std::string a = "1\n2\n3\n4\n5\n6\n7\n8\n";
  std::string b = "1\n2\n3\n4\nnew\n5\n6\n7\n8\n";
  EXPECT_EQ(unified_diff(a, b, "before", "after"),
            "--- before\n+++ after\n@@ -2,6 +2,7 @@\n 2\n 3\n 4\n+new\n 5\n 6\n 7\n");
}

TEST(UnifiedDiff, ChangesFarApartMakeTwoHunks) {
  std::string a, b;
  for (int i = 1; i <= 20; ++i) {
    a += std::to_string(i) + "\n";
    b += (i == 2 ? "two" : i == 18 ? "eighteen" : std::to_string(i)) + "\n";
  }
  EXPECT_EQ(unified_diff(a, b, "a", "b"),
            "--- a\n+++ b\n"
            "@@ -1,5 +1,5 @@\n 1\n-2\n+two\n 3\n 4\n 5\n"
            "@@ -15,6 +15,6 @@\n 15\n 16\n 17\n-18\n+eighteen\n 19\n 20\n");
}

TEST(UnifiedDiff, EmptySidesUseDiffsConventions) {
  EXPECT_EQ(unified_diff("", "x\n", "a", "b"), "--- a\n+++ b\n@@ -0,0 +1 @@\n+x\n");
  EXPECT_EQ(unified_diff("x\ny\n", "", "a", "b"), "--- a\n+++ b\n@@ -1,2 +0,0 @@\n-x\n-y\n");
}

// Length of the longest common subsequence of two line lists (the reference for minimality).
size_t lcs(const std::vector<std::string>& a, const std::vector<std::string>& b) {
  std::vector<std::vector<size_t>> t(a.size() + 1, std::vector<size_t>(b.size() + 1, 0));
  for (size_t i = 1; i <= a.size(); ++i)
    for (size_t j = 1; j <= b.size(); ++j)
      t[i][j] = a[i - 1] == b[j - 1] ? t[i - 1][j - 1] + 1 : std::max(t[i - 1][j], t[i][j - 1]);
  return t[a.size()][b.size()];
}

std::string join(const std::vector<std::string>& lines) {
  std::string s;
  for (const auto& l : lines) s += l + "\n";
  return s;
}

void write(const std::string& path, const std::string& text) { std::ofstream(path, std::ios::binary) << text; }

std::string read(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

TEST(UnifiedDiff, RandomTextsMinimalAndPatchable) {
  std::mt19937 rng(7);
  const std::string dir = ::testing::TempDir();
  for (int round = 0; round < 40; ++round) {
    // Lines from a small alphabet so that many lines repeat (the hard case for diffs).
    std::uniform_int_distribution<int> len(0, 30), sym(0, 5), op(0, 9);
    std::vector<std::string> a, b;
    for (int i = len(rng); i > 0; --i) a.push_back("line " + std::to_string(sym(rng)));
    for (const auto& l : a) {
      int o = op(rng);
      if (o == 0) continue;                                         // delete
      if (o == 1) b.push_back("new " + std::to_string(sym(rng)));  // replace
      else b.push_back(l);
      if (o == 2) b.push_back("line " + std::to_string(sym(rng)));  // insert after
    }
    std::string d = unified_diff(join(a), join(b), "a", "b");
    size_t removed = 0, added = 0;
    std::istringstream in(d);
    for (std::string l; std::getline(in, l);) {
      if (l.rfind("---", 0) == 0 || l.rfind("+++", 0) == 0) continue;
      removed += !l.empty() && l[0] == '-';
      added += !l.empty() && l[0] == '+';
    }
    size_t common = lcs(a, b);
    EXPECT_EQ(removed, a.size() - common) << d;
    EXPECT_EQ(added, b.size() - common) << d;
    if (d.empty()) continue;
    std::string pa = dir + "/ud_a.txt", pd = dir + "/ud.diff", po = dir + "/ud_out.txt";
    write(pa, join(a));
    write(pd, d);
    std::remove(po.c_str());
    std::string cmd = "patch -s -o " + po + " " + pa + " " + pd;
    ASSERT_EQ(std::system(cmd.c_str()), 0) << d;
    EXPECT_EQ(read(po), join(b)) << d;
  }
}

}  // namespace
}  // namespace otter
