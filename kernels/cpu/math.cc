// CPU kernels of the math op families (graph/ops/math.cc): trigonometric and hyperbolic functions,
// rounding, Sign, IsNaN / IsInf, the activations HardSigmoid ... Shrink, PRelu (slope broadcast
// onto X), and the ai.otter derivative ops <Op>Grad(dY, X). The per-element math is the shared
// functors of kernels/common/math.h; half types compute in float and round once.
#include "graph/op_table.h"
#include "kernels/common/checks.h"
#include "kernels/common/math_attrs.h"
#include "kernels/cpu/broadcast.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/derivative.h"

namespace otter {
namespace {

using cpu::load;
using cpu::store;

const std::vector<DataType> kFloatTypes = {DataType::kFloat32, DataType::kFloat64, DataType::kFloat16,
                                           DataType::kBFloat16};
const std::vector<DataType> kNumericTypes = {DataType::kFloat32,  DataType::kFloat64, DataType::kFloat16,
                                             DataType::kBFloat16, DataType::kInt64,   DataType::kInt32,
                                             DataType::kInt8,     DataType::kUInt8};

// y = f(x) element by element; Out is bool for the classification ops, else x's storage type.
template <typename F, bool kNumeric, bool kBoolOut>
class MapKernel : public Kernel {
 public:
  explicit MapKernel(F f) : f_(f) {}
  void run(KernelContext& ctx) override {
    const Tensor& x = ctx.input(0);
    auto body = [&](auto tag) {
      using S = typename decltype(tag)::type;
      using Out = std::conditional_t<kBoolOut, bool, S>;
      Tensor& y = ctx.allocate_output(0, kBoolOut ? DataType::kBool : x.dtype(), x.dims());
      const S* px = x.data<S>();
      Out* py = y.data<Out>();
      cpu::parallel_ranges(
          x.numel(),
          [&](int64_t b, int64_t e) {
            for (int64_t j = b; j < e; ++j) py[j] = store<Out>(f_(load(px[j])));
          },
          8);
    };
    if constexpr (kNumeric)
      cpu::visit_numeric(x.dtype(), body);
    else
      cpu::visit_float(x.dtype(), body);
  }

 private:
  F f_;
};

// dX = F(dY, X) element by element (the ai.otter <Op>Grad ops).
template <typename F>
class DerivativeKernel : public cpu::DerivativeMapKernel<F> {
 public:
  explicit DerivativeKernel(F f) : cpu::DerivativeMapKernel<F>(f, check_derivative_inputs, 8) {}
};

// PRelu(X, slope): slope broadcast one way onto X.
class PReluKernel : public Kernel {
 public:
  void run(KernelContext& ctx) override {
    const Tensor& x = ctx.input(0);
    const Tensor& slope = ctx.input(1);
    if (slope.dtype() != x.dtype()) ctx.error(str_cat("slope is ", slope.describe(), " but X is ", x.describe()));
    std::vector<int64_t> dims;
    if (!cpu::broadcast_dims({&x.dims(), &slope.dims()}, &dims) || dims != x.dims())
      ctx.error(str_cat("slope ", slope.describe(), " does not broadcast onto X ", x.describe()));
    Tensor& y = ctx.allocate_output(0, x.dtype(), x.dims());
    if (y.numel() == 0) return;
    cpu::BroadcastPlan<2> plan({&x.dims(), &slope.dims()}, x.dims());
    const auto st = plan.inner_strides();
    cpu::visit_numeric(x.dtype(), [&](auto tag) {
      using S = typename decltype(tag)::type;
      const S* px = x.data<S>();
      const S* ps = slope.data<S>();
      S* py = y.data<S>();
      plan.for_each_run([&](int64_t o, const std::array<int64_t, 2>& offs, int64_t len) {
        for (int64_t j = 0; j < len; ++j)
          py[o + j] = store<S>(PReluOp{}(load(px[offs[0] + j * st[0]]), load(ps[offs[1] + j * st[1]])));
      });
    });
  }
};

// The op's first opset in the op table (kernels cover what the table admits).
int since_of(const std::string& domain, const std::string& op) {
  int since = 1 << 30;
  for (const OpDef* d : OpTable::instance().all())
    if (d->domain == domain && d->op_type == op) since = std::min(since, d->since_version);
  OTTER_CHECK(since != 1 << 30, "math kernels: ", op, " is not in the op table");
  return since;
}

void add(KernelRegistry& r, const std::string& domain, const char* op, std::vector<DataType> types, KernelFactory f) {
  KernelDef d;
  d.domain = domain;
  d.op_type = op;
  d.since_version = since_of(domain, op);
  d.until_version = domain.empty() ? kMaxOnnxOpset : 1 << 30;
  d.dtypes = std::move(types);
  d.create = std::move(f);
  r.add(std::move(d));
}

template <typename K, typename F>
KernelFactory from_attrs() {
  return [](const Node& n) -> std::unique_ptr<Kernel> { return std::make_unique<K>(functor_from<F>(n)); };
}

}  // namespace

void register_cpu_math_kernels(KernelRegistry& r) {
#define OTTER_FLOAT(Name) add(r, "", #Name, kFloatTypes, from_attrs<MapKernel<Name##Op, false, false>, Name##Op>());
#define OTTER_NUMERIC(Name) add(r, "", #Name, kNumericTypes, from_attrs<MapKernel<Name##Op, true, false>, Name##Op>());
#define OTTER_CLASSIFY(Name) add(r, "", #Name, kFloatTypes, from_attrs<MapKernel<Name##Op, false, true>, Name##Op>());
#define OTTER_DERIVATIVE(Name) \
  add(r, kOtterDomain, #Name "Grad", kFloatTypes, from_attrs<DerivativeKernel<Name##GradOp>, Name##GradOp>());
  OTTER_MATH_ALL_OPS(OTTER_FLOAT, OTTER_NUMERIC, OTTER_CLASSIFY, OTTER_DERIVATIVE)
#undef OTTER_FLOAT
#undef OTTER_NUMERIC
#undef OTTER_CLASSIFY
#undef OTTER_DERIVATIVE
  add(r, "", "PRelu", kNumericTypes,
      [](const Node&) -> std::unique_ptr<Kernel> { return std::make_unique<PReluKernel>(); });
}

}  // namespace otter
