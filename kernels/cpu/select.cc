// CPU kernels of TopK, NonZero, Compress, OneHot and EyeLike (graph/ops/select.cc). The CUDA
// backend runs these on host copies of their inputs (kernels/cuda/host_ops.cc).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>

#include "kernels/common/scan.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/dispatch.h"
#include "kernels/cpu/shape_util.h"

namespace otter {
namespace {

class TopKKernel : public Kernel {
 public:
  explicit TopKKernel(const Node& n) : axis_(n.attr_i("axis", -1)), largest_(n.attr_i("largest", 1) != 0) {}
  void run(KernelContext& ctx) override {
    const Tensor& x = ctx.input(0);
    const std::vector<int64_t> kv = cpu::int_input(ctx, 1, "K");
    if (kv.size() != 1) ctx.error(str_cat("K must hold one value, got ", ctx.input(1).describe()));
    if (x.rank() == 0) ctx.error("X must have rank >= 1");
    const int64_t axis = cpu::normalize_axis(ctx, axis_, x.rank()), k = kv[0];
    const AxisLines l = axis_lines(x.dims(), axis);
    if (k < 0 || k > l.len) ctx.error(str_cat("K = ", k, " is out of range for axis ", axis, " of ", x.describe()));
    std::vector<int64_t> od = x.dims();
    od[axis] = k;
    Tensor& vals = ctx.allocate_output(0, x.dtype(), od);
    Tensor& idx = ctx.allocate_output(1, DataType::kInt64, od);
    cpu::visit_numeric(x.dtype(), [&](auto tag) {
      using S = typename decltype(tag)::type;
      const S* px = x.data<S>();
      std::vector<int64_t> order(static_cast<size_t>(l.len));
      for (int64_t line = 0; line < l.outer * l.inner; ++line) {
        const int64_t base = l.base(line);
        auto v = [&](int64_t i) { return static_cast<double>(load_value(px[base + i * l.inner])); };
        std::iota(order.begin(), order.end(), 0);
        // Ties keep the smaller index first (ONNX TopK 11); NaN counts as the largest.
        auto before = [&](int64_t a, int64_t b) {
          const double va = v(a), vb = v(b);
          if (va != vb) {
            if (std::isnan(va) || std::isnan(vb)) return largest_ == std::isnan(va);
            return largest_ ? va > vb : va < vb;
          }
          return a < b;
        };
        std::partial_sort(order.begin(), order.begin() + k, order.end(), before);
        const int64_t obase = (line / l.inner) * k * l.inner + line % l.inner;
        for (int64_t j = 0; j < k; ++j) {
          vals.data<S>()[obase + j * l.inner] = px[base + order[j] * l.inner];
          idx.data<int64_t>()[obase + j * l.inner] = order[j];
        }
      }
    });
  }

 private:
  int64_t axis_;
  bool largest_;
};

// Whether element i of x is nonzero (any type; read as double, which keeps every nonzero nonzero).
bool nonzero_at(const Tensor& x, int64_t i) { return x.get_as_double(i) != 0; }

class NonZeroKernel : public Kernel {
 public:
  explicit NonZeroKernel(const Node&) {}
  void run(KernelContext& ctx) override {
    const Tensor& x = ctx.input(0);
    std::vector<int64_t> hits;
    for (int64_t i = 0; i < x.numel(); ++i)
      if (nonzero_at(x, i)) hits.push_back(i);
    const int64_t r = x.rank(), n = static_cast<int64_t>(hits.size());
    Tensor& out = ctx.allocate_output(0, DataType::kInt64, {r, n});
    int64_t* p = out.data<int64_t>();
    for (int64_t j = 0; j < n; ++j) {
      int64_t i = hits[j];
      for (int64_t d = r - 1; d >= 0; --d) {
        p[d * n + j] = i % x.dims()[d];
        i /= x.dims()[d];
      }
    }
  }
};

class CompressKernel : public Kernel {
 public:
  explicit CompressKernel(const Node& n) : has_axis_(n.find_attr("axis") != nullptr), axis_(n.attr_i("axis", 0)) {}
  void run(KernelContext& ctx) override {
    const Tensor& x = ctx.input(0);
    const Tensor& cond = ctx.input(1);
    if (cond.dtype() != DataType::kBool || cond.rank() != 1)
      ctx.error(str_cat("condition must be a 1-D bool tensor, got ", cond.describe()));
    std::vector<int64_t> dims = has_axis_ ? x.dims() : std::vector<int64_t>{x.numel()};
    const int64_t axis = has_axis_ ? cpu::normalize_axis(ctx, axis_, x.rank()) : 0;
    const AxisLines l = axis_lines(dims, axis);
    if (cond.numel() > l.len)
      ctx.error(str_cat("condition ", cond.describe(), " is longer than axis ", axis, " (", l.len, ")"));
    std::vector<int64_t> keep;
    for (int64_t i = 0; i < cond.numel(); ++i)
      if (cond.data<bool>()[i]) keep.push_back(i);
    dims[axis] = static_cast<int64_t>(keep.size());
    Tensor& out = ctx.allocate_output(0, x.dtype(), dims);
    const int64_t nk = dims[axis];
    OTTER_DISPATCH_BYTES(x.dtype(), T, [&] {
      const T* src = static_cast<const T*>(x.raw());
      T* dst = static_cast<T*>(out.raw());
      for (int64_t o = 0; o < l.outer; ++o)
        for (int64_t j = 0; j < nk; ++j)
          std::memcpy(dst + (o * nk + j) * l.inner, src + (o * l.len + keep[j]) * l.inner,
                      static_cast<size_t>(l.inner) * sizeof(T));
    });
  }

 private:
  bool has_axis_;
  int64_t axis_;
};

class OneHotKernel : public Kernel {
 public:
  explicit OneHotKernel(const Node& n) : axis_(n.attr_i("axis", -1)) {}
  void run(KernelContext& ctx) override {
    const Tensor& idx = ctx.input(0);
    const Tensor& dep = ctx.input(1);
    const Tensor& values = ctx.input(2);
    if (dep.numel() != 1) ctx.error(str_cat("depth must hold one value, got ", dep.describe()));
    if (values.numel() != 2) ctx.error(str_cat("values must hold [off, on], got ", values.describe()));
    const int64_t depth = static_cast<int64_t>(dep.get_as_double(0));
    if (depth < 1) ctx.error(str_cat("depth must be positive, got ", depth));
    const int64_t axis = cpu::normalize_axis(ctx, axis_, idx.rank() + 1);
    std::vector<int64_t> od = idx.dims();
    od.insert(od.begin() + axis, depth);
    Tensor& out = ctx.allocate_output(0, values.dtype(), od);
    const AxisLines l = axis_lines(od, axis);
    const size_t es = dtype_size(values.dtype());
    const char* off = static_cast<const char*>(values.raw());
    char* dst = static_cast<char*>(out.raw());
    for (int64_t i = 0; i < out.numel(); ++i) std::memcpy(dst + i * es, off, es);
    for (int64_t i = 0; i < idx.numel(); ++i) {  // index i is line i of the output
      int64_t v = static_cast<int64_t>(idx.get_as_double(i));
      if (v < 0) v += depth;
      if (v < 0 || v >= depth) continue;
      std::memcpy(dst + (l.base(i) + v * l.inner) * es, off + es, es);
    }
  }

 private:
  int64_t axis_;
};

class EyeLikeKernel : public Kernel {
 public:
  explicit EyeLikeKernel(const Node& n) : k_(n.attr_i("k", 0)) {
    if (const Attribute* a = n.find_attr("dtype")) dtype_ = dtype_from_onnx(static_cast<int>(a->i()));
  }
  void run(KernelContext& ctx) override {
    const Tensor& x = ctx.input(0);
    if (x.rank() != 2) ctx.error(str_cat("input must be 2-D, got ", x.describe()));
    const DataType t = dtype_ == DataType::kUndefined ? x.dtype() : dtype_;
    Tensor& out = ctx.allocate_output(0, t, x.dims());
    Tensor one(DataType::kFloat64, {1});
    one.data<double>()[0] = 1;
    Tensor one_t(t, {1});
    cpu::visit_all(t, [&](auto tag) {
      using S = typename decltype(tag)::type;
      one_t.data<S>()[0] = store_value<S>(static_cast<compute_type<S>>(1));
    });
    const size_t es = dtype_size(t);
    char* dst = static_cast<char*>(out.raw());
    std::memset(dst, 0, out.nbytes());
    const int64_t rows = x.dims()[0], cols = x.dims()[1];
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t c = r + k_;
      if (c >= 0 && c < cols) std::memcpy(dst + (r * cols + c) * es, one_t.raw(), es);
    }
  }

 private:
  int64_t k_;
  DataType dtype_ = DataType::kUndefined;
};

}  // namespace

void register_cpu_detect_kernels(KernelRegistry& r);  // kernels/cpu/detect.cc

void register_cpu_select_kernels(KernelRegistry& r) {
  cpu::add_any_type(r, "TopK", node_kernel<TopKKernel>());
  cpu::add_any_type(r, "NonZero", node_kernel<NonZeroKernel>());
  cpu::add_any_type(r, "Compress", node_kernel<CompressKernel>());
  cpu::add_any_type(r, "OneHot", node_kernel<OneHotKernel>());
  cpu::add_any_type(r, "EyeLike", node_kernel<EyeLikeKernel>());
  register_cpu_detect_kernels(r);
}

}  // namespace otter
