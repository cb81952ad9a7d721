// CPU kernels of the training ops (ai.otter): SumToShape, gradient accumulation, the finite check,
// global norm, learning rate, optimizer updates and loss-scale updates. The arithmetic is in
// kernels/common/optim.h, shared with CUDA.
#include <cmath>
#include <cstring>
#include <type_traits>

#include "kernels/common/checks.h"
#include "kernels/common/half.h"
#include "kernels/common/optim.h"
#include "kernels/cpu/broadcast.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/dispatch.h"
#include "kernels/cpu/isa.h"
#include "kernels/cpu/gemm.h"
#include "kernels/cpu/gemm_bf16.h"
#include "graph/op_table.h"

namespace otter {

namespace {

const std::vector<DataType> kFloats = {DataType::kFloat32, DataType::kFloat64};

// Calls f with a value of float or double, by dtype.
template <typename F>
void for_float(DataType t, F&& f) {
  if (t == DataType::kFloat32) f(float{});
  else if (t == DataType::kFloat64) f(double{});
  else fail("expected float32 or float64, got ", dtype_name(t));
}

// Element i of any float tensor as float/double.
template <typename T>
T read_as(const Tensor& t, int64_t i) {
  switch (t.dtype()) {
    case DataType::kFloat32: return static_cast<T>(t.data<float>()[i]);
    case DataType::kFloat64: return static_cast<T>(t.data<double>()[i]);
    case DataType::kFloat16: return static_cast<T>(half_to_float(static_cast<const uint16_t*>(t.raw())[i]));
    case DataType::kBFloat16: return static_cast<T>(bf16_to_float(static_cast<const uint16_t*>(t.raw())[i]));
    default: fail("expected a float tensor, got ", t.describe());
  }
}

double scalar_f(const Tensor& t) { return t.get_as_double(0); }

// Sums g over the axes where `like` is broadcast (numpy unbroadcasting) into out.
template <typename T>
void sum_to_shape(const Tensor& g, const std::vector<int64_t>& target, Tensor& out) {
  const auto& gd = g.dims();
  size_t r = gd.size();
  std::vector<int64_t> td(r, 1);
  OTTER_CHECK(target.size() <= r, "SumToShape: target rank exceeds gradient rank");
  for (size_t k = 0; k < target.size(); ++k) td[r - target.size() + k] = target[k];
  for (size_t k = 0; k < r; ++k)
    OTTER_CHECK(td[k] == gd[k] || td[k] == 1, "SumToShape: cannot reduce ", dims_to_string(gd), " to ",
                dims_to_string(target));
  T* o = out.data<T>();
  std::memset(o, 0, out.nbytes());
  const T* in = g.data<T>();
  // Strides of the target (0 on broadcast axes), walked with an odometer.
  std::vector<int64_t> ts(r, 0);
  int64_t s = 1;
  for (size_t k = r; k-- > 0;) {
    ts[k] = td[k] == 1 ? 0 : s;
    s *= td[k];
  }
  int64_t n = g.numel();
  if (n == 0) return;
  int64_t inner = gd.empty() ? 1 : gd.back();
  std::vector<int64_t> idx(r, 0);
  for (int64_t base = 0; base < n; base += inner) {
    int64_t off = 0;
    for (size_t k = 0; k + 1 < r; ++k) off += idx[k] * ts[k];
    const T* row = in + base;
    if (r == 0) {
      o[0] += row[0];
    } else if (ts[r - 1] == 0) {
      T acc = 0;
      for (int64_t j = 0; j < inner; ++j) acc += row[j];
      o[off] += acc;
    } else {
      for (int64_t j = 0; j < inner; ++j) o[off + j] += row[j];
    }
    for (size_t k = r - 1; k-- > 0;) {
      if (++idx[k] < gd[k]) break;
      idx[k] = 0;
    }
  }
}

void sum_to_shape_kernel(KernelContext& ctx) {
  const Tensor& g = ctx.input(0);
  const Tensor& like = ctx.input(1);
  Tensor& out = ctx.allocate_output(0, g.dtype(), like.dims());
  for_float(g.dtype(), [&](auto tag_) {
    using T = decltype(tag_); sum_to_shape<T>(g, like.dims(), out); });
}

// acc (+)= g; the output shares acc's buffer.
void accumulate_kernel(KernelContext& ctx) {
  Tensor out = accumulator_output(ctx);
  const Tensor& acc = ctx.input(0);
  const Tensor& g = ctx.input(1);
  const int64_t n = acc.numel();
  const bool first = ctx.first_micro_step;
  for_float(acc.dtype(), [&](auto tag_) {
    using T = decltype(tag_);
    T* a = out.data<T>();
    if (g.dtype() == acc.dtype()) {
      const T* gp = g.data<T>();
      if (first) {  // both threads copy: one core cannot saturate the memory bus
        cpu::parallel_ranges(n, [&](int64_t b, int64_t e) { std::memcpy(a + b, gp + b, (e - b) * sizeof(T)); });
      } else {
        cpu::parallel_ranges(n, [&](int64_t b, int64_t e) {
          cpu::isa_dispatch_if<std::is_same_v<T, float>>([&] {
            for (int64_t i = b; i < e; ++i) a[i] += gp[i];
          });
        });
      }
    } else {
#pragma omp parallel for if (n > 32768)
      for (int64_t i = 0; i < n; ++i) a[i] = (first ? T(0) : a[i]) + read_as<T>(g, i);
    }
  });
}

void gemm_accumulate_kernel(KernelContext& ctx) {
  const Tensor& a = ctx.input(0);
  const Tensor& b = ctx.input(1);
  const Tensor& acc = ctx.input(2);
  const bool ta = ctx.node().attr_i("transA", 0) != 0, tb = ctx.node().attr_i("transB", 0) != 0;
  const double alpha = ctx.node().attr_f("alpha", 1.0f);
  if (a.rank() != 2 || b.rank() != 2) ctx.error("operands must be 2-D");
  int64_t m = ta ? a.dim(1) : a.dim(0), k = ta ? a.dim(0) : a.dim(1);
  int64_t kb = tb ? b.dim(1) : b.dim(0), n = tb ? b.dim(0) : b.dim(1);
  if (k != kb || acc.dims() != std::vector<int64_t>{m, n})
    ctx.error(str_cat("shapes ", a.describe(), " x ", b.describe(), " do not fit accumulator ", acc.describe()));
  ctx.alias_output(0, acc, acc.dims());
  Tensor out = acc;
  if (a.dtype() == DataType::kBFloat16 && b.dtype() == a.dtype() && acc.dtype() == DataType::kFloat32) {
    // bf16 products summed in float32 into the accumulator (kernels/cpu/gemm_bf16.h), which is read
    // next by the following micro-step's GEMM or by the optimizer at the end of the step.
    cpu::gemm_bf16(ta, tb, m, n, k, static_cast<float>(alpha), static_cast<const uint16_t*>(a.raw()), ta ? m : k,
                   static_cast<const uint16_t*>(b.raw()), tb ? k : n, ctx.first_micro_step ? 0.f : 1.f,
                   out.data<float>(), n, /*read_later=*/true);
    return;
  }
  if (a.dtype() != acc.dtype() || b.dtype() != acc.dtype())
    ctx.error("operands and accumulator must share a dtype on the CPU (or be bf16 into a float32 accumulator)");
  for_float(acc.dtype(), [&](auto tag_) {
    using T = decltype(tag_);
    cpu::gemm<T>(ta, tb, m, n, k, static_cast<T>(alpha), a.data<T>(), b.data<T>(), ctx.first_micro_step ? T(0) : T(1),
                 out.data<T>());
  });
}

void all_finite_kernel(KernelContext& ctx) {
  bool finite = true;
  for (int i = 0; i < ctx.num_inputs() && finite; ++i) {
    const Tensor& t = ctx.input(i);
    const int64_t n = t.numel();
    bool ok = true;
    for_float(t.dtype(), [&](auto tag_) {
    using T = decltype(tag_);
      using A = std::conditional_t<std::is_same_v<T, double>, double, float>;
      const T* p = t.data<T>();
      // x * 0 is 0 for finite x and NaN for inf or NaN: one branch-free sum that vectorises.
      // Small tensors skip OpenMP altogether (an if(false) parallel region still costs about a
      // microsecond, which dominates the step of a small model).
      A z = 0;
      if (n > 65536) {
#pragma omp parallel for simd reduction(+ : z)
        for (int64_t j = 0; j < n; ++j) z += static_cast<A>(p[j]) * A(0);
      } else {
#pragma omp simd reduction(+ : z)
        for (int64_t j = 0; j < n; ++j) z += static_cast<A>(p[j]) * A(0);
      }
      ok = z == A(0);
    });
    finite = ok;
  }
  Tensor& out = ctx.allocate_output(0, DataType::kBool, {});
  out.data<bool>()[0] = finite;
}

void global_norm_sq_kernel(KernelContext& ctx) {
  double total = 0;
  for (int i = 0; i < ctx.num_inputs(); ++i) {
    const Tensor& t = ctx.input(i);
    const int64_t n = t.numel();
    double s = 0;
    for_float(t.dtype(), [&](auto tag_) {
    using T = decltype(tag_);
      const T* p = t.data<T>();
      if (n > 65536) {
#pragma omp parallel for reduction(+ : s)
        for (int64_t j = 0; j < n; ++j) s += static_cast<double>(p[j]) * p[j];
      } else {
        for (int64_t j = 0; j < n; ++j) s += static_cast<double>(p[j]) * p[j];
      }
    });
    total += s;
  }
  Tensor& out = ctx.allocate_output(0, DataType::kFloat32, {});
  out.data<float>()[0] = static_cast<float>(total);
}

// GradScale(inv_scale, norm_sq?) {max_norm}
void grad_scale_kernel(KernelContext& ctx) {
  float inv = static_cast<float>(scalar_f(ctx.input(0)));
  float max_norm = ctx.node().attr_f("max_norm", 0.f);
  float coef = inv;
  if (max_norm > 0.f && ctx.has_input(1)) {
    float norm = std::sqrt(static_cast<float>(scalar_f(ctx.input(1)))) * inv;
    coef = inv * clip_coefficient(norm, max_norm);
  }
  Tensor& out = ctx.allocate_output(0, DataType::kFloat32, {});
  out.data<float>()[0] = coef;
}

LrSchedule parse_schedule(const Node& n) {
  std::string s = n.attr_s("schedule", "constant");
  if (s == "constant") return LrSchedule::kConstant;
  if (s == "linear-warmup" || s == "linear") return LrSchedule::kLinearWarmup;
  if (s == "cosine") return LrSchedule::kCosine;
  fail(n.describe(), ": unknown schedule '", s, "'");
}

void learning_rate_kernel(KernelContext& ctx) {
  const Node& n = ctx.node();
  int64_t step = static_cast<int64_t>(scalar_f(ctx.input(0)));
  float lr = learning_rate(parse_schedule(n), n.attr_f("lr", 1e-3f), step, n.attr_i("warmup", 0), n.attr_i("total", 0),
                           n.attr_f("min_lr", 0.f));
  Tensor& out = ctx.allocate_output(0, DataType::kFloat32, {});
  out.data<float>()[0] = lr;
}

bool finite_flag(KernelContext& ctx, int i) { return !ctx.has_input(i) || ctx.input(i).data<bool>()[0]; }

// The optional half copy of an update's parameter (input `in`), rewritten in place as output `out`;
// an undefined tensor when the node has none.
Tensor half_copy(KernelContext& ctx, int in, int out, const Tensor& p) {
  if (!ctx.has_input(in)) return Tensor();
  const Tensor& h = ctx.input(in);
  if (!is_half(h.dtype()) || h.dims() != p.dims())
    ctx.error(str_cat("the half copy ", h.describe(), " does not match the parameter ", p.describe()));
  ctx.alias_output(out, h, h.dims());
  return h;
}

// Runs `update(i)` (which updates element i and returns the new weight) over `count` elements and,
// when `half` is defined, rounds each new weight into it in the same sweep.
template <typename F>
void update_elements(int64_t count, Tensor half, F&& update) {
  if (!half.defined()) {
#pragma omp parallel for if (count > 32768)
    for (int64_t i = 0; i < count; ++i) update(i);
    return;
  }
  OTTER_DISPATCH_HALF(half.dtype(), S, [&] {
    S* h = static_cast<S*>(half.raw());
    cpu::parallel_ranges(count, [&](int64_t b, int64_t e) {
      cpu::isa_dispatch([&] {
        for (int64_t i = b; i < e; ++i) h[i] = cpu::store<S>(update(i));
      });
    });
  });
}

// An optimizer update of `count` float32 weights p from the gradient g: when g is fp32,
// `range(b, e, gp)` over contiguous ranges (gp: g's data), in parallel and as the active ISA
// variant, each range then rounded into the half copy where there is one; else `element(i, gi)`
// (updates element i from its gradient gi read as float and returns the new weight) through
// update_elements.
template <typename Range, typename Element>
void run_update(int64_t count, const Tensor& g, const Tensor& half, const float* p, Range&& range, Element&& element) {
  const bool g32 = g.dtype() == DataType::kFloat32;
  const float* gp = g32 ? g.data<float>() : nullptr;
  if (g32 && !half.defined()) {  // the common fp32 case: contiguous arrays, vectorised
    cpu::parallel_ranges(count, [&](int64_t b, int64_t e) { cpu::isa_dispatch([&] { range(b, e, gp); }); });
    return;
  }
  if (g32) {  // mixed precision (fp32 accumulators): the same vectorised range, then its half copy
    Tensor ht = half;  // shares the half copy's storage
    OTTER_DISPATCH_HALF(ht.dtype(), S, [&] {
      S* h = static_cast<S*>(ht.raw());
      cpu::parallel_ranges(count, [&](int64_t b, int64_t e) {
        cpu::isa_dispatch([&] {
          // A chunk at a time, so the new weights are rounded while still in L1 (a whole range
          // rounded after its update read them from memory a second time).
          constexpr int64_t kChunk = 2048;
          for (int64_t c = b; c < e; c += kChunk) {
            const int64_t ce = std::min(e, c + kChunk);
            range(c, ce, gp);
            for (int64_t i = c; i < ce; ++i) h[i] = cpu::store<S>(p[i]);
          }
        });
      });
    });
    return;
  }
  update_elements(count, half, [&](int64_t i) { return element(i, g32 ? gp[i] : read_as<float>(g, i)); });
}

// sgd_element over contiguous fp32 arrays, the momentum and Nesterov modes fixed at compile time
// so the loop has no branches and vectorises.
template <bool kMomentum, bool kNesterov>
void sgd_range(float* __restrict p, const float* __restrict g, float* __restrict mom, int64_t n, float gs,
               SgdParams s) {
  s.nesterov = kNesterov;
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) sgd_element(p[i], g[i] * gs, kMomentum ? mom + i : nullptr, s);
}

// SGDUpdate(p, g, mom?, lr, gscale, finite, p_half?) -> p_out, mom_out, p_half_out (in place).
void sgd_kernel(KernelContext& ctx) {
  const Node& n = ctx.node();
  const Tensor& p = ctx.input(0);
  const Tensor& g = ctx.input(1);
  ctx.alias_output(0, p, p.dims());
  bool has_mom = ctx.has_input(2);
  if (has_mom) ctx.alias_output(1, ctx.input(2), p.dims());
  Tensor half = half_copy(ctx, 6, 2, p);
  if (!finite_flag(ctx, 5)) return;
  if (p.dtype() != DataType::kFloat32) ctx.error("parameters must be float32 (master weights)");
  SgdParams sp{static_cast<float>(scalar_f(ctx.input(3))), n.attr_f("momentum", 0.f), n.attr_f("weight_decay", 0.f),
               n.attr_i("nesterov", 0) != 0};
  float gs = static_cast<float>(scalar_f(ctx.input(4)));
  Tensor pt = p;
  float* pp = pt.data<float>();
  Tensor mt = has_mom ? ctx.input(2) : Tensor();
  float* mp = has_mom ? mt.data<float>() : nullptr;
  run_update(
      p.numel(), g, half, pp,
      [&](int64_t b, int64_t e, const float* gp) {
        if (!mp) sgd_range<false, false>(pp + b, gp + b, nullptr, e - b, gs, sp);
        else if (sp.nesterov) sgd_range<true, true>(pp + b, gp + b, mp + b, e - b, gs, sp);
        else sgd_range<true, false>(pp + b, gp + b, mp + b, e - b, gs, sp);
      },
      [&](int64_t i, float gi) {
        sgd_element(pp[i], gi * gs, mp ? mp + i : nullptr, sp);
        return pp[i];
      });
}

// adam_element over contiguous fp32 arrays with the weight-decay mode fixed at compile time
// (kDecay: 0 none, 1 L2 into the gradient, 2 decoupled), so the loop has no branches and vectorises.
template <int kDecay>
void adam_range(float* __restrict p, const float* __restrict g, float* __restrict m, float* __restrict v, int64_t n,
                float gs, AdamParams a) {
  if constexpr (kDecay == 0) a.weight_decay = 0.f;
  a.decoupled = kDecay == 2;
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) adam_element(p[i], g[i] * gs, m[i], v[i], a);
}

// AdamUpdate(p, g, m, v, step, lr, gscale, finite, p_half?) -> p_out, m_out, v_out, p_half_out
// (in place).
void adam_kernel(KernelContext& ctx) {
  const Node& n = ctx.node();
  const Tensor& p = ctx.input(0);
  const Tensor& g = ctx.input(1);
  ctx.alias_output(0, p, p.dims());
  ctx.alias_output(1, ctx.input(2), p.dims());
  ctx.alias_output(2, ctx.input(3), p.dims());
  Tensor half = half_copy(ctx, 8, 3, p);
  if (!finite_flag(ctx, 7)) return;
  if (p.dtype() != DataType::kFloat32) ctx.error("parameters must be float32 (master weights)");
  double t = scalar_f(ctx.input(4)) + 1;  // this update's 1-based step
  double b1 = n.attr_f("beta1", 0.9f), b2 = n.attr_f("beta2", 0.999f);
  AdamParams ap{static_cast<float>(scalar_f(ctx.input(5))),
                static_cast<float>(b1),
                static_cast<float>(b2),
                n.attr_f("eps", 1e-8f),
                n.attr_f("weight_decay", 0.f),
                static_cast<float>(1.0 - std::pow(b1, t)),
                static_cast<float>(std::sqrt(1.0 - std::pow(b2, t))),
                n.attr_i("decoupled", 0) != 0};
  float gs = static_cast<float>(scalar_f(ctx.input(6)));
  Tensor pt = p, mt = ctx.input(2), vt = ctx.input(3);
  float* pp = pt.data<float>();
  float* mp = mt.data<float>();
  float* vp = vt.data<float>();
  run_update(
      p.numel(), g, half, pp,
      [&](int64_t b, int64_t e, const float* gp) {
        if (ap.weight_decay == 0.f) adam_range<0>(pp + b, gp + b, mp + b, vp + b, e - b, gs, ap);
        else if (ap.decoupled) adam_range<2>(pp + b, gp + b, mp + b, vp + b, e - b, gs, ap);
        else adam_range<1>(pp + b, gp + b, mp + b, vp + b, e - b, gs, ap);
      },
      [&](int64_t i, float gi) {
        adam_element(pp[i], gi * gs, mp[i], vp[i], ap);
        return pp[i];
      });
}

void step_count_kernel(KernelContext& ctx) {
  const Tensor& s = ctx.input(0);
  Tensor& out = ctx.allocate_output(0, s.dtype(), s.dims());
  bool finite = finite_flag(ctx, 1);
  if (s.dtype() == DataType::kInt64) out.data<int64_t>()[0] = s.data<int64_t>()[0] + (finite ? 1 : 0);
  else if (s.dtype() == DataType::kFloat32) out.data<float>()[0] = s.data<float>()[0] + (finite ? 1.f : 0.f);
  else ctx.error("step counter must be int64 or float32");
}

void loss_scale_update_kernel(KernelContext& ctx) {
  const Node& n = ctx.node();
  const Tensor& s = ctx.input(0);
  const Tensor& good = ctx.input(1);
  if (s.dtype() != DataType::kFloat32 || good.dtype() != DataType::kInt64)
    ctx.error("loss scale must be float32 and the good-step count int64");
  LossScaleParams lp{n.attr_f("growth", 2.f), n.attr_f("backoff", 0.5f), n.attr_f("min_scale", 1.f),
                     n.attr_f("max_scale", 16777216.f), n.attr_i("interval", 2000)};
  float scale = s.data<float>()[0];
  int64_t g = good.data<int64_t>()[0];
  loss_scale_update(scale, g, finite_flag(ctx, 2), lp);
  ctx.allocate_output(0, DataType::kFloat32, {}).data<float>()[0] = scale;
  ctx.allocate_output(1, DataType::kInt64, {}).data<int64_t>()[0] = g;
}

void loss_scale_inverse_kernel(KernelContext& ctx) {
  const Tensor& s = ctx.input(0);
  ctx.allocate_output(0, DataType::kFloat32, s.dims()).data<float>()[0] = 1.f / static_cast<float>(scalar_f(s));
}

void scale_seed_kernel(KernelContext& ctx) {
  const Tensor& s = ctx.input(0);
  float k = static_cast<float>(ctx.node().attr_i("k", 1));
  Tensor& out = ctx.allocate_output(0, DataType::kFloat32, s.dims());
  for (int64_t i = 0; i < s.numel(); ++i) out.data<float>()[i] = static_cast<float>(s.get_as_double(i)) / k;
}

KernelDef def(const std::string& op, std::vector<DataType> types, KernelFactory f) {
  KernelDef d;
  d.domain = kOtterDomain;
  d.op_type = op;
  d.dtypes = std::move(types);
  d.create = std::move(f);
  return d;
}

}  // namespace

void register_cpu_train_kernels(KernelRegistry& r) {
  r.add(def("SumToShape", kFloats, simple_kernel(sum_to_shape_kernel)));
  r.add(def("AccumulateGrad", {DataType::kFloat32, DataType::kFloat64, DataType::kFloat16, DataType::kBFloat16},
            simple_kernel(accumulate_kernel)));
  // bf16 operands (into a float32 accumulator) multiply on the bf16 GEMM; float16 ones come through
  // kernels/cpu/half.cc's widening wrapper.
  r.add(def("GemmAccumulate", {DataType::kFloat32, DataType::kFloat64, DataType::kBFloat16},
            simple_kernel(gemm_accumulate_kernel)));
  r.add(def("AllFinite", {}, simple_kernel(all_finite_kernel)));
  r.add(def("GlobalNormSq", {}, simple_kernel(global_norm_sq_kernel)));
  r.add(def("GradScale", {}, simple_kernel(grad_scale_kernel)));
  r.add(def("LearningRate", {}, simple_kernel(learning_rate_kernel)));
  r.add(def("SGDUpdate", {}, simple_kernel(sgd_kernel)));
  r.add(def("AdamUpdate", {}, simple_kernel(adam_kernel)));
  r.add(def("StepCount", {}, simple_kernel(step_count_kernel)));
  r.add(def("LossScaleUpdate", {}, simple_kernel(loss_scale_update_kernel)));
  r.add(def("ScaleSeed", {}, simple_kernel(scale_seed_kernel)));
  r.add(def("LossScaleInverse", {}, simple_kernel(loss_scale_inverse_kernel)));
}

}  // namespace otter
