// The CUDA entry points of builds without the CUDA backend: no kernels, no device.
#include "graph/error.h"
#include "kernels/device.h"

namespace otter {
void register_cuda_kernels(KernelRegistry&) {}
bool cuda_available() { return false; }
std::string cuda_unavailable_reason() { return "this build of otter has no CUDA backend (configure with -DOTTER_CUDA=ON)"; }
std::unique_ptr<Device> make_cuda_device(int) { fail("--device cuda: ", cuda_unavailable_reason()); }
}  // namespace otter
