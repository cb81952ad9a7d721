// The CPU kernel of dX = F(dY, V) element by element, shared by the activation gradients of
// kernels/cpu/elementwise_grad.cc and the math derivatives of kernels/cpu/math.cc: V is input 1,
// checked against dY by the caller's check; halves are computed in float.
#pragma once

#include <cstdint>
#include <type_traits>

#include "graph/tensor.h"
#include "kernels/cpu/broadcast.h"
#include "kernels/cpu/isa.h"
#include "kernels/kernel.h"

namespace otter::cpu {

template <typename F>
class DerivativeMapKernel : public Kernel {
 public:
  using Check = void (*)(const KernelContext&);
  // `cost` weighs one element for parallel_ranges.
  DerivativeMapKernel(F f, Check check, int64_t cost) : f_(f), check_(check), cost_(cost) {}
  void run(KernelContext& ctx) override {
    check_(ctx);
    const Tensor& dy = ctx.input(0);
    const Tensor& v = ctx.input(1);
    Tensor& dx = ctx.allocate_output(0, dy.dtype(), dy.dims());
    visit_float(dy.dtype(), [&](auto tag) {
      using S = typename decltype(tag)::type;
      const S* pg = dy.data<S>();
      const S* pv = v.data<S>();
      S* po = dx.data<S>();
      parallel_ranges(
          dy.numel(),
          [&](int64_t b, int64_t e) {
            isa_dispatch_if<std::is_same_v<compute_t<S>, float>>([&] {
              for (int64_t j = b; j < e; ++j) po[j] = store<S>(f_(load(pg[j]), load(pv[j])));
            });
          },
          cost_);
    });
  }

 private:
  F f_;
  Check check_;
  int64_t cost_;
};

}  // namespace otter::cpu
