// CPU kernels of ai.otter.BiasGelu and ai.otter.BiasGeluGrad (graph/ops/elementwise.cc, made by the
// fuse-bias-gelu pass): one pass over X instead of the six element-wise ops of the exported GELU
// chain; and of ai.otter.BiasAdd (made by cast-elimination), AddOp with the bias. The per-element math is the shared BiasGeluOp / BiasGeluGradOp (kernels/common/), which
// reuse GeluOp / GeluGradOp at the pre-activation x + bias. Every float storage type (halves are
// computed in float); the float loops run as the active ISA variant (kernels/cpu/isa.h).
#include <algorithm>
#include <type_traits>

#include "graph/op_table.h"
#include "kernels/common/checks.h"
#include "kernels/common/elementwise_grad.h"
#include "kernels/cpu/broadcast.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/isa.h"

namespace otter {
namespace {

using cpu::compute_t;
using cpu::load;
using cpu::store;

// Calls f(j, c) for the flat elements j of [0, n) split over threads, c = j mod cols the bias
// index (any c when cols is 0: no bias), a row segment at a time so that the inner loop over
// consecutive j and c vectorises.
template <bool kWide, typename F>
void bias_loop(int64_t n, int64_t cols, const F& f) {
  cpu::parallel_ranges(
      n,
      [&](int64_t b, int64_t e) {
        cpu::isa_dispatch_if<kWide>([&] {
          for (int64_t j = b; j < e;) {
            const int64_t c0 = cols ? j % cols : 0, len = cols ? std::min(e - j, cols - c0) : e - j;
            for (int64_t t = 0; t < len; ++t) f(j + t, c0 + t);
            j += len;
          }
        });
      },
      8);
}

// Calls f(tag S, tag B): S the storage type of X (and dY), B the bias's (S, or float where a half
// X takes a float32 bias: graph/ops/elementwise.cc).
template <typename F>
void visit_x_and_bias(KernelContext& ctx, int x, int64_t cols, const F& f) {
  const DataType xt = ctx.input(x).dtype();
  cpu::visit_float(xt, [&](auto tag) {
    if (cols && ctx.input(x + 1).dtype() != xt)
      f(tag, cpu::Tag<float>{});
    else
      f(tag, tag);
  });
}

// Y = Gelu(X + bias), computed in compute_t<S> (float for halves) and rounded once to S.
class BiasGeluKernel : public Kernel {
 public:
  void run(KernelContext& ctx) override {
    const Tensor& x = ctx.input(0);
    const int64_t cols = check_bias_gelu_bias(ctx, 0);
    Tensor& y = ctx.allocate_output(0, x.dtype(), x.dims());
    visit_x_and_bias(ctx, 0, cols, [&](auto xtag, auto btag) {
      using S = typename decltype(xtag)::type;
      using B = typename decltype(btag)::type;
      using C = compute_t<S>;
      const S* px = x.data<S>();
      const B* pb = cols ? ctx.input(1).data<B>() : nullptr;
      S* py = y.data<S>();
      if (pb) {
        bias_loop<std::is_same_v<C, float>>(x.numel(), cols, [&](int64_t j, int64_t c) {
          py[j] = store<S>(BiasGeluOp{}(load(px[j]), C(load(pb[c]))));
        });
      } else {
        bias_loop<std::is_same_v<C, float>>(x.numel(), 0, [&](int64_t j, int64_t) {
          py[j] = store<S>(BiasGeluOp{}(load(px[j]), C(0)));
        });
      }
    });
  }
};

// dX = dY * Gelu'(X + bias), stored as the bias's type (dY's without a bias); the bias gradient is
// a ReduceSum of dX the rule emits.
class BiasGeluGradKernel : public Kernel {
 public:
  void run(KernelContext& ctx) override {
    const Tensor& dy = ctx.input(0);
    check_like(ctx, 1, dy, "X");
    const int64_t cols = check_bias_gelu_bias(ctx, 1);
    Tensor& dx = ctx.allocate_output(0, cols ? ctx.input(2).dtype() : dy.dtype(), dy.dims());
    visit_x_and_bias(ctx, 1, cols, [&](auto xtag, auto btag) {
      using S = typename decltype(xtag)::type;
      using B = typename decltype(btag)::type;
      using C = compute_t<S>;
      const S* pg = dy.data<S>();
      const S* px = ctx.input(1).data<S>();
      const B* pb = cols ? ctx.input(2).data<B>() : nullptr;
      if (pb) {
        B* po = dx.data<B>();
        bias_loop<std::is_same_v<C, float>>(dy.numel(), cols, [&](int64_t j, int64_t c) {
          po[j] = store<B>(BiasGeluGradOp{}(load(pg[j]), load(px[j]), C(load(pb[c]))));
        });
      } else {
        S* po = dx.data<S>();
        bias_loop<std::is_same_v<C, float>>(dy.numel(), 0, [&](int64_t j, int64_t) {
          po[j] = store<S>(BiasGeluGradOp{}(load(pg[j]), load(px[j]), C(0)));
        });
      }
    });
  }
};

// Y = X + bias, summed in compute_t<S> (float for halves) and rounded once to Y's type (X's, or
// float32 for a half X: attribute `to`).
class BiasAddKernel : public Kernel {
 public:
  explicit BiasAddKernel(const Node& n) : to_(bias_add_to_attr(n)) {}
  void run(KernelContext& ctx) override {
    const Tensor& x = ctx.input(0);
    const auto [cols, to] = check_bias_add(ctx, to_);
    Tensor& y = ctx.allocate_output(0, to, x.dims());
    visit_x_and_bias(ctx, 0, cols, [&](auto xtag, auto btag) {
      using S = typename decltype(xtag)::type;
      using B = typename decltype(btag)::type;
      using C = compute_t<S>;
      const S* px = x.data<S>();
      const B* pb = ctx.input(1).data<B>();
      auto add = [&](auto* py) {
        using O = std::remove_pointer_t<decltype(py)>;
        bias_loop<std::is_same_v<C, float>>(x.numel(), cols, [&](int64_t j, int64_t c) {
          py[j] = store<O>(AddOp{}(load(px[j]), C(load(pb[c]))));
        });
      };
      if (to == x.dtype())
        add(y.data<S>());
      else
        add(y.data<float>());
    });
  }

 private:
  DataType to_;
};

}  // namespace

void register_cpu_bias_gelu_kernels(KernelRegistry& r) {
  const std::vector<DataType> kFloats = {DataType::kFloat32, DataType::kFloat64, DataType::kFloat16,
                                         DataType::kBFloat16};
  r.add({.domain = kOtterDomain,
         .op_type = "BiasGelu",
         .dtypes = kFloats,
         .create = [](const Node&) -> std::unique_ptr<Kernel> { return std::make_unique<BiasGeluKernel>(); }});
  r.add({.domain = kOtterDomain,
         .op_type = "BiasGeluGrad",
         .dtypes = kFloats,
         .create = [](const Node&) -> std::unique_ptr<Kernel> { return std::make_unique<BiasGeluGradKernel>(); }});
  r.add({.domain = kOtterDomain,
         .op_type = "BiasAdd",
         .dtypes = kFloats,
         .create = [](const Node& n) -> std::unique_ptr<Kernel> { return std::make_unique<BiasAddKernel>(n); }});
}

}  // namespace otter
