// Host-side parameter resolution of the data-movement ops shared by the CPU and CUDA kernels: the
// per-axis start/step/length of Slice and the output sizes of Split, validated with errors that
// name the node.
#pragma once

#include <algorithm>
#include <cstdint>
#include <limits>
#include <vector>

#include "graph/error.h"
#include "kernels/kernel.h"

namespace otter::params {

inline int64_t normalize_axis(const KernelContext& ctx, int64_t axis, int64_t rank, const char* what = "axis") {
  if (axis < -rank || axis >= rank) ctx.error(str_cat(what, " ", axis, " is out of range for rank ", rank));
  return axis < 0 ? axis + rank : axis;
}

// Per input axis: the first element read, the step, and the output length.
struct Slice {
  std::vector<int64_t> start, step, dims;
};

// Slice of an input of dims `in`; `axes` and `steps` may be empty (defaults 0..n-1 and 1).
inline Slice resolve_slice(const KernelContext& ctx, const std::vector<int64_t>& in, const std::vector<int64_t>& starts,
                           const std::vector<int64_t>& ends, std::vector<int64_t> axes, std::vector<int64_t> steps) {
  const int64_t r = static_cast<int64_t>(in.size());
  if (starts.size() != ends.size())
    ctx.error(str_cat("starts ", dims_to_string(starts), " and ends ", dims_to_string(ends), " differ in length"));
  const size_t n = starts.size();
  if (axes.empty())
    for (size_t i = 0; i < n; ++i) axes.push_back(static_cast<int64_t>(i));
  if (steps.empty()) steps.assign(n, 1);
  if (axes.size() != n || steps.size() != n) ctx.error("starts, ends, axes and steps must have the same length");
  Slice p{std::vector<int64_t>(static_cast<size_t>(r), 0), std::vector<int64_t>(static_cast<size_t>(r), 1), in};
  std::vector<bool> seen(static_cast<size_t>(r), false);
  for (size_t i = 0; i < n; ++i) {
    const int64_t a = normalize_axis(ctx, axes[i], r);
    if (seen[a]) ctx.error(str_cat("axis ", axes[i], " is repeated in axes ", dims_to_string(axes)));
    seen[a] = true;
    int64_t s = starts[i], e = ends[i], k = steps[i];
    const int64_t dim = in[a];
    if (k == 0) ctx.error(str_cat("step for axis ", axes[i], " is 0"));
    k = std::max<int64_t>(k, -std::numeric_limits<int64_t>::max());
    if (s < 0) s += dim;
    if (e < 0) e += dim;
    int64_t len;
    if (k > 0) {
      s = std::clamp<int64_t>(s, 0, dim);
      e = std::clamp<int64_t>(e, 0, dim);
      len = e > s ? 1 + (e - s - 1) / k : 0;
    } else {
      s = std::clamp<int64_t>(s, 0, std::max<int64_t>(dim - 1, 0));
      e = std::clamp<int64_t>(e, -1, dim - 1);
      len = dim > 0 && s > e ? 1 + (s - e - 1) / (-k) : 0;
    }
    p.start[a] = s;
    p.step[a] = k;
    p.dims[a] = len;
  }
  return p;
}

// Output sizes of Split along an axis of length `dim` into `nout` outputs: from the `split`
// input or attribute (`given`, may be empty), else equal chunks (the last one smaller only with
// the opset-18 attribute num_outputs).
inline std::vector<int64_t> split_sizes(const KernelContext& ctx, const Tensor& x, int64_t axis, int nout,
                                        std::vector<int64_t> given, int64_t num_outputs_attr) {
  const int64_t dim = x.dims()[axis];
  if (!given.empty()) {
    int64_t sum = 0;
    for (int64_t s : given) {
      if (s < 0) ctx.error(str_cat("split ", dims_to_string(given), " has a negative size"));
      sum += s;
    }
    if (static_cast<int>(given.size()) != nout || sum != dim)
      ctx.error(str_cat("split ", dims_to_string(given), " does not divide axis ", axis, " of ", x.describe(), " into ",
                        nout, " outputs"));
    return given;
  }
  const int64_t n = num_outputs_attr > 0 ? num_outputs_attr : nout;
  if (n != nout) ctx.error(str_cat("num_outputs is ", n, " but the node has ", nout, " outputs"));
  const int64_t chunk = (dim + n - 1) / n;
  if (num_outputs_attr == 0 && dim % n != 0)
    ctx.error(str_cat("cannot split axis ", axis, " of ", x.describe(), " evenly into ", n, " outputs"));
  std::vector<int64_t> sizes;
  for (int64_t i = 0; i < n; ++i) sizes.push_back(std::max<int64_t>(0, std::min(chunk, dim - i * chunk)));
  return sizes;
}

}  // namespace otter::params
