// Window geometry shared by the CPU convolution and pooling kernels and their gradients: attribute
// parsing, output sizes, per-axis valid ranges, im2col / col2im and a reusable scratch buffer.
#pragma once

#include <omp.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

#include "kernels/common/window.h"
#include "kernels/cpu/gemm.h"
#include "kernels/cpu/gemm_bf16.h"
#include "kernels/cpu/scratch.h"
#include "kernels/kernel.h"

namespace otter::cpu {

// The window attributes and per-call geometry (kernels/common/window.h, shared with CUDA).
using window::ceil_div;
using window::floor_div;
using window::Geometry;
using window::resolve_geometry;
using window::WindowAttrs;

// Per-axis tables for one kernel offset along axis j: output positions o in [lo, hi) read input
// o*s + off, the others fall into padding.
struct AxisRange {
  int64_t off, lo, hi;
};
inline AxisRange axis_range(const Geometry& g, int j, int64_t kj) {
  const int64_t off = kj * g.d[j] - g.pb[j];
  const int64_t lo = std::clamp<int64_t>(ceil_div(-off, g.s[j]), 0, g.out[j]);
  const int64_t hi = std::clamp<int64_t>(floor_div(g.in[j] - 1 - off, g.s[j]) + 1, lo, g.out[j]);
  return {off, lo, hi};
}

// For one kernel offset (kidx, a flat index over the kernel window), visits each output row (all
// spatial axes but the last fixed) with f(out_row, in_row, valid): out_row is the flat output index
// of the row's first element; in_row the flat input index that output position 0 of the row would
// read (only meaningful when valid). Output positions [lo, hi) of the last axis (from `last`) read
// in_row + o * s_last; the rest of a valid row, and all of an invalid row, are padding.
template <class F>
void for_each_row(const Geometry& g, int64_t kidx, const AxisRange& last, F&& f) {
  const int n = g.nsp;
  // Decompose kidx into per-axis kernel positions.
  int64_t kpos[8];
  for (int j = n - 1; j >= 0; --j) {
    kpos[j] = kidx % g.k[j];
    kidx /= g.k[j];
  }
  if (n == 1) {
    f(int64_t{0}, last.off, true);
    return;
  }
  int64_t off[8], in_stride[8];
  in_stride[n - 1] = 1;
  for (int j = n - 2; j >= 0; --j) in_stride[j] = in_stride[j + 1] * g.in[j + 1];
  for (int j = 0; j < n - 1; ++j) off[j] = kpos[j] * g.d[j] - g.pb[j];
  const int64_t olast = g.out[n - 1];
  const int64_t rows = g.out_plane / std::max<int64_t>(olast, 1);
  int64_t o[8] = {0};
  for (int64_t r = 0; r < rows; ++r) {
    bool valid = true;
    int64_t in_row = last.off;
    for (int j = 0; j < n - 1; ++j) {
      const int64_t i = o[j] * g.s[j] + off[j];
      if (i < 0 || i >= g.in[j]) { valid = false; break; }
      in_row += i * in_stride[j];
    }
    f(r * olast, in_row, valid);
    for (int j = n - 2; j >= 0; --j) {
      if (++o[j] < g.out[j]) break;
      o[j] = 0;
    }
  }
}

// im2col of one image group: col[(c*k_size + kidx), out_plane] for channels [0, channels) of x.
// Rows of col are `ld` elements apart (default out_plane), so several images can fill side-by-side
// column blocks of one matrix.
template <typename T>
void im2col(const Geometry& g, const T* x, int64_t channels, T* col, bool parallel, int64_t ld = -1) {
  const int64_t rows = channels * g.k_size, L = ld < 0 ? g.out_plane : ld, olast = g.out[g.nsp - 1];
  const int64_t slast = g.s[g.nsp - 1];
  const int64_t klast = g.k[g.nsp - 1];
#pragma omp parallel for schedule(static) if (parallel && rows * L > 32768)
  for (int64_t row = 0; row < rows; ++row) {
    const int64_t c = row / g.k_size, kidx = row % g.k_size;
    const T* xc = x + c * g.in_plane;
    T* dst = col + row * L;
    const AxisRange last = axis_range(g, g.nsp - 1, kidx % klast);
    for_each_row(g, kidx, last, [&](int64_t out_row, int64_t in_row, bool valid) {
      T* d = dst + out_row;
      if (!valid) {
        std::fill(d, d + olast, T(0));
        return;
      }
      std::fill(d, d + last.lo, T(0));
      const T* s = xc + in_row;
      if (slast == 1) {
        std::copy(s + last.lo, s + last.hi, d + last.lo);
      } else {
        for (int64_t o = last.lo; o < last.hi; ++o) d[o] = s[o * slast];
      }
      std::fill(d + last.hi, d + olast, T(0));
    });
  }
}

// col2im, the adjoint of im2col: adds col[(c*k_size + kidx), out_plane] (rows `ld` apart) into the
// channels [0, channels) of x. Channels run in parallel; the kernel offsets of one channel, which
// overlap in x, run in order.
template <typename T>
void col2im_add(const Geometry& g, const T* col, int64_t channels, T* x, bool parallel, int64_t ld = -1) {
  const int64_t L = ld < 0 ? g.out_plane : ld;
  const int64_t slast = g.s[g.nsp - 1], klast = g.k[g.nsp - 1];
#pragma omp parallel for schedule(static) if (parallel && channels * g.k_size * g.out_plane > 32768)
  for (int64_t c = 0; c < channels; ++c) {
    T* xc = x + c * g.in_plane;
    for (int64_t kidx = 0; kidx < g.k_size; ++kidx) {
      const T* src = col + (c * g.k_size + kidx) * L;
      const AxisRange last = axis_range(g, g.nsp - 1, kidx % klast);
      for_each_row(g, kidx, last, [&](int64_t out_row, int64_t in_row, bool valid) {
        if (!valid) return;
        const T* s = src + out_row;
        T* d = xc + in_row;
        for (int64_t o = last.lo; o < last.hi; ++o) d[o * slast] += s[o];
      });
    }
  }
}

// The kernel offsets (flat over a 2-D window) that read the input at some output position; the
// others only ever see padding (a 3x3 kernel with padding 1 over a 1x1 plane reads through its
// centre alone). Convolutions drop the dead offsets from im2col and the GEMMs. Not 2-D: all.
inline std::vector<int64_t> live_taps(const Geometry& g) {
  std::vector<int64_t> taps;
  if (g.nsp != 2) {
    for (int64_t t = 0; t < g.k_size; ++t) taps.push_back(t);
    return taps;
  }
  for (int64_t kh = 0; kh < g.k[0]; ++kh) {
    const AxisRange h = axis_range(g, 0, kh);
    for (int64_t kw = 0; kw < g.k[1]; ++kw) {
      const AxisRange w = axis_range(g, 1, kw);
      if (h.lo < h.hi && w.lo < w.hi) taps.push_back(kh * g.k[1] + kw);
    }
  }
  return taps;
}

// Per kernel offset of a 2-D window: the input row offset and the output columns that read
// the input (the rest read padding).
struct Tap2d {
  int64_t h_off;
  AxisRange w;
};
inline std::vector<Tap2d> tap_table(const Geometry& g, const std::vector<int64_t>& taps) {
  std::vector<Tap2d> t;
  t.reserve(taps.size());
  for (int64_t k : taps) t.push_back({(k / g.k[1]) * g.d[0] - g.pb[0], axis_range(g, 1, k % g.k[1])});
  return t;
}

// The loop bounds the 2-D im2col and its adjoint share: the tap table of `taps`, their count, the
// output and input plane sizes and the strides.
struct Loop2d {
  std::vector<Tap2d> tt;
  int64_t nt, oh_n, ow_n, ih_n, iw_n, sh, sw;
  Loop2d(const Geometry& g, const std::vector<int64_t>& taps)
      : tt(tap_table(g, taps)),
        nt(static_cast<int64_t>(taps.size())),
        oh_n(g.out[0]),
        ow_n(g.out[1]),
        ih_n(g.in[0]),
        iw_n(g.in[1]),
        sh(g.s[0]),
        sw(g.s[1]) {}
};

// 2-D im2col over the kernel offsets `taps` (all of them, or live_taps): col[(c*taps.size() + j),
// out_plane] for offset taps[j], rows `ld` apart, so several images can fill side-by-side column
// blocks of one matrix. Plain loops over output rows, the ranges computed once per call.
template <typename T>
void im2col_2d(const Geometry& g, const T* x, int64_t channels, T* col, const std::vector<int64_t>& taps,
               bool parallel, int64_t ld) {
  const Loop2d l(g, taps);
#pragma omp parallel for collapse(2) schedule(static) if (parallel && channels * l.nt * g.out_plane > 32768)
  for (int64_t c = 0; c < channels; ++c) {
    for (int64_t j = 0; j < l.nt; ++j) {
      const T* xc = x + c * g.in_plane;
      T* dst = col + (c * l.nt + j) * ld;
      const AxisRange& w = l.tt[j].w;
      for (int64_t oh = 0; oh < l.oh_n; ++oh) {
        T* d = dst + oh * l.ow_n;
        const int64_t ih = oh * l.sh + l.tt[j].h_off;
        if (ih < 0 || ih >= l.ih_n) {
          for (int64_t o = 0; o < l.ow_n; ++o) d[o] = T(0);
          continue;
        }
        const T* src = xc + ih * l.iw_n + w.off;
        for (int64_t o = 0; o < w.lo; ++o) d[o] = T(0);
        if (l.sw == 1) {
          for (int64_t o = w.lo; o < w.hi; ++o) d[o] = src[o];
        } else {
          for (int64_t o = w.lo; o < w.hi; ++o) d[o] = src[o * l.sw];
        }
        for (int64_t o = w.hi; o < l.ow_n; ++o) d[o] = T(0);
      }
    }
  }
}

// The adjoint of im2col_2d: adds col's rows into channels [0, channels) of x. Channels run in
// parallel; the offsets of one channel, which overlap in x, run in order.
template <typename T>
void col2im_add_2d(const Geometry& g, const T* col, int64_t channels, T* x, const std::vector<int64_t>& taps,
                   bool parallel, int64_t ld) {
  const Loop2d l(g, taps);
#pragma omp parallel for schedule(static) if (parallel && channels * l.nt * g.out_plane > 32768)
  for (int64_t c = 0; c < channels; ++c) {
    T* xc = x + c * g.in_plane;
    for (int64_t j = 0; j < l.nt; ++j) {
      const T* src = col + (c * l.nt + j) * ld;
      const AxisRange& w = l.tt[j].w;
      for (int64_t oh = 0; oh < l.oh_n; ++oh) {
        const int64_t ih = oh * l.sh + l.tt[j].h_off;
        if (ih < 0 || ih >= l.ih_n) continue;
        const T* s = src + oh * l.ow_n;
        T* d = xc + ih * l.iw_n + w.off;
        if (l.sw == 1) {
          for (int64_t o = w.lo; o < w.hi; ++o) d[o] += s[o];
        } else {
          for (int64_t o = w.lo; o < w.hi; ++o) d[o * l.sw] += s[o];
        }
      }
    }
  }
}

// im2col / col2im of a convolution over its kernel offsets `taps`: the 2-D loops for images,
// the N-d ones otherwise (where taps are always all offsets, see live_taps).
template <typename T>
void conv_im2col(const Geometry& g, const T* x, int64_t channels, T* col, const std::vector<int64_t>& taps,
                 bool parallel, int64_t ld) {
  if (g.nsp == 2) im2col_2d(g, x, channels, col, taps, parallel, ld);
  else im2col(g, x, channels, col, parallel, ld);
}
template <typename T>
void conv_col2im_add(const Geometry& g, const T* col, int64_t channels, T* x, const std::vector<int64_t>& taps,
                     bool parallel, int64_t ld) {
  if (g.nsp == 2) col2im_add_2d(g, col, channels, x, taps, parallel, ld);
  else col2im_add(g, col, channels, x, parallel, ld);
}

// The convolutions' GEMMs over their storage type S: float and double through BLAS (gemm.h), the
// bits of bfloat16 (uint16_t) on the bf16 GEMM (gemm_bf16.h), whose products are exact and whose
// sums and result C are float32 (conv_acc_t), rounded once by the caller.
template <typename S>
using conv_acc_t = std::conditional_t<std::is_same_v<S, uint16_t>, float, S>;

template <typename S>
void conv_gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const S* a, int64_t lda, const S* b,
               int64_t ldb, conv_acc_t<S> beta, conv_acc_t<S>* c, int64_t ldc) {
  if constexpr (std::is_same_v<S, uint16_t>)
    gemm_bf16(ta, tb, m, n, k, 1.f, a, lda, b, ldb, beta, c, ldc);
  else
    gemm<S>(ta, tb, m, n, k, S(1), a, lda, b, ldb, beta, c, ldc);
}

// W_live[m, c*nt + j] = W[m, c, taps[j]]: the weights of the live kernel offsets, W being
// [rows, cg, k_size] (rows = output channels).
template <typename T>
void gather_tap_weights(const T* w, int64_t rows, int64_t cg, int64_t k_size, const std::vector<int64_t>& taps,
                        T* out) {
  const int64_t nt = static_cast<int64_t>(taps.size());
  for (int64_t m = 0; m < rows; ++m)
    for (int64_t c = 0; c < cg; ++c)
      for (int64_t j = 0; j < nt; ++j) out[(m * cg + c) * nt + j] = w[(m * cg + c) * k_size + taps[j]];
}

// Pooling geometry padded to three spatial axes (leading axes of size 1), with per-axis tables of
// the valid kernel positions for each output position.
struct Pool3 : window::Window3 {
  std::vector<int64_t> klo[3], khi[3], cnt_pad[3];  // valid k range; k count inside the padded extent
};

Pool3 make_pool3(const Geometry& g);

// One output row of 2x2, stride-2 max pooling: for ow in [0, n), the first of the window's four
// values top[2ow], top[2ow+1], bottom[2ow], bottom[2ow+1] that is larger than every earlier one
// and than `lowest` (NaN winning), as the generic loops compare: best[ow] its value (lowest when
// none is), tap[ow] its position 0..3 or -1. Pairs first, then the pairs' winners: each choice
// keeps the earlier value unless the later one is larger or is the first NaN, so the result is
// the sequential scan's, with two short dependency chains instead of one of four.
template <typename T>
inline void max_pool_row_2x2(const T* top, const T* bottom, int64_t n, T lowest, T* best, int* tap) {
  auto later_wins = [](T earlier, T later) { return (later > earlier) | ((later != later) & (earlier == earlier)); };
  int64_t ow = 0;
#if defined(__SSE2__)
  if constexpr (std::is_same_v<T, float>) {
    // Four outputs at a time with SSE2 compares and masks. Written as scalar selects, the compiler
    // emitted a branch per choice, and which tap wins is unpredictable on real data: the
    // mispredictions made MaxPool and MaxPoolGrad of the digits CNN take 10 times as long.
    const __m128 lo = _mm_set1_ps(lowest);
    const __m128i one = _mm_set1_epi32(1), two = _mm_set1_epi32(2);
    auto wins = [](__m128 earlier, __m128 later) {
      return _mm_or_ps(_mm_cmpgt_ps(later, earlier), _mm_and_ps(_mm_cmpunord_ps(later, later), _mm_cmpord_ps(earlier, earlier)));
    };
    auto pick = [](__m128 mask, __m128 yes, __m128 no) { return _mm_or_ps(_mm_and_ps(mask, yes), _mm_andnot_ps(mask, no)); };
    for (; ow + 4 <= n; ow += 4) {
      const __m128 t0 = _mm_loadu_ps(top + 2 * ow), t1 = _mm_loadu_ps(top + 2 * ow + 4);
      const __m128 b0 = _mm_loadu_ps(bottom + 2 * ow), b1 = _mm_loadu_ps(bottom + 2 * ow + 4);
      const __m128 a = _mm_shuffle_ps(t0, t1, _MM_SHUFFLE(2, 0, 2, 0)), b = _mm_shuffle_ps(t0, t1, _MM_SHUFFLE(3, 1, 3, 1));
      const __m128 c = _mm_shuffle_ps(b0, b1, _MM_SHUFFLE(2, 0, 2, 0)), d = _mm_shuffle_ps(b0, b1, _MM_SHUFFLE(3, 1, 3, 1));
      const __m128 ab = wins(a, b), cd = wins(c, d);
      const __m128 m0 = pick(ab, b, a), m1 = pick(cd, d, c);
      const __m128 right = wins(m0, m1);
      const __m128 m = pick(right, m1, m0);
      const __m128i iab = _mm_and_si128(_mm_castps_si128(ab), one);
      const __m128i icd = _mm_add_epi32(two, _mm_and_si128(_mm_castps_si128(cd), one));
      const __m128i r = _mm_castps_si128(right);
      __m128i t = _mm_or_si128(_mm_and_si128(r, icd), _mm_andnot_si128(r, iab));
      const __m128 taken = wins(lo, m);
      const __m128i tk = _mm_castps_si128(taken);
      t = _mm_or_si128(_mm_and_si128(tk, t), _mm_andnot_si128(tk, _mm_set1_epi32(-1)));
      _mm_storeu_ps(best + ow, pick(taken, m, lo));
      _mm_storeu_si128(reinterpret_cast<__m128i*>(tap + ow), t);
    }
  }
#endif
  for (; ow < n; ++ow) {
    const T a = top[2 * ow], b = top[2 * ow + 1], c = bottom[2 * ow], d = bottom[2 * ow + 1];
    const bool ab = later_wins(a, b), cd = later_wins(c, d);
    const T m0 = ab ? b : a, m1 = cd ? d : c;
    const bool right = later_wins(m0, m1);
    const T m = right ? m1 : m0;
    const int t = right ? 2 + static_cast<int>(cd) : static_cast<int>(ab);
    const bool taken = later_wins(lowest, m);
    best[ow] = taken ? m : lowest;
    tap[ow] = taken ? t : -1;
  }
}

// 2-D max pooling of one plane (a Pool3 geometry whose first axis is 1): calls
// f(output index, flat input index of the window's first maximum, or -1 for an empty window).
// NaN wins, as in the generic loops and PyTorch.
template <typename T, class F>
void max_pool_plane_2d(const Pool3& p, const T* xp, F&& f) {
  const int64_t oh_n = p.out[1], ow_n = p.out[2], iw_n = p.in[2];
  const int64_t sh = p.s[1], sw = p.s[2], dh = p.d[1], dw = p.d[2], ph = p.pb[1], pw = p.pb[2];
  int64_t oi = 0;
  // The common 2x2 window, stride 2, no padding or dilation: every window is whole, so the four
  // taps are compared a row of outputs at a time (max_pool_row_2x2) without per-window bounds.
  if (p.k[1] == 2 && p.k[2] == 2 && sh == 2 && sw == 2 && dh == 1 && dw == 1 && ph == 0 && pw == 0 &&
      2 * oh_n <= p.in[1] && 2 * ow_n <= iw_n) {
    const T lowest = std::numeric_limits<T>::has_infinity ? -std::numeric_limits<T>::infinity()
                                                          : std::numeric_limits<T>::lowest();
    constexpr int64_t kChunk = 64;
    T best[kChunk];
    int tap[kChunk];
    for (int64_t oh = 0; oh < oh_n; ++oh) {
      const int64_t r0 = 2 * oh * iw_n;
      for (int64_t ow0 = 0; ow0 < ow_n; ow0 += kChunk) {
        const int64_t n = std::min(kChunk, ow_n - ow0);
        max_pool_row_2x2(xp + r0 + 2 * ow0, xp + r0 + iw_n + 2 * ow0, n, lowest, best, tap);
        for (int64_t j = 0; j < n; ++j, ++oi) {
          const int t = tap[j];
          f(oi, t < 0 ? int64_t{-1} : r0 + (t >> 1) * iw_n + 2 * (ow0 + j) + (t & 1), best[j]);
        }
      }
    }
    return;
  }
  for (int64_t oh = 0; oh < oh_n; ++oh) {
    const int64_t h0 = oh * sh - ph, kh_lo = p.klo[1][oh], kh_hi = p.khi[1][oh];
    for (int64_t ow = 0; ow < ow_n; ++ow, ++oi) {
      const int64_t w0 = ow * sw - pw, kw_lo = p.klo[2][ow], kw_hi = p.khi[2][ow];
      T best = std::numeric_limits<T>::has_infinity ? -std::numeric_limits<T>::infinity()
                                                    : std::numeric_limits<T>::lowest();
      int64_t bi = -1;
      for (int64_t kh = kh_lo; kh < kh_hi; ++kh) {
        const int64_t row = (h0 + kh * dh) * iw_n + w0;
        for (int64_t kw = kw_lo; kw < kw_hi; ++kw) {
          const int64_t i = row + kw * dw;
          const T v = xp[i];
          if (v > best || (v != v && best == best)) {
            best = v;
            bi = i;
          }
        }
      }
      f(oi, bi, best);
    }
  }
}

// One pooling window of a Pool3 geometry: output position (o0, o1, o2) and its valid kernel ranges.
struct PoolWindow {
  int64_t o[3], start[3], lo[3], hi[3];
  int64_t valid() const { return (hi[0] - lo[0]) * (hi[1] - lo[1]) * (hi[2] - lo[2]); }
  // Positions inside the padded extent (the divisor of AveragePool's count_include_pad).
  int64_t padded(const Pool3& p) const { return p.cnt_pad[0][o[0]] * p.cnt_pad[1][o[1]] * p.cnt_pad[2][o[2]]; }
};

// Calls f(oi, window) for every output position oi of one plane, in the forward kernel's order.
template <class F>
void for_each_pool_window(const Pool3& p, F&& f) {
  int64_t oi = 0;
  PoolWindow w;
  for (int64_t o0 = 0; o0 < p.out[0]; ++o0)
    for (int64_t o1 = 0; o1 < p.out[1]; ++o1)
      for (int64_t o2 = 0; o2 < p.out[2]; ++o2, ++oi) {
        w.o[0] = o0;
        w.o[1] = o1;
        w.o[2] = o2;
        for (int j = 0; j < 3; ++j) {
          w.start[j] = w.o[j] * p.s[j] - p.pb[j];
          w.lo[j] = p.klo[j][w.o[j]];
          w.hi[j] = p.khi[j][w.o[j]];
        }
        f(oi, w);
      }
}

// Calls g(i) with the in-plane flat index of every valid input position of window w, in order.
template <class G>
void for_each_window_input(const Pool3& p, const PoolWindow& w, G&& g) {
  for (int64_t k0 = w.lo[0]; k0 < w.hi[0]; ++k0) {
    const int64_t i0 = w.start[0] + k0 * p.d[0];
    for (int64_t k1 = w.lo[1]; k1 < w.hi[1]; ++k1) {
      const int64_t row = (i0 * p.in[1] + w.start[1] + k1 * p.d[1]) * p.in[2];
      for (int64_t k2 = w.lo[2]; k2 < w.hi[2]; ++k2) g(row + w.start[2] + k2 * p.d[2]);
    }
  }
}

}  // namespace otter::cpu
