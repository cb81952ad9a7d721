// Registration of the CUDA kernels and the CUDA device (the CUDA backend is being built up:
// nothing is registered yet and no device is offered).
#include "graph/error.h"
#include "kernels/device.h"

namespace otter {
void register_cuda_kernels(KernelRegistry&) {}
bool cuda_available() { return false; }
std::string cuda_unavailable_reason() { return "the CUDA backend of this build has no device support yet"; }
std::unique_ptr<Device> make_cuda_device(int) { fail("--device cuda: ", cuda_unavailable_reason()); }
}  // namespace otter
