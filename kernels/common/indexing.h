// Index arithmetic of the data-movement ops, shared by forward and gradient kernels on both
// backends: the clamped range of one Slice axis and the source position of one Pad output.
#pragma once

#include <cstdint>

#include "kernels/common/half.h"

namespace otter {

// One sliced axis: elements start, start + step, ... (len of them) of an axis of size dim, after
// ONNX's rules (negative starts/ends count from the end, then clamp; step != 0).
struct SliceAxis {
  int64_t start, step, len;
};

OTTER_HD SliceAxis resolve_slice_axis(int64_t start, int64_t end, int64_t step, int64_t dim) {
  if (step < -INT64_MAX) step = -INT64_MAX;
  if (start < 0) start += dim;
  if (end < 0) end += dim;
  int64_t len;
  if (step > 0) {
    start = start < 0 ? 0 : (start > dim ? dim : start);
    end = end < 0 ? 0 : (end > dim ? dim : end);
    len = end > start ? 1 + (end - start - 1) / step : 0;
  } else {
    start = start < 0 ? 0 : (start > dim - 1 ? dim - 1 : start);
    end = end < -1 ? -1 : (end > dim - 1 ? dim - 1 : end);
    len = start > end ? 1 + (start - end - 1) / (-step) : 0;
  }
  return {start, step, len};
}

enum class PadMode : uint8_t { kConstant, kReflect, kEdge, kWrap };

// Input position that Pad's output position `s` (counted from the first input element, so
// negative in the leading pad) copies along an axis of size n, or -1 for the constant value.
OTTER_HD int64_t pad_source(PadMode mode, int64_t s, int64_t n) {
  if (s >= 0 && s < n) return s;
  switch (mode) {
    case PadMode::kConstant: return -1;
    case PadMode::kEdge: return s < 0 ? 0 : n - 1;
    case PadMode::kWrap: return ((s % n) + n) % n;
    case PadMode::kReflect: break;
  }
  if (n == 1) return 0;
  const int64_t period = 2 * (n - 1);
  const int64_t m = ((s % period) + period) % period;
  return m >= n ? period - m : m;
}

}  // namespace otter
