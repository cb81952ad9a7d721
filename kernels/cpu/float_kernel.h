// A base for CPU kernels that compute in their input's float type: run() dispatches on input 0's
// dtype (f32 or f64; half types come through kernels/cpu/half.cc) to Derived::compute<T>(ctx).
#pragma once

#include "kernels/cpu/dispatch.h"
#include "kernels/kernel.h"

namespace otter::cpu {

template <typename Derived>
class FloatKernel : public Kernel {
 public:
  void run(KernelContext& ctx) override {
    OTTER_DISPATCH_FLOAT(ctx.input(0).dtype(), T, [&] { static_cast<Derived*>(this)->template compute<T>(ctx); });
  }
};

}  // namespace otter::cpu
