// Registers every CPU kernel family.
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/isa.h"

namespace otter {

void register_cpu_attention_kernels(KernelRegistry& r);  // attention.cc: Attention, AttentionGrad (blocked)
void register_cpu_select_kernels(KernelRegistry& r);  // select.cc: TopK, NonZero, Compress, OneHot, EyeLike
void register_cpu_collective_kernels(KernelRegistry& r);  // collective.cc: AllReduce (kernels/collective.h)
void register_cpu_quantization_kernels(KernelRegistry& r);  // quantization.cc: QuantizeLinear, QLinearConv, ...
void register_cpu_onnx_optim_kernels(KernelRegistry& r);  // onnx_optim.cc: ONNX Adagrad, Adam, Momentum
void register_cpu_linalg_kernels(KernelRegistry& r);  // linalg.cc: Einsum, Det
void register_cpu_lrn_kernels(KernelRegistry& r);  // lrn.cc: LRN, LRNGrad
void register_cpu_grid_sample_kernels(KernelRegistry& r);  // grid_sample.cc: GridSample, GridSampleGrad
void register_cpu_bias_gelu_kernels(KernelRegistry& r);  // bias_gelu.cc: BiasGelu, BiasGeluGrad
void register_cpu_add_layer_norm_kernels(KernelRegistry& r);  // add_layer_norm.cc: AddLayerNorm
void register_cpu_control_flow_kernels(KernelRegistry& r);  // control_flow.cc: If, Loop, Scan

void register_cpu_kernels(KernelRegistry& r) {
  cpu::active_isa();  // a bad OTTER_ISA fails here, before any kernel runs
  register_cpu_elementwise_kernels(r);
  register_cpu_reduce_kernels(r);
  register_cpu_shape_kernels(r);
  register_cpu_matmul_kernels(r);
  register_cpu_conv_kernels(r);
  register_cpu_nn_kernels(r);
  register_cpu_math_kernels(r);
  register_cpu_scan_kernels(r);
  register_cpu_control_flow_kernels(r);
  register_cpu_gather_scatter_kernels(r);
  register_cpu_normalize_kernels(r);
  register_cpu_resize_kernels(r);
  register_cpu_select_kernels(r);
  register_cpu_train_kernels(r);
  register_cpu_onnx_optim_kernels(r);
  register_cpu_linalg_kernels(r);
  register_cpu_lrn_kernels(r);
  register_cpu_grid_sample_kernels(r);
  register_cpu_collective_kernels(r);
  register_cpu_quantization_kernels(r);
  register_cpu_elementwise_grad_kernels(r);
  register_cpu_conv_grad_kernels(r);
  register_cpu_nn_grad_kernels(r);
  register_cpu_shape_grad_kernels(r);
  register_cpu_attention_kernels(r);
  register_cpu_bias_gelu_kernels(r);
  register_cpu_add_layer_norm_kernels(r);
  register_cpu_half_kernels(r);  // last: it derives half kernels from the float32 ones above
}

}  // namespace otter
