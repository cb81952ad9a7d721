// CPU kernel of ai.otter.AddLayerNorm(X, R, scale, bias?) {axis, epsilon} -> Y, S? (graph/ops/
// add_layer_norm.cc): per row, S = X + R into S's output (or a per-thread row when S is not an
// output), then LayerNormalization's own row code (kernels/cpu/layer_norm_row.h) normalises the
// row while it is in cache. One pass over memory: X and R read, S and Y written, where the unfused
// pair reads X and R, writes S, then reads S again and writes Y. float32 and float64, as
// LayerNormalization (mixed precision casts half inputs to float32: the op's class is FP32).
#include <omp.h>

#include <type_traits>
#include <vector>

#include "graph/op_table.h"
#include "kernels/common/checks.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/float_kernel.h"
#include "kernels/cpu/isa.h"
#include "kernels/cpu/layer_norm_row.h"

namespace otter {
namespace {

constexpr int64_t kParallelWork = 32768;  // elements below which OpenMP is not worth starting

class AddLayerNormKernel : public cpu::FloatKernel<AddLayerNormKernel> {
 public:
  explicit AddLayerNormKernel(const Node& n) : axis_(n.attr_i("axis", -1)), epsilon_(n.attr_f("epsilon", 1e-5f)) {}

 private:
  friend cpu::FloatKernel<AddLayerNormKernel>;

  // Input i (scale or bias) as a row of `cols` values of X's type.
  template <typename T>
  static const T* row_operand(KernelContext& ctx, int i, const Tensor& x, int64_t cols) {
    const Tensor& t = ctx.input(i);
    if (t.dtype() != x.dtype() || t.rank() != 1 || t.numel() != cols)
      ctx.error(str_cat("input ", i, " ", t.describe(), " must be 1-D of X's last axis ", x.describe()));
    return t.data<T>();
  }

  template <typename T>
  void compute(KernelContext& ctx) {
    using A = std::conditional_t<std::is_same_v<T, double>, double, float>;  // LayerNormalization's stash
    const Tensor& x = ctx.input(0);
    check_like(ctx, 1, x, "R");
    const int64_t r = x.rank();
    if (r < 1 || (axis_ != -1 && axis_ != r - 1))
      ctx.error(str_cat("axis ", axis_, " is not the last axis of X ", x.describe()));
    const int64_t cols = x.dim(r - 1), rows = cols == 0 ? 0 : x.numel() / cols;
    const T* pscale = row_operand<T>(ctx, 2, x, cols);
    const T* pbias = ctx.has_input(3) ? row_operand<T>(ctx, 3, x, cols) : nullptr;
    T* py = ctx.allocate_output(0, x.dtype(), x.dims()).template data<T>();
    T* ps = ctx.has_output(1) ? ctx.allocate_output(1, x.dtype(), x.dims()).template data<T>() : nullptr;
    const T* px = x.data<T>();
    const T* pr = ctx.input(1).data<T>();
    const A eps = static_cast<A>(epsilon_);
    const bool parallel = x.numel() > kParallelWork;
    // Without an S output each thread sums its rows into its own row of own_.
    if (!ps) own_.resize(static_cast<size_t>(parallel ? omp_get_max_threads() : 1) * cols);
    cpu::row_ranges<std::is_same_v<T, float>>(rows, parallel, [&](int64_t b, int64_t e, int t) {
      T* own = reinterpret_cast<T*>(own_.data()) + static_cast<size_t>(t) * cols;
      for (int64_t row = b; row < e; ++row) {
        const int64_t o = row * cols;
        T* s = ps ? ps + o : own;
        for (int64_t i = 0; i < cols; ++i) s[i] = px[o + i] + pr[o + i];
        A m, inv;
        cpu::layer_norm_row<T, A>(s, py + o, cols, pscale, pbias, eps, m, inv);
      }
    });
  }

  std::vector<double> own_;  // per-thread sum rows (as double: room for float and double), reused between runs

  int64_t axis_;
  float epsilon_;
};

}  // namespace

void register_cpu_add_layer_norm_kernels(KernelRegistry& r) {
  r.add({.domain = kOtterDomain,
         .op_type = "AddLayerNorm",
         .dtypes = {DataType::kFloat32, DataType::kFloat64},
         .create = node_kernel<AddLayerNormKernel>()});
}

}  // namespace otter
