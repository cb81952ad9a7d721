// CUDA kernels of ai.otter.Attention and AttentionGrad (graph/ops/attention.cc): correctness-
// oriented, one block per query row, the row's keys taken in chunks of kChunk scores in shared
// memory, so that any number of keys fits; nothing of size [S, T] is written to global memory
// (except dScores, where a trained additive mask asks for it). Forward: the online softmax over
// the chunks, Y and the row's logsumexp (LSE). Backward: recomputes P = exp(score - LSE) per chunk,
// then dS = P (dY V^T - rowsum(dY Y)), dQ += scale dS K, and adds P^T dY into dV and scale dS^T Q
// into dKt with float atomics in float32 scratch (cast to the gradients' type at the end). Every
// type computes in float; grouped-query heads and masks as on the CPU (kernels/cpu/attention.cc).
#include <cmath>

#include "kernels/common/attention_dropout.h"
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
  attn::Dropout dr;  // the probabilities' dropout (kernels/common/attention_dropout.h)
};

__device__ int64_t kv_head(const AttnArgs& a, int64_t bh) { return (bh / a.h) * a.hk + (bh % a.h) / (a.h / a.hk); }

// Keys per chunk: a block holds one chunk of a row's scores in shared memory, so any T fits.
constexpr int64_t kChunk = 1024;

// Fills sc[0, n) with the masked, scaled scores of keys [k0, k0 + n) of row i of head bh; sets
// replaced[j] (where given) to whether key k0 + j's score was replaced by the fill.
__device__ void chunk_scores(const AttnArgs& a, int64_t bh, int64_t i, int64_t k0, int64_t n, float* sc,
                             bool* replaced) {
  const int64_t kv = kv_head(a, bh);
  const int64_t qo = (bh * a.s + i) * a.d, ko = kv * a.d * a.t + k0;
  for (int64_t j = threadIdx.x; j < n; j += blockDim.x) {
    float acc = 0;
    for (int64_t c = 0; c < a.d; ++c)
      acc += load_as_float(a.q, a.type, qo + c) * load_as_float(a.kt, a.type, ko + c * a.t + j);
    acc *= a.scale;
    bool rep = false;
    if (a.mode != static_cast<int>(MaskMode::kNone)) {
      const int64_t at = a.mask_off[bh] + i * a.ss + (k0 + j) * a.st;
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

// One row per block, its keys in chunks (the online softmax, as on the CPU): the running maximum m,
// the running sum l of exp(score - m) and the unnormalised output acc (Dv floats in shared memory,
// after the chunk) are rescaled by exp(m_old - m_new) when a chunk raises the maximum.
__global__ void attention_forward_kernel(AttnArgs a, int64_t rows, void* y, float* lse) {
  extern __shared__ float smem[];
  float* sc = smem;
  float* acc = smem + kChunk;
  OTTER_BLOCK_STRIDE(r, rows) {
    const int64_t bh = r / a.s, i = r % a.s, kv = kv_head(a, bh);
    for (int64_t c = threadIdx.x; c < a.dv; c += blockDim.x) acc[c] = 0;
    float m = -INFINITY, l = 0;
    for (int64_t k0 = 0; k0 < a.t; k0 += kChunk) {
      const int64_t n = a.t - k0 < kChunk ? a.t - k0 : kChunk;
      chunk_scores(a, bh, i, k0, n, sc, nullptr);
      float mx = -INFINITY;
      for (int64_t j = threadIdx.x; j < n; j += blockDim.x) mx = fmaxf(mx, sc[j]);
      const float mnew = fmaxf(m, block_reduce(mx, MaxF{}, -INFINITY));
      if (mnew != -INFINITY) {  // block-uniform: something unmasked so far
        const float corr = expf(m - mnew);
        // Each key's exp once: the sum takes it undropped, sc keeps it times the dropout factor
        // (the weight of V's row); block_reduce's barriers publish sc to the whole block.
        float sum = 0;
        for (int64_t j = threadIdx.x; j < n; j += blockDim.x) {
          const float e = expf(sc[j] - mnew);
          sum += e;
          sc[j] = a.dr.on() ? e * a.dr.factor(static_cast<uint64_t>(r * a.t + k0 + j)) : e;
        }
        l = l * corr + block_reduce(sum, SumOp{}, 0.f);
        for (int64_t c = threadIdx.x; c < a.dv; c += blockDim.x) {
          float part = 0;
          for (int64_t j = 0; j < n; ++j)
            if (sc[j] != 0.f) part += sc[j] * load_as_float(a.v, a.type, (kv * a.t + k0 + j) * a.dv + c);
          acc[c] = acc[c] * corr + part;
        }
        m = mnew;
      }
      __syncthreads();  // the next chunk overwrites sc
    }
    for (int64_t c = threadIdx.x; c < a.dv; c += blockDim.x)
      store_from_double(y, a.type, r * a.dv + c, l > 0 ? acc[c] / l : NAN);
    if (lse && threadIdx.x == 0) lse[r] = l > 0 ? m + logf(l) : -INFINITY;
    __syncthreads();
  }
}

// One row per block, its keys in chunks: P = exp(score - LSE) and dS per chunk; dQ's row (owned by
// the block) accumulates over the chunks, dV and dKt (shared by rows) take float atomics.
__global__ void attention_backward_kernel(AttnArgs a, int64_t rows, float* dq, float* dkt, float* dv, float* dsc) {
  extern __shared__ float smem[];
  float* p = smem;
  float* ds = smem + kChunk;
  bool* rep = reinterpret_cast<bool*>(smem + 2 * kChunk);
  OTTER_BLOCK_STRIDE(r, rows) {
    const int64_t bh = r / a.s, i = r % a.s, kv = kv_head(a, bh);
    const float l = a.lse_in[r];
    float di = 0;
    for (int64_t c = threadIdx.x; c < a.dv; c += blockDim.x)
      di += load_as_float(a.dy, a.type, r * a.dv + c) * load_as_float(a.y, a.type, r * a.dv + c);
    di = block_reduce(di, SumOp{}, 0.f);
    for (int64_t k0 = 0; k0 < a.t; k0 += kChunk) {
      const int64_t n = a.t - k0 < kChunk ? a.t - k0 : kChunk;
      chunk_scores(a, bh, i, k0, n, p, rep);
      for (int64_t j = threadIdx.x; j < n; j += blockDim.x) {
        const float pj = l == -INFINITY ? 0.f : expf(p[j] - l);
        float dp = 0;
        for (int64_t c = 0; c < a.dv; ++c)
          dp += load_as_float(a.dy, a.type, r * a.dv + c) * load_as_float(a.v, a.type, (kv * a.t + k0 + j) * a.dv + c);
        const float f = a.dr.on() ? a.dr.factor(static_cast<uint64_t>(r * a.t + k0 + j)) : 1.f;
        p[j] = pj * f;  // what multiplied V
        ds[j] = rep[j] ? 0.f : pj * (f * dp - di);
        if (dsc) dsc[r * a.t + k0 + j] = ds[j];
      }
      __syncthreads();
      for (int64_t e = threadIdx.x; e < n * a.dv; e += blockDim.x) {
        const int64_t j = e / a.dv, c = e % a.dv;
        if (p[j] != 0.f)
          atomicAdd(dv + (kv * a.t + k0 + j) * a.dv + c, p[j] * load_as_float(a.dy, a.type, r * a.dv + c));
      }
      for (int64_t c = threadIdx.x; c < a.d; c += blockDim.x) {
        float acc = 0;
        for (int64_t j = 0; j < n; ++j) acc += ds[j] * load_as_float(a.kt, a.type, (kv * a.d + c) * a.t + k0 + j);
        dq[r * a.d + c] += a.scale * acc;
      }
      for (int64_t e = threadIdx.x; e < a.d * n; e += blockDim.x) {
        const int64_t c = e / n, j = e % n;
        if (ds[j] != 0.f)
          atomicAdd(dkt + (kv * a.d + c) * a.t + k0 + j, a.scale * ds[j] * load_as_float(a.q, a.type, r * a.d + c));
      }
      __syncthreads();  // the next chunk overwrites p, ds, rep
    }
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

// Shared memory of one block: a chunk of scores (and of dS and the replaced flags backward), and
// the forward's Dv accumulators; fails where Dv does not fit.
size_t shared_bytes(const KernelContext& ctx, const AttnShape& s, bool backward) {
  const size_t bytes = backward ? kChunk * (2 * sizeof(float) + sizeof(bool)) : (kChunk + s.dv) * sizeof(float);
  if (bytes > 48 * 1024)
    ctx.error(str_cat("the CUDA Attention kernel keeps a value row of ", s.dv, " floats in shared memory (", bytes,
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
    uint64_t seed = 0;  // input 4, else drawn from the training generator (the node's own counter without one)
    if (ctx.has_input(4))
      seed = static_cast<uint64_t>(host_ints(ctx, 4, "seed").at(0));
    else if (at_.dropout > 0)
      seed = ctx.rng ? (*ctx.rng)() : runs_++;
    a.dr = attn::make_dropout(at_.dropout, seed);
    if (ctx.has_output(2)) {
      const int64_t host = static_cast<int64_t>(seed);
      OTTER_CUDA_CHECK(cudaMemcpyAsync(ctx.allocate_output(2, DataType::kInt64, {}).raw(), &host, sizeof host,
                                       cudaMemcpyHostToDevice, stream_of(ctx)));
    }
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
  uint64_t runs_ = 0;
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
    if (at_.dropout > 0) {
      if (!ctx.has_input(7)) ctx.error("dropout needs input 7 (the forward's Seed)");
      a.dr = attn::make_dropout(at_.dropout, static_cast<uint64_t>(host_ints(ctx, 7, "seed").at(0)));
    }
    const Tensor* like[3] = {&q, &kt, &v};
    Tensor acc[3];
    for (int k = 0; k < 3; ++k) {
      acc[k] = ctx.scratch(DataType::kFloat32, like[k]->dims());
      if (acc[k].nbytes()) OTTER_CUDA_CHECK(cudaMemsetAsync(acc[k].raw(), 0, acc[k].nbytes(), stream_of(ctx)));
    }
    Tensor dsc = scores_grad(ctx, s);
    const int64_t rows = s.bh() * s.s;
    if (rows > 0) {
      attention_backward_kernel<<<blocks_for(rows), kBlock, shared_bytes(ctx, s, true), stream_of(ctx)>>>(
          a, rows, acc[0].data<float>(), acc[1].data<float>(), acc[2].data<float>(),
          ctx.has_output(3) ? dsc.data<float>() : nullptr);
      OTTER_CUDA_LAUNCH_CHECK();
    }
    for (int k = 0; k < 3; ++k)
      if (ctx.has_output(k)) cast_tensor(ctx, acc[k], ctx.allocate_output(k, q.dtype(), like[k]->dims()));
    if (ctx.has_output(3)) cast_tensor(ctx, dsc, ctx.allocate_output(3, ctx.input(4).dtype(), dsc.dims()));
  }

 private:
  // float32 scratch for output 3, dScores [..., H, S, T] (an additive mask's gradient), where wanted;
  // every element is written by the kernel.
  Tensor scores_grad(KernelContext& ctx, const AttnShape& s) {
    if (!ctx.has_output(3)) return Tensor();
    if (at_.mode != MaskMode::kAdd) ctx.error("output 3 (dScores) needs mask_mode add");
    std::vector<int64_t> dims = s.y_dims;
    dims.back() = s.t;
    return ctx.scratch(DataType::kFloat32, dims);
  }

  AttnAttrs at_;
};

}  // namespace

KernelFactory attention_kernel(const std::string& op) {
  if (op == "Attention") return node_kernel<AttentionKernel>();
  if (op == "AttentionGrad") return node_kernel<AttentionGradKernel>();
  fail("attention_kernel: no CUDA kernel for ", op);
}

}  // namespace otter::cuda
