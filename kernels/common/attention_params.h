// Host-side parameter resolution of ai.otter.Attention and AttentionGrad (graph/ops/attention.cc),
// shared by the CPU and CUDA kernels: the attributes, the sizes of Q [..., H, S, D],
// Kt [..., Hk, D, T] and V [..., Hk, T, Dv], and where the mask, broadcast to [..., H, S, T],
// starts for each (leading position, head), validated with errors that name the node.
#pragma once

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "graph/error.h"
#include "kernels/kernel.h"

namespace otter::params {

enum class MaskMode : int { kNone, kAdd, kFillTrue, kFillFalse };

struct AttnAttrs {
  double scale = 1;
  MaskMode mode = MaskMode::kNone;
  double fill = -INFINITY;
  double dropout = 0;  // the ratio of dropped probabilities (kernels/common/attention_dropout.h)
  explicit AttnAttrs(const Node& n)
      : scale(n.attr_f("scale", 1.0f)), fill(n.attr_f("fill", -INFINITY)), dropout(n.attr_f("dropout", 0.f)) {
    const std::string m = n.attr_s("mask_mode", "none");
    mode = m == "add"          ? MaskMode::kAdd
           : m == "fill_true"  ? MaskMode::kFillTrue
           : m == "fill_false" ? MaskMode::kFillFalse
                               : MaskMode::kNone;
  }
};

// Sizes of one call: `lead` leading positions (all axes before the heads), h query heads reading
// hk K/V heads (head h reads K/V head h / (h / hk)), S query rows, T keys, D and Dv head widths.
struct AttnShape {
  int64_t lead = 1, h = 1, hk = 1, s = 0, t = 0, d = 0, dv = 0;
  std::vector<int64_t> y_dims, lse_dims;
  int64_t bh() const { return lead * h; }
  int64_t kv_head(int64_t bh_index) const { return (bh_index / h) * hk + (bh_index % h) / (h / hk); }
};

inline AttnShape attn_shape(const KernelContext& ctx, const Tensor& q, const Tensor& kt, const Tensor& v) {
  const auto &qd = q.dims(), &kd = kt.dims(), &vd = v.dims();
  const size_t r = qd.size();
  if (r < 2 || kd.size() != r || vd.size() != r)
    ctx.error("Q, Kt and V must have one rank >= 2, got " + q.describe() + ", " + kt.describe() + ", " + v.describe());
  if (kt.dtype() != q.dtype() || v.dtype() != q.dtype())
    ctx.error("Q, Kt and V must have one type, got " + q.describe() + ", " + kt.describe() + ", " + v.describe());
  AttnShape s;
  for (size_t a = 0; a + 3 < r; ++a) {
    if (kd[a] != qd[a] || vd[a] != qd[a]) ctx.error(str_cat("axis ", a, " differs between Q, Kt and V"));
    s.lead *= qd[a];
  }
  if (r >= 3) {
    s.h = qd[r - 3];
    s.hk = kd[r - 3];
    if (vd[r - 3] != s.hk || s.hk == 0 || s.h % s.hk != 0)
      ctx.error(str_cat("Q's ", s.h, " heads must be a multiple of Kt's ", s.hk, " (V: ", vd[r - 3], ")"));
  }
  s.s = qd[r - 2];
  s.d = qd[r - 1];
  s.t = kd[r - 1];
  s.dv = vd[r - 1];
  if (kd[r - 2] != s.d || vd[r - 2] != s.t)
    ctx.error("Kt must be [..., D, T] and V [..., T, Dv] for Q " + q.describe() + ", got " + kt.describe() + ", " +
              v.describe());
  s.y_dims = qd;
  s.y_dims[r - 1] = s.dv;
  s.lse_dims.assign(qd.begin(), qd.end() - 1);
  return s;
}

// AttentionGrad's dY, Y and LSE against Q's shape s: dY and Y of Q's type and Y's dims, LSE of
// [..., H, S] in float32 for half Q, else in Q's type (graph/ops/attention.cc types it so).
inline void check_grad_inputs(const KernelContext& ctx, const AttnShape& s, const Tensor& q, const Tensor& dy,
                              const Tensor& y, const Tensor& lse) {
  const DataType lse_type = is_half(q.dtype()) ? DataType::kFloat32 : q.dtype();
  if (dy.dtype() != q.dtype() || y.dtype() != q.dtype() || lse.dtype() != lse_type)
    ctx.error("dY and Y must have Q's type and LSE " + std::string(dtype_name(lse_type)) + ", got " + dy.describe() +
              ", " + y.describe() + ", " + lse.describe());
  if (dy.dims() != s.y_dims || y.dims() != s.y_dims || lse.dims() != s.lse_dims)
    ctx.error("dY, Y or LSE do not fit Q, Kt and V: " + dy.describe() + ", " + y.describe() + ", " + lse.describe());
}

// Where the mask's [S, T] plane of each (leading position, head) starts, and the element strides
// of its S and T axes (0 where the mask broadcasts).
struct MaskLayout {
  std::vector<int64_t> off;  // per bh index
  int64_t ss = 0, st = 0;
};

inline MaskLayout mask_layout(const KernelContext& ctx, const AttnShape& s, const Tensor& m, MaskMode mode) {
  if (mode == MaskMode::kAdd ? !is_float(m.dtype()) : m.dtype() != DataType::kBool)
    ctx.error(std::string(mode == MaskMode::kAdd ? "an additive mask must be float" : "a fill mask must be bool") +
              ", got " + m.describe());
  std::vector<int64_t> full = s.y_dims;
  full.back() = s.t;
  const int64_t r = static_cast<int64_t>(full.size()), mr = static_cast<int64_t>(m.dims().size());
  if (mr > r) ctx.error("mask " + m.describe() + " has a higher rank than the scores " + dims_to_string(full));
  std::vector<int64_t> stride(r, 0);
  for (int64_t a = r - 1, acc = 1; a >= r - mr; --a) {
    const int64_t md = m.dims()[a - (r - mr)];
    if (md != 1 && md != full[a])
      ctx.error("mask " + m.describe() + " does not broadcast to the scores " + dims_to_string(full));
    stride[a] = md == 1 ? 0 : acc;
    acc *= md;
  }
  MaskLayout l;
  l.ss = stride[r - 2];
  l.st = stride[r - 1];
  l.off.assign(s.bh(), 0);
  for (int64_t f = 0; f < s.bh(); ++f) {  // f runs over the axes before S
    int64_t rest = f, o = 0;
    for (int64_t a = r - 3; a >= 0; --a) {
      o += (rest % full[a]) * stride[a];
      rest /= full[a];
    }
    l.off[f] = o;
  }
  return l;
}

}  // namespace otter::params
