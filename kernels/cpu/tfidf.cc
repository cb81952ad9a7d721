// CPU kernel of TfIdfVectorizer (graph/ops/tfidf.cc), registered with the detection kernels
// (kernels/cpu/detect.cc). The CUDA backend runs it on host copies of its input
// (kernels/cuda/host_ops.cc).
//
// Counting follows ONNX's description of the op: for each skip s in 0..max_skip_count and each start
// position, the items start, start + (s + 1), start + 2 (s + 1), ... of a row spell n-grams of
// every length in [min_gram_length, max_gram_length]; each one in the pool adds 1 to its output
// coordinate. 1-grams do not depend on the skip and are counted at skip 0 only.
#include <algorithm>
#include <unordered_map>

#include "graph/ops/tfidf.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/shape_util.h"

namespace otter {
namespace {

// The pool's n-grams as a trie: a path of items from the root ends at an n-gram's node, which holds
// its output coordinate (-1 on nodes that only prefix longer n-grams).
class GramTrie {
 public:
  explicit GramTrie(const std::vector<tfidf::Gram>& grams) : nodes_(1) {
    for (const tfidf::Gram& g : grams) {
      int32_t at = 0;
      for (int64_t item : g.items) {
        auto [it, added] = nodes_[at].next.try_emplace(item, static_cast<int32_t>(nodes_.size()));
        if (added) nodes_.emplace_back();
        at = it->second;
      }
      nodes_[at].index = g.index;  // a repeated n-gram: the later coordinate, as onnxruntime
    }
  }
  // The child of node `at` along `item`, -1 where there is none.
  int32_t step(int32_t at, int64_t item) const {
    auto it = nodes_[at].next.find(item);
    return it == nodes_[at].next.end() ? -1 : it->second;
  }
  int64_t index(int32_t at) const { return nodes_[at].index; }

 private:
  struct TrieNode {
    std::unordered_map<int64_t, int32_t> next;
    int64_t index = -1;
  };
  std::vector<TrieNode> nodes_;
};

class TfIdfVectorizerKernel : public Kernel {
 public:
  explicit TfIdfVectorizerKernel(const Node& n) : p_(tfidf::parse(n)), trie_(p_.grams) {}

  void run(KernelContext& ctx) override {
    const Tensor& x = ctx.input(0);
    if (x.dtype() != DataType::kInt32 && x.dtype() != DataType::kInt64)
      ctx.error(str_cat("X must be int32 or int64 (pool_int64s' n-grams), got ", x.describe()));
    if (x.rank() != 1 && x.rank() != 2) ctx.error(str_cat("X must be [C] or [N, C], got ", x.describe()));
    const std::vector<int64_t> items = x.to_int64_vector();
    const int64_t rows = x.rank() == 1 ? 1 : x.dims()[0], cols = x.dims().back();
    std::vector<int64_t> od = {p_.output_size};
    if (x.rank() == 2) od.insert(od.begin(), rows);
    float* y = ctx.allocate_output(0, DataType::kFloat32, od).data<float>();
    std::vector<int64_t> counts(static_cast<size_t>(p_.output_size));
    for (int64_t r = 0; r < rows; ++r) {
      std::fill(counts.begin(), counts.end(), 0);
      count_row(items.data() + r * cols, cols, counts.data());
      for (int64_t j = 0; j < p_.output_size; ++j) y[r * p_.output_size + j] = weigh(counts[j], j);
    }
  }

 private:
  // Adds the pool n-grams of one row of `len` items to counts.
  void count_row(const int64_t* row, int64_t len, int64_t* counts) const {
    for (int64_t skip = 0; skip <= p_.max_skip; ++skip) {
      const int64_t stride = skip + 1;
      const int64_t shortest = skip == 0 ? p_.min_gram : std::max<int64_t>(p_.min_gram, 2);
      if (shortest > p_.max_gram) break;
      for (int64_t start = 0; start + stride * (shortest - 1) < len; ++start) {
        int32_t at = 0;
        for (int64_t n = 1, pos = start; n <= p_.max_gram && pos < len; ++n, pos += stride) {
          at = trie_.step(at, row[pos]);
          if (at < 0) break;
          if (n >= shortest && trie_.index(at) >= 0) ++counts[trie_.index(at)];
        }
      }
    }
  }

  // Output coordinate j's value from its count: TF the count, IDF the weight (1 without weights)
  // where the count is positive, TFIDF the count times the weight.
  float weigh(int64_t count, int64_t j) const {
    const double w = p_.weights.empty() ? 1.0 : p_.weights[j];
    switch (p_.mode) {
      case tfidf::Mode::kTF: return static_cast<float>(count);
      case tfidf::Mode::kIDF: return count > 0 ? static_cast<float>(w) : 0.0f;
      case tfidf::Mode::kTFIDF: return static_cast<float>(w * static_cast<double>(count));
    }
    return 0;
  }

  tfidf::Params p_;
  GramTrie trie_;
};

}  // namespace

// Called by register_cpu_detect_kernels (kernels/cpu/detect.cc).
void register_cpu_tfidf_kernels(KernelRegistry& r) {
  cpu::add_any_type(r, "TfIdfVectorizer", node_kernel<TfIdfVectorizerKernel>());
}

}  // namespace otter
