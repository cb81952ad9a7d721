// CPU kernels of ONNX's training-preview optimizers (ai.onnx.preview.training opset 1: Adagrad,
// Adam, Momentum; graph/ops/training.cc). Each node updates n tensors: the per-node scalars (the
// decayed or bias-corrected rate) are computed here once, the per-element update is the shared
// functor of kernels/common/onnx_optim.h.
#include <cmath>
#include <cstring>

#include "graph/op_table.h"
#include "kernels/common/onnx_optim.h"
#include "kernels/cpu/cpu_kernels.h"

namespace otter {
namespace {

// Runs `update(x, g, s0, s1)` over every element of each of the node's n tensors, where the node
// has `lists` input lists (X, G, then lists - 2 state lists) after R and T. Outputs are X_new and
// the new states, written from copies of the inputs. T is float or double (X's dtype).
template <typename F>
void update_lists(KernelContext& ctx, int lists, F&& update) {
  const int n = (ctx.num_inputs() - 2) / lists;
  for (int k = 0; k < n; ++k) {
    const Tensor& x = ctx.input(2 + k);
    // out[l]: X_new (l = 0) and the states (l >= 1), starting as copies of their inputs.
    std::vector<Tensor*> out;
    for (int l = 0; l < lists - 1; ++l) {
      const Tensor& src = ctx.input(2 + k + (l == 0 ? 0 : (l + 1) * n));
      if (src.dtype() != x.dtype() || src.dims() != x.dims())
        ctx.error(str_cat(src.describe(), " does not match X ", x.describe()));
      Tensor& o = ctx.allocate_output(l * n + k, x.dtype(), x.dims());
      std::memcpy(o.raw(), src.raw(), src.nbytes());
      out.push_back(&o);
    }
    const Tensor& g = ctx.input(2 + k + n);
    if (g.dtype() != x.dtype() || g.dims() != x.dims())
      ctx.error(str_cat("gradient ", g.describe(), " does not match X ", x.describe()));
    auto run = [&](auto tag) {
      using T = decltype(tag);
      T* xp = out[0]->data<T>();
      T* s0 = out.size() > 1 ? out[1]->data<T>() : nullptr;
      T* s1 = out.size() > 2 ? out[2]->data<T>() : nullptr;
      const T* gp = g.data<T>();
      for (int64_t i = 0; i < x.numel(); ++i) update(xp[i], gp[i], s0 + i, s1 ? s1 + i : nullptr);
    };
    if (x.dtype() == DataType::kFloat32) run(float{});
    else if (x.dtype() == DataType::kFloat64) run(double{});
    else ctx.error(str_cat("X must be float32 or float64, got ", x.describe()));
  }
}

double rate(const KernelContext& ctx) { return ctx.input(0).get_as_double(0); }
int64_t step(const KernelContext& ctx) { return static_cast<int64_t>(ctx.input(1).get_as_double(0)); }

void adagrad_kernel(KernelContext& ctx) {
  const Node& n = ctx.node();
  const OnnxAdagradParams p{rate(ctx) / (1.0 + static_cast<double>(step(ctx)) * n.attr_f("decay_factor", 0.f)),
                            n.attr_f("norm_coefficient", 0.f), n.attr_f("epsilon", 1e-6f)};
  update_lists(ctx, 3, [&](auto& x, auto g, auto* h, auto*) { onnx_adagrad_element(x, g, *h, p); });
}

void adam_kernel(KernelContext& ctx) {
  const Node& n = ctx.node();
  const double alpha = n.attr_f("alpha", 0.9f), beta = n.attr_f("beta", 0.999f);
  const int64_t t = step(ctx);
  const double r = t > 0 ? rate(ctx) * std::sqrt(1.0 - std::pow(beta, static_cast<double>(t))) /
                               (1.0 - std::pow(alpha, static_cast<double>(t)))
                         : rate(ctx);
  const OnnxAdamParams p{r, alpha, beta, n.attr_f("epsilon", 1e-6f), n.attr_f("norm_coefficient", 0.f),
                         n.attr_f("norm_coefficient_post", 0.f)};
  update_lists(ctx, 4, [&](auto& x, auto g, auto* v, auto* h) { onnx_adam_element(x, g, *v, *h, p); });
}

void momentum_kernel(KernelContext& ctx) {
  const Node& n = ctx.node();
  const std::string mode = n.attr_s("mode", "");
  if (mode != "standard" && mode != "nesterov") ctx.error(str_cat("unknown mode '", mode, "'"));
  const OnnxMomentumParams p{rate(ctx), n.attr_f("alpha", 0.f), step(ctx) > 0 ? n.attr_f("beta", 0.f) : 1.0,
                             n.attr_f("norm_coefficient", 0.f), mode == "nesterov"};
  update_lists(ctx, 3, [&](auto& x, auto g, auto* v, auto*) { onnx_momentum_element(x, g, *v, p); });
}

}  // namespace

void register_cpu_onnx_optim_kernels(KernelRegistry& r) {
  r.add({.domain = kTrainingDomain, .op_type = "Adagrad", .create = simple_kernel(adagrad_kernel)});
  r.add({.domain = kTrainingDomain, .op_type = "Adam", .create = simple_kernel(adam_kernel)});
  r.add({.domain = kTrainingDomain, .op_type = "Momentum", .create = simple_kernel(momentum_kernel)});
}

}  // namespace otter
