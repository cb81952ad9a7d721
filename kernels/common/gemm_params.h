// Host-side parameter resolution of MatMul, Gemm and GemmAccumulate, shared by the CPU and CUDA
// kernels: MatMul's batch broadcast, Gemm's attributes, the [M, K] x [K, N] dims of op(A) op(B)
// and C's unidirectional broadcast to [M, N], validated with errors that name the node.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

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

// MatMul's operands (numpy semantics): 1-D ones promoted to matrices, [.., m, k] x [.., k, n] with
// the batch axes broadcast. Element strides of A's and B's matrices per output batch axis (0 where
// broadcast), the output dims, and per output matrix the element offsets into A and B.
struct MatMulShape {
  int64_t m = 0, k = 0, n = 0;
  std::vector<int64_t> abatch, bbatch, obatch, astr, bstr, out_dims;
  int64_t nbatch = 0;
  // Offsets of output matrix t's operands, t in [0, nbatch).
  std::vector<int64_t> a_offsets() const { return offsets(astr); }
  std::vector<int64_t> b_offsets() const { return offsets(bstr); }

 private:
  std::vector<int64_t> offsets(const std::vector<int64_t>& str) const {
    std::vector<int64_t> off(static_cast<size_t>(nbatch));
    std::vector<int64_t> idx(obatch.size(), 0);
    for (int64_t t = 0; t < nbatch; ++t) {
      for (size_t r = 0; r < obatch.size(); ++r) off[t] += idx[r] * str[r];
      for (size_t r = obatch.size(); r-- > 0;) {
        if (++idx[r] < obatch[r]) break;
        idx[r] = 0;
      }
    }
    return off;
  }
};

inline MatMulShape resolve_matmul(const KernelContext& ctx, const Tensor& a, const Tensor& b) {
  if (a.dtype() != b.dtype()) ctx.error(str_cat("inputs have different types ", a.describe(), " and ", b.describe()));
  if (a.rank() == 0 || b.rank() == 0)
    ctx.error(str_cat("MatMul needs operands of rank >= 1, got ", a.describe(), " and ", b.describe()));
  std::vector<int64_t> ad = a.dims(), bd = b.dims();
  const bool a_vec = ad.size() == 1, b_vec = bd.size() == 1;
  if (a_vec) ad.insert(ad.begin(), 1);
  if (b_vec) bd.push_back(1);
  MatMulShape s;
  s.m = ad[ad.size() - 2];
  s.k = ad.back();
  s.n = bd.back();
  if (bd[bd.size() - 2] != s.k) ctx.error(str_cat("inner dimensions differ: A ", a.describe(), " vs B ", b.describe()));
  s.abatch.assign(ad.begin(), ad.end() - 2);
  s.bbatch.assign(bd.begin(), bd.end() - 2);
  const size_t rank = std::max(s.abatch.size(), s.bbatch.size());
  s.obatch.assign(rank, 0);
  s.astr.assign(rank, 0);
  s.bstr.assign(rank, 0);
  int64_t as = s.m * s.k, bs = s.k * s.n;
  for (size_t i = 0; i < rank; ++i) {
    const size_t r = rank - 1 - i;  // output axis, from the right
    const int64_t da = i < s.abatch.size() ? s.abatch[s.abatch.size() - 1 - i] : 1;
    const int64_t db = i < s.bbatch.size() ? s.bbatch[s.bbatch.size() - 1 - i] : 1;
    if (da != db && da != 1 && db != 1)
      ctx.error(str_cat("batch dimensions do not broadcast: A ", a.describe(), " vs B ", b.describe()));
    s.obatch[r] = (da == 0 || db == 0) ? 0 : std::max(da, db);
    s.astr[r] = da == 1 ? 0 : as;
    s.bstr[r] = db == 1 ? 0 : bs;
    as *= da;
    bs *= db;
  }
  s.out_dims = s.obatch;
  if (!a_vec) s.out_dims.push_back(s.m);
  if (!b_vec) s.out_dims.push_back(s.n);
  s.nbatch = 1;
  for (int64_t d : s.obatch) s.nbatch *= d;
  return s;
}

// MatMul of the context's inputs 0 (A) and 1 (B).
inline MatMulShape resolve_matmul(const KernelContext& ctx) { return resolve_matmul(ctx, ctx.input(0), ctx.input(1)); }

}  // namespace otter::params
