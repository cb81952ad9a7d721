// Along-one-axis algorithms shared by the CPU (kernels/cpu/scan.cc) and CUDA (kernels/cuda/scan.cu)
// kernels of CumSum, ArgMax, ArgMin and Hardmax: each works on one line of `len` elements `stride` apart.
// Conventions of kernels/common/elementwise.h: half types load as float, floats accumulate in
// double and integers in int64, and the result is stored once.
#pragma once

#include <cstdint>
#include <type_traits>
#include <vector>

#include "kernels/common/convert.h"

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

}  // namespace otter
