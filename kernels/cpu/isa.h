// ISA variants of otter's own CPU loops (docs/performance.md, "ISA dispatch"). The build targets
// baseline x86-64; a hot loop wrapped in isa_dispatch() is also compiled for AVX2 (+FMA, F16C)
// and AVX-512 (F, BW, VL, DQ) and the variant runs that the CPU supports, or the one OTTER_ISA
// names (baseline|avx2|avx512; naming one the CPU lacks is an error). The kernels are built with
// -ffp-contract=off and without reassociation, so every variant performs the same float
// operations in the same order: the variants' results are bitwise equal (tests/kernels/isa_test.cc).
#pragma once

#include <string>

namespace otter::cpu {

enum class Isa { kBaseline = 0, kAvx2 = 1, kAvx512 = 2 };

const char* isa_name(Isa isa);
// The widest variant this CPU (and its operating system) supports.
Isa best_isa();
// The variant the loops run: OTTER_ISA's, else best_isa(). Fails naming OTTER_ISA when its value
// is unknown or asks for more than the CPU has (register_cpu_kernels checks it once, up front).
Isa active_isa();
// Forces a variant the CPU supports (tests compare the variants in one process); fails otherwise.
void set_active_isa(Isa isa);
// "avx2 (this CPU supports up to avx2; OTTER_ISA unset)", for otter-train kernels.
std::string describe_isa();

#if defined(__x86_64__) && defined(__GNUC__)
#define OTTER_TARGET_AVX2 "avx2,fma,f16c,bmi,bmi2"
#define OTTER_TARGET_AVX512 "avx512f,avx512bw,avx512vl,avx512dq,avx2,fma,f16c,bmi,bmi2"
// f() with everything it calls inlined (flatten) and compiled for the target. The callable's own
// body is compiled once more per variant; what it cannot inline (libm calls) stays baseline.
template <typename F>
__attribute__((target(OTTER_TARGET_AVX2), flatten)) void run_avx2(const F& f) {
  f();
}
template <typename F>
__attribute__((target(OTTER_TARGET_AVX512), flatten)) void run_avx512(const F& f) {
  f();
}
#endif

// Runs the loop `f` (a lambda without OpenMP regions of its own: call it inside each thread's
// range) as the active variant.
template <typename F>
inline void isa_dispatch(const F& f) {
#if defined(__x86_64__) && defined(__GNUC__)
  switch (active_isa()) {
    case Isa::kAvx512:
      run_avx512(f);
      return;
    case Isa::kAvx2:
      run_avx2(f);
      return;
    case Isa::kBaseline:
      break;
  }
#endif
  f();
}

// isa_dispatch where kWide (the float loops), else the baseline loop: integer and double loops
// gain little and would triple the code the compiler makes for them.
template <bool kWide, typename F>
inline void isa_dispatch_if(const F& f) {
  if constexpr (kWide)
    isa_dispatch(f);
  else
    f();
}

}  // namespace otter::cpu
