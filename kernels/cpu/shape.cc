// CPU shape and data-movement kernels (Reshape, Transpose, Concat, Split, Slice, Gather, Expand,
// Tile, Pad, Shape, Constant, Range, Trilu, ...): type-agnostic, they move bytes of any dtype.
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

constexpr int kFirstOpset = 13;
constexpr int kLastOpset = 21;

using cpu::contiguous_strides;
using cpu::for_each_row;
using cpu::int_input;
using cpu::normalize_axis;

void add(KernelRegistry& r, const char* op, KernelFactory f, int since = kFirstOpset) {
  KernelDef d;
  d.op_type = op;
  d.since_version = since;
  d.until_version = kLastOpset;
  d.create = std::move(f);  // empty dtypes: any type
  r.add(std::move(d));
}

template <typename K>
KernelFactory make() {
  return [](const Node& n) -> std::unique_ptr<Kernel> { return std::make_unique<K>(n); };
}

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

// ---- Transpose ----------------------------------------------------------------------------------
// dims/perm already collapsed: no size-1 dims, no two input dims that stay adjacent in the output.
template <typename T>
void transpose_impl(const T* in, T* out, const std::vector<int64_t>& d, const std::vector<int64_t>& p) {
  const int r = static_cast<int>(d.size());
  std::vector<int64_t> is = contiguous_strides(d), od(r), os_of_in(r);
  for (int i = 0; i < r; ++i) od[i] = d[p[i]];
  std::vector<int64_t> os = contiguous_strides(od);
  for (int i = 0; i < r; ++i) os_of_in[p[i]] = os[i];
  if (p[r - 1] == r - 1) {  // the innermost dim stays innermost: copy whole rows
    std::vector<int64_t> ist(r);
    for (int i = 0; i < r; ++i) ist[i] = is[p[i]];
    const int64_t n = od[r - 1];
    for_each_row(od, ist, [&](int64_t row, int64_t off) { std::memcpy(out + row * n, in + off, n * sizeof(T)); });
    return;
  }
  // Tiled 2-D transpose between input dim A (innermost in the input) and input dim B (innermost
  // in the output), batched over the other dims.
  constexpr int64_t kTile = 32;
  const int A = r - 1, B = static_cast<int>(p[r - 1]);
  const int64_t na = d[A], nb = d[B], isb = is[B], osa = os_of_in[A];
  std::vector<int> batch_dims;
  for (int i = 0; i < r; ++i)
    if (i != A && i != B) batch_dims.push_back(i);
  int64_t nbatch = 1;
  for (int i : batch_dims) nbatch *= d[i];
  const int64_t ta = (na + kTile - 1) / kTile, tb = (nb + kTile - 1) / kTile;
  cpu::parallel_ranges(nbatch * ta * tb, [&](int64_t b, int64_t e) {
    for (int64_t item = b; item < e; ++item) {
      int64_t rem = item / (ta * tb), t = item % (ta * tb);
      int64_t ioff = 0, ooff = 0;
      for (size_t k = batch_dims.size(); k-- > 0;) {
        int dim = batch_dims[k];
        int64_t v = rem % d[dim];
        rem /= d[dim];
        ioff += v * is[dim];
        ooff += v * os_of_in[dim];
      }
      int64_t a0 = (t / tb) * kTile, b0 = (t % tb) * kTile;
      int64_t a1 = std::min(na, a0 + kTile), b1 = std::min(nb, b0 + kTile);
      for (int64_t j = b0; j < b1; ++j) {
        const T* src = in + ioff + j * isb;
        T* dst = out + ooff + j;
        for (int64_t i = a0; i < a1; ++i) dst[i * osa] = src[i];
      }
    }
  }, kTile * kTile);
}

class TransposeKernel : public Kernel {
 public:
  explicit TransposeKernel(const Node& n) : perm_(n.attr_ints("perm")), has_perm_(n.has_attr("perm")) {}
  void run(KernelContext& ctx) override {
    const Tensor& x = ctx.input(0);
    const int64_t r = x.rank();
    std::vector<int64_t> perm = perm_;
    if (!has_perm_) {
      perm.resize(static_cast<size_t>(r));
      for (int64_t i = 0; i < r; ++i) perm[i] = r - 1 - i;
    }
    if (static_cast<int64_t>(perm.size()) != r)
      ctx.error(str_cat("perm ", dims_to_string(perm), " does not match input ", x.describe()));
    std::vector<bool> seen(static_cast<size_t>(r), false);
    for (int64_t& v : perm) {
      if (v < -r || v >= r || seen[v < 0 ? v + r : v])
        ctx.error(str_cat("perm ", dims_to_string(perm_), " is not a permutation of rank ", r));
      if (v < 0) v += r;
      seen[v] = true;
    }
    std::vector<int64_t> od(static_cast<size_t>(r));
    for (int64_t i = 0; i < r; ++i) od[i] = x.dims()[perm[i]];
    Tensor& out = ctx.allocate_output(0, x.dtype(), od);
    if (x.numel() == 0) return;
    // Collapse: drop size-1 dims, then merge input dims that stay adjacent in the output.
    std::vector<int64_t> keep_id(static_cast<size_t>(r), -1);
    std::vector<int64_t> kd;
    for (int64_t i = 0; i < r; ++i)
      if (x.dims()[i] != 1) { keep_id[i] = static_cast<int64_t>(kd.size()); kd.push_back(x.dims()[i]); }
    std::vector<int64_t> kp;
    for (int64_t i = 0; i < r; ++i)
      if (keep_id[perm[i]] >= 0) kp.push_back(keep_id[perm[i]]);
    // Groups of consecutive output positions whose input dims are consecutive.
    std::vector<std::vector<int64_t>> groups;
    for (int64_t v : kp) {
      if (!groups.empty() && groups.back().back() + 1 == v) groups.back().push_back(v);
      else groups.push_back({v});
    }
    // Number the groups by their first input dim to get the collapsed dims and permutation.
    std::vector<int64_t> order(groups.size());
    for (size_t g = 0; g < groups.size(); ++g) order[g] = static_cast<int64_t>(g);
    std::sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return groups[a][0] < groups[b][0]; });
    std::vector<int64_t> cd(groups.size()), cp(groups.size());
    for (size_t k = 0; k < order.size(); ++k) {
      int64_t size = 1;
      for (int64_t v : groups[order[k]]) size *= kd[v];
      cd[k] = size;
      cp[order[k]] = static_cast<int64_t>(k);
    }
    if (cd.size() <= 1) {
      std::memcpy(out.raw(), x.raw(), x.nbytes());
      return;
    }
    OTTER_DISPATCH_BYTES(x.dtype(), T, [&] {
      transpose_impl(static_cast<const T*>(x.raw()), static_cast<T*>(out.raw()), cd, cp);
    });
  }

 private:
  std::vector<int64_t> perm_;
  bool has_perm_;
};

// ---- Concat / Split -----------------------------------------------------------------------------
class ConcatKernel : public Kernel {
 public:
  explicit ConcatKernel(const Node& n) : axis_(n.attr_i("axis", 0)) {}
  void run(KernelContext& ctx) override {
    const int n = ctx.num_inputs();
    if (n < 1) ctx.error("needs at least one input");
    const Tensor& x0 = ctx.input(0);
    const int64_t r = x0.rank();
    if (r == 0) ctx.error("cannot concatenate scalars");
    const int64_t a = normalize_axis(ctx, axis_, r);
    std::vector<int64_t> od = x0.dims();
    od[a] = 0;
    for (int i = 0; i < n; ++i) {
      const Tensor& xi = ctx.input(i);
      bool ok = xi.dtype() == x0.dtype() && xi.rank() == r;
      for (int64_t k = 0; ok && k < r; ++k) ok = k == a || xi.dims()[k] == x0.dims()[k];
      if (!ok) ctx.error(str_cat("input ", i, " ", xi.describe(), " does not match input 0 ", x0.describe(),
                                 " outside axis ", a));
      od[a] += xi.dims()[a];
    }
    Tensor& out = ctx.allocate_output(0, x0.dtype(), od);
    if (out.numel() == 0) return;
    const size_t es = dtype_size(x0.dtype());
    int64_t outer = 1, inner = 1;
    for (int64_t k = 0; k < a; ++k) outer *= od[k];
    for (int64_t k = a + 1; k < r; ++k) inner *= od[k];
    const int64_t out_row = od[a] * inner;
    char* dst = static_cast<char*>(out.raw());
    int64_t col = 0;
    for (int i = 0; i < n; ++i) {
      const Tensor& xi = ctx.input(i);
      const int64_t len = xi.dims()[a] * inner;
      const char* src = static_cast<const char*>(xi.raw());
      if (len > 0) {
        cpu::parallel_ranges(outer, [&](int64_t b, int64_t e) {
          for (int64_t o = b; o < e; ++o)
            std::memcpy(dst + (o * out_row + col) * es, src + o * len * es, len * es);
        }, len);
      }
      col += len;
    }
  }

 private:
  int64_t axis_;
};

class SplitKernel : public Kernel {
 public:
  explicit SplitKernel(const Node& n)
      : axis_(n.attr_i("axis", 0)), num_outputs_(n.attr_i("num_outputs", 0)), split_attr_(n.attr_ints("split")) {}
  void run(KernelContext& ctx) override {
    const Tensor& x = ctx.input(0);
    const int64_t r = x.rank();
    const int64_t a = normalize_axis(ctx, axis_, r);
    const int64_t dim = x.dims()[a];
    const int nout = ctx.num_outputs();
    const std::vector<int64_t> sizes = params::split_sizes(
        ctx, x, a, nout, ctx.has_input(1) ? int_input(ctx, 1, "split") : split_attr_, num_outputs_);
    const size_t es = dtype_size(x.dtype());
    int64_t outer = 1, inner = 1;
    for (int64_t k = 0; k < a; ++k) outer *= x.dims()[k];
    for (int64_t k = a + 1; k < r; ++k) inner *= x.dims()[k];
    const int64_t in_row = dim * inner;
    const char* src = static_cast<const char*>(x.raw());
    int64_t col = 0;
    for (int i = 0; i < nout; ++i) {
      std::vector<int64_t> od = x.dims();
      od[a] = sizes[i];
      const int64_t len = sizes[i] * inner;
      if (!ctx.has_output(i)) { col += len; continue; }
      Tensor& out = ctx.allocate_output(i, x.dtype(), od);
      char* dst = static_cast<char*>(out.raw());
      if (len > 0) {
        cpu::parallel_ranges(outer, [&](int64_t b, int64_t e) {
          for (int64_t o = b; o < e; ++o)
            std::memcpy(dst + o * len * es, src + (o * in_row + col) * es, len * es);
        }, len);
      }
      col += len;
    }
  }

 private:
  int64_t axis_, num_outputs_;
  std::vector<int64_t> split_attr_;
};

// ---- Slice --------------------------------------------------------------------------------------
class SliceKernel : public Kernel {
 public:
  explicit SliceKernel(const Node&) {}
  void run(KernelContext& ctx) override {
    const Tensor& x = ctx.input(0);
    const int64_t r = x.rank();
    const cpu::SliceView v = cpu::resolve_slice(ctx, x.dims(), 1);
    const std::vector<int64_t>& st = v.start;
    const std::vector<int64_t>& step = v.step;
    const std::vector<int64_t>& od = v.out_dims;
    Tensor& out = ctx.allocate_output(0, x.dtype(), od);
    if (out.numel() == 0) return;
    std::vector<int64_t> is = contiguous_strides(x.dims()), ist(static_cast<size_t>(r));
    int64_t base = 0;
    for (int64_t i = 0; i < r; ++i) {
      base += st[i] * is[i];
      ist[i] = step[i] * is[i];
    }
    OTTER_DISPATCH_BYTES(x.dtype(), T, [&] {
      const T* in = static_cast<const T*>(x.raw()) + base;
      T* o = static_cast<T*>(out.raw());
      if (r == 0) { o[0] = in[0]; return; }
      const int64_t len = od[r - 1], inner_step = ist[r - 1];
      for_each_row(od, ist, [&](int64_t row, int64_t off) {
        T* dst = o + row * len;
        const T* src = in + off;
        if (inner_step == 1) std::memcpy(dst, src, len * sizeof(T));
        else for (int64_t j = 0; j < len; ++j) dst[j] = src[j * inner_step];
      });
    });
  }
};

// ---- Gather -------------------------------------------------------------------------------------
class GatherKernel : public Kernel {
 public:
  explicit GatherKernel(const Node& n) : axis_(n.attr_i("axis", 0)) {}
  void run(KernelContext& ctx) override {
    const Tensor& x = ctx.input(0);
    const Tensor& idx = ctx.input(1);
    const int64_t r = x.rank();
    if (r == 0) ctx.error("data must have rank >= 1");
    const int64_t a = normalize_axis(ctx, axis_, r);
    const int64_t n = x.dims()[a];
    const std::vector<int64_t> ind = cpu::gather_indices(ctx, idx, a, x.dims());
    std::vector<int64_t> od(x.dims().begin(), x.dims().begin() + a);
    od.insert(od.end(), idx.dims().begin(), idx.dims().end());
    od.insert(od.end(), x.dims().begin() + a + 1, x.dims().end());
    Tensor& out = ctx.allocate_output(0, x.dtype(), od);
    if (out.numel() == 0) return;
    int64_t outer = 1, inner = 1;
    for (int64_t k = 0; k < a; ++k) outer *= x.dims()[k];
    for (int64_t k = a + 1; k < r; ++k) inner *= x.dims()[k];
    const int64_t ni = static_cast<int64_t>(ind.size());
    OTTER_DISPATCH_BYTES(x.dtype(), T, [&] {
      const T* src = static_cast<const T*>(x.raw());
      T* dst = static_cast<T*>(out.raw());
      cpu::parallel_ranges(outer * ni, [&](int64_t b, int64_t e) {
        for (int64_t it = b; it < e; ++it) {
          int64_t o = it / ni, k = it % ni;
          const T* s = src + (o * n + ind[k]) * inner;
          T* d = dst + it * inner;
          if (inner == 1) d[0] = s[0];
          else std::memcpy(d, s, inner * sizeof(T));
        }
      }, inner);
    });
  }

 private:
  int64_t axis_;
};

// ---- Expand / Tile ------------------------------------------------------------------------------
class ExpandKernel : public Kernel {
 public:
  explicit ExpandKernel(const Node&) {}
  void run(KernelContext& ctx) override {
    const Tensor& x = ctx.input(0);
    std::vector<int64_t> shape = int_input(ctx, 1, "shape");
    std::vector<int64_t> od;
    if (!cpu::broadcast_dims({&x.dims(), &shape}, &od))
      ctx.error(str_cat("cannot expand ", x.describe(), " to shape ", dims_to_string(shape)));
    Tensor& out = ctx.allocate_output(0, x.dtype(), od);
    if (out.numel() == 0) return;
    cpu::BroadcastPlan<1> plan({&x.dims()}, od);
    const bool moving = plan.inner_strides()[0] == 1;
    OTTER_DISPATCH_BYTES(x.dtype(), T, [&] {
      const T* src = static_cast<const T*>(x.raw());
      T* dst = static_cast<T*>(out.raw());
      plan.for_each_run([&](int64_t o, const std::array<int64_t, 1>& offs, int64_t len) {
        if (moving) std::memcpy(dst + o, src + offs[0], len * sizeof(T));
        else std::fill(dst + o, dst + o + len, src[offs[0]]);
      });
    });
  }
};

class TileKernel : public Kernel {
 public:
  explicit TileKernel(const Node&) {}
  void run(KernelContext& ctx) override {
    const Tensor& x = ctx.input(0);
    std::vector<int64_t> reps = int_input(ctx, 1, "repeats");
    const int64_t r = x.rank();
    if (static_cast<int64_t>(reps.size()) != r)
      ctx.error(str_cat("repeats ", dims_to_string(reps), " must have one entry per dim of ", x.describe()));
    std::vector<int64_t> od(static_cast<size_t>(r));
    for (int64_t i = 0; i < r; ++i) {
      if (reps[i] < 0) ctx.error(str_cat("repeats ", dims_to_string(reps), " has a negative entry"));
      od[i] = x.dims()[i] * reps[i];
    }
    Tensor& out = ctx.allocate_output(0, x.dtype(), od);
    if (out.numel() == 0) return;
    if (r == 0) { std::memcpy(out.raw(), x.raw(), x.nbytes()); return; }
    const std::vector<int64_t> is = contiguous_strides(x.dims());
    const int64_t n_in = x.dims()[r - 1], n_out = od[r - 1];
    OTTER_DISPATCH_BYTES(x.dtype(), T, [&] {
      const T* src = static_cast<const T*>(x.raw());
      T* dst = static_cast<T*>(out.raw());
      int64_t rows = out.numel() / n_out;
      cpu::parallel_ranges(rows, [&](int64_t b, int64_t e) {
        for (int64_t row = b; row < e; ++row) {
          int64_t rem = row, off = 0;
          for (int64_t i = r - 2; i >= 0; --i) {
            off += (rem % od[i]) % x.dims()[i] * is[i];
            rem /= od[i];
          }
          T* d = dst + row * n_out;
          for (int64_t k = 0; k < reps[r - 1]; ++k) std::memcpy(d + k * n_in, src + off, n_in * sizeof(T));
        }
      }, n_out);
    });
  }
};

// ---- Pad ----------------------------------------------------------------------------------------
class PadKernel : public Kernel {
 public:
  explicit PadKernel(const Node& n) : mode_name_(n.attr_s("mode", "constant")), mode_(cpu::parse_pad_mode(n)) {}
  int64_t source(int64_t s, int64_t n) const { return pad_source(mode_, s, n); }
  void run(KernelContext& ctx) override {
    const Tensor& x = ctx.input(0);
    const int64_t r = x.rank();
    std::vector<int64_t> pads = int_input(ctx, 1, "pads");
    std::vector<int64_t> axes;
    if (ctx.has_input(3)) {
      for (int64_t a : int_input(ctx, 3, "axes")) axes.push_back(normalize_axis(ctx, a, r));
    } else {
      for (int64_t i = 0; i < r; ++i) axes.push_back(i);
    }
    const size_t na = axes.size();
    if (pads.size() != 2 * na)
      ctx.error(str_cat("pads ", dims_to_string(pads), " must have 2 entries per padded axis (", na, ")"));
    std::vector<int64_t> lo(static_cast<size_t>(r), 0), od = x.dims();
    for (size_t i = 0; i < na; ++i) {
      int64_t a = axes[i];
      lo[a] = pads[i];
      od[a] = x.dims()[a] + pads[i] + pads[i + na];
      if (od[a] < 0) ctx.error(str_cat("pads ", dims_to_string(pads), " crop axis ", a, " of ", x.describe(), " below 0"));
      if (mode_ != PadMode::kConstant && x.dims()[a] == 0 && od[a] > 0)
        ctx.error(str_cat("cannot ", mode_name_, "-pad the empty axis ", a, " of ", x.describe()));
    }
    Tensor& out = ctx.allocate_output(0, x.dtype(), od);
    if (out.numel() == 0) return;
    if (r == 0) { std::memcpy(out.raw(), x.raw(), x.nbytes()); return; }
    const size_t es = dtype_size(x.dtype());
    std::vector<unsigned char> cval(es, 0);
    if (ctx.has_input(2) && ctx.input(2).numel() > 0) {
      if (ctx.input(2).dtype() != x.dtype())
        ctx.error(str_cat("constant_value is ", ctx.input(2).describe(), " but data is ", x.describe()));
      std::memcpy(cval.data(), ctx.input(2).raw(), es);
    }
    const std::vector<int64_t> is = contiguous_strides(x.dims());
    const int64_t n_out = od[r - 1], n_in = x.dims()[r - 1], l = lo[r - 1];
    const int64_t mid_b = std::clamp<int64_t>(l, 0, n_out), mid_e = std::clamp<int64_t>(l + n_in, 0, n_out);
    OTTER_DISPATCH_BYTES(x.dtype(), T, [&] {
      T c;
      std::memcpy(&c, cval.data(), sizeof(T));
      const T* src = static_cast<const T*>(x.raw());
      T* dst = static_cast<T*>(out.raw());
      const int64_t rows = out.numel() / n_out;
      cpu::parallel_ranges(rows, [&](int64_t b, int64_t e) {
        for (int64_t row = b; row < e; ++row) {
          T* d = dst + row * n_out;
          int64_t rem = row, off = 0;
          bool fill = false;
          for (int64_t i = r - 2; i >= 0; --i) {
            int64_t s = source(rem % od[i] - lo[i], x.dims()[i]);
            rem /= od[i];
            if (s < 0) { fill = true; break; }
            off += s * is[i];
          }
          if (fill) { std::fill(d, d + n_out, c); continue; }
          const T* sr = src + off;
          for (int64_t j = 0; j < mid_b; ++j) { int64_t s = source(j - l, n_in); d[j] = s < 0 ? c : sr[s]; }
          if (mid_e > mid_b) std::memcpy(d + mid_b, sr + (mid_b - l), (mid_e - mid_b) * sizeof(T));
          for (int64_t j = std::max(mid_e, mid_b); j < n_out; ++j) { int64_t s = source(j - l, n_in); d[j] = s < 0 ? c : sr[s]; }
        }
      }, n_out);
    });
  }

 private:
  std::string mode_name_;
  PadMode mode_;
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
  explicit ConstantOfShapeKernel(const Node& n) {
    if (const Attribute* a = n.find_attr("value")) {
      value_ = a->t();
      if (value_.numel() != 1) fail(n.describe(), ": attribute 'value' must hold one element, got ", value_.describe());
    } else {
      value_ = Tensor::scalar<float>(0.0f);
    }
  }
  void run(KernelContext& ctx) override {
    std::vector<int64_t> dims = int_input(ctx, 0, "shape");
    for (int64_t d : dims)
      if (d < 0) ctx.error(str_cat("shape ", dims_to_string(dims), " has a negative dim"));
    Tensor& out = ctx.allocate_output(0, value_.dtype(), dims);
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
    const Tensor& x = ctx.input(0);
    if (x.rank() < 2) ctx.error(str_cat("input must have rank >= 2, got ", x.describe()));
    int64_t k = 0;
    if (ctx.has_input(1)) {
      auto kv = int_input(ctx, 1, "k");
      if (kv.size() != 1) ctx.error("k must be a scalar");
      k = kv[0];
    }
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
  add(r, "Reshape", make<ReshapeKernel>());
  add(r, "Flatten", make<FlattenKernel>());
  add(r, "Squeeze", make<SqueezeKernel>());
  add(r, "Unsqueeze", make<UnsqueezeKernel>());
  add(r, "Identity", make<IdentityKernel>());
  add(r, "Transpose", make<TransposeKernel>());
  add(r, "Concat", make<ConcatKernel>());
  add(r, "Split", make<SplitKernel>());
  add(r, "Slice", make<SliceKernel>());
  add(r, "Gather", make<GatherKernel>());
  add(r, "Expand", make<ExpandKernel>());
  add(r, "Tile", make<TileKernel>());
  add(r, "Pad", make<PadKernel>());
  add(r, "Shape", make<ShapeKernel>());
  add(r, "Size", make<SizeKernel>());
  add(r, "Constant", make<ConstantKernel>());
  add(r, "ConstantOfShape", make<ConstantOfShapeKernel>());
  add(r, "Range", make<RangeKernel>());
  add(r, "Trilu", make<TriluKernel>(), 14);
}

}  // namespace otter
