// Window geometry of the CPU convolution and pooling kernels (see window.h).
#include "kernels/cpu/window.h"

namespace otter::cpu {

Geometry resolve_geometry(const KernelContext& ctx, const WindowAttrs& w, const std::vector<int64_t>& in,
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
  g.s = w.strides.empty() ? std::vector<int64_t>(n, 1) : w.strides;
  g.d = w.dilations.empty() ? std::vector<int64_t>(n, 1) : w.dilations;
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

Pool3 make_pool3(const Geometry& g) {
  Pool3 p;
  const int shift = 3 - g.nsp;
  for (int j = 0; j < 3; ++j) {
    const int src = j - shift;
    const bool real = src >= 0;
    p.in[j] = real ? g.in[src] : 1;
    p.out[j] = real ? g.out[src] : 1;
    p.s[j] = real ? g.s[src] : 1;
    p.d[j] = real ? g.d[src] : 1;
    p.pb[j] = real ? g.pb[src] : 0;
    const int64_t k = real ? g.k[src] : 1, pe = real ? g.pe[src] : 0;
    p.klo[j].resize(p.out[j]);
    p.khi[j].resize(p.out[j]);
    p.cnt_pad[j].resize(p.out[j]);
    for (int64_t o = 0; o < p.out[j]; ++o) {
      const int64_t start = o * p.s[j] - p.pb[j];
      // k valid when 0 <= start + k*d < in
      const int64_t lo = std::clamp<int64_t>(ceil_div(-start, p.d[j]), 0, k);
      const int64_t hi = std::clamp<int64_t>(floor_div(p.in[j] - 1 - start, p.d[j]) + 1, lo, k);
      p.klo[j][o] = lo;
      p.khi[j][o] = hi;
      // positions inside [-pb, in + pe): the divisor of count_include_pad
      const int64_t plo = std::clamp<int64_t>(ceil_div(-p.pb[j] - start, p.d[j]), 0, k);
      const int64_t phi = std::clamp<int64_t>(floor_div(p.in[j] + pe - 1 - start, p.d[j]) + 1, plo, k);
      p.cnt_pad[j][o] = phi - plo;
    }
  }
  return p;
}

}  // namespace otter::cpu
