// Host-side parameter resolution of the data-movement ops, shared by the CPU and CUDA kernels (and
// their gradients): axis normalisation, Concat's output, the strided view one Slice reads, Split's
// output sizes, Trilu's offset and Pad's geometry (also PadGrad's), validated with errors that name the node.
// Inputs are already read on the host.
#pragma once

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "graph/error.h"
#include "kernels/common/indexing.h"
#include "kernels/kernel.h"

namespace otter::params {

inline int64_t normalize_axis(const KernelContext& ctx, int64_t axis, int64_t rank, const char* what = "axis") {
  if (axis < -rank || axis >= rank) ctx.error(str_cat(what, " ", axis, " is out of range for rank ", rank));
  return axis < 0 ? axis + rank : axis;
}

// Concat of all the context's inputs along `axis`: the inputs agree in dtype, rank and every other
// dim. The output is `outer` rows of out_dims[axis] * inner elements; input i fills a column
// block of dims[axis] * inner elements in each row.
struct ConcatSpec {
  int64_t axis = 0;
  std::vector<int64_t> out_dims;
  int64_t outer = 1, inner = 1;
};

inline ConcatSpec resolve_concat(const KernelContext& ctx, int64_t axis) {
  const int n = ctx.num_inputs();
  if (n < 1) ctx.error("needs at least one input");
  const Tensor& x0 = ctx.input(0);
  const int64_t r = x0.rank();
  if (r == 0) ctx.error("cannot concatenate scalars");
  ConcatSpec c;
  c.axis = normalize_axis(ctx, axis, r);
  const int64_t a = c.axis;
  c.out_dims = x0.dims();
  c.out_dims[a] = 0;
  for (int i = 0; i < n; ++i) {
    const Tensor& xi = ctx.input(i);
    bool ok = xi.dtype() == x0.dtype() && xi.rank() == r;
    for (int64_t k = 0; ok && k < r; ++k) ok = k == a || xi.dims()[k] == x0.dims()[k];
    if (!ok)
      ctx.error(
          str_cat("input ", i, " ", xi.describe(), " does not match input 0 ", x0.describe(), " outside axis ", a));
    c.out_dims[a] += xi.dims()[a];
  }
  for (int64_t k = 0; k < a; ++k) c.outer *= c.out_dims[k];
  for (int64_t k = a + 1; k < r; ++k) c.inner *= c.out_dims[k];
  return c;
}

// The strided view one Slice reads: per axis the first element, the step and the output length.
struct SliceView {
  std::vector<int64_t> start, step, out_dims;
};

// Slice of an input of dims `dims`; `axes` and `steps` may be empty (defaults 0..n-1 and 1).
inline SliceView resolve_slice(const KernelContext& ctx, const std::vector<int64_t>& dims,
                               const std::vector<int64_t>& starts, const std::vector<int64_t>& ends,
                               std::vector<int64_t> axes, std::vector<int64_t> steps) {
  const int64_t r = static_cast<int64_t>(dims.size());
  if (starts.size() != ends.size())
    ctx.error(str_cat("starts ", dims_to_string(starts), " and ends ", dims_to_string(ends), " differ in length"));
  const size_t n = starts.size();
  if (axes.empty())
    for (size_t i = 0; i < n; ++i) axes.push_back(static_cast<int64_t>(i));
  if (steps.empty()) steps.assign(n, 1);
  if (axes.size() != n || steps.size() != n) ctx.error("starts, ends, axes and steps must have the same length");
  SliceView v{std::vector<int64_t>(static_cast<size_t>(r), 0), std::vector<int64_t>(static_cast<size_t>(r), 1), dims};
  std::vector<bool> seen(static_cast<size_t>(r), false);
  for (size_t i = 0; i < n; ++i) {
    const int64_t a = normalize_axis(ctx, axes[i], r);
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

// Output sizes of Split along `axis` of x into `nout` outputs: from the `split` input or
// attribute (`given`, may be empty), else equal chunks (the last one smaller only with the
// opset-18 attribute num_outputs).
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

// ConstantOfShape's fill value: attribute 'value' (one element), else float 0.
inline Tensor constant_of_shape_value(const Node& n) {
  const Attribute* a = n.find_attr("value");
  if (!a) return Tensor::scalar<float>(0.0f);
  if (a->t().numel() != 1) fail(n.describe(), ": attribute 'value' must hold one element, got ", a->t().describe());
  return a->t();
}

// ConstantOfShape's output dims: input 0 (read on the host as `dims`), none negative.
inline std::vector<int64_t> constant_of_shape_dims(const KernelContext& ctx, std::vector<int64_t> dims) {
  for (int64_t d : dims)
    if (d < 0) ctx.error(str_cat("shape ", dims_to_string(dims), " has a negative dim"));
  return dims;
}

// Trilu's diagonal offset: the one value of input 1 (`k`, read on the host; nullopt when the input
// is absent: 0). Input 0 must have rank >= 2.
inline int64_t trilu_k(const KernelContext& ctx, const std::optional<std::vector<int64_t>>& k) {
  const Tensor& x = ctx.input(0);
  if (x.rank() < 2) ctx.error(str_cat("input must have rank >= 2, got ", x.describe()));
  if (!k) return 0;
  if (k->size() != 1) ctx.error("k must be a scalar");
  return (*k)[0];
}

// Pad's attribute 'mode'.
inline PadMode parse_pad_mode(const Node& n) {
  const std::string m = n.attr_s("mode", "constant");
  if (m == "constant") return PadMode::kConstant;
  if (m == "reflect") return PadMode::kReflect;
  if (m == "edge") return PadMode::kEdge;
  if (m == "wrap") return PadMode::kWrap;
  fail(n.describe(), ": unsupported pad mode '", m, "'");
}

// Pad's geometry on an input `x` (PadGrad: on the gradient dX, of the padded input's dims): per
// axis the padding before (`lo`, negative crops) and the output length. `pads` holds the begins
// then the ends of the padded axes: `axes` (nullopt: every axis in order; negative ones count
// from the end). Reflect, edge and wrap padding cannot grow an empty axis.
struct PadSpec {
  std::vector<int64_t> lo, out_dims;
};

inline PadSpec resolve_pad(const KernelContext& ctx, const Tensor& x, const std::vector<int64_t>& pads,
                           const std::optional<std::vector<int64_t>>& axes_in, PadMode mode) {
  const int64_t r = x.rank();
  std::vector<int64_t> axes;
  if (axes_in) {
    for (int64_t a : *axes_in) axes.push_back(normalize_axis(ctx, a, r));
  } else {
    for (int64_t i = 0; i < r; ++i) axes.push_back(i);
  }
  const size_t na = axes.size();
  if (pads.size() != 2 * na)
    ctx.error(str_cat("pads ", dims_to_string(pads), " must have 2 entries per padded axis (", na, ")"));
  PadSpec p{std::vector<int64_t>(static_cast<size_t>(r), 0), x.dims()};
  for (size_t i = 0; i < na; ++i) {
    const int64_t a = axes[i];
    p.lo[a] = pads[i];
    p.out_dims[a] = x.dims()[a] + pads[i] + pads[i + na];
    if (p.out_dims[a] < 0)
      ctx.error(str_cat("pads ", dims_to_string(pads), " crop axis ", a, " of ", x.describe(), " below 0"));
    if (mode != PadMode::kConstant && x.dims()[a] == 0 && p.out_dims[a] > 0)
      ctx.error(str_cat("cannot ", ctx.node().attr_s("mode", "constant"), "-pad the empty axis ", a, " of ",
                        x.describe()));
  }
  return p;
}

}  // namespace otter::params
