// CUDA kernels of ai.otter.Attention and AttentionGrad (graph/ops/attention.cc): correctness-
// oriented, one block per query row. The row's scores live in shared memory (T floats, or 2T in
// the backward pass); nothing of size [S, T] is written to global memory. Forward: scores, their
// max and logsumexp (LSE), then Y = softmax V. Backward: recomputes P = exp(score - LSE), then
// dS = P (dY V^T - rowsum(dY Y)), dQ = scale dS K, and adds P^T dY into dV and scale dS^T Q into
// dKt with float atomics in float32 scratch (cast to the gradients' type at the end). Every type
// computes in float; grouped-query heads and masks as on the CPU (kernels/cpu/attention.cc).
#include <cmath>

#include "kernels/common/attention_params.h"
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/cuda_kernels.h"

namespace otter::cuda {
namespace {

using params::AttnAttrs;
using params::AttnShape;
using params::MaskMode;

struct MaxF {
  __device__ float operator()(float a, float b) const { return fmaxf(a, b); }
};

// Everything a block needs, by value.
struct AttnArgs {
  int64_t h, hk, s, t, d, dv;
  float scale, fill;
  int mode;
  DataType type;  // Q, Kt, V, Y, dY
  const void *q, *kt, *v, *y, *dy;
  const float* lse_in;      // backward
  const float* mask_add;    // kAdd: the mask in float
  const bool* mask_flags;   // fill modes
  const int64_t* mask_off;  // per bh
  int64_t ss, st;
};

__device__ int64_t kv_head(const AttnArgs& a, int64_t bh) { return (bh / a.h) * a.hk + (bh % a.h) / (a.h / a.hk); }

// Fills sc[0, T) with the masked, scaled scores of row i of head bh; returns whether key j's score
// was replaced by the fill (through `replaced`, per key).
__device__ void row_scores(const AttnArgs& a, int64_t bh, int64_t i, float* sc, bool* replaced) {
  const int64_t kv = kv_head(a, bh);
  const int64_t q0 = (bh * a.s + i) * a.d, k0 = kv * a.d * a.t;
  for (int64_t j = threadIdx.x; j < a.t; j += blockDim.x) {
    float acc = 0;
    for (int64_t c = 0; c < a.d; ++c)
      acc += load_as_float(a.q, a.type, q0 + c) * load_as_float(a.kt, a.type, k0 + c * a.t + j);
    acc *= a.scale;
    bool rep = false;
    if (a.mode != static_cast<int>(MaskMode::kNone)) {
      const int64_t at = a.mask_off[bh] + i * a.ss + j * a.st;
      if (a.mode == static_cast<int>(MaskMode::kAdd)) {
        acc += a.mask_add[at];
      } else if (a.mask_flags[at] == (a.mode == static_cast<int>(MaskMode::kFillTrue))) {
        acc = a.fill;
        rep = true;
      }
    }
    sc[j] = acc;
    if (replaced) replaced[j] = rep;
  }
  __syncthreads();
}

__global__ void attention_forward_kernel(AttnArgs a, int64_t rows, void* y, float* lse) {
  extern __shared__ float sc[];
  OTTER_BLOCK_STRIDE(r, rows) {
    const int64_t bh = r / a.s, i = r % a.s, kv = kv_head(a, bh);
    row_scores(a, bh, i, sc, nullptr);
    float mx = -INFINITY;
    for (int64_t j = threadIdx.x; j < a.t; j += blockDim.x) mx = fmaxf(mx, sc[j]);
    mx = block_reduce(mx, MaxF{}, -INFINITY);
    float sum = 0;
    if (mx != -INFINITY)
      for (int64_t j = threadIdx.x; j < a.t; j += blockDim.x) sum += expf(sc[j] - mx);
    sum = block_reduce(sum, SumOp{}, 0.f);
    const float l = sum > 0 ? mx + logf(sum) : -INFINITY;
    for (int64_t c = threadIdx.x; c < a.dv; c += blockDim.x) {
      float acc = 0;
      for (int64_t j = 0; j < a.t; ++j)
        if (sc[j] != -INFINITY) acc += expf(sc[j] - l) * load_as_float(a.v, a.type, (kv * a.t + j) * a.dv + c);
      store_from_double(y, a.type, r * a.dv + c, sum > 0 ? acc : NAN);
    }
    if (lse && threadIdx.x == 0) lse[r] = l;
    __syncthreads();
  }
}

__global__ void attention_backward_kernel(AttnArgs a, int64_t rows, float* dq, float* dkt, float* dv) {
  extern __shared__ float smem[];
  float* p = smem;
  float* ds = smem + a.t;
  bool* rep = reinterpret_cast<bool*>(smem + 2 * a.t);
  OTTER_BLOCK_STRIDE(r, rows) {
    const int64_t bh = r / a.s, i = r % a.s, kv = kv_head(a, bh);
    row_scores(a, bh, i, p, rep);
    const float l = a.lse_in[r];
    float di = 0;
    for (int64_t c = threadIdx.x; c < a.dv; c += blockDim.x)
      di += load_as_float(a.dy, a.type, r * a.dv + c) * load_as_float(a.y, a.type, r * a.dv + c);
    di = block_reduce(di, SumOp{}, 0.f);
    for (int64_t j = threadIdx.x; j < a.t; j += blockDim.x) {
      const float pj = l == -INFINITY ? 0.f : expf(p[j] - l);
      float dp = 0;
      for (int64_t c = 0; c < a.dv; ++c)
        dp += load_as_float(a.dy, a.type, r * a.dv + c) * load_as_float(a.v, a.type, (kv * a.t + j) * a.dv + c);
      p[j] = pj;
      ds[j] = rep[j] ? 0.f : pj * (dp - di);
    }
    __syncthreads();
    for (int64_t e = threadIdx.x; e < a.t * a.dv; e += blockDim.x) {
      const int64_t j = e / a.dv, c = e % a.dv;
      if (p[j] != 0.f) atomicAdd(dv + (kv * a.t + j) * a.dv + c, p[j] * load_as_float(a.dy, a.type, r * a.dv + c));
    }
    for (int64_t c = threadIdx.x; c < a.d; c += blockDim.x) {
      float acc = 0;
      for (int64_t j = 0; j < a.t; ++j) acc += ds[j] * load_as_float(a.kt, a.type, (kv * a.d + c) * a.t + j);
      dq[r * a.d + c] = a.scale * acc;
    }
    for (int64_t e = threadIdx.x; e < a.d * a.t; e += blockDim.x) {
      const int64_t c = e / a.t, j = e % a.t;
      if (ds[j] != 0.f)
        atomicAdd(dkt + (kv * a.d + c) * a.t + j, a.scale * ds[j] * load_as_float(a.q, a.type, r * a.d + c));
    }
    __syncthreads();
  }
}

// Device copies of the mask offsets and (additive masks) the mask in float.
struct MaskBuffers {
  Tensor off, add;
};

MaskBuffers upload_mask(KernelContext& ctx, const AttnAttrs& at, const AttnShape& s, int input, AttnArgs& a) {
  MaskBuffers b;
  a.mode = static_cast<int>(at.mode);
  a.fill = static_cast<float>(at.fill);
  a.mask_add = nullptr;
  a.mask_flags = nullptr;
  a.mask_off = nullptr;
  a.ss = a.st = 0;
  if (at.mode == MaskMode::kNone) return b;
  if (!ctx.has_input(input)) ctx.error(str_cat("mask_mode needs input ", input, " (mask)"));
  const Tensor& m = ctx.input(input);
  params::MaskLayout l = params::mask_layout(ctx, s, m, at.mode);
  b.off = ctx.scratch(DataType::kInt64, {s.bh()});
  OTTER_CUDA_CHECK(cudaMemcpyAsync(b.off.raw(), l.off.data(), l.off.size() * sizeof(int64_t), cudaMemcpyHostToDevice,
                                   stream_of(ctx)));
  a.mask_off = b.off.data<int64_t>();
  a.ss = l.ss;
  a.st = l.st;
  if (at.mode == MaskMode::kAdd) {
    b.add = ctx.scratch(DataType::kFloat32, m.dims());
    cast_tensor(ctx, m, b.add);
    a.mask_add = b.add.data<float>();
  } else {
    a.mask_flags = m.data<bool>();
  }
  return b;
}

AttnArgs base_args(const AttnAttrs& at, const AttnShape& s, DataType t) {
  AttnArgs a{};
  a.h = s.h;
  a.hk = s.hk;
  a.s = s.s;
  a.t = s.t;
  a.d = s.d;
  a.dv = s.dv;
  a.scale = static_cast<float>(at.scale);
  a.type = t;
  return a;
}

// Shared memory of one block; fails where the keys do not fit.
size_t shared_bytes(const KernelContext& ctx, const AttnShape& s, bool backward) {
  const size_t bytes = s.t * (backward ? 2 * sizeof(float) + sizeof(bool) : sizeof(float));
  if (bytes > 48 * 1024)
    ctx.error(str_cat("the CUDA Attention kernel holds a row of ", s.t, " keys in shared memory (", bytes,
                      " bytes > 48 KiB)"));
  return bytes;
}

class AttentionKernel : public Kernel {
 public:
  explicit AttentionKernel(const Node& n) : at_(n) {}
  void run(KernelContext& ctx) override {
    const Tensor &q = ctx.input(0), &kt = ctx.input(1), &v = ctx.input(2);
    const AttnShape s = params::attn_shape(ctx, q, kt, v);
    AttnArgs a = base_args(at_, s, q.dtype());
    MaskBuffers keep = upload_mask(ctx, at_, s, 3, a);
    a.q = q.raw();
    a.kt = kt.raw();
    a.v = v.raw();
    Tensor& y = ctx.allocate_output(0, q.dtype(), s.y_dims);
    float* lse = ctx.has_output(1) ? ctx.allocate_output(1, DataType::kFloat32, s.lse_dims).data<float>() : nullptr;
    const int64_t rows = s.bh() * s.s;
    if (rows == 0) return;
    attention_forward_kernel<<<blocks_for(rows), kBlock, shared_bytes(ctx, s, false), stream_of(ctx)>>>(a, rows,
                                                                                                        y.raw(), lse);
    OTTER_CUDA_LAUNCH_CHECK();
  }

 private:
  AttnAttrs at_;
};

class AttentionGradKernel : public Kernel {
 public:
  explicit AttentionGradKernel(const Node& n) : at_(n) {}
  void run(KernelContext& ctx) override {
    const Tensor &dy = ctx.input(0), &q = ctx.input(1), &kt = ctx.input(2), &v = ctx.input(3);
    const Tensor &y = ctx.input(5), &lse = ctx.input(6);
    const AttnShape s = params::attn_shape(ctx, q, kt, v);
    params::check_grad_inputs(ctx, s, q, dy, y, lse);  // LSE float32 (the kernels run f32, f16, bf16)
    AttnArgs a = base_args(at_, s, q.dtype());
    MaskBuffers keep = upload_mask(ctx, at_, s, 4, a);
    a.q = q.raw();
    a.kt = kt.raw();
    a.v = v.raw();
    a.y = y.raw();
    a.dy = dy.raw();
    a.lse_in = lse.data<float>();
    const Tensor* like[3] = {&q, &kt, &v};
    Tensor acc[3];
    for (int k = 0; k < 3; ++k) {
      acc[k] = ctx.scratch(DataType::kFloat32, like[k]->dims());
      if (acc[k].nbytes()) OTTER_CUDA_CHECK(cudaMemsetAsync(acc[k].raw(), 0, acc[k].nbytes(), stream_of(ctx)));
    }
    const int64_t rows = s.bh() * s.s;
    if (rows > 0) {
      attention_backward_kernel<<<blocks_for(rows), kBlock, shared_bytes(ctx, s, true), stream_of(ctx)>>>(
          a, rows, acc[0].data<float>(), acc[1].data<float>(), acc[2].data<float>());
      OTTER_CUDA_LAUNCH_CHECK();
    }
    for (int k = 0; k < 3; ++k)
      if (ctx.has_output(k)) cast_tensor(ctx, acc[k], ctx.allocate_output(k, q.dtype(), like[k]->dims()));
  }

 private:
  AttnAttrs at_;
};

}  // namespace

KernelFactory attention_kernel(const std::string& op) {
  if (op == "Attention") return node_kernel<AttentionKernel>();
  if (op == "AttentionGrad") return node_kernel<AttentionGradKernel>();
  fail("attention_kernel: no CUDA kernel for ", op);
}

}  // namespace otter::cuda
