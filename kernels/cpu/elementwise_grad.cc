// CPU kernels of the element-wise gradient ops (ai.otter): activation derivatives (ReluGrad,
// GeluGrad, ...), ClipGrad and DropoutGrad. The per-element math is the shared functors of
// kernels/common/elementwise_grad.h; every float storage type is handled (halves computed in float).
#include <limits>

#include "graph/op_table.h"
#include "kernels/common/checks.h"
#include "kernels/common/elementwise_grad.h"
#include "kernels/cpu/broadcast.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/derivative.h"

namespace otter {
namespace {

using cpu::compute_t;
using cpu::load;
using cpu::store;

const std::vector<DataType> kFloatTypes = {DataType::kFloat32, DataType::kFloat64, DataType::kFloat16,
                                           DataType::kBFloat16};

// dX = F(dY, V) element by element, V the forward input or output the derivative reads.
template <typename F>
class ActivationGradKernel : public cpu::DerivativeMapKernel<F> {
 public:
  explicit ActivationGradKernel(F f)
      : cpu::DerivativeMapKernel<F>(
            f, [](const KernelContext& ctx) { check_like(ctx, 1, ctx.input(0), "forward value"); }, 4) {}
};

template <typename F>
KernelFactory activation(F f = F{}) {
  return [f](const Node&) -> std::unique_ptr<Kernel> { return std::make_unique<ActivationGradKernel<F>>(f); };
}

// ClipGrad(dY, X, min?, max?) -> dX?, dMin?, dMax?: each element's gradient goes to whichever of
// x, min, max the forward returned (ClipGradOp::source); dMin / dMax are sums.
class ClipGradKernel : public Kernel {
 public:
  void run(KernelContext& ctx) override {
    const Tensor& dy = ctx.input(0);
    check_clip_grad_inputs(ctx);
    cpu::visit_float(dy.dtype(), [&](auto tag) {
      using S = typename decltype(tag)::type;
      using C = compute_t<S>;
      ClipGradOp<C> op{-std::numeric_limits<C>::infinity(), std::numeric_limits<C>::infinity()};
      if (ctx.has_input(2)) op.lo = load(ctx.input(2).data<S>()[0]);
      if (ctx.has_input(3)) op.hi = load(ctx.input(3).data<S>()[0]);
      const S* pg = dy.data<S>();
      const S* px = ctx.input(1).data<S>();
      S* pdx = ctx.has_output(0) ? ctx.allocate_output(0, dy.dtype(), dy.dims()).template data<S>() : nullptr;
      double sums[3] = {0, 0, 0};
      for (int64_t j = 0; j < dy.numel(); ++j) {
        const int src = op.source(load(px[j]));
        const C g = load(pg[j]);
        if (pdx) pdx[j] = store<S>(src == 0 ? g : C(0));
        sums[src] += static_cast<double>(g);
      }
      for (int i = 1; i <= 2; ++i)
        if (ctx.has_output(i))
          ctx.allocate_output(i, dy.dtype(), ctx.input(i + 1).dims()).template data<S>()[0] =
              store<S>(static_cast<C>(sums[i]));
    });
  }
};

// DropoutGrad(dY, mask, ratio?, training_mode?): dY * mask / (1 - ratio) in training mode, dY
// otherwise (the forward was the identity).
class DropoutGradKernel : public Kernel {
 public:
  void run(KernelContext& ctx) override {
    const Tensor& dy = ctx.input(0);
    const Tensor& mask = ctx.input(1);
    if (mask.dtype() != DataType::kBool || mask.dims() != dy.dims())
      ctx.error(str_cat("mask ", mask.describe(), " must be bool of dY's shape ", dy.describe()));
    const double ratio = ctx.has_input(2) ? ctx.input(2).get_as_double(0) : 0.5;
    const bool training = ctx.has_input(3) && ctx.input(3).get_as_double(0) != 0;
    Tensor& dx = ctx.allocate_output(0, dy.dtype(), dy.dims());
    cpu::visit_float(dy.dtype(), [&](auto tag) {
      using S = typename decltype(tag)::type;
      using C = compute_t<S>;
      const S* pg = dy.data<S>();
      const bool* pm = mask.data<bool>();
      S* po = dx.data<S>();
      const C scale = training && ratio > 0 ? static_cast<C>(1.0 / (1.0 - ratio)) : C(1);
      const bool identity = !training || ratio == 0;
      cpu::parallel_ranges(dy.numel(), [&](int64_t b, int64_t e) {
        for (int64_t j = b; j < e; ++j) po[j] = identity ? pg[j] : store<S>(DropoutGradOp{}(load(pg[j]), pm[j], scale));
      });
    });
  }
};

void add(KernelRegistry& r, const char* op, KernelFactory f) {
  KernelDef d;
  d.domain = kOtterDomain;
  d.op_type = op;
  d.dtypes = kFloatTypes;
  d.create = std::move(f);
  r.add(std::move(d));
}

}  // namespace

void register_cpu_elementwise_grad_kernels(KernelRegistry& r) {
  add(r, "ReluGrad", activation<ReluGradOp>());
  add(r, "SigmoidGrad", activation<SigmoidGradOp>());
  add(r, "TanhGrad", activation<TanhGradOp>());
  add(r, "ErfGrad", activation<ErfGradOp>());
  add(r, "SoftplusGrad", activation<SoftplusGradOp>());
  add(r, "SoftsignGrad", activation<SoftsignGradOp>());
  add(r, "AbsGrad", activation<AbsGradOp>());
  add(r, "LeakyReluGrad", [](const Node& n) -> std::unique_ptr<Kernel> {
    return std::make_unique<ActivationGradKernel<LeakyReluGradOp>>(LeakyReluGradOp{n.attr_f("alpha", 0.01f)});
  });
  add(r, "GeluGrad", [](const Node& n) -> std::unique_ptr<Kernel> {
    const std::string a = n.attr_s("approximate", "none");
    if (a != "none" && a != "tanh") fail(n.describe(), ": attribute 'approximate' must be 'none' or 'tanh'");
    return std::make_unique<ActivationGradKernel<GeluGradOp>>(GeluGradOp{a == "tanh"});
  });
  add(r, "ClipGrad", [](const Node&) -> std::unique_ptr<Kernel> { return std::make_unique<ClipGradKernel>(); });
  add(r, "DropoutGrad", [](const Node&) -> std::unique_ptr<Kernel> { return std::make_unique<DropoutGradKernel>(); });
}

}  // namespace otter
