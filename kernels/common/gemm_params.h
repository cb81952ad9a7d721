// Host-side parameter resolution of Gemm and GemmAccumulate, shared by the CPU and CUDA kernels:
// the attributes, the [M, K] x [K, N] dims of op(A) op(B) and C's unidirectional broadcast to
// [M, N], validated with errors that name the node.
#pragma once

#include <cstdint>

#include "graph/error.h"
#include "kernels/kernel.h"

namespace otter::params {

// Gemm's attributes (GemmAccumulate has no beta: it keeps the default).
struct GemmAttrs {
  bool trans_a = false, trans_b = false;
  float alpha = 1.f, beta = 1.f;
  explicit GemmAttrs(const Node& n)
      : trans_a(n.attr_i("transA", 0) != 0),
        trans_b(n.attr_i("transB", 0) != 0),
        alpha(n.attr_f("alpha", 1.0f)),
        beta(n.attr_f("beta", 1.0f)) {}
};

struct GemmDims {
  int64_t m = 0, n = 0, k = 0;
};

// The dims of op(A) op(B) for 2-D A and B.
inline GemmDims gemm_dims(const KernelContext& ctx, const Tensor& a, const Tensor& b, bool ta, bool tb) {
  if (a.rank() != 2 || b.rank() != 2)
    ctx.error(str_cat("operands must be 2-D, got ", a.describe(), " and ", b.describe()));
  GemmDims d{ta ? a.dim(1) : a.dim(0), tb ? b.dim(0) : b.dim(1), ta ? a.dim(0) : a.dim(1)};
  const int64_t kb = tb ? b.dim(1) : b.dim(0);
  if (d.k != kb)
    ctx.error(str_cat("inner dimensions differ: A ", a.describe(), (ta ? " (transA)" : ""), " vs B ", b.describe(),
                      (tb ? " (transB)" : "")));
  return d;
}

// C's dims as [cm, cn] after checking it has A's dtype and broadcasts unidirectionally to [m, n]
// (dims aligned right, each 1 or equal).
struct GemmC {
  int64_t cm = 1, cn = 1;
};

inline GemmC check_gemm_c(const KernelContext& ctx, const Tensor& c, const Tensor& a, int64_t m, int64_t n) {
  if (c.dtype() != a.dtype()) ctx.error(str_cat("C has type ", c.describe(), ", A ", a.describe()));
  if (c.rank() > 2) ctx.error(str_cat("C ", c.describe(), " has rank > 2"));
  GemmC r{c.rank() == 2 ? c.dim(0) : 1, c.rank() >= 1 ? c.dim(-1) : 1};
  if ((r.cm != 1 && r.cm != m) || (r.cn != 1 && r.cn != n))
    ctx.error(str_cat("C ", c.describe(), " does not broadcast to [", m, ",", n, "]"));
  return r;
}

}  // namespace otter::params
