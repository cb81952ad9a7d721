// Window geometry of Conv and the pooling ops, shared by the CPU and CUDA kernels: the attributes
// (kernel_shape, strides, dilations, pads, auto_pad, ceil_mode) parsed once per node, and the
// resolved per-call geometry (output sizes, begin/end pads) for given spatial input sizes.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "graph/error.h"
#include "kernels/common/half.h"
#include "kernels/kernel.h"

namespace otter::window {

// Integer division rounding down / up (b > 0).
OTTER_HD int64_t floor_div(int64_t a, int64_t b) { return a >= 0 ? a / b : -((-a + b - 1) / b); }
OTTER_HD int64_t ceil_div(int64_t a, int64_t b) { return -floor_div(-a, b); }

// Window attributes shared by Conv and the pooling ops, parsed once per node.
struct WindowAttrs {
  std::string auto_pad = "NOTSET";
  std::vector<int64_t> kernel, strides, dilations, pads;
  bool ceil_mode = false;

  WindowAttrs(const Node& n, bool pool) {
    auto_pad = n.attr_s("auto_pad", "NOTSET");
    if (auto_pad != "NOTSET" && auto_pad != "VALID" && auto_pad != "SAME_UPPER" && auto_pad != "SAME_LOWER")
      fail(n.describe(), ": unknown auto_pad '", auto_pad, "'");
    kernel = n.attr_ints("kernel_shape");
    strides = n.attr_ints("strides");
    dilations = n.attr_ints("dilations");
    pads = n.attr_ints("pads");
    ceil_mode = n.attr_i("ceil_mode", 0) != 0;
    if (pool && kernel.empty()) fail(n.describe(), ": attribute 'kernel_shape' is required");
    for (int64_t v : kernel)
      if (v <= 0) fail(n.describe(), ": kernel_shape values must be positive");
    for (int64_t v : strides)
      if (v <= 0) fail(n.describe(), ": strides must be positive");
    for (int64_t v : dilations)
      if (v <= 0) fail(n.describe(), ": dilations must be positive");
    for (int64_t v : pads)
      if (v < 0) fail(n.describe(), ": pads must be >= 0");
  }
};

// Resolved geometry of one call: spatial sizes in and out, kernel, strides, dilations, begin pads.
struct Geometry {
  int nsp = 0;
  std::vector<int64_t> in, out, k, s, d, pb, pe;
  int64_t in_plane = 1, out_plane = 1, k_size = 1;
};

inline Geometry resolve_geometry(const KernelContext& ctx, const WindowAttrs& w, const std::vector<int64_t>& in,
                          const std::vector<int64_t>& kernel) {
  Geometry g;
  g.nsp = static_cast<int>(in.size());
  const size_t n = in.size();
  auto check_len = [&](const std::vector<int64_t>& v, size_t len, const char* what) {
    if (!v.empty() && v.size() != len)
      ctx.error(str_cat("attribute '", what, "' has ", v.size(), " values, expected ", len, " for ", n,
                        " spatial axes"));
  };
  check_len(w.strides, n, "strides");
  check_len(w.dilations, n, "dilations");
  check_len(w.pads, 2 * n, "pads");
  g.in = in;
  g.k = kernel;
  if (w.strides.empty()) g.s.assign(n, 1);
  else g.s = w.strides;
  if (w.dilations.empty()) g.d.assign(n, 1);
  else g.d = w.dilations;
  g.pb.assign(n, 0);
  g.pe.assign(n, 0);
  g.out.assign(n, 0);
  for (size_t i = 0; i < n; ++i) {
    const int64_t ek = (g.k[i] - 1) * g.d[i] + 1;  // effective (dilated) kernel extent
    if (w.auto_pad == "SAME_UPPER" || w.auto_pad == "SAME_LOWER") {
      g.out[i] = ceil_div(in[i], g.s[i]);
      const int64_t total = std::max<int64_t>(0, (g.out[i] - 1) * g.s[i] + ek - in[i]);
      const int64_t small = total / 2, large = total - small;
      g.pb[i] = w.auto_pad == "SAME_UPPER" ? small : large;
      g.pe[i] = total - g.pb[i];
    } else {
      if (w.auto_pad == "NOTSET" && !w.pads.empty()) {
        g.pb[i] = w.pads[i];
        g.pe[i] = w.pads[i + n];
      }
      const int64_t span = in[i] + g.pb[i] + g.pe[i] - ek;
      if (span < 0)
        ctx.error(str_cat("spatial axis ", i, " of size ", in[i], " (padded ", in[i] + g.pb[i] + g.pe[i],
                          ") is smaller than the kernel extent ", ek));
      if (w.ceil_mode && w.auto_pad == "NOTSET") {
        g.out[i] = ceil_div(span, g.s[i]) + 1;
        // The last window must start inside the input or the left padding (as PyTorch and ONNX's
        // reference implementation do).
        if ((g.out[i] - 1) * g.s[i] >= in[i] + g.pb[i]) --g.out[i];
      } else {
        g.out[i] = span / g.s[i] + 1;
      }
    }
    g.in_plane *= in[i];
    g.out_plane *= g.out[i];
    g.k_size *= g.k[i];
  }
  return g;
}

}  // namespace otter::window
