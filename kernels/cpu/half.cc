// Half-precision CPU kernels by widening: every CPU kernel written for float32 (and not for the
// 16-bit types) also serves float16 and bfloat16. Half inputs widen exactly to float32, the
// float32 kernel computes (sums accumulate in float32, as a GPU's half kernels with a 32F compute
// type do: cuBLASLt GEMMs, cuDNN convolutions and normalisations), and each output the graph
// types as half is rounded once, to nearest even. CPU numerics thus match the GPU's up to
// summation order. GEMMs convert their operands whole and call OpenBLAS's sgemm.
#include <memory>
#include <type_traits>
#include <vector>

#if defined(__x86_64__)
#include <cpuid.h>
#include <immintrin.h>
#endif

#include "kernels/cpu/broadcast.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/dispatch.h"
#include "kernels/cpu/half.h"
#include "kernels/cpu/isa.h"

namespace otter {

namespace cpu {

namespace {

// float16 <-> float32 of whole runs: the x86 F16C instructions where the CPU has them (IEEE
// conversions: exact widening, round-to-nearest-even narrowing, the same values as half.h's
// functions, which the tests check exhaustively), else half.h per element. Bulk conversion is what
// the half kernels spend their extra time on; F16C makes it several times faster.
#if defined(__x86_64__)
__attribute__((target("avx,f16c"))) void widen_f16c(const uint16_t* x, float* y, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(y + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x + i))));
  for (; i < n; ++i) y[i] = half_to_float(x[i]);
}

__attribute__((target("avx,f16c"))) void round_f16c(const float* x, uint16_t* y, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm_storeu_si128(reinterpret_cast<__m128i*>(y + i), _mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT));
  for (; i < n; ++i) y[i] = float_to_half(x[i]);
}

bool have_f16c() {
  // CPUID leaf 1, ECX bit 29 (clang 14's __builtin_cpu_supports does not know "f16c").
  static const bool yes = __builtin_cpu_supports("avx") && [] {
    unsigned a, b, c, d;
    return __get_cpuid(1, &a, &b, &c, &d) && (c & (1u << 29)) != 0;
  }();
  return yes;
}
#else
bool have_f16c() { return false; }
void widen_f16c(const uint16_t*, float*, int64_t) {}
void round_f16c(const float*, uint16_t*, int64_t) {}
#endif

// F16C is part of the avx2 and avx512 variants (isa.h); OTTER_ISA=baseline converts per element.
bool use_f16c() { return have_f16c() && active_isa() != Isa::kBaseline; }

}  // namespace

Tensor widen_to_float(const Tensor& t) {
  Tensor out(DataType::kFloat32, t.dims());
  widen_into(t, out);
  return out;
}

void widen_into(const Tensor& t, Tensor& out) {
  OTTER_CHECK(out.dtype() == DataType::kFloat32 && t.dims() == out.dims(), "widen_into: ", t.describe(), " into ",
              out.describe());
  float* y = out.data<float>();
  OTTER_DISPATCH_HALF(t.dtype(), S, [&] {
    const S* x = static_cast<const S*>(t.raw());
    parallel_ranges(t.numel(), [&](int64_t b, int64_t e) {
      if (std::is_same_v<S, Half> && use_f16c()) {
        widen_f16c(reinterpret_cast<const uint16_t*>(x) + b, y + b, e - b);
        return;
      }
      isa_dispatch([&] {
        for (int64_t i = b; i < e; ++i) y[i] = load(x[i]);
      });
    });
  });
}

void round_into(const Tensor& src, Tensor& dst) {
  OTTER_CHECK(src.dtype() == DataType::kFloat32 && src.dims() == dst.dims(), "round_into: ", src.describe(),
              " into ", dst.describe());
  const float* x = src.data<float>();
  OTTER_DISPATCH_HALF(dst.dtype(), S, [&] {
    S* y = static_cast<S*>(dst.raw());
    parallel_ranges(src.numel(), [&](int64_t b, int64_t e) {
      if (std::is_same_v<S, Half> && use_f16c()) {
        round_f16c(x + b, reinterpret_cast<uint16_t*>(y) + b, e - b);
        return;
      }
      isa_dispatch([&] {
        for (int64_t i = b; i < e; ++i) y[i] = store<S>(x[i]);
      });
    });
  });
}

void widen_bf16(const uint16_t* x, float* y, int64_t n) {
  isa_dispatch([&] {
    for (int64_t i = 0; i < n; ++i) y[i] = bf16_to_float(x[i]);
  });
}

void round_to_bf16(const float* x, uint16_t* y, int64_t n) {
  isa_dispatch([&] {
    for (int64_t i = 0; i < n; ++i) y[i] = float_to_bf16(x[i]);
  });
}

}  // namespace cpu

namespace {

// Runs the float32 kernel of a node on widened inputs and rounds its half outputs.
class HalfViaFloatKernel : public Kernel {
 public:
  explicit HalfViaFloatKernel(std::unique_ptr<Kernel> inner) : inner_(std::move(inner)) {}

  void run(KernelContext& ctx) override {
    const Node& n = ctx.node();
    std::vector<Tensor> wide(ctx.num_inputs());
    std::vector<const Tensor*> ins(ctx.num_inputs(), nullptr);
    for (int i = 0; i < ctx.num_inputs(); ++i) {
      if (!ctx.has_input(i)) continue;
      const Tensor& t = ctx.input(i);
      if (is_half(t.dtype())) {
        wide[i] = cpu::widen_to_float(t);
        ins[i] = &wide[i];
      } else {
        ins[i] = &t;
      }
    }
    std::vector<Tensor> results(ctx.num_outputs());
    std::vector<Tensor*> outs;
    for (int i = 0; i < ctx.num_outputs(); ++i) outs.push_back(ctx.has_output(i) ? &results[i] : nullptr);
    KernelContext inner(n, ins, outs, HostAllocator::instance());
    inner.device = ctx.device;
    inner.rng = ctx.rng;
    inner.first_micro_step = ctx.first_micro_step;
    inner_->run(inner);
    for (int i = 0; i < ctx.num_outputs(); ++i) {
      if (!ctx.has_output(i)) continue;
      const Tensor& r = results[i];
      const Value* v = n.output(i);
      if (v && is_half(v->dtype()) && r.dtype() == DataType::kFloat32) {
        cpu::round_into(r, ctx.allocate_output(i, v->dtype(), r.dims()));
      } else {
        ctx.alias_output(i, r, r.dims());
      }
    }
  }

 private:
  std::unique_ptr<Kernel> inner_;
};

bool covers(const KernelDef& d, DataType t) {
  for (DataType x : d.dtypes)
    if (x == t) return true;
  return false;
}

}  // namespace

std::unique_ptr<Kernel> half_via_float_kernel(std::unique_ptr<Kernel> inner) {
  return std::make_unique<HalfViaFloatKernel>(std::move(inner));
}

void register_cpu_half_kernels(KernelRegistry& r) {
  std::vector<KernelDef> halves;
  for (const KernelDef& d : r.all()) {
    if (d.device != DeviceType::kCpu || !covers(d, DataType::kFloat32)) continue;
    // The half types the kernel does not compute itself (MatMul and Gemm have their own bf16).
    std::vector<DataType> missing;
    for (DataType t : {DataType::kFloat16, DataType::kBFloat16})
      if (!covers(d, t)) missing.push_back(t);
    if (missing.empty() || (missing.size() == 1 && covers(d, DataType::kFloat16))) continue;
    KernelDef h = d;
    h.dtypes = missing;
    h.create = [inner = d.create](const Node& n) -> std::unique_ptr<Kernel> {
      return half_via_float_kernel(inner(n));
    };
    halves.push_back(std::move(h));
  }
  for (KernelDef& h : halves) r.add(std::move(h));
}

}  // namespace otter
