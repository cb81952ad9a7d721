// Window geometry of the CPU convolution and pooling kernels (see window.h).
#include "kernels/cpu/window.h"

namespace otter::cpu {

Pool3 make_pool3(const Geometry& g) {
  Pool3 p;
  static_cast<window::Window3&>(p) = window::to_3d(g);
  for (int j = 0; j < 3; ++j) {
    const int64_t k = p.k[j], pe = p.pe[j];
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
