// Registration entry points of the CPU kernel families (kernels/cpu/*.cc).
#pragma once

#include <memory>

#include "kernels/kernel.h"

namespace otter {
void register_cpu_elementwise_kernels(KernelRegistry& r);  // elementwise.cc
void register_cpu_reduce_kernels(KernelRegistry& r);       // reduce.cc
void register_cpu_shape_kernels(KernelRegistry& r);        // shape.cc: views, shape queries, constants
void register_cpu_movement_kernels(KernelRegistry& r);     // movement.cc: Concat, Slice, Pad, ... (by shape.cc)
void register_cpu_matmul_kernels(KernelRegistry& r);       // matmul.cc: MatMul, Gemm
void register_cpu_conv_kernels(KernelRegistry& r);         // conv.cc: Conv, pooling
void register_cpu_nn_kernels(KernelRegistry& r);           // nn.cc: norms, softmax, losses, dropout
void register_cpu_math_kernels(KernelRegistry& r);         // math.cc: trig, rounding, activations
void register_cpu_gather_scatter_kernels(KernelRegistry& r);  // gather_scatter.cc
void register_cpu_normalize_kernels(KernelRegistry& r);       // normalize.cc
void register_cpu_resize_kernels(KernelRegistry& r);          // resize.cc: Resize, ResizeGrad
void register_cpu_scan_kernels(KernelRegistry& r);         // scan.cc: CumSum, ArgMax, ArgMin
void register_cpu_train_kernels(KernelRegistry& r);        // train.cc: accumulation, optimizers, scaler
// Gradient ops of the ai.otter domain (the autodiff pass emits them).
void register_cpu_elementwise_grad_kernels(KernelRegistry& r);  // elementwise_grad.cc: ReluGrad, GeluGrad, ...
void register_cpu_conv_grad_kernels(KernelRegistry& r);         // conv_grad.cc: ConvGrad, ConvTranspose, pool grads
void register_cpu_nn_grad_kernels(KernelRegistry& r);           // nn_grad.cc: norms, softmax, losses
void register_cpu_shape_grad_kernels(KernelRegistry& r);        // shape_grad.cc: SliceGrad, GatherGrad, PadGrad
// half.cc: float16/bfloat16 versions of every float32-only kernel registered before it (computed in
// float32, outputs rounded once); registered last.
void register_cpu_half_kernels(KernelRegistry& r);
// half.cc: runs `inner`, a float32 kernel, on widened float16/bfloat16 inputs and rounds its half
// outputs (what register_cpu_half_kernels registers; for kernels that fall back to it).
std::unique_ptr<Kernel> half_via_float_kernel(std::unique_ptr<Kernel> inner);
}  // namespace otter
