// Helpers shared by the CPU shape kernels and their gradient kernels: strides, axis and integer
// input reading, strided row iteration, Slice's resolved view and Pad's mode.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "kernels/common/indexing.h"
#include "kernels/common/shape_params.h"
#include "kernels/cpu/broadcast.h"
#include "kernels/kernel.h"

namespace otter::cpu {

inline std::vector<int64_t> contiguous_strides(const std::vector<int64_t>& dims) {
  std::vector<int64_t> s(dims.size(), 1);
  for (size_t i = dims.size(); i-- > 1;) s[i - 1] = s[i] * dims[i];
  return s;
}

using params::normalize_axis;

inline std::vector<int64_t> int_input(const KernelContext& ctx, int i, const char* name) {
  const Tensor& t = ctx.input(i);
  if (t.dtype() != DataType::kInt64 && t.dtype() != DataType::kInt32)
    ctx.error(str_cat("input ", i, " (", name, ") must be int64 or int32, got ", t.describe()));
  return t.to_int64_vector();
}

// Registers a kernel for op over the op table's opsets, for any dtype (the shape kernels move
// bytes).
inline void add_any_type(KernelRegistry& r, const char* op, KernelFactory f) {
  KernelDef d;
  d.op_type = op;
  d.create = std::move(f);
  r.add(std::move(d));
}

// int_input of an optional input: nullopt where it is absent.
inline std::optional<std::vector<int64_t>> optional_int_input(const KernelContext& ctx, int i, const char* name) {
  if (!ctx.has_input(i)) return std::nullopt;
  return int_input(ctx, i, name);
}

// Calls fn(row, in_offset) for every output row (all dims but the last) of a strided view:
// output dims `od`, input element strides `is` per output dim. Rows are split across threads.
template <typename F>
void for_each_row(const std::vector<int64_t>& od, const std::vector<int64_t>& is, F&& fn) {
  const int r = static_cast<int>(od.size());
  if (r == 0) { fn(int64_t{0}, int64_t{0}); return; }
  int64_t rows = 1;
  for (int i = 0; i < r - 1; ++i) rows *= od[i];
  if (rows == 0 || od[r - 1] == 0) return;
  cpu::parallel_ranges(rows, [&](int64_t b, int64_t e) {
    std::vector<int64_t> idx(static_cast<size_t>(std::max(r - 1, 0)), 0);
    int64_t rem = b, off = 0;
    for (int i = r - 2; i >= 0; --i) {
      idx[i] = rem % od[i];
      rem /= od[i];
      off += idx[i] * is[i];
    }
    for (int64_t row = b; row < e; ++row) {
      fn(row, off);
      for (int i = r - 2; i >= 0; --i) {
        off += is[i];
        if (++idx[i] < od[i]) break;
        off -= idx[i] * is[i];
        idx[i] = 0;
      }
    }
  }, od[r - 1]);
}

// Gather's indices along `axis` of `dims`, checked and made non-negative.
inline std::vector<int64_t> gather_indices(const KernelContext& ctx, const Tensor& idx, int64_t axis,
                                           const std::vector<int64_t>& dims) {
  if (idx.dtype() != DataType::kInt64 && idx.dtype() != DataType::kInt32)
    ctx.error(str_cat("indices must be int64 or int32, got ", idx.describe()));
  const int64_t n = dims[axis];
  std::vector<int64_t> ind = idx.to_int64_vector();
  for (int64_t& v : ind) {
    if (v < -n || v >= n)
      ctx.error(str_cat("index ", v, " is out of range for axis ", axis, " of size ", n, " (data ",
                        dims_to_string(dims), ")"));
    if (v < 0) v += n;
  }
  return ind;
}

using params::SliceView;

// Resolves Slice's starts, ends, axes?, steps? (inputs first .. first + 3) against `dims`.
inline SliceView resolve_slice(const KernelContext& ctx, const std::vector<int64_t>& dims, int first) {
  return params::resolve_slice(ctx, dims, int_input(ctx, first, "starts"), int_input(ctx, first + 1, "ends"),
                               ctx.has_input(first + 2) ? int_input(ctx, first + 2, "axes") : std::vector<int64_t>{},
                               ctx.has_input(first + 3) ? int_input(ctx, first + 3, "steps") : std::vector<int64_t>{});
}

using params::parse_pad_mode;

}  // namespace otter::cpu
