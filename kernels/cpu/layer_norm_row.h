// One row of LayerNormalization over its last `cols` values, shared by LayerNormalization
// (kernels/cpu/nn.cc) and ai.otter.AddLayerNorm (kernels/cpu/add_layer_norm.cc) so that the fused
// op normalises the sum with the very same operations, bit for bit.
#pragma once

#include <omp.h>

#include <cmath>
#include <cstdint>
#include <type_traits>

#include "kernels/cpu/isa.h"
#include "kernels/cpu/lane_sum.h"

namespace otter::cpu {

// q = (p - mean) * inv * scale (+ bias) with the row's mean and inv = 1 / sqrt(var + eps), which
// are returned rounded to A (the statistics' type). Sums in double whatever A is (long rows in
// float lose digits); float rows run through the ISA variants (all give the same bits).
template <typename T, typename A>
inline void layer_norm_row(const T* p, T* q, int64_t cols, const T* pscale, const T* pbias, A eps, A& m_out,
                           A& inv_out) {
  double md = 0, ss = 0;
  cpu::isa_dispatch_if<std::is_same_v<T, float>>([&] {
    md = cols ? cpu::lane_sum(cols, [&](int64_t i) { return static_cast<double>(p[i]); }) / static_cast<double>(cols)
              : 0.0;
    ss = cpu::lane_sum(cols, [&](int64_t i) {
      const double dv = static_cast<double>(p[i]) - md;
      return dv * dv;
    });
  });
  const double var = cols ? ss / static_cast<double>(cols) : 0.0;
  const A m = static_cast<A>(md);
  const A inv = static_cast<A>(1.0 / std::sqrt(var + static_cast<double>(eps)));
  cpu::isa_dispatch_if<std::is_same_v<T, float>>([&] {
    if (pbias) {
      for (int64_t i = 0; i < cols; ++i) q[i] = static_cast<T>((static_cast<A>(p[i]) - m) * inv) * pscale[i] + pbias[i];
    } else {
      for (int64_t i = 0; i < cols; ++i) q[i] = static_cast<T>((static_cast<A>(p[i]) - m) * inv) * pscale[i];
    }
  });
  m_out = m;
  inv_out = inv;
}

// Calls fn(begin, end, thread) over rows [0, rows): once on the calling thread (thread 0) unless
// `parallel`, else one contiguous range per OpenMP thread. Each range runs in one ISA variant when
// kWide (one dispatch per range, not per row), as the LayerNorm kernels' row loops want.
template <bool kWide, typename F>
inline void row_ranges(int64_t rows, bool parallel, const F& fn) {
  const auto run = [&](int64_t b, int64_t e, int t) { isa_dispatch_if<kWide>([&] { fn(b, e, t); }); };
  if (!parallel || omp_get_max_threads() == 1) return run(0, rows, 0);
#pragma omp parallel
  {
    const int64_t n = omp_get_num_threads(), t = omp_get_thread_num();
    run(rows * t / n, rows * (t + 1) / n, static_cast<int>(t));
  }
}

}  // namespace otter::cpu
