// Along-one-axis algorithms shared by the CPU (kernels/cpu/scan.cc) and CUDA (kernels/cuda/scan.cu)
// kernels of CumSum, ArgMax, ArgMin and Hardmax: each works on one line of `len` elements `stride` apart.
// Conventions of kernels/common/elementwise.h: half types load as float, floats accumulate in
// double and integers in int64, and the result is stored once. Also the host-side attribute reads
// and checks of those ops, with errors that name the node.
#pragma once

#include <cstdint>
#include <type_traits>
#include <vector>

#include "graph/error.h"
#include "kernels/common/convert.h"
#include "kernels/kernel.h"

namespace otter {

// A tensor of dims viewed as [outer, len, inner] around one axis: outer * inner lines of len
// elements, inner apart; line k starts at base(k).
struct AxisLines {
  int64_t outer = 1, len = 1, inner = 1;
  OTTER_HD int64_t base(int64_t k) const { return (k / inner) * len * inner + k % inner; }
};
// The view around axis (in [0, rank)).
inline AxisLines axis_lines(const std::vector<int64_t>& dims, int64_t axis) {
  AxisLines l;
  for (int64_t i = 0; i < static_cast<int64_t>(dims.size()); ++i)
    (i < axis ? l.outer : i > axis ? l.inner : l.len) *= dims[i];
  return l;
}
// ArgMax / ArgMin output dims: axis kept as 1 or dropped.
inline std::vector<int64_t> arg_output_dims(std::vector<int64_t> dims, int64_t axis, bool keepdims) {
  if (keepdims)
    dims[axis] = 1;
  else
    dims.erase(dims.begin() + axis);
  return dims;
}

// Inclusive (or exclusive: the element itself left out) running sums of a line, front to back or
// (reverse) back to front.
template <typename S>
OTTER_HD void cumsum_line(const S* x, S* y, int64_t len, int64_t stride, bool exclusive, bool reverse) {
  using A = std::conditional_t<std::is_floating_point_v<compute_type<S>>, double, int64_t>;
  A acc = 0;
  for (int64_t k = 0; k < len; ++k) {
    const int64_t i = (reverse ? len - 1 - k : k) * stride;
    const A v = static_cast<A>(load_value(x[i]));
    if (!exclusive) acc += v;
    y[i] = store_value<S>(static_cast<compute_type<S>>(acc));
    if (exclusive) acc += v;
  }
}

// Index of the largest (or smallest) element of a line: the first one, or the last with
// select_last; NaN counts as larger and smaller than every number (numpy's argmax / argmin).
template <typename S>
OTTER_HD int64_t arg_extreme_line(const S* x, int64_t len, int64_t stride, bool is_max, bool select_last) {
  int64_t best = 0;
  auto bv = load_value(x[0]);
  for (int64_t k = 1; k < len; ++k) {
    const auto v = load_value(x[k * stride]);
    if (bv != bv) break;  // a NaN wins and stays first
    const bool better = v != v || (is_max ? v > bv : v < bv) || (select_last && v == bv);
    if (better) {
      best = k;
      bv = v;
    }
  }
  return best;
}

// Hardmax of a line: 1 at the first largest element (arg_extreme_line), 0 elsewhere.
template <typename S>
OTTER_HD void hardmax_line(const S* x, S* y, int64_t len, int64_t stride) {
  const int64_t best = arg_extreme_line(x, len, stride, true, false);
  for (int64_t k = 0; k < len; ++k) y[k * stride] = store_value<S>(compute_type<S>(k == best ? 1 : 0));
}

// ---- host side ----------------------------------------------------------------------------------

// The line view of dims around axis (possibly negative); fails naming the node when out of range.
inline AxisLines lines_around(const KernelContext& ctx, const std::vector<int64_t>& dims, int64_t axis) {
  const int64_t rank = static_cast<int64_t>(dims.size());
  if (axis < -rank || axis >= rank) ctx.error(str_cat("axis ", axis, " is out of range for rank ", rank));
  return axis_lines(dims, axis < 0 ? axis + rank : axis);
}

// CumSum's attributes.
struct CumSumAttrs {
  bool exclusive, reverse;
  explicit CumSumAttrs(const Node& n)
      : exclusive(n.attr_i("exclusive", 0) != 0), reverse(n.attr_i("reverse", 0) != 0) {}
};

// CumSum's lines: around input 1 (axis), whose values `axis` the caller read on the host.
inline AxisLines cumsum_lines(const KernelContext& ctx, const std::vector<int64_t>& axis) {
  if (axis.size() != 1) ctx.error(str_cat("input 1 (axis) must hold one value, got ", ctx.input(1).describe()));
  return lines_around(ctx, ctx.input(0).dims(), axis[0]);
}

// ArgMax's / ArgMin's attributes.
struct ArgExtremeAttrs {
  bool is_max;
  int64_t axis;
  bool keepdims, last;
  ArgExtremeAttrs(const Node& n, bool max)
      : is_max(max),
        axis(n.attr_i("axis", 0)),
        keepdims(n.attr_i("keepdims", 1) != 0),
        last(n.attr_i("select_last_index", 0) != 0) {}
};

// ArgMax / ArgMin of input 0: its lines (never empty) and the output dims.
struct ArgExtremeShape {
  AxisLines lines;
  std::vector<int64_t> out_dims;
};
inline ArgExtremeShape resolve_arg_extreme(const KernelContext& ctx, const ArgExtremeAttrs& at) {
  const Tensor& x = ctx.input(0);
  const AxisLines l = lines_around(ctx, x.dims(), at.axis);
  if (l.len == 0)
    ctx.error(str_cat("cannot take the arg", at.is_max ? "max" : "min", " of an empty axis of ", x.describe()));
  const int64_t axis = at.axis < 0 ? at.axis + x.rank() : at.axis;
  return {l, arg_output_dims(x.dims(), axis, at.keepdims)};
}

}  // namespace otter
