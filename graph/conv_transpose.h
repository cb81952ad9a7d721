// ConvTranspose's output arithmetic, shared by its shape inference and gradient rule (graph/ops/
// conv_transpose.cc) and its CPU and CUDA kernels: from the input's spatial sizes and the node's
// attributes (strides, dilations, pads, auto_pad, output_padding, output_shape), the output size
// and the begin / end padding of each spatial axis, as ONNX's ConvTranspose defines them:
//   out = stride * (in - 1) + output_padding + dilation * (k - 1) + 1 - pad_begin - pad_end
// With output_shape (or SAME_*), the pads come from total = stride * (in - 1) + output_padding +
// dilation * (k - 1) + 1 - out: SAME_UPPER puts the odd unit at the end, SAME_LOWER and an explicit
// output_shape at the beginning. A negative total (an output_shape beyond the full result) pads
// nothing and extends the output at the end with positions no input reaches (bias only), as ONNX's
// test data expects.
//
// The kernels compute ConvTranspose as the data gradient of a Conv whose input is the ConvTranspose
// output: that Conv has the same strides, dilations and pads, and reads `out` positions to give
// `in` ones; `extra` counts the output positions past the last one the Conv's windows cover
// (output_padding and the extension above).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "graph/error.h"
#include "graph/ir.h"

namespace otter::conv_transpose {

struct Axis {
  int64_t out = 0, pad_begin = 0, pad_end = 0, extra = 0;
};

// The node's ConvTranspose attributes, read once.
struct Attrs {
  std::vector<int64_t> strides, dilations, pads, output_padding, output_shape, kernel_shape;
  std::string auto_pad = "NOTSET";
  int64_t group = 1;

  explicit Attrs(const Node& n)
      : strides(n.attr_ints("strides")),
        dilations(n.attr_ints("dilations")),
        pads(n.attr_ints("pads")),
        output_padding(n.attr_ints("output_padding")),
        output_shape(n.attr_ints("output_shape")),
        kernel_shape(n.attr_ints("kernel_shape")),
        auto_pad(n.attr_s("auto_pad", "NOTSET")),
        group(n.attr_i("group", 1)) {}

  // Whether the pads follow from the input sizes (output_shape given), so that they are known only
  // where the input's spatial sizes are.
  bool pads_need_input() const { return !output_shape.empty(); }
};

// One value per spatial axis of `v` (empty: `dflt`); "" or the error.
inline std::string per_axis(const std::vector<int64_t>& v, size_t n, int64_t dflt, int64_t min, const char* name,
                            std::vector<int64_t>& out) {
  if (v.empty()) {
    out.assign(n, dflt);
    return "";
  }
  if (v.size() != n)
    return str_cat("attribute '", name, "' has ", v.size(), " values, expected ", n, " (one per spatial axis)");
  for (int64_t x : v)
    if (x < min) return str_cat("attribute '", name, "' has value ", x, ", must be >= ", min);
  out = v;
  return "";
}

// The output size and pads of each spatial axis for input sizes `in` and kernel sizes `kernel`
// (all known); "" or an error naming the attribute at fault.
inline std::string resolve(const Attrs& a, const std::vector<int64_t>& in, const std::vector<int64_t>& kernel,
                           std::vector<Axis>& axes) {
  const size_t n = in.size();
  std::vector<int64_t> s, d, op, pads;
  for (const std::string& e :
       {per_axis(a.strides, n, 1, 1, "strides", s), per_axis(a.dilations, n, 1, 1, "dilations", d),
        per_axis(a.output_padding, n, 0, 0, "output_padding", op)})
    if (!e.empty()) return e;
  if (!a.pads.empty() && a.pads.size() != 2 * n)
    return str_cat("attribute 'pads' has ", a.pads.size(), " values, expected ", 2 * n);
  for (int64_t p : a.pads)
    if (p < 0) return str_cat("attribute 'pads' has value ", p, ", must be >= 0");
  if (a.auto_pad != "NOTSET" && a.auto_pad != "SAME_UPPER" && a.auto_pad != "SAME_LOWER" && a.auto_pad != "VALID")
    return "attribute 'auto_pad' must be NOTSET, SAME_UPPER, SAME_LOWER or VALID, got '" + a.auto_pad + "'";
  std::vector<int64_t> shape = a.output_shape;
  if (shape.size() == n + 2) shape.erase(shape.begin(), shape.begin() + 2);  // [N, C, spatial...] also accepted
  if (!shape.empty() && shape.size() != n)
    return str_cat("attribute 'output_shape' has ", a.output_shape.size(), " values, expected ", n);
  const bool same = a.auto_pad == "SAME_UPPER" || a.auto_pad == "SAME_LOWER";
  axes.assign(n, Axis{});
  for (size_t i = 0; i < n; ++i) {
    if (op[i] >= s[i] && op[i] >= d[i])
      return str_cat("output_padding ", op[i], " on spatial axis ", i, " must be smaller than the stride ", s[i],
                     " or the dilation ", d[i]);
    const int64_t full = s[i] * (in[i] - 1) + op[i] + d[i] * (kernel[i] - 1) + 1;
    Axis& x = axes[i];
    if (!shape.empty() || same) {
      x.out = shape.empty() ? in[i] * s[i] : shape[i];
      if (x.out < 0) return str_cat("output_shape has negative size ", x.out);
      const int64_t total = full - x.out;
      if (total >= 0) {
        const int64_t small = total / 2;
        x.pad_begin = a.auto_pad == "SAME_UPPER" ? small : total - small;
        x.pad_end = total - x.pad_begin;
      }
    } else {
      if (a.auto_pad == "NOTSET" && !a.pads.empty()) {
        x.pad_begin = a.pads[i];
        x.pad_end = a.pads[i + n];
      }
      x.out = full - x.pad_begin - x.pad_end;
      if (x.out < 0)
        return str_cat("spatial axis ", i, ": pads ", x.pad_begin, "+", x.pad_end, " exceed the full output size ",
                       full);
    }
    x.extra = x.out + x.pad_begin + x.pad_end - (full - op[i]);
  }
  return "";
}

}  // namespace otter::conv_transpose
