// CUDA gradients of the data-movement ops (ai.otter): SliceGrad (a strided copy into zeros),
// GatherGrad and PadGrad (scatter-adds with f32 atomics), on float types: zeros of the forward
// input's shape plus dY where the forward read.
#include "kernels/common/indexing.h"
#include "kernels/common/shape_params.h"
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/shape.cuh"

namespace otter::cuda {
namespace {


// acc[(o * n + idx[k]) * inner + j] += dY[(o * ni + k) * inner + j]; atomics, as indices repeat.
template <typename S, typename I>
__global__ void gather_grad_kernel(int64_t count, const S* dy, const I* idx, float* acc, int64_t ni, int64_t inner,
                                   int64_t n, DeviceError* slot, int reporter) {
  OTTER_GRID_STRIDE(i, count) {
    const int64_t j = i % inner, t = i / inner, k = t % ni, o = t / ni;
    int64_t v = static_cast<int64_t>(idx[k]);
    if (v < -n || v >= n) {
      report_error(slot, reporter, 1, v, k, n);
      continue;
    }
    if (v < 0) v += n;
    atomicAdd(acc + (o * n + v) * inner + j, static_cast<float>(load_value(dy[i])));
  }
}

// Every output position of Pad adds its dY to the input position it copied (none for the
// constant); reflect/edge/wrap may fold several onto one, hence atomics.
template <typename S>
__global__ void pad_grad_kernel(int64_t count, const S* dy, float* acc, PadGeometry g, PadMode mode) {
  OTTER_GRID_STRIDE(i, count) {
    int64_t rem = i, off = 0;
    bool dropped = false;
    for (int d = g.rank - 1; d >= 0; --d) {
      const int64_t o = rem % g.out[d];
      rem /= g.out[d];
      const int64_t src = pad_source(mode, o - g.lo[d], g.in[d]);
      dropped |= src < 0;
      off += src * g.stride[d];
    }
    if (!dropped) atomicAdd(acc + off, static_cast<float>(load_value(dy[i])));
  }
}

// Zeros of the shape in input 1, of dY's type.
Tensor& zero_output(KernelContext& ctx) {
  const std::vector<int64_t> dims = host_ints(ctx, 1, "shape");
  for (int64_t d : dims)
    if (d < 0) ctx.error(str_cat("shape ", dims_to_string(dims), " has a negative entry"));
  Tensor& out = ctx.allocate_output(0, ctx.input(0).dtype(), dims);
  if (out.nbytes()) OTTER_CUDA_CHECK(cudaMemsetAsync(out.raw(), 0, out.nbytes(), stream_of(ctx)));
  return out;
}

void check_dy(const KernelContext& ctx, const std::vector<int64_t>& expected) {
  if (ctx.input(0).dims() != expected)
    ctx.error(str_cat("dY ", ctx.input(0).describe(), " does not match the forward output shape ",
                      dims_to_string(expected)));
}

// Runs scatter(acc) with an f32 accumulator over dx's elements (zeroed): dx itself when it is f32,
// else scratch converted into dx afterwards (half types do not accumulate in half).
template <typename F>
void scatter_add_f32(KernelContext& ctx, Tensor& dx, F&& scatter) {
  if (dx.dtype() == DataType::kFloat32) return scatter(static_cast<float*>(dx.raw()));
  Tensor acc = ctx.scratch(DataType::kFloat32, dx.dims());
  if (acc.nbytes()) OTTER_CUDA_CHECK(cudaMemsetAsync(acc.raw(), 0, acc.nbytes(), stream_of(ctx)));
  scatter(static_cast<float*>(acc.raw()));
  cast_tensor(ctx, acc, dx);
}

// SliceGrad(dY, shape, starts, ends, axes?, steps?): dY written into the strided view Slice read.
class SliceGradKernel : public Kernel {
 public:
  explicit SliceGradKernel(const Node&) {}
  void run(KernelContext& ctx) override {
    Tensor& dx = zero_output(ctx);
    const params::SliceView v = params::resolve_slice(
        ctx, dx.dims(), host_ints(ctx, 2, "starts"), host_ints(ctx, 3, "ends"),
        ctx.has_input(4) ? host_ints(ctx, 4, "axes") : std::vector<int64_t>{},
        ctx.has_input(5) ? host_ints(ctx, 5, "steps") : std::vector<int64_t>{});
    check_dy(ctx, v.out_dims);
    const std::vector<int64_t> is = contiguous_strides(dx.dims());
    std::vector<int64_t> dst_strides(is.size());
    int64_t base = 0;
    for (size_t i = 0; i < is.size(); ++i) {
      base += v.start[i] * is[i];
      dst_strides[i] = v.step[i] * is[i];
    }
    const Tensor& dy = ctx.input(0);
    if (dy.numel() == 0) return;
    copy_strided(ctx, dy.dtype(), at_element(dx, base), dst_strides, dy.raw(), contiguous_strides(v.out_dims), v.out_dims);
  }
};

// GatherGrad(dY, shape, indices) {axis}: dX[o, indices[k], i] += dY[o, k, i], a scatter-add.
class GatherGradKernel : public Kernel {
 public:
  explicit GatherGradKernel(const Node& n)
      : axis_(n.attr_i("axis", 0)),
        reporter_(n, [](const DeviceError& e) {
          return str_cat("index ", e.a, " (indices element ", e.b, ") is out of range for an axis of size ", e.c);
        }) {}
  void run(KernelContext& ctx) override {
    Tensor& dx = zero_output(ctx);
    const Tensor& dy = ctx.input(0);
    const Tensor& idx = ctx.input(2);
    const int64_t r = dx.rank();
    if (r == 0) ctx.error("shape must have rank >= 1");
    if (idx.dtype() != DataType::kInt64 && idx.dtype() != DataType::kInt32)
      ctx.error(str_cat("indices must be int64 or int32, got ", idx.describe()));
    const int64_t a = params::normalize_axis(ctx, axis_, r);
    std::vector<int64_t> yd(dx.dims().begin(), dx.dims().begin() + a);
    yd.insert(yd.end(), idx.dims().begin(), idx.dims().end());
    yd.insert(yd.end(), dx.dims().begin() + a + 1, dx.dims().end());
    check_dy(ctx, yd);
    int64_t inner = 1;
    for (int64_t k = a + 1; k < r; ++k) inner *= dx.dims()[k];
    const int64_t count = dy.numel();
    if (count == 0) return;
    CudaDevice& dev = device_of(ctx);
    const int rep = reporter_.id(dev);
    dispatch_float(dy.dtype(), [&](auto tag) {
      using S = typename decltype(tag)::type;
      scatter_add_f32(ctx, dx, [&](float* acc) {
        auto launch = [&](auto* ip) {
          using I = std::remove_const_t<std::remove_pointer_t<decltype(ip)>>;
          gather_grad_kernel<S, I><<<grid_for(count), kBlock, 0, dev.cuda_stream()>>>(
              count, static_cast<const S*>(dy.raw()), ip, acc, idx.numel(), inner, dx.dims()[a], dev.error_slot(), rep);
          OTTER_CUDA_LAUNCH_CHECK();
        };
        if (idx.dtype() == DataType::kInt64) launch(static_cast<const int64_t*>(idx.raw()));
        else launch(static_cast<const int32_t*>(idx.raw()));
      });
    });
  }

 private:
  int64_t axis_;
  ErrorReporter reporter_;
};

// PadGrad(dY, shape, pads, axes?) {mode}: the sum of dY over the output positions that copied each
// input position.
class PadGradKernel : public Kernel {
 public:
  explicit PadGradKernel(const Node& n) : mode_(params::parse_pad_mode(n)) {}
  void run(KernelContext& ctx) override {
    Tensor& dx = zero_output(ctx);
    const Tensor& dy = ctx.input(0);
    const int64_t r = dx.rank();
    if (r > kMaxDims) ctx.error(str_cat("PadGrad on CUDA takes at most ", kMaxDims, " dims, got ", dx.describe()));
    const params::PadSpec p = params::resolve_pad(ctx, dx, host_ints(ctx, 2, "pads"), optional_host_ints(ctx, 3, "axes"),
                                                  mode_);
    const PadGeometry g = pad_geometry(dx.dims(), p);
    check_dy(ctx, p.out_dims);
    const int64_t count = dy.numel();
    if (count == 0 || dx.numel() == 0) return;
    dispatch_float(dy.dtype(), [&](auto tag) {
      using S = typename decltype(tag)::type;
      scatter_add_f32(ctx, dx, [&](float* acc) {
        pad_grad_kernel<S><<<grid_for(count), kBlock, 0, stream_of(ctx)>>>(count, static_cast<const S*>(dy.raw()), acc, g,
                                                                           mode_);
        OTTER_CUDA_LAUNCH_CHECK();
      });
    });
  }

 private:
  PadMode mode_;
};

}  // namespace

KernelFactory shape_grad_kernel(const std::string& op) {
  if (op == "SliceGrad") return node_kernel<SliceGradKernel>();
  if (op == "GatherGrad") return node_kernel<GatherGradKernel>();
  if (op == "PadGrad") return node_kernel<PadGradKernel>();
  fail("shape_grad_kernel: no CUDA kernel for ", op);
}

}  // namespace otter::cuda
