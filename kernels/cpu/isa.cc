// Choosing the ISA variant of the CPU loops at run time (see isa.h).
#include "kernels/cpu/isa.h"

#include <atomic>
#include <cstdlib>

#include "graph/error.h"

namespace otter::cpu {

namespace {

Isa parse_isa(const std::string& s) {
  if (s == "baseline") return Isa::kBaseline;
  if (s == "avx2") return Isa::kAvx2;
  if (s == "avx512") return Isa::kAvx512;
  fail("OTTER_ISA: unknown ISA '", s, "' (baseline, avx2 or avx512)");
}

void check_supported(Isa isa, const char* what) {
  if (static_cast<int>(isa) > static_cast<int>(best_isa()))
    fail(what, isa_name(isa), ": this CPU supports up to ", isa_name(best_isa()));
}

Isa from_environment() {
  const char* env = std::getenv("OTTER_ISA");
  if (!env || !*env) return best_isa();
  Isa isa = parse_isa(env);
  check_supported(isa, "OTTER_ISA=");
  return isa;
}

// -1: not chosen yet. The first active_isa() reads OTTER_ISA.
std::atomic<int> g_isa{-1};

}  // namespace

const char* isa_name(Isa isa) {
  switch (isa) {
    case Isa::kBaseline:
      return "baseline";
    case Isa::kAvx2:
      return "avx2";
    case Isa::kAvx512:
      return "avx512";
  }
  return "?";
}

Isa best_isa() {
#if defined(__x86_64__) && defined(__GNUC__)
  static const Isa best = [] {
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
        __builtin_cpu_supports("avx512dq"))
      return Isa::kAvx512;
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return Isa::kAvx2;
    return Isa::kBaseline;
  }();
  return best;
#else
  return Isa::kBaseline;
#endif
}

Isa active_isa() {
  int v = g_isa.load(std::memory_order_relaxed);
  if (v < 0) {
    v = static_cast<int>(from_environment());
    g_isa.store(v, std::memory_order_relaxed);
  }
  return static_cast<Isa>(v);
}

void set_active_isa(Isa isa) {
  check_supported(isa, "set_active_isa: ");
  g_isa.store(static_cast<int>(isa), std::memory_order_relaxed);
}

std::string describe_isa() {
  const char* env = std::getenv("OTTER_ISA");
  return str_cat(isa_name(active_isa()), " (this CPU supports up to ", isa_name(best_isa()), "; OTTER_ISA",
                 env && *env ? str_cat("=", env) : std::string(" unset"), ")");
}

}  // namespace otter::cpu
