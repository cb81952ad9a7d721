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
    const int64_t dst = gather_offset(i, idx, ni, inner, n, slot, reporter);
    if (dst >= 0) atomicAdd(acc + dst, static_cast<float>(load_value(dy[i])));
  }
}

// Every output position of Pad adds its dY to the input position it copied (none for the
// constant); reflect/edge/wrap may fold several onto one, hence atomics.
template <typename S>
__global__ void pad_grad_kernel(int64_t count, const S* dy, float* acc, PadGeometry g, PadMode mode) {
  OTTER_GRID_STRIDE(i, count) {
    const int64_t off = pad_input_offset(g, mode, i);
    if (off >= 0) atomicAdd(acc + off, static_cast<float>(load_value(dy[i])));
  }
}

// Zeros of the shape in input 1, of dY's type.
Tensor& zero_output(KernelContext& ctx) {
  Tensor& out = ctx.allocate_output(0, ctx.input(0).dtype(), params::grad_shape(ctx, host_ints(ctx, 1, "shape")));
  if (out.nbytes()) OTTER_CUDA_CHECK(cudaMemsetAsync(out.raw(), 0, out.nbytes(), stream_of(ctx)));
  return out;
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
    params::check_dy(ctx, v.out_dims);
    const Tensor& dy = ctx.input(0);
    if (dy.numel() == 0) return;
    copy_strided(ctx, dy.dtype(), element_at(dx, v.offset), v.strides, dy.raw(), contiguous_strides(v.out_dims),
                 v.out_dims);
  }
};

// GatherGrad(dY, shape, indices) {axis}: dX[o, indices[k], i] += dY[o, k, i], a scatter-add.
class GatherGradKernel : public GatherKernelBase {
 public:
  explicit GatherGradKernel(const Node& n) : GatherKernelBase(n) {}
  void run(KernelContext& ctx) override {
    Tensor& dx = zero_output(ctx);
    const Tensor& dy = ctx.input(0);
    const Tensor& idx = ctx.input(2);
    const params::GatherSpec g = params::resolve_gather(ctx, dx.dims(), idx, axis_, "shape");
    params::check_dy(ctx, g.out_dims);
    const int64_t count = dy.numel();
    if (count == 0) return;
    const Launch l = launch_on(ctx);
    dispatch_float(dy.dtype(), [&](auto tag) {
      using S = typename decltype(tag)::type;
      scatter_add_f32(ctx, dx, [&](float* acc) {
        with_index_data(idx, [&](auto* ip) {
          gather_grad_kernel<<<grid_for(count), kBlock, 0, l.dev.cuda_stream()>>>(count, static_cast<const S*>(dy.raw()),
                                                                                  ip, acc, idx.numel(), g.inner,
                                                                                  g.axis_len, l.dev.error_slot(),
                                                                                  l.reporter);
          OTTER_CUDA_LAUNCH_CHECK();
        });
      });
    });
  }

};

// PadGrad(dY, shape, pads, axes?) {mode}: the sum of dY over the output positions that copied each
// input position.
class PadGradKernel : public Kernel {
 public:
  explicit PadGradKernel(const Node& n) : mode_(params::parse_pad_mode(n)) {}
  void run(KernelContext& ctx) override {
    Tensor& dx = zero_output(ctx);
    const Tensor& dy = ctx.input(0);
    const params::PadSpec p = params::resolve_pad(ctx, dx, host_ints(ctx, 2, "pads"), optional_host_ints(ctx, 3, "axes"),
                                                  mode_);
    const PadGeometry g = pad_geometry(ctx, dx, p);
    params::check_dy(ctx, p.out_dims);
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
