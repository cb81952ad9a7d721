// CPU views, shape queries and constant-making kernels (Reshape, Flatten, Squeeze, Unsqueeze,
// Identity, Shape, Size, Constant, ConstantOfShape, Range, Trilu): type-agnostic, they move bytes
// of any dtype. The data-movement kernels are in kernels/cpu/movement.cc.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "kernels/common/indexing.h"
#include "kernels/cpu/broadcast.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/dispatch.h"
#include "kernels/cpu/shape_util.h"

namespace otter {
namespace {

using cpu::contiguous_strides;
using cpu::for_each_row;
using cpu::int_input;
using cpu::normalize_axis;

// ---- views: Reshape, Flatten, Squeeze, Unsqueeze, Identity ---------------------------------------
class ReshapeKernel : public Kernel {
 public:
  explicit ReshapeKernel(const Node& n) : allowzero_(n.attr_i("allowzero", 0) != 0) {}
  void run(KernelContext& ctx) override {
    const Tensor& x = ctx.input(0);
    std::vector<int64_t> shape = int_input(ctx, 1, "shape");
    std::vector<int64_t> dims(shape.size());
    int64_t infer = -1, known = 1;
    for (size_t i = 0; i < shape.size(); ++i) {
      int64_t s = shape[i];
      if (s == 0 && !allowzero_) {
        if (static_cast<int64_t>(i) >= x.rank())
          ctx.error(str_cat("shape ", dims_to_string(shape), " copies dim ", i, " (0) but the input is ",
                            x.describe()));
        dims[i] = x.dims()[i];
      } else if (s == -1) {
        if (infer >= 0) ctx.error(str_cat("shape ", dims_to_string(shape), " has more than one -1"));
        infer = static_cast<int64_t>(i);
        continue;
      } else if (s < 0) {
        ctx.error(str_cat("shape ", dims_to_string(shape), " has invalid dim ", s));
      } else {
        dims[i] = s;
      }
      known *= dims[i];
    }
    if (infer >= 0) {
      if (known == 0 || x.numel() % known != 0)
        ctx.error(str_cat("cannot reshape ", x.describe(), " to ", dims_to_string(shape)));
      dims[infer] = x.numel() / known;
    }
    if (num_elements(dims) != x.numel())
      ctx.error(str_cat("cannot reshape ", x.describe(), " to ", dims_to_string(shape)));
    ctx.alias_output(0, x, dims);
  }

 private:
  bool allowzero_;
};

class FlattenKernel : public Kernel {
 public:
  explicit FlattenKernel(const Node& n) : axis_(n.attr_i("axis", 1)) {}
  void run(KernelContext& ctx) override {
    const Tensor& x = ctx.input(0);
    int64_t r = x.rank(), a = axis_ < 0 ? axis_ + r : axis_;
    if (a < 0 || a > r) ctx.error(str_cat("axis ", axis_, " is out of range for input ", x.describe()));
    int64_t outer = 1;
    for (int64_t i = 0; i < a; ++i) outer *= x.dims()[i];
    int64_t inner = 1;
    for (int64_t i = a; i < r; ++i) inner *= x.dims()[i];
    ctx.alias_output(0, x, {outer, inner});
  }

 private:
  int64_t axis_;
};

class SqueezeKernel : public Kernel {
 public:
  explicit SqueezeKernel(const Node&) {}
  void run(KernelContext& ctx) override {
    const Tensor& x = ctx.input(0);
    const int64_t r = x.rank();
    std::vector<bool> drop(static_cast<size_t>(r), false);
    if (ctx.has_input(1)) {
      for (int64_t a : int_input(ctx, 1, "axes")) {
        int64_t k = normalize_axis(ctx, a, r);
        if (x.dims()[k] != 1)
          ctx.error(str_cat("cannot squeeze axis ", a, " of size ", x.dims()[k], " in ", x.describe()));
        drop[k] = true;
      }
    } else {
      for (int64_t i = 0; i < r; ++i) drop[i] = x.dims()[i] == 1;
    }
    std::vector<int64_t> dims;
    for (int64_t i = 0; i < r; ++i)
      if (!drop[i]) dims.push_back(x.dims()[i]);
    ctx.alias_output(0, x, dims);
  }
};

class UnsqueezeKernel : public Kernel {
 public:
  explicit UnsqueezeKernel(const Node&) {}
  void run(KernelContext& ctx) override {
    const Tensor& x = ctx.input(0);
    std::vector<int64_t> axes = int_input(ctx, 1, "axes");
    const int64_t r = x.rank() + static_cast<int64_t>(axes.size());
    std::vector<bool> ins(static_cast<size_t>(r), false);
    for (int64_t a : axes) {
      int64_t k = normalize_axis(ctx, a, r);
      if (ins[k]) ctx.error(str_cat("axis ", a, " is repeated in axes ", dims_to_string(axes)));
      ins[k] = true;
    }
    std::vector<int64_t> dims;
    size_t j = 0;
    for (int64_t i = 0; i < r; ++i) dims.push_back(ins[i] ? 1 : x.dims()[j++]);
    ctx.alias_output(0, x, dims);
  }
};

class IdentityKernel : public Kernel {
 public:
  explicit IdentityKernel(const Node&) {}
  void run(KernelContext& ctx) override { ctx.alias_output(0, ctx.input(0), ctx.input(0).dims()); }
};

// ---- Shape, Size, Constant, ConstantOfShape, Range, Trilu ---------------------------------------
class ShapeKernel : public Kernel {
 public:
  explicit ShapeKernel(const Node& n)
      : start_(n.attr_i("start", 0)), end_(n.attr_i("end", std::numeric_limits<int64_t>::max())) {}
  void run(KernelContext& ctx) override {
    const Tensor& x = ctx.input(0);
    const int64_t r = x.rank();
    auto clampr = [&](int64_t v) { return std::clamp<int64_t>(v < 0 ? v + r : v, 0, r); };
    int64_t s = clampr(start_), e = clampr(end_);
    int64_t n = std::max<int64_t>(0, e - s);
    Tensor& out = ctx.allocate_output(0, DataType::kInt64, {n});
    for (int64_t i = 0; i < n; ++i) out.data<int64_t>()[i] = x.dims()[s + i];
  }

 private:
  int64_t start_, end_;
};

class SizeKernel : public Kernel {
 public:
  explicit SizeKernel(const Node&) {}
  void run(KernelContext& ctx) override {
    ctx.allocate_output(0, DataType::kInt64, {}).data<int64_t>()[0] = ctx.input(0).numel();
  }
};

void copy_constant(KernelContext& ctx, const Tensor& value) {
  Tensor& out = ctx.allocate_output(0, value.dtype(), value.dims());
  if (value.nbytes()) std::memcpy(out.raw(), value.raw(), value.nbytes());
}

class ConstantKernel : public Kernel {
 public:
  explicit ConstantKernel(const Node& n) {
    if (const Attribute* a = n.find_attr("value")) {
      value_ = a->t().clone();
    } else if (n.has_attr("value_float")) {
      value_ = Tensor::scalar<float>(n.attr_f("value_float", 0));
    } else if (n.has_attr("value_floats")) {
      auto v = n.attr_floats("value_floats");
      value_ = Tensor::from_vector<float>({static_cast<int64_t>(v.size())}, v);
    } else if (n.has_attr("value_int")) {
      value_ = Tensor::scalar<int64_t>(n.attr_i("value_int", 0));
    } else if (n.has_attr("value_ints")) {
      auto v = n.attr_ints("value_ints");
      value_ = Tensor::from_vector<int64_t>({static_cast<int64_t>(v.size())}, v);
    } else {
      fail(n.describe(), ": Constant needs one of value, value_float(s), value_int(s)");
    }
  }
  void run(KernelContext& ctx) override { copy_constant(ctx, value_); }

 private:
  Tensor value_;
};

class ConstantOfShapeKernel : public Kernel {
 public:
  explicit ConstantOfShapeKernel(const Node& n) : value_(params::constant_of_shape_value(n)) {}
  void run(KernelContext& ctx) override {
    Tensor& out =
        ctx.allocate_output(0, value_.dtype(), params::constant_of_shape_dims(ctx, int_input(ctx, 0, "shape")));
    OTTER_DISPATCH_BYTES(value_.dtype(), T, [&] {
      T v;
      std::memcpy(&v, value_.raw(), sizeof(T));
      T* p = static_cast<T*>(out.raw());
      std::fill(p, p + out.numel(), v);
    });
  }

 private:
  Tensor value_;
};

class RangeKernel : public Kernel {
 public:
  explicit RangeKernel(const Node&) {}
  void run(KernelContext& ctx) override {
    const Tensor& s = ctx.input(0);
    for (int i = 1; i < 3; ++i) {
      if (ctx.input(i).dtype() != s.dtype())
        ctx.error(str_cat("input ", i, " is ", ctx.input(i).describe(), " but start is ", s.describe()));
    }
    for (int i = 0; i < 3; ++i)
      if (ctx.input(i).numel() != 1) ctx.error(str_cat("input ", i, " must be a scalar, got ", ctx.input(i).describe()));
    cpu::visit_numeric(s.dtype(), [&](auto tag) {
      using S = typename decltype(tag)::type;
      if constexpr (std::is_same_v<S, Half> || std::is_same_v<S, BFloat16>) {
        ctx.error(str_cat("unsupported type ", s.describe()));
      } else {
        S start = ctx.input(0).data<S>()[0], limit = ctx.input(1).data<S>()[0], delta = ctx.input(2).data<S>()[0];
        if (delta == S(0)) ctx.error("delta is 0");
        int64_t n;
        if constexpr (std::is_floating_point_v<S>) {
          double c = std::ceil((static_cast<double>(limit) - start) / delta);
          n = c > 0 ? static_cast<int64_t>(c) : 0;
        } else {
          int64_t diff = static_cast<int64_t>(limit) - start, d = delta;
          n = (d > 0) ? (diff > 0 ? (diff + d - 1) / d : 0) : (diff < 0 ? (-diff + (-d) - 1) / (-d) : 0);
        }
        Tensor& out = ctx.allocate_output(0, s.dtype(), {n});
        S* p = out.data<S>();
        for (int64_t i = 0; i < n; ++i) p[i] = static_cast<S>(start + static_cast<S>(i) * delta);
      }
    });
  }
};

class TriluKernel : public Kernel {
 public:
  explicit TriluKernel(const Node& n) : upper_(n.attr_i("upper", 1) != 0) {}
  void run(KernelContext& ctx) override {
    const int64_t k = params::trilu_k(ctx, cpu::optional_int_input(ctx, 1, "k"));
    const Tensor& x = ctx.input(0);
    Tensor& out = ctx.allocate_output(0, x.dtype(), x.dims());
    if (x.numel() == 0) return;
    const int64_t rows = x.dim(-2), cols = x.dim(-1), nmat = x.numel() / (rows * cols);
    const size_t es = dtype_size(x.dtype());
    const char* src = static_cast<const char*>(x.raw());
    char* dst = static_cast<char*>(out.raw());
    cpu::parallel_ranges(nmat * rows, [&](int64_t b, int64_t e) {
      for (int64_t it = b; it < e; ++it) {
        const int64_t i = it % rows;
        // Kept columns: [i + k, cols) for upper, [0, i + k] for lower.
        int64_t kb = upper_ ? std::clamp<int64_t>(i + k, 0, cols) : 0;
        int64_t ke = upper_ ? cols : std::clamp<int64_t>(i + k + 1, 0, cols);
        char* d = dst + it * cols * es;
        const char* s = src + it * cols * es;
        std::memset(d, 0, cols * es);
        if (ke > kb) std::memcpy(d + kb * es, s + kb * es, (ke - kb) * es);
      }
    }, cols);
  }

 private:
  bool upper_;
};

}  // namespace

void register_cpu_shape_kernels(KernelRegistry& r) {
  cpu::add_any_type(r, "Reshape", node_kernel<ReshapeKernel>());
  cpu::add_any_type(r, "Flatten", node_kernel<FlattenKernel>());
  cpu::add_any_type(r, "Squeeze", node_kernel<SqueezeKernel>());
  cpu::add_any_type(r, "Unsqueeze", node_kernel<UnsqueezeKernel>());
  cpu::add_any_type(r, "Identity", node_kernel<IdentityKernel>());
  cpu::add_any_type(r, "Shape", node_kernel<ShapeKernel>());
  cpu::add_any_type(r, "Size", node_kernel<SizeKernel>());
  cpu::add_any_type(r, "Constant", node_kernel<ConstantKernel>());
  cpu::add_any_type(r, "ConstantOfShape", node_kernel<ConstantOfShapeKernel>());
  cpu::add_any_type(r, "Range", node_kernel<RangeKernel>());
  cpu::add_any_type(r, "Trilu", node_kernel<TriluKernel>());
  register_cpu_movement_kernels(r);
}

}  // namespace otter
