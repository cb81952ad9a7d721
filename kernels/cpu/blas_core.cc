// What OpenBLAS's kernel choice is and whether the environment held it below the CPU (blas_core.h).
#include "kernels/cpu/blas_core.h"

#include <dlfcn.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>

#include "graph/error.h"
#include "kernels/cpu/isa.h"

namespace otter::cpu {

namespace {

using CoreNameFn = char* (*)();

// openblas_get_corename() is part of OpenBLAS's API (cblas.h); looked up at run time so that otter
// also links against another CBLAS.
std::string core_name() {
  auto fn = reinterpret_cast<CoreNameFn>(dlsym(RTLD_DEFAULT, "openblas_get_corename"));
  const char* s = fn ? fn() : nullptr;
  return s ? std::string(s) : std::string();
}

// OpenBLAS's x86-64 cores whose kernels use AVX2 at most.
bool avx2_core(const std::string& name) {
  for (const char* n : {"Haswell", "Zen", "SandyBridge", "Sandybridge", "Nehalem", "Core2", "Penryn",
                        "Excavator", "Steamroller", "Piledriver", "Bulldozer", "Barcelona", "Prescott"})
    if (name.size() == std::string(n).size() &&
        std::equal(name.begin(), name.end(), n, [](char a, char b) { return std::tolower(a) == std::tolower(b); }))
      return true;
  return false;
}

}  // namespace

bool blas_core_below_cpu() {
  const char* env = std::getenv("OPENBLAS_CORETYPE");
  return env && *env && best_isa() == Isa::kAvx512 && avx2_core(core_name());
}

std::string describe_blas_core() {
  const std::string name = core_name();
  if (name.empty()) return "not OpenBLAS (openblas_get_corename is not exported)";
  const char* env = std::getenv("OPENBLAS_CORETYPE");
  if (!env || !*env) return str_cat("OpenBLAS ", name, " (OpenBLAS's own choice)");
  if (blas_core_below_cpu())
    return str_cat("OpenBLAS ", name, " (OPENBLAS_CORETYPE=", env,
                   "; this CPU has AVX-512: unset it for OpenBLAS's AVX-512 kernels)");
  return str_cat("OpenBLAS ", name, " (OPENBLAS_CORETYPE=", env, ")");
}

}  // namespace otter::cpu
