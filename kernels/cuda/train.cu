// CUDA kernels of the training ops (ai.otter): SumToShape, AccumulateGrad, the multi-tensor finite
// check and global norm (one launch per chunk of up to kMaxTensors tensors), the scalar ops of the
// apply program (GradScale, LearningRate, StepCount, LossScaleUpdate, LossScaleInverse, ScaleSeed)
// and the SGD / Adam updates. Scalars stay on the device: kernels read them through pointers, so
// the apply program never waits for the host. The arithmetic is kernels/common/optim.h's.
#include <cmath>

#include "kernels/common/optim.h"
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/cuda_kernels.h"

namespace otter::cuda {
namespace {

// A device scalar of any numeric dtype (the training ops' scalar inputs), or none.
struct Scalar {
  const void* p = nullptr;
  DataType t = DataType::kUndefined;
  __device__ double get() const { return load_as_double(p, t, 0); }
};

Scalar scalar_input(const KernelContext& ctx, int i, const char* what) {
  if (!ctx.has_input(i)) return {};
  const Tensor& t = ctx.input(i);
  if (t.numel() != 1) ctx.error(str_cat("input ", i, " (", what, ") must hold one element, got ", t.describe()));
  return {t.raw(), t.dtype()};
}

// The finite flag of the apply program (absent: finite).
const bool* finite_input(const KernelContext& ctx, int i) {
  if (!ctx.has_input(i)) return nullptr;
  const Tensor& t = ctx.input(i);
  if (t.dtype() != DataType::kBool || t.numel() != 1) ctx.error(str_cat("finite flag must be a bool scalar, got ", t.describe()));
  return static_cast<const bool*>(t.raw());
}

// ---- AccumulateGrad ----------------------------------------------------------------------------

// acc = g on the first micro-step, acc += g after (g converted to acc's type).
template <typename A, typename G>
__global__ void accumulate_kernel(int64_t n, A* acc, const G* g, bool first) {
  OTTER_GRID_STRIDE(i, n) {
    const compute_type<A> v = static_cast<compute_type<A>>(load_value(g[i]));
    acc[i] = first ? store_value<A>(v) : store_value<A>(load_value(acc[i]) + v);
  }
}

void accumulate_grad(KernelContext& ctx) {
  Tensor out = accumulator_output(ctx);
  const Tensor& acc = ctx.input(0);
  const Tensor& g = ctx.input(1);
  const int64_t n = acc.numel();
  if (n == 0) return;
  dispatch_float(acc.dtype(), [&](auto at) {
    using A = typename decltype(at)::type;
    dispatch_float(g.dtype(), [&](auto gt) {
      using G = typename decltype(gt)::type;
      accumulate_kernel<A, G><<<grid_for(n), kBlock, 0, stream_of(ctx)>>>(n, static_cast<A*>(out.raw()),
                                                                          static_cast<const G*>(g.raw()), ctx.first_micro_step);
      OTTER_CUDA_LAUNCH_CHECK();
    });
  });
}

void sum_to_shape_op(KernelContext& ctx) {
  const Tensor& g = ctx.input(0);
  sum_to_shape(ctx, g, ctx.allocate_output(0, g.dtype(), ctx.input(1).dims()));
}

// ---- multi-tensor kernels ----------------------------------------------------------------------

constexpr int kMaxTensors = 48;   // per launch (kernel parameters stay well under 4 KiB)
constexpr int kNormBlocks = 64;   // blocks per tensor of GlobalNormSq, one partial sum each

struct TensorList {
  int count;
  const void* ptr[kMaxTensors];
  int64_t n[kMaxTensors];
  DataType t[kMaxTensors];
};

// Calls launch(list, first_index) for the float inputs in chunks of kMaxTensors.
template <typename F>
void for_each_chunk(const KernelContext& ctx, F&& launch) {
  for (int base = 0; base < ctx.num_inputs(); base += kMaxTensors) {
    TensorList list{};
    list.count = std::min(kMaxTensors, ctx.num_inputs() - base);
    for (int j = 0; j < list.count; ++j) {
      const Tensor& t = ctx.input(base + j);
      if (t.dtype() != DataType::kFloat32 && t.dtype() != DataType::kFloat16 && t.dtype() != DataType::kBFloat16)
        ctx.error(str_cat("input ", base + j, " must be f32, f16 or bf16 on CUDA, got ", t.describe()));
      list.ptr[j] = t.raw();
      list.n[j] = t.numel();
      list.t[j] = t.dtype();
    }
    launch(list, base);
  }
}

// Tensor blockIdx.y of the list; any non-finite element clears *finite (all writers store false).
__global__ void all_finite_kernel(TensorList list, bool* finite) {
  const int t = blockIdx.y;
  bool bad = false;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < list.n[t];
       i += static_cast<int64_t>(blockDim.x) * gridDim.x)
    bad |= !isfinite(load_as_float(list.ptr[t], list.t[t], i));
  if (bad) *finite = false;
}

// partial[(base + tensor) * kNormBlocks + block] = that block's sum of squares (double).
__global__ void norm_sq_partial_kernel(TensorList list, int base, double* partial) {
  const int t = blockIdx.y;
  double s = 0;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < list.n[t];
       i += static_cast<int64_t>(blockDim.x) * gridDim.x) {
    const double v = load_as_float(list.ptr[t], list.t[t], i);
    s += v * v;
  }
  s = block_reduce(s, SumOp{}, 0.0);
  if (threadIdx.x == 0) partial[(static_cast<int64_t>(base) + t) * kNormBlocks + blockIdx.x] = s;
}

// One block: the partials summed in a fixed order (deterministic), rounded to f32.
__global__ void norm_sq_total_kernel(int64_t count, const double* partial, float* out) {
  double s = 0;
  for (int64_t i = threadIdx.x; i < count; i += blockDim.x) s += partial[i];
  s = block_reduce(s, SumOp{}, 0.0);
  if (threadIdx.x == 0) *out = static_cast<float>(s);
}

void all_finite(KernelContext& ctx) {
  Tensor& out = ctx.allocate_output(0, DataType::kBool, {});
  const cudaStream_t s = stream_of(ctx);
  bool* flag = static_cast<bool*>(out.raw());
  OTTER_CUDA_CHECK(cudaMemsetAsync(flag, 1, 1, s));
  for_each_chunk(ctx, [&](const TensorList& list, int) {
    int64_t most = 1;
    for (int j = 0; j < list.count; ++j) most = std::max(most, list.n[j]);
    const dim3 grid(std::min<unsigned>(grid_for(most), 1024u), static_cast<unsigned>(list.count));
    all_finite_kernel<<<grid, kBlock, 0, s>>>(list, flag);
    OTTER_CUDA_LAUNCH_CHECK();
  });
}

void global_norm_sq(KernelContext& ctx) {
  Tensor& out = ctx.allocate_output(0, DataType::kFloat32, {});
  const cudaStream_t s = stream_of(ctx);
  const int64_t partials = static_cast<int64_t>(ctx.num_inputs()) * kNormBlocks;
  Tensor partial = ctx.scratch(DataType::kFloat64, {std::max<int64_t>(partials, 1)});
  double* pp = static_cast<double*>(partial.raw());
  for_each_chunk(ctx, [&](const TensorList& list, int base) {
    const dim3 grid(kNormBlocks, static_cast<unsigned>(list.count));
    norm_sq_partial_kernel<<<grid, kBlock, 0, s>>>(list, base, pp);
    OTTER_CUDA_LAUNCH_CHECK();
  });
  norm_sq_total_kernel<<<1, kBlock, 0, s>>>(partials, pp, static_cast<float*>(out.raw()));
  OTTER_CUDA_LAUNCH_CHECK();
}

// ---- scalar ops of the apply program (one thread) ----------------------------------------------

__global__ void grad_scale_kernel(Scalar inv_scale, Scalar norm_sq, float max_norm, float* out) {
  const float inv = static_cast<float>(inv_scale.get());
  float coef = inv;
  if (max_norm > 0.f && norm_sq.p) coef = inv * clip_coefficient(sqrtf(static_cast<float>(norm_sq.get())) * inv, max_norm);
  *out = coef;
}

__global__ void learning_rate_kernel(Scalar step, LrSchedule kind, float lr, int64_t warmup, int64_t total, float min_lr,
                                     float* out) {
  *out = learning_rate(kind, lr, static_cast<int64_t>(step.get()), warmup, total, min_lr);
}

template <typename T>
__global__ void step_count_kernel(const T* step, const bool* finite, T* out) {
  *out = step[0] + ((!finite || *finite) ? T(1) : T(0));
}

__global__ void loss_scale_update_kernel(const float* scale, const int64_t* good, const bool* finite, LossScaleParams p,
                                         float* scale_out, int64_t* good_out) {
  float s = *scale;
  int64_t g = *good;
  loss_scale_update(s, g, !finite || *finite, p);
  *scale_out = s;
  *good_out = g;
}

__global__ void loss_scale_inverse_kernel(Scalar s, float* out) { *out = 1.f / static_cast<float>(s.get()); }

__global__ void scale_seed_kernel(int64_t n, const void* s, DataType t, float k, float* out) {
  OTTER_GRID_STRIDE(i, n) { out[i] = static_cast<float>(load_as_double(s, t, i)) / k; }
}

LrSchedule parse_schedule(const Node& n) {
  const std::string s = n.attr_s("schedule", "constant");
  if (s == "constant") return LrSchedule::kConstant;
  if (s == "linear-warmup" || s == "linear") return LrSchedule::kLinearWarmup;
  if (s == "cosine") return LrSchedule::kCosine;
  fail(n.describe(), ": unknown schedule '", s, "'");
}

void grad_scale(KernelContext& ctx) {
  Tensor& out = ctx.allocate_output(0, DataType::kFloat32, {});
  grad_scale_kernel<<<1, 1, 0, stream_of(ctx)>>>(scalar_input(ctx, 0, "inv_scale"), scalar_input(ctx, 1, "norm_sq"),
                                                 ctx.node().attr_f("max_norm", 0.f), static_cast<float*>(out.raw()));
  OTTER_CUDA_LAUNCH_CHECK();
}

void learning_rate_op(KernelContext& ctx) {
  const Node& n = ctx.node();
  Tensor& out = ctx.allocate_output(0, DataType::kFloat32, {});
  learning_rate_kernel<<<1, 1, 0, stream_of(ctx)>>>(scalar_input(ctx, 0, "step"), parse_schedule(n), n.attr_f("lr", 1e-3f),
                                                    n.attr_i("warmup", 0), n.attr_i("total", 0), n.attr_f("min_lr", 0.f),
                                                    static_cast<float*>(out.raw()));
  OTTER_CUDA_LAUNCH_CHECK();
}

void step_count(KernelContext& ctx) {
  const Tensor& s = ctx.input(0);
  if (s.numel() != 1) ctx.error(str_cat("step counter must hold one element, got ", s.describe()));
  Tensor& out = ctx.allocate_output(0, s.dtype(), s.dims());
  const bool* finite = finite_input(ctx, 1);
  const cudaStream_t st = stream_of(ctx);
  if (s.dtype() == DataType::kInt64)
    step_count_kernel<<<1, 1, 0, st>>>(static_cast<const int64_t*>(s.raw()), finite, static_cast<int64_t*>(out.raw()));
  else if (s.dtype() == DataType::kFloat32)
    step_count_kernel<<<1, 1, 0, st>>>(static_cast<const float*>(s.raw()), finite, static_cast<float*>(out.raw()));
  else
    ctx.error("step counter must be int64 or float32");
  OTTER_CUDA_LAUNCH_CHECK();
}

void loss_scale_update_op(KernelContext& ctx) {
  const Node& n = ctx.node();
  const Tensor& s = ctx.input(0);
  const Tensor& good = ctx.input(1);
  if (s.dtype() != DataType::kFloat32 || good.dtype() != DataType::kInt64 || s.numel() != 1 || good.numel() != 1)
    ctx.error("loss scale must be a float32 scalar and the good-step count an int64 scalar");
  const LossScaleParams p{n.attr_f("growth", 2.f), n.attr_f("backoff", 0.5f), n.attr_f("min_scale", 1.f),
                          n.attr_f("max_scale", 16777216.f), n.attr_i("interval", 2000)};
  float* s_out = static_cast<float*>(ctx.allocate_output(0, DataType::kFloat32, {}).raw());
  int64_t* g_out = static_cast<int64_t*>(ctx.allocate_output(1, DataType::kInt64, {}).raw());
  loss_scale_update_kernel<<<1, 1, 0, stream_of(ctx)>>>(static_cast<const float*>(s.raw()),
                                                        static_cast<const int64_t*>(good.raw()), finite_input(ctx, 2), p,
                                                        s_out, g_out);
  OTTER_CUDA_LAUNCH_CHECK();
}

void loss_scale_inverse(KernelContext& ctx) {
  const Tensor& s = ctx.input(0);
  Tensor& out = ctx.allocate_output(0, DataType::kFloat32, s.dims());
  loss_scale_inverse_kernel<<<1, 1, 0, stream_of(ctx)>>>(scalar_input(ctx, 0, "loss scale"), static_cast<float*>(out.raw()));
  OTTER_CUDA_LAUNCH_CHECK();
}

void scale_seed(KernelContext& ctx) {
  const Tensor& s = ctx.input(0);
  Tensor& out = ctx.allocate_output(0, DataType::kFloat32, s.dims());
  if (s.numel() == 0) return;
  const float k = static_cast<float>(ctx.node().attr_i("k", 1));
  scale_seed_kernel<<<grid_for(s.numel()), kBlock, 0, stream_of(ctx)>>>(s.numel(), s.raw(), s.dtype(), k,
                                                                          static_cast<float*>(out.raw()));
  OTTER_CUDA_LAUNCH_CHECK();
}

// ---- optimizer updates -------------------------------------------------------------------------

// What an update kernel does with each new parameter value besides storing it: nothing, or round it
// into the weight's half copy (the micro-step program reads that copy; docs/ops.md).
struct NoWeightCopy {
  __device__ void operator()(int64_t, float) const {}
};
template <typename H>
struct HalfWeightCopy {
  H* h;
  __device__ void operator()(int64_t i, float w) const { h[i] = store_value<H>(w); }
};

// The optional half copy of an update's parameter (input `in`), rewritten in place as output `out`;
// an undefined tensor when the node has none.
Tensor half_copy(KernelContext& ctx, int in, int out, const Tensor& p) {
  if (!ctx.has_input(in)) return Tensor();
  const Tensor& h = ctx.input(in);
  if ((h.dtype() != DataType::kFloat16 && h.dtype() != DataType::kBFloat16) || h.dims() != p.dims())
    ctx.error(str_cat("the half copy ", h.describe(), " does not match the parameter ", p.describe()));
  ctx.alias_output(out, h, h.dims());
  return h;
}

// Calls launch(copy) with the copy functor the node asks for.
template <typename L>
void with_weight_copy(const Tensor& half, L&& launch) {
  if (!half.defined()) return launch(NoWeightCopy{});
  Tensor h = half;
  if (h.dtype() == DataType::kFloat16) return launch(HalfWeightCopy<Half>{static_cast<Half*>(h.raw())});
  launch(HalfWeightCopy<BFloat16>{static_cast<BFloat16*>(h.raw())});
}

// SGDUpdate, in place, skipped entirely when the step is not finite.
template <typename G, typename Copy>
__global__ void sgd_kernel(int64_t n, float* p, const G* g, float* mom, Scalar lr, Scalar gscale, const bool* finite,
                           SgdParams sp, Copy copy) {
  if (finite && !*finite) return;
  sp.lr = static_cast<float>(lr.get());
  const float gs = static_cast<float>(gscale.get());
  OTTER_GRID_STRIDE(i, n) {
    sgd_element(p[i], load_value(g[i]) * gs, mom ? mom + i : nullptr, sp);
    copy(i, p[i]);
  }
}

// AdamUpdate, in place; `step` counts completed updates, so this one is step + 1.
template <typename G, typename Copy>
__global__ void adam_kernel(int64_t n, float* p, const G* g, float* m, float* v, Scalar step, Scalar lr, Scalar gscale,
                            const bool* finite, AdamParams ap, Copy copy) {
  if (finite && !*finite) return;
  const double t = step.get() + 1;
  ap.lr = static_cast<float>(lr.get());
  ap.bias_correction1 = static_cast<float>(1.0 - pow(static_cast<double>(ap.beta1), t));
  ap.bias_correction2_sqrt = static_cast<float>(sqrt(1.0 - pow(static_cast<double>(ap.beta2), t)));
  const float gs = static_cast<float>(gscale.get());
  OTTER_GRID_STRIDE(i, n) {
    adam_element(p[i], load_value(g[i]) * gs, m[i], v[i], ap);
    copy(i, p[i]);
  }
}

// Parameters (and moments) must be fp32 master weights of one shape with the gradient.
void check_update_operands(const KernelContext& ctx, const std::vector<int>& f32_inputs) {
  const Tensor& p = ctx.input(0);
  for (int i : f32_inputs) {
    const Tensor& t = ctx.input(i);
    if (t.dtype() != DataType::kFloat32) ctx.error(str_cat("input ", i, " must be float32 (master weights), got ", t.describe()));
    if (t.dims() != p.dims()) ctx.error(str_cat("input ", i, " ", t.describe(), " does not match the parameter ", p.describe()));
  }
  if (ctx.input(1).numel() != p.numel())
    ctx.error(str_cat("gradient ", ctx.input(1).describe(), " does not match the parameter ", p.describe()));
}

// SGDUpdate(p, g, mom?, lr, gscale, finite, p_half?) -> p_out, mom_out, p_half_out (in place).
void sgd_update(KernelContext& ctx) {
  const Node& n = ctx.node();
  const Tensor& p = ctx.input(0);
  const Tensor& g = ctx.input(1);
  const bool has_mom = ctx.has_input(2);
  check_update_operands(ctx, has_mom ? std::vector<int>{0, 2} : std::vector<int>{0});
  ctx.alias_output(0, p, p.dims());
  if (has_mom) ctx.alias_output(1, ctx.input(2), p.dims());
  const Tensor half = half_copy(ctx, 6, 2, p);
  const int64_t count = p.numel();
  if (count == 0) return;
  const SgdParams sp{0.f, n.attr_f("momentum", 0.f), n.attr_f("weight_decay", 0.f), n.attr_i("nesterov", 0) != 0};
  Tensor pt = p, mt = has_mom ? ctx.input(2) : Tensor();
  dispatch_float(g.dtype(), [&](auto tag) {
    using G = typename decltype(tag)::type;
    with_weight_copy(half, [&](auto copy) {
      sgd_kernel<G><<<grid_for(count), kBlock, 0, stream_of(ctx)>>>(
          count, static_cast<float*>(pt.raw()), static_cast<const G*>(g.raw()),
          has_mom ? static_cast<float*>(mt.raw()) : nullptr, scalar_input(ctx, 3, "lr"),
          scalar_input(ctx, 4, "gscale"), finite_input(ctx, 5), sp, copy);
      OTTER_CUDA_LAUNCH_CHECK();
    });
  });
}

// AdamUpdate(p, g, m, v, step, lr, gscale, finite, p_half?) -> p_out, m_out, v_out, p_half_out (in place).
void adam_update(KernelContext& ctx) {
  const Node& n = ctx.node();
  const Tensor& p = ctx.input(0);
  const Tensor& g = ctx.input(1);
  check_update_operands(ctx, {0, 2, 3});
  ctx.alias_output(0, p, p.dims());
  ctx.alias_output(1, ctx.input(2), p.dims());
  ctx.alias_output(2, ctx.input(3), p.dims());
  const Tensor half = half_copy(ctx, 8, 3, p);
  const int64_t count = p.numel();
  if (count == 0) return;
  const AdamParams ap{0.f, n.attr_f("beta1", 0.9f), n.attr_f("beta2", 0.999f), n.attr_f("eps", 1e-8f),
                      n.attr_f("weight_decay", 0.f), 1.f, 1.f, n.attr_i("decoupled", 0) != 0};
  Tensor pt = p, mt = ctx.input(2), vt = ctx.input(3);
  dispatch_float(g.dtype(), [&](auto tag) {
    using G = typename decltype(tag)::type;
    with_weight_copy(half, [&](auto copy) {
      adam_kernel<G><<<grid_for(count), kBlock, 0, stream_of(ctx)>>>(
          count, static_cast<float*>(pt.raw()), static_cast<const G*>(g.raw()), static_cast<float*>(mt.raw()),
          static_cast<float*>(vt.raw()), scalar_input(ctx, 4, "step"), scalar_input(ctx, 5, "lr"),
          scalar_input(ctx, 6, "gscale"), finite_input(ctx, 7), ap, copy);
      OTTER_CUDA_LAUNCH_CHECK();
    });
  });
}

}  // namespace

KernelFactory train_kernel(const std::string& op) {
  if (op == "SumToShape") return simple_kernel(sum_to_shape_op);
  if (op == "AccumulateGrad") return simple_kernel(accumulate_grad);
  if (op == "AllFinite") return simple_kernel(all_finite);
  if (op == "GlobalNormSq") return simple_kernel(global_norm_sq);
  if (op == "GradScale") return simple_kernel(grad_scale);
  if (op == "LearningRate") return simple_kernel(learning_rate_op);
  if (op == "SGDUpdate") return simple_kernel(sgd_update);
  if (op == "AdamUpdate") return simple_kernel(adam_update);
  if (op == "StepCount") return simple_kernel(step_count);
  if (op == "LossScaleUpdate") return simple_kernel(loss_scale_update_op);
  if (op == "LossScaleInverse") return simple_kernel(loss_scale_inverse);
  if (op == "ScaleSeed") return simple_kernel(scale_seed);
  fail("train_kernel: no CUDA kernel for ", op);
}

}  // namespace otter::cuda
