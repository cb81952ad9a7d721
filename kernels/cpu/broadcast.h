// Private helpers of the CPU element-wise, reduction and shape kernels: numpy broadcasting plans
// with collapsed dimensions, OpenMP range splitting, and storage/compute type mapping for halves.
#pragma once

#include <omp.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "graph/dtype.h"
#include "graph/error.h"
#include "graph/tensor.h"
#include "kernels/common/convert.h"
#include "kernels/common/half.h"

namespace otter::cpu {

// Below this many elements a loop runs on the calling thread (thread start-up costs more).
constexpr int64_t kParallelThreshold = 1 << 15;

// Calls fn(begin, end) over [0, n) split into one contiguous range per thread (or a single call
// when n is small). `cost` scales n for loops whose per-element work is heavier than a copy.
template <typename F>
void parallel_ranges(int64_t n, F&& fn, int64_t cost = 1) {
  if (n <= 0) return;
  if (n * cost < kParallelThreshold || omp_get_max_threads() == 1 || omp_in_parallel()) {
    fn(int64_t{0}, n);
    return;
  }
#pragma omp parallel
  {
    int64_t nt = omp_get_num_threads(), t = omp_get_thread_num();
    int64_t b = n * t / nt, e = n * (t + 1) / nt;
    if (b < e) fn(b, e);
  }
}

// Calls fn(p, offset) for every position p in [0, batch * inner) of a [batch, classes, inner...]
// tensor (the losses' layout: class c of position p at offset + c * inner), the positions split
// over threads as parallel_ranges does, each position's cost `classes`.
template <typename F>
void for_each_class_position(int64_t positions, int64_t classes, int64_t inner, F&& fn) {
  parallel_ranges(
      positions,
      [&](int64_t pbeg, int64_t pend) {
        for (int64_t p = pbeg; p < pend; ++p) fn(p, (p / inner) * classes * inner + p % inner);
      },
      classes);
}

// ---- storage type <-> compute type ---------------------------------------------------------------
template <typename T> struct Tag { using type = T; };

// The compute type and the load of kernels/common/convert.h.
template <typename S> using compute_t = compute_type<S>;
template <typename S> inline compute_t<S> load(S v) { return load_value(v); }

template <typename S, typename C> inline S store(C v) { return static_cast<S>(v); }
template <> inline Half store<Half, float>(float v) { return Half{float_to_half(v)}; }
template <> inline BFloat16 store<BFloat16, float>(float v) { return BFloat16{float_to_bf16(v)}; }

// Calls f(Tag<T>{}) with T the storage type of `t`; the sets are nested (float < numeric < all).
template <typename F>
decltype(auto) visit_float(DataType t, F&& f) {
  switch (t) {
    case DataType::kFloat32: return f(Tag<float>{});
    case DataType::kFloat64: return f(Tag<double>{});
    case DataType::kFloat16: return f(Tag<Half>{});
    case DataType::kBFloat16: return f(Tag<BFloat16>{});
    default: fail("unsupported dtype ", dtype_name(t), " (expected a float type)");
  }
}
template <typename F>
decltype(auto) visit_numeric(DataType t, F&& f) {
  switch (t) {
    case DataType::kInt64: return f(Tag<int64_t>{});
    case DataType::kInt32: return f(Tag<int32_t>{});
    case DataType::kInt8: return f(Tag<int8_t>{});
    case DataType::kUInt8: return f(Tag<uint8_t>{});
    default: return visit_float(t, std::forward<F>(f));
  }
}
// The numeric types plus the wider integer types only some ops take (i16 u16 u32 u64).
template <typename F>
decltype(auto) visit_wide_numeric(DataType t, F&& f) {
  switch (t) {
    case DataType::kInt16: return f(Tag<int16_t>{});
    case DataType::kUInt16: return f(Tag<uint16_t>{});
    case DataType::kUInt32: return f(Tag<uint32_t>{});
    case DataType::kUInt64: return f(Tag<uint64_t>{});
    default: return visit_numeric(t, std::forward<F>(f));
  }
}
// The unsigned integer types (BitShift).
template <typename F>
decltype(auto) visit_unsigned(DataType t, F&& f) {
  switch (t) {
    case DataType::kUInt8: return f(Tag<uint8_t>{});
    case DataType::kUInt16: return f(Tag<uint16_t>{});
    case DataType::kUInt32: return f(Tag<uint32_t>{});
    case DataType::kUInt64: return f(Tag<uint64_t>{});
    default: fail("unsupported dtype ", dtype_name(t), " (expected an unsigned integer type)");
  }
}
// The integer types, signed and unsigned (the Bitwise ops).
template <typename F>
decltype(auto) visit_integer(DataType t, F&& f) {
  switch (t) {
    case DataType::kInt8: return f(Tag<int8_t>{});
    case DataType::kInt16: return f(Tag<int16_t>{});
    case DataType::kInt32: return f(Tag<int32_t>{});
    case DataType::kInt64: return f(Tag<int64_t>{});
    default: return visit_unsigned(t, std::forward<F>(f));
  }
}
template <typename F>
decltype(auto) visit_all(DataType t, F&& f) {
  if (t == DataType::kBool) return f(Tag<bool>{});
  return visit_numeric(t, std::forward<F>(f));
}

// ---- broadcasting --------------------------------------------------------------------------------
// Numpy broadcast of several shapes; returns false when they are incompatible.
inline bool broadcast_dims(const std::vector<const std::vector<int64_t>*>& shapes,
                           std::vector<int64_t>* out) {
  size_t rank = 0;
  for (auto* s : shapes) rank = std::max(rank, s->size());
  out->assign(rank, 1);
  for (auto* s : shapes) {
    size_t off = rank - s->size();
    for (size_t i = 0; i < s->size(); ++i) {
      int64_t d = (*s)[i], &o = (*out)[off + i];
      if (d == o || d == 1) continue;
      if (o != 1) return false;
      o = d;
    }
  }
  return true;
}

inline std::string shapes_to_string(const std::vector<const std::vector<int64_t>*>& shapes) {
  std::string s;
  for (size_t i = 0; i < shapes.size(); ++i) s += (i ? " and " : "") + dims_to_string(*shapes[i]);
  return s;
}

// How K inputs map onto a broadcast output, with dims of size 1 dropped and adjacent dims merged
// where every input stays linear across them. The innermost stride of each input is 0 or 1.
template <int K>
struct BroadcastPlan {
  std::vector<int64_t> dims;                    // collapsed output dims (at least one)
  std::vector<std::array<int64_t, K>> strides;  // element strides of each input per dim
  int64_t numel = 0;

  BroadcastPlan(const std::array<const std::vector<int64_t>*, K>& in,
                const std::vector<int64_t>& out_dims) {
    numel = num_elements(out_dims);
    size_t rank = out_dims.size();
    std::vector<std::array<int64_t, K>> full(rank);
    for (int k = 0; k < K; ++k) {
      const auto& d = *in[k];
      size_t off = rank - d.size();
      int64_t s = 1;
      for (size_t i = rank; i-- > 0;) {
        int64_t dk = i >= off ? d[i - off] : 1;
        full[i][k] = dk == 1 ? 0 : s;
        s *= dk;
      }
    }
    for (size_t i = 0; i < rank; ++i) {
      if (out_dims[i] == 1) continue;
      if (!dims.empty()) {
        bool merge = true;
        for (int k = 0; k < K; ++k) merge &= strides.back()[k] == full[i][k] * out_dims[i];
        if (merge) {
          dims.back() *= out_dims[i];
          strides.back() = full[i];
          continue;
        }
      }
      dims.push_back(out_dims[i]);
      strides.push_back(full[i]);
    }
    if (dims.empty()) {
      dims.push_back(1);
      strides.push_back({});
    }
  }
  int64_t inner() const { return dims.back(); }
  const std::array<int64_t, K>& inner_strides() const { return strides.back(); }

  // Calls f(out_offset, input_offsets, len) for runs along the inner dim covering the output;
  // within a run input k advances by inner_strides()[k]. Runs are split across threads.
  template <typename F>
  void for_each_run(F&& f, int64_t cost = 1) const {
    const int r = static_cast<int>(dims.size());
    parallel_ranges(numel, [&](int64_t begin, int64_t end) {
      // Multi-index of `begin` over the outer dims, kept by odometer increments afterwards.
      std::vector<int64_t> idx(r, 0);
      int64_t rem = begin;
      for (int i = r - 1; i >= 0; --i) {
        idx[i] = rem % dims[i];
        rem /= dims[i];
      }
      std::array<int64_t, K> base{};
      for (int i = 0; i < r - 1; ++i)
        for (int k = 0; k < K; ++k) base[k] += idx[i] * strides[i][k];
      int64_t col = idx[r - 1], pos = begin;
      const int64_t n_in = inner();
      while (pos < end) {
        int64_t len = std::min(n_in - col, end - pos);
        std::array<int64_t, K> offs;
        for (int k = 0; k < K; ++k) offs[k] = base[k] + col * strides[r - 1][k];
        f(pos, offs, len);
        pos += len;
        col = 0;
        for (int i = r - 2; i >= 0; --i) {  // next row
          for (int k = 0; k < K; ++k) base[k] += strides[i][k];
          if (++idx[i] < dims[i]) break;
          for (int k = 0; k < K; ++k) base[k] -= idx[i] * strides[i][k];
          idx[i] = 0;
        }
      }
    }, cost);
  }
};

}  // namespace otter::cpu
