// Registration of the CUDA kernels (the CUDA backend is being built up; nothing is registered yet).
#include "kernels/kernel.h"

namespace otter {
void register_cuda_kernels(KernelRegistry&) {}
}  // namespace otter
