// Strided indexing for the CUDA kernels: a flat index over an output shape maps to element offsets
// in K operands, each with its own strides (0 along broadcast axes). Built on the host with size-1
// dims dropped and neighbouring dims merged where every operand stays linear across them, so
// most element-wise launches index over one or two dims. Plain C++: the CPU tests check it.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "graph/error.h"
#include "graph/tensor.h"
#include "kernels/common/half.h"

namespace otter::cuda {

constexpr int kMaxDims = 8;

template <int K>
struct StridedIndexer {
  int rank = 0;  // 0: a single element at offset 0 for every operand
  int64_t dims[kMaxDims] = {};
  int64_t strides[K][kMaxDims] = {};

  // Offsets of flat index i (row-major over dims) in each operand.
  OTTER_HD void offsets(int64_t i, int64_t (&off)[K]) const {
    if (rank == 1) {  // the common merged case: no 64-bit division
      for (int k = 0; k < K; ++k) off[k] = i * strides[k][0];
      return;
    }
    for (int k = 0; k < K; ++k) off[k] = 0;
    for (int d = rank - 1; d >= 0; --d) {
      const int64_t q = i / dims[d];
      const int64_t idx = i - q * dims[d];
      i = q;
      for (int k = 0; k < K; ++k) off[k] += idx * strides[k][d];
    }
  }
};

inline std::vector<int64_t> contiguous_strides(const std::vector<int64_t>& dims) {
  std::vector<int64_t> s(dims.size(), 1);
  for (size_t i = dims.size(); i-- > 1;) s[i - 1] = s[i] * dims[i];
  return s;
}

// Strides of a contiguous operand of dims `in` broadcast (numpy, right-aligned) onto `out`.
inline std::vector<int64_t> broadcast_strides(const std::vector<int64_t>& in, const std::vector<int64_t>& out) {
  OTTER_CHECK(in.size() <= out.size(), "broadcast_strides: rank ", in.size(), " onto rank ", out.size());
  std::vector<int64_t> s(out.size(), 0);
  const size_t off = out.size() - in.size();
  int64_t stride = 1;
  for (size_t i = in.size(); i-- > 0;) {
    OTTER_CHECK(in[i] == out[off + i] || in[i] == 1, "broadcast_strides: dim ", in[i], " onto ", out[off + i]);
    s[off + i] = in[i] == 1 ? 0 : stride;
    stride *= in[i];
  }
  return s;
}

// An indexer over `dims` with operand k's element strides `strides[k]` (one per dim).
template <int K>
StridedIndexer<K> make_indexer(const std::vector<int64_t>& dims, const std::array<std::vector<int64_t>, K>& strides) {
  for (int k = 0; k < K; ++k)
    OTTER_CHECK(strides[k].size() == dims.size(), "make_indexer: operand ", k, " has ", strides[k].size(),
                " strides for ", dims.size(), " dims");
  StridedIndexer<K> ix;
  std::vector<int64_t> cd;
  std::vector<std::array<int64_t, K>> cs;
  for (size_t i = 0; i < dims.size(); ++i) {
    if (dims[i] == 1) continue;
    std::array<int64_t, K> s;
    for (int k = 0; k < K; ++k) s[k] = strides[k][i];
    if (!cd.empty()) {
      bool linear = true;
      for (int k = 0; k < K; ++k) linear &= cs.back()[k] == s[k] * dims[i];
      if (linear) {
        cd.back() *= dims[i];
        cs.back() = s;
        continue;
      }
    }
    cd.push_back(dims[i]);
    cs.push_back(s);
  }
  OTTER_CHECK(cd.size() <= static_cast<size_t>(kMaxDims), "a CUDA kernel indexes at most ", kMaxDims,
              " non-mergeable dims, this shape ", dims_to_string(dims), " needs ", cd.size());
  ix.rank = static_cast<int>(cd.size());
  for (int d = 0; d < ix.rank; ++d) {
    ix.dims[d] = cd[d];
    for (int k = 0; k < K; ++k) ix.strides[k][d] = cs[d][k];
  }
  return ix;
}

}  // namespace otter::cuda
