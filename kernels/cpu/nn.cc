// CPU kernel family (placeholder until its kernels land).
#include "kernels/cpu/cpu_kernels.h"

namespace otter {
void register_cpu_nn_kernels(KernelRegistry&) {}
}  // namespace otter
