// CUDA kernel registration for builds without the CUDA backend: registers nothing.
#include "kernels/kernel.h"

namespace otter {
void register_cuda_kernels(KernelRegistry&) {}
}  // namespace otter
