// The bf16 CPU kernels of ai.otter.Attention and AttentionGrad (kernels/cpu/attention_bf16.cc).
#pragma once

#include <memory>

#include "kernels/kernel.h"

namespace otter::attn {

// Attention (grad false) or AttentionGrad (grad true) of a bf16 node: on the bf16 dot products
// where cpu::bf16_gemm_native() holds when it runs, else `widened` (the float32 kernel on widened
// inputs, half_via_float_kernel in kernels/cpu/cpu_kernels.h).
std::unique_ptr<Kernel> bf16_attention_kernel(const Node& n, bool grad, std::unique_ptr<Kernel> widened);

}  // namespace otter::attn
