// CPU kernels of Einsum (a general loop over the equation's labels, graph/ops/einsum_equation.h)
// and Det (LU factorisation with partial pivoting, accumulated in double).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <utility>

#include "graph/op_table.h"
#include "graph/ops/einsum_equation.h"
#include "kernels/cpu/cpu_kernels.h"

namespace otter {
namespace {

// ---- Einsum ----------------------------------------------------------------------------------------

// The loop over labels: the output's labels (outer, in output order) then the summed ones; for
// each operand the stride of each loop label (repeated letters add their strides: a diagonal;
// ellipsis dims of size 1 broadcast with stride 0).
struct EinsumLoop {
  std::vector<int64_t> sizes;                 // per loop label
  std::vector<std::vector<int64_t>> strides;  // per operand, per loop label
  std::vector<int64_t> out_dims;
  size_t num_out = 0;                         // the first num_out loop labels are the output's
};

EinsumLoop plan_einsum(KernelContext& ctx) {
  const int n = ctx.num_inputs();
  const std::string text = ctx.node().attr_s("equation", "");
  einsum::Equation e;
  std::string err = einsum::parse(text, n, &e);
  std::vector<int64_t> ranks;
  for (int i = 0; i < n; ++i) ranks.push_back(ctx.input(i).rank());
  einsum::Axes axes;
  if (err.empty()) err = einsum::expand(e, ranks, &axes);
  if (!err.empty()) ctx.error(str_cat("equation '", text, "': ", err));
  const int L = axes.num_labels(), E = axes.ellipsis_rank;
  std::vector<int64_t> size(L, -1);
  for (int i = 0; i < n; ++i) {
    const auto& dims = ctx.input(i).dims();
    for (size_t a = 0; a < dims.size(); ++a) {
      int64_t& s = size[axes.operands[i][a]];
      const bool ell = axes.operands[i][a] < E;
      if (s == -1 || (ell && s == 1)) s = dims[a];
      else if (dims[a] != s && !(ell && dims[a] == 1))
        ctx.error(str_cat("equation '", text, "': operand ", i, " ", ctx.input(i).describe(), " disagrees in axis ",
                          a, " (size ", s, " elsewhere)"));
    }
  }
  EinsumLoop p;
  std::vector<int> order(axes.output.begin(), axes.output.end());
  for (int l = 0; l < L; ++l)
    if (size[l] >= 0 && std::find(order.begin(), order.end(), l) == order.end()) order.push_back(l);
  p.num_out = axes.output.size();
  for (int l : axes.output) p.out_dims.push_back(size[l] < 0 ? 1 : size[l]);
  for (int l : order) p.sizes.push_back(size[l] < 0 ? 1 : size[l]);
  for (int i = 0; i < n; ++i) {
    std::vector<int64_t> st(order.size(), 0);
    const auto& dims = ctx.input(i).dims();
    int64_t s = 1;
    for (size_t a = dims.size(); a-- > 0;) {
      const int l = axes.operands[i][a];
      const size_t pos = std::find(order.begin(), order.end(), l) - order.begin();
      if (dims[a] != 1 || size[l] == 1) st[pos] += s;
      s *= dims[a];
    }
    p.strides.push_back(std::move(st));
  }
  return p;
}

template <typename T, typename A>
void run_einsum(KernelContext& ctx, const EinsumLoop& p, Tensor& out) {
  const int n = ctx.num_inputs();
  std::vector<const T*> in(n);
  for (int i = 0; i < n; ++i) in[i] = ctx.input(i).data<T>();
  T* o = out.data<T>();
  const int64_t outs = out.numel();
  int64_t inner = 1;
  for (size_t j = p.num_out; j < p.sizes.size(); ++j) inner *= p.sizes[j];
  const size_t nl = p.sizes.size();
  std::vector<int64_t> idx(nl, 0), off(n, 0);
  for (int64_t y = 0; y < outs; ++y) {
    A acc = 0;
    for (int64_t s = 0; s < inner; ++s) {
      A prod = 1;
      for (int i = 0; i < n; ++i) prod *= static_cast<A>(in[i][off[i]]);
      acc += prod;
      // Odometer step over all loop labels, the last fastest; the output index follows.
      for (size_t j = nl; j-- > 0;) {
        for (int i = 0; i < n; ++i) off[i] += p.strides[i][j];
        if (++idx[j] < p.sizes[j]) break;
        for (int i = 0; i < n; ++i) off[i] -= p.strides[i][j] * p.sizes[j];
        idx[j] = 0;
      }
    }
    o[y] = static_cast<T>(acc);
  }
}

void einsum_kernel(KernelContext& ctx) {
  const EinsumLoop p = plan_einsum(ctx);
  const DataType t = ctx.input(0).dtype();
  for (int i = 1; i < ctx.num_inputs(); ++i)
    if (ctx.input(i).dtype() != t) ctx.error(str_cat("operand ", i, " ", ctx.input(i).describe(), " is not ", dtype_name(t)));
  Tensor& out = ctx.allocate_output(0, t, p.out_dims);
  if (out.numel() == 0) return;
  bool empty = false;
  for (int64_t s : p.sizes) empty = empty || s == 0;
  if (empty) {
    std::memset(out.raw(), 0, out.nbytes());
    return;
  }
  switch (t) {
    case DataType::kFloat32: return run_einsum<float, double>(ctx, p, out);
    case DataType::kFloat64: return run_einsum<double, double>(ctx, p, out);
    case DataType::kInt32: return run_einsum<int32_t, int64_t>(ctx, p, out);
    case DataType::kInt64: return run_einsum<int64_t, int64_t>(ctx, p, out);
    default: ctx.error(str_cat("no Einsum kernel for ", dtype_name(t)));
  }
}

// ---- Det ---------------------------------------------------------------------------------------------

// Determinant of the m x m row-major matrix a (overwritten) by LU with partial pivoting.
double lu_determinant(std::vector<double>& a, int64_t m) {
  double det = 1;
  for (int64_t k = 0; k < m; ++k) {
    int64_t piv = k;
    for (int64_t r = k + 1; r < m; ++r)
      if (std::fabs(a[r * m + k]) > std::fabs(a[piv * m + k])) piv = r;
    if (a[piv * m + k] == 0) return 0;
    if (piv != k) {
      for (int64_t c = 0; c < m; ++c) std::swap(a[k * m + c], a[piv * m + c]);
      det = -det;
    }
    const double d = a[k * m + k];
    det *= d;
    for (int64_t r = k + 1; r < m; ++r) {
      const double f = a[r * m + k] / d;
      for (int64_t c = k + 1; c < m; ++c) a[r * m + c] -= f * a[k * m + c];
    }
  }
  return det;
}

void det_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  if (x.rank() < 2 || x.dim(-1) != x.dim(-2))
    ctx.error(str_cat("input ", x.describe(), " is not a (batch of) square matrices [..., M, M]"));
  const int64_t m = x.dim(-1);
  std::vector<int64_t> od(x.dims().begin(), x.dims().end() - 2);
  Tensor& out = ctx.allocate_output(0, x.dtype(), od);
  std::vector<double> a(m * m);
  for (int64_t b = 0; b < out.numel(); ++b) {
    for (int64_t i = 0; i < m * m; ++i) a[i] = x.get_as_double(b * m * m + i);
    const double det = lu_determinant(a, m);
    if (x.dtype() == DataType::kFloat32) out.data<float>()[b] = static_cast<float>(det);
    else if (x.dtype() == DataType::kFloat64) out.data<double>()[b] = det;
    else ctx.error(str_cat("no Det kernel for ", x.describe()));
  }
}

}  // namespace

void register_cpu_linalg_kernels(KernelRegistry& r) {
  r.add({.op_type = "Einsum",
         .dtypes = {DataType::kFloat32, DataType::kFloat64, DataType::kInt32, DataType::kInt64},
         .create = simple_kernel(einsum_kernel)});
  r.add({.op_type = "Det", .dtypes = {DataType::kFloat32, DataType::kFloat64}, .create = simple_kernel(det_kernel)});
}

}  // namespace otter
