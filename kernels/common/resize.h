// Resize arithmetic shared by the CPU (kernels/cpu/resize.cc) and CUDA (kernels/cuda/resize.cu)
// kernels of Resize and its gradient: each output coordinate maps back to an input coordinate by
// the coordinate transformation mode, and takes up to 4 weighted taps per axis (nearest: 1, linear:
// 2, cubic: 4), the taps of an output element being the product over the axes. Follows the ONNX
// Resize spec (opsets 11-18): edge taps clamp to the input, cubic may exclude them.
#pragma once

#include <math.h>

#include <cstdint>
#include <string>
#include <vector>

#include "graph/ir.h"
#include "kernels/common/convert.h"

namespace otter {

constexpr int kMaxResizeRank = 8;

enum class ResizeMode : uint8_t { kNearest, kLinear, kCubic };
enum class ResizeCoord : uint8_t {
  kHalfPixel,
  kPytorchHalfPixel,
  kAlignCorners,
  kAsymmetric,
  kTfHalfPixelForNn,
  kTfCropAndResize,
};
enum class ResizeNearest : uint8_t { kRoundPreferFloor, kRoundPreferCeil, kFloor, kCeil };

struct ResizeGeom {
  int rank = 0;
  ResizeMode mode = ResizeMode::kNearest;
  ResizeCoord coord = ResizeCoord::kHalfPixel;
  ResizeNearest nearest = ResizeNearest::kRoundPreferFloor;
  bool exclude_outside = false;
  double cubic_a = -0.75, extrapolation = 0;
  int64_t in[kMaxResizeRank] = {}, out[kMaxResizeRank] = {};
  double scale[kMaxResizeRank] = {}, roi_start[kMaxResizeRank] = {}, roi_end[kMaxResizeRank] = {};
};

// Input coordinate of output coordinate x along axis d; *outside is set when tf_crop_and_resize
// maps it outside the input (the element then takes the extrapolation value).
OTTER_HD double resize_source(const ResizeGeom& g, int d, int64_t x, bool* outside) {
  const double in = static_cast<double>(g.in[d]), s = g.scale[d], xr = static_cast<double>(x);
  const double out = s * in;  // the output length as the spec computes it (from scales or sizes)
  switch (g.coord) {
    case ResizeCoord::kHalfPixel:
      return (xr + 0.5) / s - 0.5;
    case ResizeCoord::kPytorchHalfPixel:
      return out > 1 ? (xr + 0.5) / s - 0.5 : -0.5;
    case ResizeCoord::kAlignCorners:
      return out == 1 ? 0 : xr * (in - 1) / (out - 1);
    case ResizeCoord::kAsymmetric:
      return xr / s;
    case ResizeCoord::kTfHalfPixelForNn:
      return (xr + 0.5) / s;
    case ResizeCoord::kTfCropAndResize: {
      const double a = g.roi_start[d], b = g.roi_end[d];
      const double v =
          out == 1 ? (b - a) * (in - 1) / 2 + a * (in - 1) : xr * (b - a) * (in - 1) / (out - 1) + a * (in - 1);
      if (v < 0 || v > in - 1) *outside = true;
      return v;
    }
  }
  return 0;
}

// The taps (input index, weight) of output coordinate x along axis d; returns their number.
OTTER_HD int resize_taps(const ResizeGeom& g, int d, int64_t x, int64_t* idx, double* w, bool* outside) {
  const double src = resize_source(g, d, x, outside);
  const int64_t n = g.in[d];
  const double fl = floor(src);
  const double r = src - fl;
  const int64_t base = static_cast<int64_t>(fl);
  auto clamp = [n](int64_t i) { return i < 0 ? int64_t{0} : (i >= n ? n - 1 : i); };
  if (g.mode == ResizeMode::kNearest) {
    bool up = false;
    if (r != 0) {
      switch (g.nearest) {
        case ResizeNearest::kRoundPreferFloor:
          up = r > 0.5;
          break;
        case ResizeNearest::kRoundPreferCeil:
          up = r >= 0.5;
          break;
        case ResizeNearest::kFloor:
          up = false;
          break;
        case ResizeNearest::kCeil:
          up = true;
          break;
      }
    }
    idx[0] = clamp(base + (up ? 1 : 0));
    w[0] = 1;
    return 1;
  }
  if (g.mode == ResizeMode::kLinear) {
    idx[0] = clamp(base), idx[1] = clamp(base + 1);
    w[0] = 1 - r, w[1] = r;
    return 2;
  }
  const double A = g.cubic_a;
  const double t0 = r + 1, t1 = r, t2 = 1 - r, t3 = 2 - r;
  w[0] = ((A * t0 - 5 * A) * t0 + 8 * A) * t0 - 4 * A;
  w[1] = ((A + 2) * t1 - (A + 3)) * t1 * t1 + 1;
  w[2] = ((A + 2) * t2 - (A + 3)) * t2 * t2 + 1;
  w[3] = ((A * t3 - 5 * A) * t3 + 8 * A) * t3 - 4 * A;
  double sum = 0;
  for (int k = 0; k < 4; ++k) {
    const int64_t i = base - 1 + k;
    if (g.exclude_outside && (i < 0 || i >= n)) w[k] = 0;
    sum += w[k];
    idx[k] = clamp(i);
  }
  if (g.exclude_outside && sum != 0)
    for (int k = 0; k < 4; ++k) w[k] /= sum;
  return 4;
}

// Visits the taps of output element o: f(input offset, weight) for each; returns false (visiting
// nothing) when the element takes the extrapolation value.
template <typename F>
OTTER_HD bool resize_visit(const ResizeGeom& g, int64_t o, F f) {
  int64_t idx[kMaxResizeRank][4];
  double w[kMaxResizeRank][4];
  int cnt[kMaxResizeRank];
  bool outside = false;
  for (int d = g.rank - 1; d >= 0; --d) {
    cnt[d] = resize_taps(g, d, o % g.out[d], idx[d], w[d], &outside);
    o /= g.out[d];
  }
  if (outside) return false;
  int k[kMaxResizeRank] = {};
  for (;;) {
    int64_t off = 0;
    double wt = 1;
    for (int d = 0; d < g.rank; ++d) {
      off = off * g.in[d] + idx[d][k[d]];
      wt *= w[d][k[d]];
    }
    if (wt != 0) f(off, wt);
    int d = g.rank - 1;
    while (d >= 0 && ++k[d] == cnt[d]) k[d--] = 0;
    if (d < 0) return true;
  }
}

// The attributes of a Resize node.
struct ResizeAttrs {
  std::string mode = "nearest", coord = "half_pixel", nearest = "round_prefer_floor";
  double cubic_a = -0.75, extrapolation = 0;
  bool exclude_outside = false;
};

// The attributes of a Resize / ResizeGrad node; fails naming it on Resize 18's axes and
// keep_aspect_ratio_policy.
inline ResizeAttrs resize_attrs(const Node& n) {
  ResizeAttrs a;
  a.mode = n.attr_s("mode", "nearest");
  a.coord = n.attr_s("coordinate_transformation_mode", "half_pixel");
  a.nearest = n.attr_s("nearest_mode", "round_prefer_floor");
  a.cubic_a = n.attr_f("cubic_coeff_a", -0.75f);
  a.extrapolation = n.attr_f("extrapolation_value", 0.f);
  a.exclude_outside = n.attr_i("exclude_outside", 0) != 0;
  if (n.find_attr("axes") || n.find_attr("keep_aspect_ratio_policy"))
    fail(n.describe(), ": Resize attributes 'axes' and 'keep_aspect_ratio_policy' (opset 18) are not supported");
  return a;
}

// The geometry for input dims and the roi / scales / sizes inputs (empty when absent); "" or what
// is wrong.
inline std::string make_resize_geom(const ResizeAttrs& a, const std::vector<int64_t>& in,
                                    const std::vector<double>& roi, const std::vector<double>& scales,
                                    const std::vector<int64_t>& sizes, ResizeGeom* g) {
  const size_t r = in.size();
  if (r == 0 || r > kMaxResizeRank) return "input rank must be 1 to 8";
  g->rank = static_cast<int>(r);
  if (a.mode == "nearest")
    g->mode = ResizeMode::kNearest;
  else if (a.mode == "linear")
    g->mode = ResizeMode::kLinear;
  else if (a.mode == "cubic")
    g->mode = ResizeMode::kCubic;
  else
    return "attribute 'mode' must be nearest, linear or cubic, got '" + a.mode + "'";
  static const char* kCoords[] = {"half_pixel", "pytorch_half_pixel",   "align_corners",
                                  "asymmetric", "tf_half_pixel_for_nn", "tf_crop_and_resize"};
  int ci = -1;
  for (int i = 0; i < 6; ++i)
    if (a.coord == kCoords[i]) ci = i;
  if (ci < 0) return "unknown coordinate_transformation_mode '" + a.coord + "'";
  g->coord = static_cast<ResizeCoord>(ci);
  static const char* kNearest[] = {"round_prefer_floor", "round_prefer_ceil", "floor", "ceil"};
  int ni = -1;
  for (int i = 0; i < 4; ++i)
    if (a.nearest == kNearest[i]) ni = i;
  if (ni < 0) return "unknown nearest_mode '" + a.nearest + "'";
  g->nearest = static_cast<ResizeNearest>(ni);
  g->cubic_a = a.cubic_a, g->extrapolation = a.extrapolation, g->exclude_outside = a.exclude_outside;
  if (scales.empty() == sizes.empty()) return "exactly one of the inputs scales and sizes must be given";
  if ((!scales.empty() && scales.size() != r) || (!sizes.empty() && sizes.size() != r))
    return "scales / sizes must have one entry per input dim";
  if (g->coord == ResizeCoord::kTfCropAndResize && roi.size() != 2 * r)
    return "tf_crop_and_resize needs an roi of 2 * rank values";
  for (size_t d = 0; d < r; ++d) {
    g->in[d] = in[d];
    if (!scales.empty()) {
      if (!(scales[d] > 0)) return "scales must be positive";
      g->scale[d] = scales[d];
      g->out[d] = static_cast<int64_t>(floor(static_cast<double>(in[d]) * scales[d]));
    } else {
      if (sizes[d] < 0) return "sizes must not be negative";
      g->out[d] = sizes[d];
      g->scale[d] = in[d] ? static_cast<double>(sizes[d]) / static_cast<double>(in[d]) : 1;
    }
    if (g->out[d] > 0 && in[d] == 0) return "cannot resize an empty dim to a non-empty one";
    g->roi_start[d] = roi.size() == 2 * r ? roi[d] : 0;
    g->roi_end[d] = roi.size() == 2 * r ? roi[r + d] : 1;
  }
  return "";
}

}  // namespace otter
