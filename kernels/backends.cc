// The process-wide kernel registry: the CPU kernels, then the CUDA ones where this build has the
// CUDA backend (no_cuda.cc stands in otherwise). This file is the only one that names every
// backend, so it sits in its own target (otter_kernels_all) above otter_kernels_cpu and
// otter_kernels_cuda, which depend on the core otter_kernels and not on each other.
#include "kernels/kernel.h"

namespace otter {

KernelRegistry& KernelRegistry::instance() {
  static KernelRegistry* r = [] {
    auto* reg = new KernelRegistry();
    register_cpu_kernels(*reg);
    register_cuda_kernels(*reg);  // after the CPU kernels: its host-logic kernels look them up
    return reg;
  }();
  return *r;
}

}  // namespace otter
