// CPU kernels of the ONNX quantization ops (graph/ops/quantization.cc): QuantizeLinear,
// DequantizeLinear, DynamicQuantizeLinear, MatMulInteger, ConvInteger, QLinearMatMul and
// QLinearConv. Quantizing rounds half to even (std::nearbyint in the default rounding mode) and
// saturates at the int8/uint8 bounds; a NaN quantizes to the zero point. Integer products
// accumulate in int32 over zero-point-shifted int32 copies of the operands; the convolutions reuse
// Conv's window geometry and im2col (kernels/cpu/window.h), so padding reads as the zero point.
// The QLinear ops requantize as ONNX's reference does: the int32 result times the float32
// multiplier (a_scale * b_scale / y_scale), in double, rounded, plus y's zero point, saturated.
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <numeric>
#include <string>
#include <vector>

#include "kernels/common/gemm_params.h"
#include "kernels/common/half.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/dispatch.h"
#include "kernels/cpu/window.h"

namespace otter {
namespace {

using namespace cpu;  // window geometry, im2col (kernels/cpu/window.h)

// "input 1 ('x_scale')".
std::string arg(const KernelContext& ctx, int i) {
  const Value* v = ctx.node().input(i);
  return str_cat("input ", i, " ('", v ? v->name() : std::string(), "')");
}

bool is_8bit(DataType t) { return t == DataType::kInt8 || t == DataType::kUInt8; }

void check_8bit(const KernelContext& ctx, int i) {
  if (ctx.has_input(i) && !is_8bit(ctx.input(i).dtype()))
    ctx.error(str_cat(arg(ctx, i), " is ", ctx.input(i).describe(), "; expected i8 or u8"));
}

// All elements of t (a float or integer tensor) converted to C.
template <typename C>
std::vector<C> values_as(const Tensor& t) {
  std::vector<C> v(static_cast<size_t>(t.numel()));
  if (t.dtype() == DataType::kFloat16 || t.dtype() == DataType::kBFloat16) {
    const bool f16 = t.dtype() == DataType::kFloat16;
    const uint16_t* p = static_cast<const uint16_t*>(t.raw());
    for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<C>(f16 ? half_to_float(p[i]) : bf16_to_float(p[i]));
    return v;
  }
  OTTER_DISPATCH_NUMERIC(t.dtype(), T, [&] {
    const T* p = t.data<T>();
    for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<C>(p[i]);
  });
  return v;
}

// Writes v into y, a float tensor (half types rounded to nearest even).
template <typename C>
void store_floats(Tensor& y, const std::vector<C>& v) {
  const size_t n = v.size();
  switch (y.dtype()) {
    case DataType::kFloat32:
      std::copy(v.begin(), v.end(), y.data<float>());
      return;
    case DataType::kFloat64:
      std::copy(v.begin(), v.end(), y.data<double>());
      return;
    case DataType::kFloat16: {
      auto* p = static_cast<uint16_t*>(y.raw());
      for (size_t i = 0; i < n; ++i) p[i] = float_to_half(static_cast<float>(v[i]));
      return;
    }
    case DataType::kBFloat16: {
      auto* p = static_cast<uint16_t*>(y.raw());
      for (size_t i = 0; i < n; ++i) p[i] = float_to_bf16(static_cast<float>(v[i]));
      return;
    }
    default:
      fail("internal: store_floats into ", y.describe());
  }
}

// v rounded half to even, plus the zero point, saturated to Q's range (NaN: the zero point).
template <typename Q, typename C>
Q saturate_rounded(C v, int32_t zero) {
  const C r = v == v ? std::nearbyint(v) + static_cast<C>(zero) : static_cast<C>(zero);
  return static_cast<Q>(std::clamp<C>(r, std::numeric_limits<Q>::min(), std::numeric_limits<Q>::max()));
}

// Calls f with a value of the 8-bit storage type of t (int8_t or uint8_t).
template <class F>
void dispatch_8bit(DataType t, F&& f) {
  if (t == DataType::kInt8)
    f(int8_t{});
  else
    f(uint8_t{});
}

// A parameter (scale or zero point) per tensor or per index of one axis of a tensor x: element i
// of x uses entry (i / inner) % count.
struct Layout {
  int64_t count = 1, inner = 1;
  int64_t at(int64_t i) const { return count == 1 ? 0 : (i / inner) % count; }
};

// Layout of input p against x's dims: one element, or 1-D with one per index of x's axis `axis`
// (axis < 0: per tensor only).
Layout param_layout(const KernelContext& ctx, int p, const std::vector<int64_t>& xdims, int64_t axis) {
  const Tensor& t = ctx.input(p);
  Layout l;
  l.count = t.numel();
  if (t.rank() > 1)
    ctx.error(str_cat(arg(ctx, p), " is ", t.describe(),
                      "; otter supports per-tensor (scalar) and per-axis (1-D) parameters, not blocked ones"));
  if (l.count == 1) return l;
  const bool per_axis_ok = axis >= 0 && axis < static_cast<int64_t>(xdims.size()) && t.rank() == 1;
  if (!per_axis_ok || xdims[axis] != l.count)
    ctx.error(str_cat(arg(ctx, p), " is ", t.describe(), "; expected one element",
                      per_axis_ok ? str_cat(" or one per index of axis ", axis, " (", xdims[axis], ")")
                                  : std::string(" (per tensor)")));
  for (size_t j = static_cast<size_t>(axis) + 1; j < xdims.size(); ++j) l.inner *= xdims[j];
  return l;
}

// Scale (input s) and zero point (input z; absent: 0, else of the scale's shape) of x.
template <typename C>
struct QParams {
  Layout layout;
  std::vector<C> scale;
  std::vector<int32_t> zero;
};

template <typename C>
QParams<C> read_qparams(const KernelContext& ctx, const std::vector<int64_t>& xdims, int s, int z, int64_t axis) {
  const Tensor& st = ctx.input(s);
  if (!is_float(st.dtype())) ctx.error(str_cat(arg(ctx, s), " is ", st.describe(), "; a scale must be a float"));
  QParams<C> q{param_layout(ctx, s, xdims, axis), values_as<C>(st), {}};
  if (ctx.has_input(z)) {
    const Tensor& zt = ctx.input(z);
    if (zt.dims() != st.dims())
      ctx.error(str_cat(arg(ctx, z), " is ", zt.describe(), " but ", arg(ctx, s), " is ", st.describe(),
                        " (the zero point must have the scale's shape)"));
    q.zero = values_as<int32_t>(zt);
  } else {
    q.zero.assign(q.scale.size(), 0);
  }
  return q;
}

// Axis of QuantizeLinear / DequantizeLinear's per-axis parameters, normalised; -1 for a scalar x or
// a one-element scale (the axis, 1 by default, only matters for a per-axis scale).
int64_t quant_axis(const KernelContext& ctx, int64_t axis, int64_t rank) {
  if (rank == 0 || ctx.input(1).numel() == 1) return -1;
  if (axis < -rank || axis >= rank) ctx.error(str_cat("axis ", axis, " is out of range for rank ", rank));
  return axis < 0 ? axis + rank : axis;
}

// ---- QuantizeLinear / DequantizeLinear / DynamicQuantizeLinear ------------------------------------

class QuantizeLinearKernel : public Kernel {
 public:
  explicit QuantizeLinearKernel(const Node& n) : axis_(n.attr_i("axis", 1)), out_attr_(n.attr_i("output_dtype", 0)) {
    if (n.attr_i("block_size", 0) != 0) fail(n.describe(), ": blocked quantization (block_size) is not supported");
  }

  void run(KernelContext& ctx) override {
    const Tensor& x = ctx.input(0);
    const DataType xt = x.dtype();
    if (!is_float(xt) && xt != DataType::kInt32)
      ctx.error(str_cat(arg(ctx, 0), " is ", x.describe(), "; expected a float type or i32"));
    DataType yt = out_attr_ != 0 ? dtype_from_onnx(static_cast<int>(out_attr_)) : DataType::kUInt8;
    if (ctx.has_input(2)) yt = ctx.input(2).dtype();
    if (!is_8bit(yt)) ctx.error(str_cat("output type ", dtype_name(yt), " is not supported (i8 or u8)"));
    if (xt == DataType::kFloat64 || xt == DataType::kInt32)
      compute<double>(ctx, yt);
    else
      compute<float>(ctx, yt);
  }

 private:
  // C: the type x / y_scale is computed in (float32 for float32 and half inputs, as ONNX's
  // reference computes).
  template <typename C>
  void compute(KernelContext& ctx, DataType yt) {
    const Tensor& x = ctx.input(0);
    const QParams<C> q = read_qparams<C>(ctx, x.dims(), 1, 2, quant_axis(ctx, axis_, x.rank()));
    const std::vector<C> xv = values_as<C>(x);
    Tensor& y = ctx.allocate_output(0, yt, x.dims());
    dispatch_8bit(yt, [&](auto q_type) {
      using Q = decltype(q_type);
      Q* py = y.data<Q>();
      const int64_t n = x.numel();
#pragma omp parallel for schedule(static) if (n > 65536)
      for (int64_t i = 0; i < n; ++i) {
        const int64_t j = q.layout.at(i);
        py[i] = saturate_rounded<Q>(xv[i] / q.scale[j], q.zero[j]);
      }
    });
  }

  int64_t axis_, out_attr_;
};

class DequantizeLinearKernel : public Kernel {
 public:
  explicit DequantizeLinearKernel(const Node& n) : axis_(n.attr_i("axis", 1)) {
    if (n.attr_i("block_size", 0) != 0) fail(n.describe(), ": blocked quantization (block_size) is not supported");
  }

  void run(KernelContext& ctx) override {
    const Tensor& x = ctx.input(0);
    if (!is_8bit(x.dtype()) && x.dtype() != DataType::kInt32)
      ctx.error(str_cat(arg(ctx, 0), " is ", x.describe(), "; expected i8, u8 or i32"));
    if (ctx.has_input(2) && ctx.input(2).dtype() != x.dtype())
      ctx.error(
          str_cat(arg(ctx, 2), " is ", ctx.input(2).describe(), " but x is ", x.describe(), " (the types must match)"));
    if (ctx.input(1).dtype() == DataType::kFloat64)
      compute<double>(ctx);
    else
      compute<float>(ctx);
  }

 private:
  // y = (x - zero) * scale in C (float32 unless the scale is float64), stored in the scale's type.
  template <typename C>
  void compute(KernelContext& ctx) {
    const Tensor& x = ctx.input(0);
    const QParams<C> q = read_qparams<C>(ctx, x.dims(), 1, 2, quant_axis(ctx, axis_, x.rank()));
    std::vector<C> v = values_as<C>(x);
    const int64_t n = x.numel();
    for (int64_t i = 0; i < n; ++i) {
      const int64_t j = q.layout.at(i);
      v[i] = (v[i] - static_cast<C>(q.zero[j])) * q.scale[j];
    }
    store_floats(ctx.allocate_output(0, ctx.input(1).dtype(), x.dims()), v);
  }

  int64_t axis_;
};

// The scale covers [min(x, 0), max(x, 0)] in 255 steps; the zero point is 0 - min / scale, clipped
// to [0, 255] and rounded; y = QuantizeLinear(x, scale, zero point). All in float32, as ONNX's
// function body computes. An all-zero (or empty) x has scale 0, zero point 0 and y 0.
void dynamic_quantize_linear(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  if (x.dtype() != DataType::kFloat32) ctx.error(str_cat(arg(ctx, 0), " is ", x.describe(), "; expected f32"));
  const float* px = x.data<float>();
  const int64_t n = x.numel();
  float lo = 0.0f, hi = 0.0f;
  for (int64_t i = 0; i < n; ++i) {
    lo = std::min(lo, px[i]);
    hi = std::max(hi, px[i]);
  }
  const float scale = (hi - lo) / 255.0f;
  uint8_t zero = 0;
  if (scale != 0.0f) zero = static_cast<uint8_t>(std::nearbyint(std::clamp(0.0f - lo / scale, 0.0f, 255.0f)));
  uint8_t* py = ctx.allocate_output(0, DataType::kUInt8, x.dims()).data<uint8_t>();
  for (int64_t i = 0; i < n; ++i) py[i] = scale == 0.0f ? uint8_t{0} : saturate_rounded<uint8_t>(px[i] / scale, zero);
  *ctx.allocate_output(1, DataType::kFloat32, {}).data<float>() = scale;
  *ctx.allocate_output(2, DataType::kUInt8, {}).data<uint8_t>() = zero;
}

// ---- integer products ------------------------------------------------------------------------------

// An int32 copy of the 8-bit input i minus its zero point (input z, optional), which is per tensor
// or per index of axis `axis` of input i (axis < 0: per tensor only).
Tensor shifted(const KernelContext& ctx, int i, int z, int64_t axis) {
  check_8bit(ctx, i);
  const Tensor& x = ctx.input(i);
  Tensor out(DataType::kInt32, x.dims());
  const std::vector<int32_t> xv = values_as<int32_t>(x);
  std::vector<int32_t> zero{0};
  Layout l;
  if (ctx.has_input(z)) {
    check_8bit(ctx, z);
    if (ctx.input(z).dtype() != x.dtype())
      ctx.error(str_cat(arg(ctx, z), " is ", ctx.input(z).describe(), " but ", arg(ctx, i), " is ", x.describe(),
                        " (the types must match)"));
    l = param_layout(ctx, z, x.dims(), axis);
    zero = values_as<int32_t>(ctx.input(z));
  }
  int32_t* po = out.data<int32_t>();
  for (int64_t k = 0; k < x.numel(); ++k) po[k] = xv[k] - zero[l.at(k)];
  return out;
}

// Axis `from_end` (1: last, 2: second to last) of a tensor of rank `rank` used as a matrix operand:
// -1 where that axis is not a real matrix axis (1-D operands).
int64_t matrix_axis(int64_t rank, int64_t from_end) { return rank >= 2 ? rank - from_end : -1; }

// Y = A * B (numpy matmul of int32 operands; shapes from params::resolve_matmul), int32 sums.
void matmul_i32(const params::MatMulShape& s, const int32_t* a, const int32_t* b, int32_t* y) {
  const std::vector<int64_t> a_off = s.a_offsets(), b_off = s.b_offsets();
  const int64_t m = s.m, k = s.k, n = s.n;
#pragma omp parallel for schedule(static) if (s.nbatch * m * n * k > 65536)
  for (int64_t r = 0; r < s.nbatch * m; ++r) {
    const int64_t t = r / m, i = r % m;
    const int32_t* ar = a + a_off[t] + i * k;
    const int32_t* bt = b + b_off[t];
    int32_t* yr = y + r * n;
    std::fill(yr, yr + n, 0);
    for (int64_t p = 0; p < k; ++p) {
      const int32_t av = ar[p];
      if (av == 0) continue;
      const int32_t* br = bt + p * n;
      for (int64_t j = 0; j < n; ++j) yr[j] += av * br[j];
    }
  }
}

// MatMulInteger(A, B, a_zero_point?, b_zero_point?) -> Y int32.
void matmul_integer(KernelContext& ctx) {
  const Tensor a = shifted(ctx, 0, 2, matrix_axis(ctx.input(0).rank(), 2));
  const Tensor b = shifted(ctx, 1, 3, matrix_axis(ctx.input(1).rank(), 1));
  const params::MatMulShape s = params::resolve_matmul(ctx, a, b);
  Tensor& y = ctx.allocate_output(0, DataType::kInt32, s.out_dims);
  if (y.numel() > 0) matmul_i32(s, a.data<int32_t>(), b.data<int32_t>(), y.data<int32_t>());
}

// Writes acc[i] * multiplier(i) (float32 multiplier, product in double), rounded half to even,
// plus the zero point, saturated, into output 0 of y_zero_point's (input zi's) type.
template <class M>
void requantize(KernelContext& ctx, const Tensor& acc, int zi, M&& multiplier) {
  const Tensor& zt = ctx.input(zi);
  check_8bit(ctx, zi);
  if (zt.numel() != 1) ctx.error(str_cat(arg(ctx, zi), " is ", zt.describe(), "; expected one element (per tensor)"));
  const int32_t zero = values_as<int32_t>(zt)[0];
  const int32_t* pa = acc.data<int32_t>();
  Tensor& y = ctx.allocate_output(0, zt.dtype(), acc.dims());
  dispatch_8bit(zt.dtype(), [&](auto q_type) {
    using Q = decltype(q_type);
    Q* py = y.data<Q>();
    for (int64_t i = 0; i < acc.numel(); ++i)
      py[i] = saturate_rounded<Q>(static_cast<double>(pa[i]) * static_cast<double>(multiplier(i)), zero);
  });
}

// The float32 scale of a per-tensor parameter (input s, one element).
float scalar_scale(const KernelContext& ctx, int s, const std::vector<int64_t>& xdims) {
  param_layout(ctx, s, xdims, -1);
  if (!is_float(ctx.input(s).dtype()))
    ctx.error(str_cat(arg(ctx, s), " is ", ctx.input(s).describe(), "; expected a float"));
  return values_as<float>(ctx.input(s))[0];
}

// QLinearMatMul(a, a_scale, a_zero_point, b, b_scale, b_zero_point, y_scale, y_zero_point) -> y.
void qlinear_matmul(KernelContext& ctx) {
  const Tensor& a8 = ctx.input(0);
  const Tensor& b8 = ctx.input(3);
  const int64_t a_axis = matrix_axis(a8.rank(), 2), b_axis = matrix_axis(b8.rank(), 1);
  const Tensor a = shifted(ctx, 0, 2, a_axis);
  const Tensor b = shifted(ctx, 3, 5, b_axis);
  const QParams<float> qa = read_qparams<float>(ctx, a8.dims(), 1, 2, a_axis);
  const QParams<float> qb = read_qparams<float>(ctx, b8.dims(), 4, 5, b_axis);
  const float y_scale = scalar_scale(ctx, 6, {});
  const params::MatMulShape s = params::resolve_matmul(ctx, a, b);
  Tensor acc(DataType::kInt32, s.out_dims);
  if (acc.numel() > 0) matmul_i32(s, a.data<int32_t>(), b.data<int32_t>(), acc.data<int32_t>());
  const int64_t m = s.m, n = s.n;
  requantize(ctx, acc, 7, [&](int64_t i) {
    const float as = qa.scale[qa.layout.count == 1 ? 0 : (i / n) % m];
    const float bs = qb.scale[qb.layout.count == 1 ? 0 : i % n];
    return as * bs / y_scale;
  });
}

// ---- integer convolutions ----------------------------------------------------------------------

// The int32 convolution of shifted operands X' = X - x_zero_point, W' = W - w_zero_point (per
// output channel or per tensor): Conv's geometry (kernels/common/window.h), im2col of each image
// and group, and integer row-times-column sums.
class IntConv {
 public:
  IntConv(const Node& n, int x, int xz, int w, int wz)
      : win_(n, false), group_(n.attr_i("group", 1)), in_{x, xz, w, wz} {
    if (group_ <= 0) fail(n.describe(), ": group must be positive");
  }

  // The int32 result [N, M, out...] of the context's operands.
  Tensor run(const KernelContext& ctx) {
    const Tensor x = shifted(ctx, in_[0], in_[1], -1);
    const Tensor w = shifted(ctx, in_[2], in_[3], 0);
    const window::ConvShape cs = window::check_conv_shape(ctx, x, w, group_, win_.kernel);
    const Geometry g = resolve_geometry(ctx, win_, cs.in, cs.kernel);
    std::vector<int64_t> odims = {cs.batch, cs.cout};
    odims.insert(odims.end(), g.out.begin(), g.out.end());
    Tensor y(DataType::kInt32, odims);
    if (y.numel() > 0) compute(cs, g, x.data<int32_t>(), w.data<int32_t>(), y.data<int32_t>());
    return y;
  }

 private:
  void compute(const window::ConvShape& cs, const Geometry& g, const int32_t* px, const int32_t* pw, int32_t* py) {
    const int64_t mg = cs.cout / group_, L = g.out_plane, kc = cs.cg * g.k_size;
    std::vector<int64_t> taps(static_cast<size_t>(g.k_size));
    std::iota(taps.begin(), taps.end(), int64_t{0});
    int32_t* col = scratch_.get<int32_t>(static_cast<size_t>(std::max<int64_t>(kc * L, 1)));
    for (int64_t b = 0; b < cs.batch; ++b) {
      for (int64_t gi = 0; gi < group_; ++gi) {
        conv_im2col(g, px + (b * cs.cin + gi * cs.cg) * g.in_plane, cs.cg, col, taps, true, L);
        const int32_t* wg = pw + gi * mg * kc;
        int32_t* yg = py + (b * cs.cout + gi * mg) * L;
#pragma omp parallel for schedule(static) if (mg * kc * L > 65536)
        for (int64_t m = 0; m < mg; ++m) {
          int32_t* yr = yg + m * L;
          std::fill(yr, yr + L, 0);
          for (int64_t k = 0; k < kc; ++k) {
            const int32_t wv = wg[m * kc + k];
            if (wv == 0) continue;
            const int32_t* cr = col + k * L;
            for (int64_t l = 0; l < L; ++l) yr[l] += wv * cr[l];
          }
        }
      }
    }
  }

  WindowAttrs win_;
  int64_t group_;
  int in_[4];  // inputs X, x_zero_point, W, w_zero_point
  Scratch scratch_;
};

// ConvInteger(x, w, x_zero_point?, w_zero_point?) -> y int32.
class ConvIntegerKernel : public Kernel {
 public:
  explicit ConvIntegerKernel(const Node& n) : conv_(n, 0, 2, 1, 3) {}
  void run(KernelContext& ctx) override {
    const Tensor y = conv_.run(ctx);
    Tensor& out = ctx.allocate_output(0, DataType::kInt32, y.dims());
    std::copy(y.data<int32_t>(), y.data<int32_t>() + y.numel(), out.data<int32_t>());
  }

 private:
  IntConv conv_;
};

// QLinearConv(x, x_scale, x_zero_point, w, w_scale, w_zero_point, y_scale, y_zero_point, B?) -> y:
// (int32 convolution + B) * x_scale * w_scale[m] / y_scale, requantized.
class QLinearConvKernel : public Kernel {
 public:
  explicit QLinearConvKernel(const Node& n) : conv_(n, 0, 2, 3, 5) {}
  void run(KernelContext& ctx) override {
    Tensor acc = conv_.run(ctx);
    const std::vector<int64_t>& wdims = ctx.input(3).dims();
    const float x_scale = scalar_scale(ctx, 1, {});
    const QParams<float> qw = read_qparams<float>(ctx, wdims, 4, 5, 0);
    const float y_scale = scalar_scale(ctx, 6, {});
    const int64_t cout = acc.dim(1);
    int64_t plane = 1;  // output positions per channel
    for (int64_t d = 2; d < acc.rank(); ++d) plane *= acc.dim(d);
    if (ctx.has_input(8)) {
      const Tensor& bias = ctx.input(8);
      if (bias.dtype() != DataType::kInt32 || bias.rank() != 1 || bias.dim(0) != cout)
        ctx.error(str_cat(arg(ctx, 8), " is ", bias.describe(), "; expected i32[", cout, "]"));
      const int32_t* pb = bias.data<int32_t>();
      int32_t* pa = acc.data<int32_t>();
      for (int64_t i = 0; i < acc.numel(); ++i) pa[i] += pb[(i / plane) % cout];
    }
    requantize(ctx, acc, 7,
               [&](int64_t i) { return x_scale * qw.scale[qw.layout.count == 1 ? 0 : (i / plane) % cout] / y_scale; });
  }

 private:
  IntConv conv_;
};

}  // namespace

void register_cpu_quantization_kernels(KernelRegistry& r) {
  // Any dtype: the kernels check their mixed integer and float operands themselves.
  r.add({.op_type = "QuantizeLinear", .create = node_kernel<QuantizeLinearKernel>()});
  r.add({.op_type = "DequantizeLinear", .create = node_kernel<DequantizeLinearKernel>()});
  r.add({.op_type = "DynamicQuantizeLinear", .create = simple_kernel(dynamic_quantize_linear)});
  r.add({.op_type = "MatMulInteger", .create = simple_kernel(matmul_integer)});
  r.add({.op_type = "ConvInteger", .create = node_kernel<ConvIntegerKernel>()});
  r.add({.op_type = "QLinearMatMul", .create = simple_kernel(qlinear_matmul)});
  r.add({.op_type = "QLinearConv", .create = node_kernel<QLinearConvKernel>()});
}

}  // namespace otter
