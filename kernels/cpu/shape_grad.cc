// CPU kernels of the data-movement gradients (ai.otter SliceGrad, GatherGrad, PadGrad): each
// writes zeros of the forward input's shape (input 1, `shape`) and adds dY where the forward read.
#include <algorithm>
#include <cstring>

#include "graph/op_table.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/dispatch.h"
#include "kernels/cpu/shape_util.h"

namespace otter {
namespace {

using cpu::contiguous_strides;
using cpu::int_input;

// Zeros of the shape in input 1, of dY's type.
Tensor& zero_output(KernelContext& ctx) {
  Tensor& out = ctx.allocate_output(0, ctx.input(0).dtype(), params::grad_shape(ctx, int_input(ctx, 1, "shape")));
  if (out.nbytes()) std::memset(out.raw(), 0, out.nbytes());
  return out;
}

using params::check_dy;

// SliceGrad(dY, shape, starts, ends, axes?, steps?): dY written into the strided view Slice read.
class SliceGradKernel : public Kernel {
 public:
  explicit SliceGradKernel(const Node&) {}
  void run(KernelContext& ctx) override {
    Tensor& dx = zero_output(ctx);
    const cpu::SliceView v = cpu::resolve_slice(ctx, dx.dims(), 2);
    check_dy(ctx, v.out_dims);
    const Tensor& dy = ctx.input(0);
    const int64_t r = dx.rank();
    if (dy.numel() == 0) return;
    const std::vector<int64_t>& ist = v.strides;
    OTTER_DISPATCH_FLOAT(dy.dtype(), T, [&] {
      const T* src = dy.data<T>();
      T* out = dx.data<T>() + v.offset;
      if (r == 0) { out[0] = src[0]; return; }
      const int64_t len = v.out_dims[r - 1], step = ist[r - 1];
      cpu::for_each_row(v.out_dims, ist, [&](int64_t row, int64_t off) {
        const T* s = src + row * len;
        T* d = out + off;
        for (int64_t j = 0; j < len; ++j) d[j * step] = s[j];
      });
    });
  }
};

// GatherGrad(dY, shape, indices) {axis}: dX[o, indices[k], i] += dY[o, k, i], a scatter-add. The
// inner rows are split across threads (repeated indices add to the same row of dX).
class GatherGradKernel : public Kernel {
 public:
  explicit GatherGradKernel(const Node& n) : axis_(n.attr_i("axis", 0)) {}
  void run(KernelContext& ctx) override {
    Tensor& dx = zero_output(ctx);
    const Tensor& dy = ctx.input(0);
    const Tensor& idx = ctx.input(2);
    const params::GatherSpec g = params::resolve_gather(ctx, dx.dims(), idx, axis_, "shape");
    const std::vector<int64_t> ind = cpu::gather_indices(ctx, idx, g.axis, dx.dims());
    check_dy(ctx, g.out_dims);
    const int64_t outer = g.outer, inner = g.inner, n = g.axis_len, ni = static_cast<int64_t>(ind.size());
    if (dy.numel() == 0) return;
    OTTER_DISPATCH_FLOAT(dy.dtype(), T, [&] {
      const T* src = dy.data<T>();
      T* dst = dx.data<T>();
      cpu::parallel_ranges(inner, [&](int64_t b, int64_t e) {
        for (int64_t o = 0; o < outer; ++o)
          for (int64_t k = 0; k < ni; ++k) {
            const T* s = src + (o * ni + k) * inner;
            T* d = dst + (o * n + ind[k]) * inner;
            for (int64_t i = b; i < e; ++i) d[i] += s[i];
          }
      }, outer * ni);
    });
  }

 private:
  int64_t axis_;
};

// PadGrad(dY, shape, pads, axes?) {mode}: every output position of Pad adds its dY to the input
// position it copied (pad_source; nothing for constant padding). Constant padding maps output rows
// to distinct input rows and runs in parallel; reflect/edge/wrap may fold rows together and run in order.
class PadGradKernel : public Kernel {
 public:
  explicit PadGradKernel(const Node& n) : mode_(cpu::parse_pad_mode(n)) {}
  void run(KernelContext& ctx) override {
    Tensor& dx = zero_output(ctx);
    const Tensor& dy = ctx.input(0);
    const int64_t r = dx.rank();
    const std::vector<int64_t>& xd = dx.dims();
    const params::PadSpec p =
        params::resolve_pad(ctx, dx, int_input(ctx, 2, "pads"), cpu::optional_int_input(ctx, 3, "axes"), mode_);
    const std::vector<int64_t>& lo = p.lo;
    const std::vector<int64_t>& od = p.out_dims;
    check_dy(ctx, od);
    if (dy.numel() == 0 || dx.numel() == 0) return;
    if (r == 0) return add_scalar(dy, dx);
    const std::vector<int64_t> is = contiguous_strides(xd);
    const int64_t n_out = od[r - 1], n_in = xd[r - 1], l = lo[r - 1];
    OTTER_DISPATCH_FLOAT(dy.dtype(), T, [&] {
      const T* src = dy.data<T>();
      T* dst = dx.data<T>();
      auto rows = [&](int64_t b, int64_t e) {
        for (int64_t row = b; row < e; ++row) {
          int64_t rem = row, off = 0;
          bool dropped = false;
          for (int64_t i = r - 2; i >= 0 && !dropped; --i) {
            const int64_t s = pad_source(mode_, rem % od[i] - lo[i], xd[i]);
            rem /= od[i];
            dropped = s < 0;
            off += s * is[i];
          }
          if (dropped) continue;
          const T* g = src + row * n_out;
          for (int64_t j = 0; j < n_out; ++j) {
            const int64_t s = pad_source(mode_, j - l, n_in);
            if (s >= 0) dst[off + s] += g[j];
          }
        }
      };
      const int64_t nrows = dy.numel() / n_out;
      if (mode_ == PadMode::kConstant) cpu::parallel_ranges(nrows, rows, n_out);
      else rows(0, nrows);
    });
  }

 private:
  static void add_scalar(const Tensor& dy, Tensor& dx) {
    OTTER_DISPATCH_FLOAT(dy.dtype(), T, [&] { dx.data<T>()[0] += dy.data<T>()[0]; });
  }
  PadMode mode_;
};

}  // namespace

void register_cpu_shape_grad_kernels(KernelRegistry& r) {
  const std::vector<DataType> kFloats = {DataType::kFloat32, DataType::kFloat64};
  for (auto [op, create] : {std::pair{"SliceGrad", node_kernel<SliceGradKernel>()},
                            std::pair{"GatherGrad", node_kernel<GatherGradKernel>()},
                            std::pair{"PadGrad", node_kernel<PadGradKernel>()}})
    r.add({.domain = kOtterDomain, .op_type = op, .dtypes = kFloats, .create = create});
}

}  // namespace otter
