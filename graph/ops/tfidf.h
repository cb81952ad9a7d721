// TfIdfVectorizer's attributes (ai.onnx opset 9) checked and resolved into the n-grams it counts:
// shared by its op-table row (graph/ops/tfidf.cc) and its CPU kernel (kernels/cpu/tfidf.cc).
#pragma once

#include <cstdint>
#include <vector>

#include "graph/ir.h"

namespace otter::tfidf {

enum class Mode : uint8_t { kTF, kIDF, kTFIDF };

// One n-gram of pool_int64s and the output coordinate (ngram_indexes entry) its count goes to.
struct Gram {
  std::vector<int64_t> items;
  int64_t index;
};

struct Params {
  Mode mode = Mode::kTF;
  int64_t min_gram = 1, max_gram = 1, max_skip = 0;
  // The pool's n-grams whose length is in [min_gram, max_gram], in pool order; those of other
  // lengths still take their place in ngram_indexes, as ONNX's ngram_indexes is parallel to the pool.
  std::vector<Gram> grams;
  // Empty: every weight is 1. Else weights[j] scales output coordinate j (onnxruntime's indexing;
  // it is the i-th n-gram's weight of the ONNX text when ngram_indexes is 0, 1, 2, ...).
  std::vector<float> weights;
  int64_t output_size = 0;  // max(ngram_indexes) + 1
};

// Reads and checks node n's attributes; fails naming the node (pool_strings, absent or
// inconsistent attributes).
Params parse(const Node& n);

}  // namespace otter::tfidf
