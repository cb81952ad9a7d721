// TfIdfVectorizer (graph/ops/tfidf.cc, kernels/cpu/tfidf.cc): hand-worked cases from ONNX's
// description of the op (skips, 1-grams counted once, the three modes and weights, 1-D and 2-D
// input) and its errors. ONNX's node tests test_tfidfvectorizer_* (TF mode only) are run by
// tests/conformance/conformance.cc.
#include <gtest/gtest.h>
#include <onnx/defs/parser.h>
#include <onnx/onnx_pb.h>

#include "graph/onnx_io.h"
#include "graph/op_table.h"
#include "tests/kernels/kernel_test_util.h"

namespace otter::testing {
namespace {

using Ints = std::vector<int64_t>;
using Attrs = std::map<std::string, Attribute>;

#define EXPECT_HAS(msg, part) EXPECT_NE((msg).find(part), std::string::npos) << (msg)

Tensor i64(Ints dims, Ints v) { return Tensor::from_vector<int64_t>(std::move(dims), v); }
Tensor i32(Ints dims, std::vector<int32_t> v) { return Tensor::from_vector<int32_t>(std::move(dims), v); }

// The attributes of a TfIdfVectorizer node.
Attrs tfidf(const char* mode, int64_t min_len, int64_t max_len, int64_t skip, Ints counts, Ints indexes, Ints pool,
            std::vector<float> weights = {}) {
  Attrs a{{"mode", Attribute(std::string(mode))},
          {"min_gram_length", Attribute(min_len)},
          {"max_gram_length", Attribute(max_len)},
          {"max_skip_count", Attribute(skip)},
          {"ngram_counts", Attribute(counts)},
          {"ngram_indexes", Attribute(indexes)},
          {"pool_int64s", Attribute(pool)}};
  if (!weights.empty()) a["weights"] = Attribute(weights);
  return a;
}

std::vector<float> run(const Tensor& x, const Attrs& a, Ints expect_dims) {
  auto y = run_op({"TfIdfVectorizer", {x}, a, 1, 9});
  EXPECT_EQ(y[0].dtype(), DataType::kFloat32);
  EXPECT_EQ(y[0].dims(), expect_dims);
  return values<float>(y[0]);
}

using F = std::vector<float>;

TEST(TfIdfVectorizer, SpecExampleIndexesMapBigramsToCoordinates) {
  // ONNX's example: pool [94, 17, 17, 36], ngram_counts [0, 0] (no 1-grams), ngram_indexes [1, 0]:
  // Y[0] counts [17, 36] and Y[1] counts [94, 17].
  const Attrs a = tfidf("TF", 2, 2, 0, {0, 0}, {1, 0}, {94, 17, 17, 36});
  EXPECT_EQ(run(i64({5}, {94, 17, 36, 94, 17}), a, {2}), (F{1, 2}));
  EXPECT_EQ(run(i32({5}, {94, 17, 36, 12, 28}), a, {2}), (F{1, 1}));
}

TEST(TfIdfVectorizer, SkipsUpToMaxSkipCount) {
  // ONNX's example input [94, 17, 36, 12, 28]: skip 2 gives the 2-grams [94, 12] and [17, 28],
  // skip 1 gives [94, 36], [17, 12], [36, 28], skip 0 [94, 17], ... Pool: those four 2-grams.
  const Attrs base = tfidf("TF", 2, 2, 2, {0, 0}, {0, 1, 2, 3}, {94, 12, 17, 28, 94, 17, 94, 36});
  const Tensor x = i64({5}, {94, 17, 36, 12, 28});
  EXPECT_EQ(run(x, base, {4}), (F{1, 1, 1, 1}));
  Attrs one = base;
  one["max_skip_count"] = Attribute(int64_t{1});
  EXPECT_EQ(run(x, one, {4}), (F{0, 0, 1, 1}));
  one["max_skip_count"] = Attribute(int64_t{0});
  EXPECT_EQ(run(x, one, {4}), (F{0, 0, 1, 0}));
}

TEST(TfIdfVectorizer, UnigramsCountedOnceEachStartPerSkip) {
  // Pool: 1-gram [5] (coordinate 0), 2-gram [5, 5] (coordinate 1); X = [5, 5, 5], skips 0 and 1.
  // [5] occurs 3 times (skips do not repeat 1-grams); [5, 5] at starts 0 and 1 with skip 0 and at
  // start 0 with skip 1: 3.
  const Attrs a = tfidf("TF", 1, 2, 1, {0, 1}, {0, 1}, {5, 5, 5});
  EXPECT_EQ(run(i64({3}, {5, 5, 5}), a, {2}), (F{3, 3}));
  // min_gram_length 2 leaves the 1-gram's coordinate at 0; max_gram_length 1 the 2-gram's.
  EXPECT_EQ(run(i64({3}, {5, 5, 5}), tfidf("TF", 2, 2, 1, {0, 1}, {0, 1}, {5, 5, 5}), {2}), (F{0, 3}));
  EXPECT_EQ(run(i64({3}, {5, 5, 5}), tfidf("TF", 1, 1, 1, {0, 1}, {0, 1}, {5, 5, 5}), {2}), (F{3, 0}));
}

TEST(TfIdfVectorizer, TrigramsAndPrefixes) {
  // 1-grams [1], 2-grams [1, 2], 3-grams [1, 2, 3]; X = [1, 2, 3, 1, 2]: [1] twice, [1, 2] twice,
  // [1, 2, 3] once (skip 0); coordinates permuted by ngram_indexes [2, 0, 1].
  const Attrs a = tfidf("TF", 1, 3, 0, {0, 1, 3}, {2, 0, 1}, {1, 1, 2, 1, 2, 3});
  EXPECT_EQ(run(i64({5}, {1, 2, 3, 1, 2}), a, {3}), (F{2, 1, 2}));
}

TEST(TfIdfVectorizer, RowsOf2DInput) {
  // 1-grams [1, 2, 3] at coordinates [2, 0, 1]; each row counted on its own (no n-gram spans rows).
  const Attrs a = tfidf("TF", 1, 2, 0, {0, 3}, {2, 0, 1, 3}, {1, 2, 3, 1, 2});
  EXPECT_EQ(run(i32({2, 3}, {1, 2, 1, 2, 2, 3}), a, {2, 4}), (F{1, 0, 2, 1, 2, 1, 0, 0}));
  // Flattened, the 2-gram [1, 2] across the rows' boundary counts.
  EXPECT_EQ(run(i32({6}, {1, 2, 1, 2, 2, 3}), a, {4}), (F{3, 1, 2, 2}));
}

TEST(TfIdfVectorizer, ModesAndWeights) {
  // 1-grams [1, 2, 3] at coordinates 0, 1, 2; X = [1, 1, 2]: counts [2, 1, 0].
  const Ints pool{1, 2, 3}, idx{0, 1, 2};
  const Tensor x = i64({3}, {1, 1, 2});
  const F w{0.5f, 2.0f, 4.0f};
  EXPECT_EQ(run(x, tfidf("TF", 1, 1, 0, {0}, idx, pool, w), {3}), (F{2, 1, 0}));  // TF ignores weights
  EXPECT_EQ(run(x, tfidf("IDF", 1, 1, 0, {0}, idx, pool), {3}), (F{1, 1, 0}));
  EXPECT_EQ(run(x, tfidf("IDF", 1, 1, 0, {0}, idx, pool, w), {3}), (F{0.5f, 2, 0}));
  EXPECT_EQ(run(x, tfidf("TFIDF", 1, 1, 0, {0}, idx, pool), {3}), (F{2, 1, 0}));
  EXPECT_EQ(run(x, tfidf("TFIDF", 1, 1, 0, {0}, idx, pool, w), {3}), (F{1, 2, 0}));
  // Weights go by output coordinate: with ngram_indexes [2, 0, 1], [1] counts at coordinate 2.
  EXPECT_EQ(run(x, tfidf("TFIDF", 1, 1, 0, {0}, {2, 0, 1}, pool, w), {3}), (F{0.5f, 0, 8}));
}

TEST(TfIdfVectorizer, ShapeInference) {
  Graph g;
  g.opset_imports[""] = 9;
  Value* x = g.add_input("x", DataType::kInt32, Shape({Dim("N"), Dim(7)}));
  Node* n = g.add_node("TfIdfVectorizer", {x}, {"y"});
  for (const auto& [k, a] : tfidf("TF", 1, 2, 0, {0, 1}, {0, 4}, {5, 6, 7})) n->set_attr(k, a);
  infer_node(*n);
  EXPECT_EQ(n->output(0)->dtype(), DataType::kFloat32);
  EXPECT_EQ(n->output(0)->shape().to_string(), "[N,5]");
}

TEST(TfIdfVectorizer, Errors) {
  const Attrs ok = tfidf("TF", 1, 2, 0, {0, 2}, {0, 1, 2}, {5, 6, 7, 8});
  std::string e = infer_error("TfIdfVectorizer", {{DataType::kFloat32, {4}}}, ok, 1, 9);
  EXPECT_HAS(e, "the_node");
  EXPECT_HAS(e, "has type f32, expected i32 or i64");
  e = infer_error("TfIdfVectorizer", {{DataType::kInt64, {2, 2, 2}}}, ok, 1, 9);
  EXPECT_HAS(e, "must be [C] or [N, C], got [2,2,2]");
  Attrs a = ok;
  a.erase("pool_int64s");
  a["pool_strings"] = Attribute(std::vector<std::string>{"a", "b"});
  e = infer_error("TfIdfVectorizer", {{DataType::kInt64, {4}}}, a, 1, 9);
  EXPECT_HAS(e, "the_node");
  EXPECT_HAS(e, "'pool_strings' is not supported");
  // 2-grams from 1 to the end of a 4-value pool: 3 values.
  e = infer_error("TfIdfVectorizer", {{DataType::kInt64, {4}}}, tfidf("TF", 1, 2, 0, {0, 1}, {0, 1}, {5, 6, 7, 8}), 1, 9);
  EXPECT_HAS(e, "'ngram_counts' [0, 1] is inconsistent with pool_int64s (4 values)");
  e = infer_error("TfIdfVectorizer", {{DataType::kInt64, {4}}}, tfidf("TF", 1, 2, 0, {0, 2}, {0, 1}, {5, 6, 7, 8}), 1, 9);
  EXPECT_HAS(e, "'ngram_indexes' has 2 entries, the pool holds 3 n-grams");
  e = infer_error("TfIdfVectorizer", {{DataType::kInt64, {4}}}, tfidf("TF", 1, 2, 0, {0, 2}, {0, 1, -1}, {5, 6, 7, 8}), 1, 9);
  EXPECT_HAS(e, "negative coordinates, got -1");
  e = infer_error("TfIdfVectorizer", {{DataType::kInt64, {4}}},
                  tfidf("TFIDF", 1, 2, 0, {0, 2}, {0, 1, 2}, {5, 6, 7, 8}, {1, 2}), 1, 9);
  EXPECT_HAS(e, "'weights' has 2 values");
  e = infer_error("TfIdfVectorizer", {{DataType::kInt64, {4}}}, tfidf("BM25", 1, 2, 0, {0, 2}, {0, 1, 2}, {5, 6, 7, 8}), 1, 9);
  EXPECT_HAS(e, "'mode' must be TF, IDF or TFIDF, got 'BM25'");
  e = infer_error("TfIdfVectorizer", {{DataType::kInt64, {4}}}, tfidf("TF", 2, 1, 0, {0, 2}, {0, 1, 2}, {5, 6, 7, 8}), 1, 9);
  EXPECT_HAS(e, "1 <= min <= max, got 2 and 1");
  // The kernel checks on its own (it can run without inference).
  e = run_error({"TfIdfVectorizer", {i64({4}, {5, 6, 7, 8})}, tfidf("TF", 1, 2, 0, {0, 1}, {0, 1}, {5, 6, 7, 8}), 1, 9});
  EXPECT_HAS(e, "is inconsistent with pool_int64s");
}

TEST(TfIdfVectorizer, StringInputNamesTheNode) {
  onnx::ModelProto m;
  auto status = onnx::OnnxParser::Parse(m, R"(
<ir_version: 8, opset_import: ["" : 9]>
g (string[4] x) => (float[2] y) {
  y = TfIdfVectorizer <mode = "TF", min_gram_length = 1, max_gram_length = 1, max_skip_count = 0,
                       ngram_counts = [0], ngram_indexes = [0, 1], pool_strings = ["a", "b"]> (x)
}
)");
  ASSERT_TRUE(status.IsOK()) << status.ErrorMessage();
  m.mutable_graph()->mutable_node(0)->set_name("tfidf");
  std::string bytes;
  ASSERT_TRUE(m.SerializeToString(&bytes));
  const std::string e = error_of([&] { import_onnx_bytes(bytes, "", {}, "test model"); });
  EXPECT_HAS(e, "graph input 'x': unsupported element type STRING");
  EXPECT_HAS(e, "read by TfIdfVectorizer 'tfidf'");
}

}  // namespace
}  // namespace otter::testing
