// Registers every CPU kernel family.
#include "kernels/cpu/cpu_kernels.h"

namespace otter {

void register_cpu_attention_kernels(KernelRegistry& r);  // attention.cc: Attention, AttentionGrad (blocked)

void register_cpu_kernels(KernelRegistry& r) {
  register_cpu_elementwise_kernels(r);
  register_cpu_reduce_kernels(r);
  register_cpu_shape_kernels(r);
  register_cpu_matmul_kernels(r);
  register_cpu_conv_kernels(r);
  register_cpu_nn_kernels(r);
  register_cpu_math_kernels(r);
  register_cpu_scan_kernels(r);
  register_cpu_train_kernels(r);
  register_cpu_elementwise_grad_kernels(r);
  register_cpu_conv_grad_kernels(r);
  register_cpu_nn_grad_kernels(r);
  register_cpu_shape_grad_kernels(r);
  register_cpu_attention_kernels(r);
  register_cpu_half_kernels(r);  // last: it derives half kernels from the float32 ones above
}

}  // namespace otter
