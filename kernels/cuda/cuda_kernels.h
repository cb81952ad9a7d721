// The CUDA kernel families: each file builds the kernel of an op by name; the one registration
// table in register.cc says which ops, opsets and dtypes each family serves.
#pragma once

#include <string>
#include <vector>

#include "kernels/kernel.h"

namespace otter::cuda {

KernelFactory elementwise_kernel(const std::string& op);  // elementwise.cu
KernelFactory bias_gelu_kernel(const std::string& op);    // bias_gelu.cu: BiasGelu, BiasGeluGrad
KernelFactory add_layer_norm_kernel(const std::string& op);  // add_layer_norm.cu: AddLayerNorm
KernelFactory reduce_kernel(const std::string& op);       // reduce.cu
KernelFactory shape_kernel(const std::string& op);        // shape.cu
KernelFactory shape_grad_kernel(const std::string& op);   // shape_grad.cu: SliceGrad, GatherGrad, PadGrad
// host_ops.cc: views and host-computed ops, running the CPU kernels of `cpu` on host data.
KernelFactory host_kernel(const std::string& op, const KernelRegistry& cpu);
KernelFactory matmul_kernel(const std::string& op);       // matmul.cu: cuBLASLt
KernelFactory conv_kernel(const std::string& op);         // conv.cu: cuDNN
std::string conv_supports(const Node& n);                  // conv.cu: what cuDNN cannot serve
KernelFactory pool_kernel(const std::string& op);         // pool.cu
KernelFactory nn_kernel(const std::string& op);           // nn.cu: normalisations, dropout
KernelFactory softmax_loss_kernel(const std::string& op);  // softmax_loss.cu: softmax, losses
KernelFactory train_kernel(const std::string& op);        // train.cu: accumulation, optimizers, scaler
KernelFactory gather_scatter_kernel(const std::string& op);  // gather_scatter.cu
KernelFactory resize_kernel(const std::string& op);  // resize.cu: Resize, ResizeGrad
KernelFactory normalize_kernel(const std::string& op);  // normalize.cu: Instance/MeanVariance/LpNormalization
KernelFactory scan_kernel(const std::string& op);         // scan.cu: CumSum, ArgMax, ArgMin
KernelFactory math_kernel(const std::string& op);         // math.cu: trig, rounding, activations, derivatives

// Launch helpers one family lends the others (all on ctx's stream).

// dst = src converted element by element to dst's dtype (a copy when they agree). elementwise.cu
void cast_tensor(const KernelContext& ctx, const Tensor& src, Tensor& dst);

// y = the reduction of x over the axes flagged in `reduced`; y is allocated with x's other axes
// (any dims of size 1 between them). reduce.cu
enum class Reduction { kSum, kMean, kMax, kMin, kSumSquare, kL2, kProd, kL1, kLogSum, kLogSumExp };
void reduce_axes(const KernelContext& ctx, Reduction kind, const Tensor& x, Tensor& y, const std::vector<bool>& reduced);
// y (allocated with the target shape) = x summed over the axes where it was broadcast from y.
void sum_to_shape(const KernelContext& ctx, const Tensor& x, Tensor& y);

// dst[dst_strides . i] = src[src_strides . i] for every index i over dims (element strides;
// pointers at the first element of each view). shape.cu
void copy_strided(const KernelContext& ctx, DataType t, void* dst, const std::vector<int64_t>& dst_strides,
                  const void* src, const std::vector<int64_t>& src_strides, const std::vector<int64_t>& dims);

}  // namespace otter::cuda
