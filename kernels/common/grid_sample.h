// GridSample arithmetic shared by the CPU kernels of GridSample and its gradient
// ai.otter.GridSampleGrad (kernels/cpu/grid_sample.cc), written for a device kernel too (OTTER_HD,
// no allocation). It follows the ONNX GridSample spec (opsets 16 and 20) and ONNX's reference
// implementation (onnx/reference/ops/op_grid_sample.py, ONNX 1.13+):
//   * a grid value n in [-1, 1] maps to the source coordinate x = (n + 1) / 2 * (len - 1) with
//     align_corners, else ((n + 1) * len - 1) / 2;
//   * nearest rounds x half-to-even (np.rint) first;
//   * a coordinate outside [lo, hi] (align_corners: [0, len - 1], else [-0.5, len - 0.5]) is
//     clamped to [0, len - 1] (border) or reflected at lo and hi until inside (reflection);
//     zeros leaves it;
//   * the taps around x (nearest: trunc(x); linear: floor(x) + {0, 1}, weights 1 - t, t; cubic:
//     floor(x) + {-1, 0, 1, 2}, Keys' weights with a = -0.75, t = x - floor(x)) read X at their
//     index after the padding again: zero outside (zeros), clamped (border), reflected
//     (reflection). An output point's value is the sum over the product of the axes' taps.
// Grid's last axis lists the coordinates innermost spatial axis first (x, y, z): component k is X's
// spatial axis r - 1 - k. The gradient with respect to the grid value of axis d is
//   sum over taps of X[tap] * dw_d(tap) * prod_{e != d} w_e(tap) * dx/dn,
// where dx/dn is the denormalisation's slope times the padding's (0 where border clamps, +-1 where
// reflection flips) and is 0 in nearest mode (a piecewise-constant function of the grid).
#pragma once

#include <math.h>

#include <cstdint>
#include <string>

#include "graph/half.h"

namespace otter {

constexpr int kMaxGridSampleDims = 3;  // spatial axes: X of rank 3 to 5

enum class GridSampleMode : uint8_t { kLinear, kNearest, kCubic };
enum class GridSamplePadding : uint8_t { kZeros, kBorder, kReflection };

struct GridSampleGeom {
  GridSampleMode mode = GridSampleMode::kLinear;
  GridSamplePadding padding = GridSamplePadding::kZeros;
  bool align_corners = false;
  int r = 0;                            // spatial axes
  int64_t in[kMaxGridSampleDims] = {};  // X's spatial dims D1..Dr
  int64_t plane = 1;                    // D1 * ... * Dr
};

// The taps of one output point along each spatial axis d (X's order).
template <typename A>
struct GridSampleTaps {
  int count[kMaxGridSampleDims] = {};
  int64_t idx[kMaxGridSampleDims][4] = {};                          // -1: a zero (outside, zeros padding)
  A w[kMaxGridSampleDims][4] = {}, dw[kMaxGridSampleDims][4] = {};  // weight, its d/dx
  A dxdn[kMaxGridSampleDims] = {};                                  // d(source coordinate) / d(grid value)
};

// ONNX's _gs_reflect: x reflected at lo and hi until inside; *slope is dx'/dx (+-1).
template <typename A>
OTTER_HD A grid_sample_reflect(A x, A lo, A hi, A* slope) {
  const A range = hi - lo;
  *slope = 1;
  if (range <= 0) {  // one pixel with align_corners: every coordinate is that pixel's
    *slope = 0;
    return lo;
  }
  if (x >= lo && x <= hi) return x;
  // dx beyond the nearer border is n whole ranges and r; an even n leaves x mirrored once.
  const A dx = x < lo ? lo - x : x - hi;
  const A n = floor(dx / range);
  const A r = dx - n * range;
  const bool even = fmod(n, A(2)) == 0;
  *slope = even ? A(-1) : A(1);
  if (x < lo) return even ? lo + r : hi - r;
  return even ? hi - r : lo + r;
}

// X's index for tap index i along an axis of length len: -1 where the tap reads a zero.
template <typename A>
OTTER_HD int64_t grid_sample_index(const GridSampleGeom& g, int64_t i, int64_t len) {
  if (i >= 0 && i < len) return i;
  if (g.padding == GridSamplePadding::kZeros) return -1;
  if (g.padding == GridSamplePadding::kBorder) return i < 0 ? 0 : len - 1;
  const A lo = g.align_corners ? A(0) : A(-0.5), hi = g.align_corners ? A(len - 1) : A(len) - A(0.5);
  A slope;
  const int64_t j = static_cast<int64_t>(grid_sample_reflect(static_cast<A>(i), lo, hi, &slope));
  return j < 0 ? 0 : (j >= len ? len - 1 : j);
}

// Keys' cubic convolution weights (a = -0.75) of the taps at distances t + 1, t, 1 - t, 2 - t and
// their derivatives with respect to t.
template <typename A>
OTTER_HD void grid_sample_cubic(A t, A* w, A* dw) {
  const A a = A(-0.75);
  const A s0 = t + 1, s1 = t, s2 = 1 - t, s3 = 2 - t;
  w[0] = ((a * s0 - 5 * a) * s0 + 8 * a) * s0 - 4 * a;
  w[1] = ((a + 2) * s1 - (a + 3)) * s1 * s1 + 1;
  w[2] = ((a + 2) * s2 - (a + 3)) * s2 * s2 + 1;
  w[3] = ((a * s3 - 5 * a) * s3 + 8 * a) * s3 - 4 * a;
  dw[0] = (3 * a * s0 - 10 * a) * s0 + 8 * a;
  dw[1] = (3 * (a + 2) * s1 - 2 * (a + 3)) * s1;
  dw[2] = -(3 * (a + 2) * s2 - 2 * (a + 3)) * s2;
  dw[3] = -((3 * a * s3 - 10 * a) * s3 + 8 * a);
}

// The taps of the output point whose grid vector is v[0..r-1] (x first).
template <typename A, typename G>
OTTER_HD void grid_sample_taps(const GridSampleGeom& g, const G* v, GridSampleTaps<A>* t) {
  for (int d = 0; d < g.r; ++d) {
    const int64_t len = g.in[d];
    const A n = static_cast<A>(v[g.r - 1 - d]);
    A x, slope;
    if (g.align_corners) {
      slope = A(len - 1) / 2;
      x = (n + 1) * slope;
    } else {
      slope = A(len) / 2;
      x = ((n + 1) * A(len) - 1) / 2;
    }
    if (g.mode == GridSampleMode::kNearest) {
      x = nearbyint(x);  // half to even, as np.rint
      slope = 0;
    }
    const A lo = g.align_corners ? A(0) : A(-0.5), hi = g.align_corners ? A(len - 1) : A(len) - A(0.5);
    if (x < lo || x > hi) {
      if (g.padding == GridSamplePadding::kBorder) {
        x = x < 0 ? A(0) : (x > A(len - 1) ? A(len - 1) : x);
        slope = 0;
      } else if (g.padding == GridSamplePadding::kReflection) {
        A s;
        x = grid_sample_reflect(x, lo, hi, &s);
        slope *= s;
      }
    }
    // Far outside (zeros padding; or NaN): every tap reads a zero, and the index casts stay defined.
    if (!(x >= -4))
      x = -4;
    else if (x > A(len + 3))
      x = A(len + 3);
    t->dxdn[d] = slope;
    if (g.mode == GridSampleMode::kNearest) {
      t->count[d] = 1;
      t->idx[d][0] = grid_sample_index<A>(g, static_cast<int64_t>(x), len);
      t->w[d][0] = 1;
      t->dw[d][0] = 0;
      continue;
    }
    const A fl = floor(x);
    const A f = x - fl;
    const int64_t base = static_cast<int64_t>(fl);
    if (g.mode == GridSampleMode::kLinear) {
      t->count[d] = 2;
      t->idx[d][0] = grid_sample_index<A>(g, base, len);
      t->idx[d][1] = grid_sample_index<A>(g, base + 1, len);
      t->w[d][0] = 1 - f, t->w[d][1] = f;
      t->dw[d][0] = -1, t->dw[d][1] = 1;
    } else {
      t->count[d] = 4;
      for (int k = 0; k < 4; ++k) t->idx[d][k] = grid_sample_index<A>(g, base - 1 + k, len);
      grid_sample_cubic(f, t->w[d], t->dw[d]);
    }
  }
}

// Visits every tap of an output point that reads X (zeros padding skips the others):
// f(offset in one [D1, ..., Dr] plane, weight, partial) where partial[d] is the derivative of the
// weight with respect to axis d's source coordinate.
template <typename A, typename F>
OTTER_HD void grid_sample_visit(const GridSampleGeom& g, const GridSampleTaps<A>& t, F f) {
  int k[kMaxGridSampleDims] = {};
  for (;;) {
    int64_t off = 0;
    bool inside = true;
    for (int d = 0; d < g.r; ++d) {
      const int64_t i = t.idx[d][k[d]];
      inside = inside && i >= 0;
      off = off * g.in[d] + i;
    }
    if (inside) {
      A w = 1, partial[kMaxGridSampleDims];
      for (int d = 0; d < g.r; ++d) {
        partial[d] = t.dw[d][k[d]];
        for (int e = 0; e < g.r; ++e)
          if (e != d) partial[d] *= t.w[e][k[e]];
        w *= t.w[d][k[d]];
      }
      f(off, w, partial);
    }
    int d = g.r - 1;
    while (d >= 0 && ++k[d] == t.count[d]) k[d--] = 0;
    if (d < 0) return;
  }
}

// The mode and padding_mode attributes: the opset 16 names (bilinear, bicubic) and the opset 20
// ones (linear, cubic) both; false when the string is none of them.
inline bool grid_sample_mode(const std::string& s, GridSampleMode* m) {
  if (s == "bilinear" || s == "linear")
    *m = GridSampleMode::kLinear;
  else if (s == "nearest")
    *m = GridSampleMode::kNearest;
  else if (s == "bicubic" || s == "cubic")
    *m = GridSampleMode::kCubic;
  else
    return false;
  return true;
}
inline bool grid_sample_padding(const std::string& s, GridSamplePadding* p) {
  if (s == "zeros")
    *p = GridSamplePadding::kZeros;
  else if (s == "border")
    *p = GridSamplePadding::kBorder;
  else if (s == "reflection")
    *p = GridSamplePadding::kReflection;
  else
    return false;
  return true;
}

}  // namespace otter
