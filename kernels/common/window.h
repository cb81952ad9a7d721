// Window geometry of Conv and the pooling ops, shared by the CPU and CUDA kernels: the attributes
// (kernel_shape, strides, dilations, pads, auto_pad, ceil_mode) parsed once per node, and the
// resolved per-call geometry (output sizes, begin/end pads) for given spatial input sizes.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "graph/conv_transpose.h"
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

// The operands of a convolution: X [N, C, spatial...] and W [M, C / group, kernel...] of one dtype,
// checked against each other, the group count and the kernel_shape attribute (when given).
struct ConvShape {
  int64_t batch = 0, cin = 0, cout = 0, cg = 0;  // cg: input channels per group
  std::vector<int64_t> in, kernel;               // spatial dims of X and W
};

inline ConvShape check_conv_shape(const KernelContext& ctx, const Tensor& x, const Tensor& w, int64_t group,
                                  const std::vector<int64_t>& kernel_attr) {
  if (x.rank() < 3) ctx.error(str_cat("X must have rank >= 3 (N, C, spatial...), got ", x.describe()));
  if (w.rank() != x.rank()) ctx.error(str_cat("W ", w.describe(), " must have the rank of X ", x.describe()));
  if (w.dtype() != x.dtype()) ctx.error(str_cat("W has type ", w.describe(), ", X ", x.describe()));
  if (x.rank() - 2 > 8) ctx.error("more than 8 spatial axes");
  ConvShape c{x.dim(0), x.dim(1), w.dim(0), w.dim(1), {x.dims().begin() + 2, x.dims().end()},
              {w.dims().begin() + 2, w.dims().end()}};
  if (c.cin != c.cg * group)
    ctx.error(str_cat("channel mismatch: X ", x.describe(), " has ", c.cin, " channels, W ", w.describe(), " expects ",
                      c.cg, " per group x ", group, " groups"));
  if (c.cout % group != 0)
    ctx.error(str_cat("W ", w.describe(), ": ", c.cout, " output channels not divisible by group ", group));
  if (!kernel_attr.empty() && kernel_attr != c.kernel)
    ctx.error(str_cat("kernel_shape ", dims_to_string(kernel_attr), " differs from W ", w.describe()));
  return c;
}

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

// The geometry on three spatial axes (missing leading axes of size 1), as the pooling kernels
// walk it on both backends.
struct Window3 {
  int64_t in[3], out[3], k[3], s[3], d[3], pb[3], pe[3];
};

inline Window3 to_3d(const Geometry& g) {
  Window3 p{};
  const int shift = 3 - g.nsp;
  for (int j = 0; j < 3; ++j) {
    const int src = j - shift;
    const bool real = src >= 0;
    p.in[j] = real ? g.in[src] : 1;
    p.out[j] = real ? g.out[src] : 1;
    p.k[j] = real ? g.k[src] : 1;
    p.s[j] = real ? g.s[src] : 1;
    p.d[j] = real ? g.d[src] : 1;
    p.pb[j] = real ? g.pb[src] : 0;
    p.pe[j] = real ? g.pe[src] : 0;
  }
  return p;
}

// Checks a pooling gradient's X (1 to 3 spatial axes, dY's type) and dY (the pooling's output
// shape; `op` names the pooling) and resolves the window geometry.
inline Geometry check_pool_grad(const KernelContext& ctx, const Tensor& dy, const Tensor& x, const WindowAttrs& w,
                                const char* op) {
  if (x.rank() < 3 || x.rank() > 5 || x.dtype() != dy.dtype())
    ctx.error(str_cat("X ", x.describe(), " must have 1 to 3 spatial axes and dY's type ", dy.describe()));
  if (static_cast<int64_t>(w.kernel.size()) != x.rank() - 2)
    ctx.error(str_cat("kernel_shape has ", w.kernel.size(), " values for X ", x.describe()));
  const Geometry g = resolve_geometry(ctx, w, std::vector<int64_t>(x.dims().begin() + 2, x.dims().end()), w.kernel);
  std::vector<int64_t> ydims = {x.dim(0), x.dim(1)};
  ydims.insert(ydims.end(), g.out.begin(), g.out.end());
  if (dy.dims() != ydims)
    ctx.error(str_cat("dY ", dy.describe(), " does not match the ", op, " output shape ", dims_to_string(ydims)));
  return g;
}

// ConvTranspose(X [N, C, in...], W [C, M / group, kernel...], B? [M]) checked, and seen as the data
// gradient of a Conv over its output (graph/conv_transpose.h): g is that Conv's geometry (g.in: the
// ConvTranspose output's spatial sizes, g.out: X's), y_dims the ConvTranspose output's shape.
struct TransposeShape {
  Geometry g;
  std::vector<int64_t> y_dims;
};

inline TransposeShape check_conv_transpose(const KernelContext& ctx, const conv_transpose::Attrs& a) {
  const Tensor& x = ctx.input(0);
  const Tensor& w = ctx.input(1);
  if (x.rank() < 3) ctx.error(str_cat("X must have rank >= 3 (N, C, spatial...), got ", x.describe()));
  if (x.rank() - 2 > 8) ctx.error("more than 8 spatial axes");
  if (w.rank() != x.rank() || w.dtype() != x.dtype())
    ctx.error(str_cat("W ", w.describe(), " must have the rank and type of X ", x.describe()));
  if (w.dim(0) != x.dim(1) || w.dim(0) % a.group != 0)
    ctx.error(str_cat("channel mismatch: X ", x.describe(), " has ", x.dim(1), " channels, W ", w.describe(),
                      " must be [C, M / group, kernel...] with C divisible by group ", a.group));
  const std::vector<int64_t> in(x.dims().begin() + 2, x.dims().end()), kernel(w.dims().begin() + 2, w.dims().end());
  if (!a.kernel_shape.empty() && a.kernel_shape != kernel)
    ctx.error(str_cat("kernel_shape ", dims_to_string(a.kernel_shape), " differs from W ", w.describe()));
  const int64_t cout = w.dim(1) * a.group;
  if (ctx.has_input(2)) {
    const Tensor& b = ctx.input(2);
    if (b.rank() != 1 || b.dim(0) != cout || b.dtype() != x.dtype())
      ctx.error(str_cat("bias ", b.describe(), " must be [", cout, "] of the type of X"));
  }
  std::vector<conv_transpose::Axis> axes;
  const std::string err = conv_transpose::resolve(a, in, kernel, axes);
  if (!err.empty()) ctx.error(err);
  TransposeShape t;
  Geometry& g = t.g;
  g.nsp = static_cast<int>(in.size());
  g.out = in;
  g.k = kernel;
  g.s = a.strides.empty() ? std::vector<int64_t>(in.size(), 1) : a.strides;
  g.d = a.dilations.empty() ? std::vector<int64_t>(in.size(), 1) : a.dilations;
  t.y_dims = {x.dim(0), cout};
  for (const conv_transpose::Axis& ax : axes) {
    g.in.push_back(ax.out);
    g.pb.push_back(ax.pad_begin);
    g.pe.push_back(ax.pad_end);
    t.y_dims.push_back(ax.out);
  }
  for (int j = 0; j < g.nsp; ++j) {
    g.in_plane *= g.in[j];
    g.out_plane *= g.out[j];
    g.k_size *= g.k[j];
  }
  return t;
}

}  // namespace otter::window
