// Helpers shared by the CPU shape kernels and their gradient kernels: strides, axis and integer
// input reading, strided row iteration, Slice's resolved view and Pad's mode.
#pragma once

#include <string>
#include <vector>

#include "kernels/common/indexing.h"
#include "kernels/cpu/broadcast.h"
#include "kernels/kernel.h"

namespace otter::cpu {

inline std::vector<int64_t> contiguous_strides(const std::vector<int64_t>& dims) {
  std::vector<int64_t> s(dims.size(), 1);
  for (size_t i = dims.size(); i-- > 1;) s[i - 1] = s[i] * dims[i];
  return s;
}

inline int64_t normalize_axis(const KernelContext& ctx, int64_t axis, int64_t rank, const char* what = "axis") {
  if (axis < -rank || axis >= rank)
    ctx.error(str_cat(what, " ", axis, " is out of range for rank ", rank));
  return axis < 0 ? axis + rank : axis;
}

inline std::vector<int64_t> int_input(const KernelContext& ctx, int i, const char* name) {
  const Tensor& t = ctx.input(i);
  if (t.dtype() != DataType::kInt64 && t.dtype() != DataType::kInt32)
    ctx.error(str_cat("input ", i, " (", name, ") must be int64 or int32, got ", t.describe()));
  return t.to_int64_vector();
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

// The strided view one Slice reads: per axis the first element, the step and the output length.
struct SliceView {
  std::vector<int64_t> start, step, out_dims;
};

// Resolves Slice's starts, ends, axes?, steps? (inputs first .. first + 3) against `dims`.
inline SliceView resolve_slice(const KernelContext& ctx, const std::vector<int64_t>& dims, int first) {
  const int64_t r = static_cast<int64_t>(dims.size());
  std::vector<int64_t> starts = int_input(ctx, first, "starts"), ends = int_input(ctx, first + 1, "ends");
  if (starts.size() != ends.size())
    ctx.error(str_cat("starts ", dims_to_string(starts), " and ends ", dims_to_string(ends), " differ in length"));
  const size_t n = starts.size();
  std::vector<int64_t> axes, steps;
  if (ctx.has_input(first + 2)) axes = int_input(ctx, first + 2, "axes");
  else for (size_t i = 0; i < n; ++i) axes.push_back(static_cast<int64_t>(i));
  if (ctx.has_input(first + 3)) steps = int_input(ctx, first + 3, "steps");
  else steps.assign(n, 1);
  if (axes.size() != n || steps.size() != n)
    ctx.error(str_cat("starts, ends, axes and steps must have the same length"));
  SliceView v{std::vector<int64_t>(static_cast<size_t>(r), 0), std::vector<int64_t>(static_cast<size_t>(r), 1), dims};
  std::vector<bool> seen(static_cast<size_t>(r), false);
  for (size_t i = 0; i < n; ++i) {
    int64_t a = normalize_axis(ctx, axes[i], r);
    if (seen[a]) ctx.error(str_cat("axis ", axes[i], " is repeated in axes ", dims_to_string(axes)));
    seen[a] = true;
    if (steps[i] == 0) ctx.error(str_cat("step for axis ", axes[i], " is 0"));
    const SliceAxis sa = resolve_slice_axis(starts[i], ends[i], steps[i], dims[a]);
    v.start[a] = sa.start;
    v.step[a] = sa.step;
    v.out_dims[a] = sa.len;
  }
  return v;
}

inline PadMode parse_pad_mode(const Node& n) {
  const std::string m = n.attr_s("mode", "constant");
  if (m == "constant") return PadMode::kConstant;
  if (m == "reflect") return PadMode::kReflect;
  if (m == "edge") return PadMode::kEdge;
  if (m == "wrap") return PadMode::kWrap;
  fail(n.describe(), ": unsupported pad mode '", m, "'");
}

}  // namespace otter::cpu
