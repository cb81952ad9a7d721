// Group normalisation arithmetic shared by the CPU (kernels/cpu/normalize.cc) and CUDA
// (kernels/cuda/normalize.cu) kernels of InstanceNormalization, MeanVarianceNormalization and
// LpNormalization: the elements of X split into groups (the positions of the kept axes), each
// normalised over its members (the positions of the reduced axes) in double. GroupNormalization
// (CPU only; CUDA runs the CPU kernel on host copies) has its own row function, group_norm_row.
#pragma once

#include <math.h>

#include <cstdint>
#include <vector>

#include "graph/ir.h"
#include "kernels/common/convert.h"
#include "kernels/common/shape_params.h"

namespace otter {

constexpr int kMaxNormRank = 8;

enum class NormMode : uint8_t {
  kMeanVar,  // (x - mean) / sqrt(var + eps), then scale[c] and bias[c] when given
  kL1,       // x / sum |x|
  kL2,       // x / sqrt(sum x^2)
};

struct NormGeom {
  int rank = 0;
  int64_t groups = 1, members = 1;
  // The kept axes (group coordinates) and the reduced ones (member coordinates), outer to inner.
  int nk = 0, nr = 0;
  int64_t kdims[kMaxNormRank] = {}, kstrides[kMaxNormRank] = {};
  int64_t rdims[kMaxNormRank] = {}, rstrides[kMaxNormRank] = {};
};

// Offset of member m of group g.
OTTER_HD int64_t norm_offset(const NormGeom& s, int64_t g, int64_t m) {
  int64_t off = 0;
  for (int d = s.nk - 1; d >= 0; --d) {
    off += (g % s.kdims[d]) * s.kstrides[d];
    g /= s.kdims[d];
  }
  for (int d = s.nr - 1; d >= 0; --d) {
    off += (m % s.rdims[d]) * s.rstrides[d];
    m /= s.rdims[d];
  }
  return off;
}

// The geometry of dims with the axes marked in `reduced` (one flag per dim) reduced.
inline NormGeom make_norm_geom(const std::vector<int64_t>& dims, const std::vector<bool>& reduced) {
  NormGeom s;
  s.rank = static_cast<int>(dims.size());
  std::vector<int64_t> strides(dims.size(), 1);
  for (size_t i = dims.size(); i-- > 1;) strides[i - 1] = strides[i] * dims[i];
  for (size_t i = 0; i < dims.size(); ++i) {
    if (reduced[i]) {
      s.rdims[s.nr] = dims[i], s.rstrides[s.nr++] = strides[i], s.members *= dims[i];
    } else {
      s.kdims[s.nk] = dims[i], s.kstrides[s.nk++] = strides[i], s.groups *= dims[i];
    }
  }
  return s;
}

// Normalises group g of x into y. scale / bias (may be null) are indexed by g % channels.
template <typename S, typename P>
OTTER_HD void normalize_group(const NormGeom& s, int64_t g, const S* x, S* y, NormMode mode, double eps, const P* scale,
                              const P* bias, int64_t channels) {
  double a = 0, b = 0;
  for (int64_t m = 0; m < s.members; ++m) {
    const double v = static_cast<double>(load_value(x[norm_offset(s, g, m)]));
    a += mode == NormMode::kL1 ? (v < 0 ? -v : v) : mode == NormMode::kL2 ? v * v : v;
    b += v * v;
  }
  double shift = 0, mul = 1;
  if (mode == NormMode::kMeanVar) {
    const double mean = s.members ? a / static_cast<double>(s.members) : 0;
    double var = s.members ? b / static_cast<double>(s.members) - mean * mean : 0;
    var = var < 0 ? 0 : var;
    shift = mean;
    mul = 1 / sqrt(var + eps);
  } else {
    mul = 1 / (mode == NormMode::kL2 ? sqrt(a) : a);
  }
  const int64_t c = channels ? g % channels : 0;
  const double sc = scale ? static_cast<double>(load_value(scale[c])) : 1;
  const double bi = bias ? static_cast<double>(load_value(bias[c])) : 0;
  for (int64_t m = 0; m < s.members; ++m) {
    const int64_t o = norm_offset(s, g, m);
    const double v = static_cast<double>(load_value(x[o]));
    y[o] = store_value<S>(static_cast<compute_type<S>>((v - shift) * mul * sc + bi));
  }
}

// GroupNormalization: row `row` = n * groups + g of X viewed as [N, groups, members] (members =
// C / groups * spatial contiguous elements), normalised in double (mean first, then the variance
// of the deviations). scale and bias are indexed per channel (g * C / groups + m / spatial) when
// per_channel (opset 21), else per group (opset 18).
template <typename S, typename P>
OTTER_HD void group_norm_row(const S* x, S* y, int64_t row, int64_t groups, int64_t members, int64_t spatial,
                             double eps, const P* scale, const P* bias, bool per_channel) {
  const S* xr = x + row * members;
  S* yr = y + row * members;
  double sum = 0, sq = 0;
  for (int64_t m = 0; m < members; ++m) sum += static_cast<double>(load_value(xr[m]));
  const double mean = sum / static_cast<double>(members);
  for (int64_t m = 0; m < members; ++m) {
    const double d = static_cast<double>(load_value(xr[m])) - mean;
    sq += d * d;
  }
  const double rstd = 1 / sqrt(sq / static_cast<double>(members) + eps);
  const int64_t g = row % groups, channels_per_group = members / spatial;
  for (int64_t m = 0; m < members; ++m) {
    const int64_t k = per_channel ? g * channels_per_group + m / spatial : g;
    const double v = (static_cast<double>(load_value(xr[m])) - mean) * rstd;
    const double out = v * static_cast<double>(load_value(scale[k])) + static_cast<double>(load_value(bias[k]));
    yr[m] = store_value<S>(static_cast<compute_type<S>>(out));
  }
}

// What a node normalises over: its mode, epsilon, per-channel affine, and the axes it reduces
// (empty: all from 2 on, InstanceNormalization).
struct NormSpec {
  NormMode mode = NormMode::kMeanVar;
  double eps = 0;
  bool affine = false;  // InstanceNormalization: scale and bias per channel (axis 1)
  std::vector<int64_t> axes;
};

inline NormSpec norm_spec(const Node& n) {
  NormSpec s;
  if (n.op_type() == "InstanceNormalization") {
    s.eps = n.attr_f("epsilon", 1e-5f);
    s.affine = true;
  } else if (n.op_type() == "MeanVarianceNormalization") {
    s.eps = 1e-9;  // the epsilon of the ONNX function body
    s.axes = n.attr_ints("axes", {0, 2, 3});
  } else {
    const int64_t p = n.attr_i("p", 2);
    if (p != 1 && p != 2) fail(n.describe(), ": attribute 'p' must be 1 or 2, got ", p);
    s.mode = p == 1 ? NormMode::kL1 : NormMode::kL2;
    s.axes = {n.attr_i("axis", -1)};
  }
  return s;
}

// The reduced-axis flags for input rank r (fails naming the node).
inline std::vector<bool> norm_reduced_axes(const KernelContext& ctx, const NormSpec& s, int64_t r) {
  if (r > kMaxNormRank) ctx.error(str_cat("input rank ", r, " is above ", kMaxNormRank));
  std::vector<bool> red(static_cast<size_t>(r), s.axes.empty());
  if (s.axes.empty()) {
    if (r < 3) ctx.error(str_cat("input must have rank >= 3 (N, C, spatial...), got rank ", r));
    red[0] = red[1] = false;
  }
  for (int64_t a : s.axes) red[params::normalize_axis(ctx, a, r)] = true;
  return red;
}

}  // namespace otter
