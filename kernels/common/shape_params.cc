// The longer host-side resolvers of kernels/common/shape_params.h (Transpose, Concat, Split,
// Gather and the gradients' checks), shared by the CPU and CUDA kernels.
#include "kernels/common/shape_params.h"

namespace otter::params {

std::vector<int64_t> resolve_perm(const KernelContext& ctx, const std::vector<int64_t>& perm_attr, bool given,
                                  int64_t rank) {
  std::vector<int64_t> perm = perm_attr;
  if (!given)
    for (int64_t i = 0; i < rank; ++i) perm.push_back(rank - 1 - i);
  if (static_cast<int64_t>(perm.size()) != rank)
    ctx.error(str_cat("perm ", dims_to_string(perm), " does not match input ", ctx.input(0).describe()));
  std::vector<bool> seen(static_cast<size_t>(rank), false);
  for (int64_t& v : perm) {
    if (v < -rank || v >= rank || seen[v < 0 ? v + rank : v])
      ctx.error(str_cat("perm ", dims_to_string(perm_attr), " is not a permutation of rank ", rank));
    if (v < 0) v += rank;
    seen[v] = true;
  }
  return perm;
}

namespace {

// Row blocks of parts with dims[axis] `sizes` along `axis` of `dims` (the joined side).
RowBlocks row_blocks(const std::vector<int64_t>& dims, int64_t axis, const std::vector<int64_t>& sizes) {
  RowBlocks b;
  b.axis = axis;
  int64_t inner = 1;
  for (int64_t k = 0; k < axis; ++k) b.outer *= dims[k];
  for (size_t k = static_cast<size_t>(axis) + 1; k < dims.size(); ++k) inner *= dims[k];
  for (int64_t s : sizes) {
    b.cols.push_back(b.row);
    b.lens.push_back(s * inner);
    b.row += s * inner;
    b.part_dims.push_back(dims);
    b.part_dims.back()[axis] = s;
  }
  return b;
}

}  // namespace

RowBlocks resolve_concat(const KernelContext& ctx, int64_t axis, std::vector<int64_t>* out_dims) {
  const int n = ctx.num_inputs();
  if (n < 1) ctx.error("needs at least one input");
  const Tensor& x0 = ctx.input(0);
  const int64_t r = x0.rank();
  if (r == 0) ctx.error("cannot concatenate scalars");
  const int64_t a = normalize_axis(ctx, axis, r);
  *out_dims = x0.dims();
  (*out_dims)[a] = 0;
  std::vector<int64_t> sizes;
  for (int i = 0; i < n; ++i) {
    const Tensor& xi = ctx.input(i);
    bool ok = xi.dtype() == x0.dtype() && xi.rank() == r;
    for (int64_t k = 0; ok && k < r; ++k) ok = k == a || xi.dims()[k] == x0.dims()[k];
    if (!ok)
      ctx.error(
          str_cat("input ", i, " ", xi.describe(), " does not match input 0 ", x0.describe(), " outside axis ", a));
    sizes.push_back(xi.dims()[a]);
    (*out_dims)[a] += xi.dims()[a];
  }
  return row_blocks(*out_dims, a, sizes);
}

RowBlocks resolve_split(const KernelContext& ctx, int64_t axis, std::vector<int64_t> given, int64_t num_outputs_attr) {
  const Tensor& x = ctx.input(0);
  const int64_t a = normalize_axis(ctx, axis, x.rank());
  return row_blocks(x.dims(), a, split_sizes(ctx, x, a, ctx.num_outputs(), std::move(given), num_outputs_attr));
}

GatherSpec resolve_gather(const KernelContext& ctx, const std::vector<int64_t>& dims, const Tensor& idx, int64_t axis,
                          const char* what) {
  const int64_t r = static_cast<int64_t>(dims.size());
  if (r == 0) ctx.error(str_cat(what, " must have rank >= 1"));
  if (idx.dtype() != DataType::kInt64 && idx.dtype() != DataType::kInt32)
    ctx.error(str_cat("indices must be int64 or int32, got ", idx.describe()));
  GatherSpec g;
  g.axis = normalize_axis(ctx, axis, r);
  g.axis_len = dims[g.axis];
  g.out_dims.assign(dims.begin(), dims.begin() + g.axis);
  g.out_dims.insert(g.out_dims.end(), idx.dims().begin(), idx.dims().end());
  g.out_dims.insert(g.out_dims.end(), dims.begin() + g.axis + 1, dims.end());
  for (int64_t k = 0; k < g.axis; ++k) g.outer *= dims[k];
  for (int64_t k = g.axis + 1; k < r; ++k) g.inner *= dims[k];
  return g;
}

std::vector<int64_t> grad_shape(const KernelContext& ctx, std::vector<int64_t> dims) {
  for (int64_t d : dims)
    if (d < 0) ctx.error(str_cat("shape ", dims_to_string(dims), " has a negative entry"));
  return dims;
}

void check_dy(const KernelContext& ctx, const std::vector<int64_t>& expected) {
  if (ctx.input(0).dims() != expected)
    ctx.error(str_cat("dY ", ctx.input(0).describe(), " does not match the forward output shape ",
                      dims_to_string(expected)));
}

}  // namespace otter::params
