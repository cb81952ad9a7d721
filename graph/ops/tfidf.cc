// TfIdfVectorizer (ai.onnx opset 9, inference only): its attributes checked and resolved
// (graph/ops/tfidf.h) and its op-table row. X int32/int64 [C] or [N, C] -> float [P] or [N, P],
// P = max(ngram_indexes) + 1. No gradient: the input is integer. Kernel: kernels/cpu/tfidf.cc; on
// CUDA it runs on host copies (kernels/cuda/host_ops.cc). Registered by register_detect_ops.
#include "graph/ops/tfidf.h"

#include <algorithm>
#include <string>

#include "graph/error.h"
#include "graph/gradient.h"
#include "graph/op_table.h"
#include "graph/ops/infer_util.h"

namespace otter::tfidf {
namespace {

// A required integer attribute.
int64_t required_i(const Node& n, const char* name) {
  if (!n.find_attr(name)) fail(n.describe(), ": attribute '", name, "' is required");
  return n.attr_i(name, 0);
}

Mode parse_mode(const Node& n) {
  if (!n.find_attr("mode")) fail(n.describe(), ": attribute 'mode' is required (TF, IDF or TFIDF)");
  const std::string m = n.attr_s("mode", "");
  if (m == "TF") return Mode::kTF;
  if (m == "IDF") return Mode::kIDF;
  if (m == "TFIDF") return Mode::kTFIDF;
  fail(n.describe(), ": attribute 'mode' must be TF, IDF or TFIDF, got '", m, "'");
}

// "[0, 4]".
std::string list_text(const std::vector<int64_t>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += str_cat(i ? ", " : "", v[i]);
  return s + "]";
}

}  // namespace

Params parse(const Node& n) {
  const std::string d = n.describe();
  if (n.find_attr("pool_strings"))
    fail(d, ": attribute 'pool_strings' is not supported (otter has no string tensors); only pool_int64s with "
            "an int32 or int64 input");
  if (!n.find_attr("pool_int64s")) fail(d, ": attribute 'pool_int64s' is required");
  Params p;
  p.mode = parse_mode(n);
  p.min_gram = required_i(n, "min_gram_length");
  p.max_gram = required_i(n, "max_gram_length");
  p.max_skip = required_i(n, "max_skip_count");
  if (p.min_gram < 1 || p.max_gram < p.min_gram)
    fail(d, ": attributes 'min_gram_length' and 'max_gram_length' must satisfy 1 <= min <= max, got ", p.min_gram,
         " and ", p.max_gram);
  if (p.max_skip < 0) fail(d, ": attribute 'max_skip_count' must not be negative, got ", p.max_skip);
  if (!n.find_attr("ngram_counts") || !n.find_attr("ngram_indexes"))
    fail(d, ": attributes 'ngram_counts' and 'ngram_indexes' are required");
  const std::vector<int64_t> pool = n.attr_ints("pool_int64s"), counts = n.attr_ints("ngram_counts");
  const std::vector<int64_t> indexes = n.attr_ints("ngram_indexes");
  const int64_t pool_size = static_cast<int64_t>(pool.size());
  if (counts.empty() || counts[0] != 0)
    fail(d, ": attribute 'ngram_counts' must start with 0 (where the 1-grams start in pool_int64s)");
  // ngram_counts[k] is where the (k+1)-grams start; they run to the next start or the pool's end.
  size_t id = 0;  // the n-gram's position in the pool, its entry of ngram_indexes
  for (size_t k = 0; k < counts.size(); ++k) {
    const int64_t len = static_cast<int64_t>(k) + 1, begin = counts[k];
    const int64_t end = k + 1 < counts.size() ? counts[k + 1] : pool_size;
    if (end < begin || end > pool_size || (end - begin) % len != 0)
      fail(d, ": attribute 'ngram_counts' ", list_text(counts), " is inconsistent with pool_int64s (", pool_size,
           " values): the ", len, "-grams would span [", begin, ", ", end, "), not a multiple of ", len, " values");
    for (int64_t at = begin; at < end; at += len, ++id) {
      if (id >= indexes.size()) continue;  // reported below, with the count
      if (len >= p.min_gram && len <= p.max_gram)
        p.grams.push_back({std::vector<int64_t>(pool.begin() + at, pool.begin() + at + len), indexes[id]});
    }
  }
  if (id != indexes.size() || indexes.empty())
    fail(d, ": attribute 'ngram_indexes' has ", indexes.size(), " entries, the pool holds ", id,
         " n-grams (one output coordinate each, at least one)");
  for (int64_t v : indexes)
    if (v < 0) fail(d, ": attribute 'ngram_indexes' must not hold negative coordinates, got ", v);
  p.output_size = *std::max_element(indexes.begin(), indexes.end()) + 1;
  p.weights = n.attr_floats("weights");
  if (!p.weights.empty() &&
      (p.weights.size() != indexes.size() || static_cast<int64_t>(p.weights.size()) < p.output_size))
    fail(d, ": attribute 'weights' has ", p.weights.size(), " values, it needs one per n-gram (", indexes.size(),
         ") covering every output coordinate (", p.output_size, ")");
  return p;
}

}  // namespace otter::tfidf

namespace otter {
namespace {

void infer_tfidf(InferContext& ctx) {
  infer::check_arity(ctx, 1, 1);
  const tfidf::Params p = tfidf::parse(ctx.node());
  infer::check_type(ctx, 0, infer::Types::kIndex);
  const Shape& x = ctx.in_shape(0);
  if (!x.rank_known) return ctx.set_output(0, DataType::kFloat32, Shape::unknown());
  if (x.rank() == 1) return ctx.set_output(0, DataType::kFloat32, Shape({Dim(p.output_size)}));
  if (x.rank() == 2) return ctx.set_output(0, DataType::kFloat32, Shape({x.dims[0], Dim(p.output_size)}));
  ctx.error(str_cat("X (", infer::input_desc(ctx, 0), ") must be [C] or [N, C], got ", x.to_string()));
}

}  // namespace

// Called by register_detect_ops (graph/ops/detect.cc).
void register_tfidf_ops(OpTable& t) {
  infer::add(t, "TfIdfVectorizer", 9, infer_tfidf, PrecisionClass::kNone, false, no_gradient(),
             "float counts (TF), weights of the present (IDF) or weighted counts (TFIDF) of pool_int64s' n-grams "
             "in each row of X, skips up to max_skip_count");
}

}  // namespace otter
