// CUDA data-movement kernels: Transpose, Concat, Split, Slice, Expand and Tile as strided copies
// (one kernel, offsets from two strided indexers), and Gather, Pad, Trilu and ConstantOfShape as
// their own kernels; they move elements of any dtype by size. Their gradients are in
// shape_grad.cu; their parameters are resolved by kernels/common/shape_params.h, as on the CPU.
#include "kernels/common/indexing.h"
#include "kernels/common/shape_params.h"
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/shape.cuh"

namespace otter::cuda {
namespace {

// ---- kernels -----------------------------------------------------------------------------------

// dst[offset 0 of i] = src[offset 1 of i] for every flat index i.
template <typename T>
__global__ void strided_copy_kernel(int64_t n, T* dst, const T* src, StridedIndexer<2> ix) {
  OTTER_GRID_STRIDE(i, n) {
    int64_t off[2];
    ix.offsets(i, off);
    dst[off[0]] = src[off[1]];
  }
}

// out[o, k, j] = x[o, idx[k], j] with idx wrapped once when negative; an index outside
// [-axis_len, axis_len) is reported and gives 0.
template <typename T, typename I>
__global__ void gather_kernel(int64_t n, const T* x, const I* idx, T* out, int64_t ni, int64_t inner,
                              int64_t axis_len, DeviceError* slot, int reporter) {
  OTTER_GRID_STRIDE(i, n) {
    const int64_t j = i % inner, t = i / inner, k = t % ni, o = t / ni;
    int64_t v = static_cast<int64_t>(idx[k]);
    if (v < -axis_len || v >= axis_len) {
      report_error(slot, reporter, 1, v, k, axis_len);
      out[i] = T(0);
      continue;
    }
    if (v < 0) v += axis_len;
    out[i] = x[(o * axis_len + v) * inner + j];
  }
}


template <typename T>
__global__ void pad_kernel(int64_t n, const T* x, T* y, PadGeometry g, PadMode mode, const T* value) {
  const T c = value ? *value : T(0);
  OTTER_GRID_STRIDE(i, n) {
    int64_t rem = i, off = 0;
    bool fill = false;
    for (int d = g.rank - 1; d >= 0; --d) {
      const int64_t o = rem % g.out[d];
      rem /= g.out[d];
      const int64_t s = pad_source(mode, o - g.lo[d], g.in[d]);
      if (s < 0) fill = true;
      else off += s * g.stride[d];
    }
    y[i] = fill ? c : x[off];
  }
}

// Keeps columns j >= row + k (upper) or j <= row + k (lower) of each trailing [rows, cols] matrix.
template <typename T>
__global__ void trilu_kernel(int64_t n, const T* x, T* y, int64_t rows, int64_t cols, int64_t k, bool upper) {
  OTTER_GRID_STRIDE(i, n) {
    const int64_t j = i % cols, r = (i / cols) % rows;
    const bool keep = upper ? j >= r + k : j <= r + k;
    y[i] = keep ? x[i] : T(0);
  }
}

template <typename T>
__global__ void fill_kernel(int64_t n, T* y, T v) {
  OTTER_GRID_STRIDE(i, n) { y[i] = v; }
}

// ---- launchers ---------------------------------------------------------------------------------

// dst[dst_strides . idx] = src[src_strides . idx] for every index idx over dims; byte pointers
// already point at the first element of each view.
void strided_copy(const KernelContext& ctx, DataType t, void* dst, const std::vector<int64_t>& dst_strides,
                  const void* src, const std::vector<int64_t>& src_strides, const std::vector<int64_t>& dims) {
  const int64_t n = num_elements(dims);
  if (n == 0) return;
  const auto ix = make_indexer<2>(dims, {dst_strides, src_strides});
  dispatch_bytes(t, [&](auto tag) {
    using T = typename decltype(tag)::type;
    strided_copy_kernel<T><<<grid_for(n), kBlock, 0, stream_of(ctx)>>>(n, static_cast<T*>(dst),
                                                                         static_cast<const T*>(src), ix);
    OTTER_CUDA_LAUNCH_CHECK();
  });
}


// ---- kernels by op -----------------------------------------------------------------------------

class TransposeKernel : public Kernel {
 public:
  explicit TransposeKernel(const Node& n) : perm_(n.attr_ints("perm")), has_perm_(n.has_attr("perm")) {}
  void run(KernelContext& ctx) override {
    const Tensor& x = ctx.input(0);
    const int64_t r = x.rank();
    std::vector<int64_t> perm = perm_;
    if (!has_perm_)
      for (int64_t i = 0; i < r; ++i) perm.push_back(r - 1 - i);
    if (static_cast<int64_t>(perm.size()) != r)
      ctx.error(str_cat("perm ", dims_to_string(perm), " does not match input ", x.describe()));
    std::vector<bool> seen(static_cast<size_t>(r), false);
    for (int64_t& v : perm) {
      if (v < -r || v >= r || seen[v < 0 ? v + r : v])
        ctx.error(str_cat("perm ", dims_to_string(perm_), " is not a permutation of rank ", r));
      if (v < 0) v += r;
      seen[v] = true;
    }
    const std::vector<int64_t> is = contiguous_strides(x.dims());
    std::vector<int64_t> od, src_strides;
    for (int64_t p : perm) {
      od.push_back(x.dims()[p]);
      src_strides.push_back(is[p]);
    }
    Tensor& out = ctx.allocate_output(0, x.dtype(), od);
    strided_copy(ctx, x.dtype(), out.raw(), contiguous_strides(od), x.raw(), src_strides, od);
  }

 private:
  std::vector<int64_t> perm_;
  bool has_perm_;
};

class ConcatKernel : public Kernel {
 public:
  explicit ConcatKernel(const Node& n) : axis_(n.attr_i("axis", 0)) {}
  void run(KernelContext& ctx) override {
    const params::ConcatSpec c = params::resolve_concat(ctx, axis_);
    const int n = ctx.num_inputs();
    const Tensor& x0 = ctx.input(0);
    const int64_t a = c.axis, outer = c.outer, inner = c.inner;
    Tensor& out = ctx.allocate_output(0, x0.dtype(), c.out_dims);
    const int64_t out_row = c.out_dims[a] * inner;
    int64_t col = 0;
    for (int i = 0; i < n; ++i) {
      const Tensor& xi = ctx.input(i);
      const int64_t len = xi.dims()[a] * inner;
      strided_copy(ctx, x0.dtype(), at_element(out, col), {out_row, 1}, xi.raw(), {len, 1}, {outer, len});
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
    const int64_t a = params::normalize_axis(ctx, axis_, r);
    const int nout = ctx.num_outputs();
    const std::vector<int64_t> sizes =
        params::split_sizes(ctx, x, a, nout, ctx.has_input(1) ? host_ints(ctx, 1, "split") : split_attr_, num_outputs_);
    int64_t outer = 1, inner = 1;
    for (int64_t k = 0; k < a; ++k) outer *= x.dims()[k];
    for (int64_t k = a + 1; k < r; ++k) inner *= x.dims()[k];
    const int64_t in_row = x.dims()[a] * inner;
    int64_t col = 0;
    for (int i = 0; i < nout; ++i) {
      const int64_t len = sizes[i] * inner;
      if (ctx.has_output(i)) {
        std::vector<int64_t> od = x.dims();
        od[a] = sizes[i];
        Tensor& out = ctx.allocate_output(i, x.dtype(), od);
        strided_copy(ctx, x.dtype(), out.raw(), {len, 1}, at_element(x, col), {in_row, 1}, {outer, len});
      }
      col += len;
    }
  }

 private:
  int64_t axis_, num_outputs_;
  std::vector<int64_t> split_attr_;
};

class SliceKernel : public Kernel {
 public:
  explicit SliceKernel(const Node&) {}
  void run(KernelContext& ctx) override {
    const Tensor& x = ctx.input(0);
    const params::SliceView p = params::resolve_slice(
        ctx, x.dims(), host_ints(ctx, 1, "starts"), host_ints(ctx, 2, "ends"),
        ctx.has_input(3) ? host_ints(ctx, 3, "axes") : std::vector<int64_t>{},
        ctx.has_input(4) ? host_ints(ctx, 4, "steps") : std::vector<int64_t>{});
    Tensor& out = ctx.allocate_output(0, x.dtype(), p.out_dims);
    if (out.numel() == 0) return;
    const std::vector<int64_t> is = contiguous_strides(x.dims());
    std::vector<int64_t> src_strides(is.size());
    int64_t base = 0;
    for (size_t i = 0; i < is.size(); ++i) {
      base += p.start[i] * is[i];
      src_strides[i] = p.step[i] * is[i];
    }
    strided_copy(ctx, x.dtype(), out.raw(), contiguous_strides(p.out_dims), at_element(x, base), src_strides, p.out_dims);
  }
};

class ExpandKernel : public Kernel {
 public:
  explicit ExpandKernel(const Node&) {}
  void run(KernelContext& ctx) override {
    const Tensor& x = ctx.input(0);
    const std::vector<int64_t> shape = host_ints(ctx, 1, "shape");
    // Numpy broadcast of x's dims with `shape`.
    const size_t rank = std::max(shape.size(), static_cast<size_t>(x.rank()));
    std::vector<int64_t> od(rank, 1);
    for (const std::vector<int64_t>* s : {&x.dims(), &shape}) {
      const size_t off = rank - s->size();
      for (size_t i = 0; i < s->size(); ++i) {
        const int64_t d = (*s)[i];
        if (d == od[off + i] || d == 1) continue;
        if (od[off + i] != 1) ctx.error(str_cat("cannot expand ", x.describe(), " to shape ", dims_to_string(shape)));
        od[off + i] = d;
      }
    }
    Tensor& out = ctx.allocate_output(0, x.dtype(), od);
    strided_copy(ctx, x.dtype(), out.raw(), contiguous_strides(od), x.raw(), broadcast_strides(x.dims(), od), od);
  }
};

// Tile as a strided copy: output [r0*d0, r1*d1, ...] is the row-major array [r0, d0, r1, d1, ...]
// whose repeat axes read the input with stride 0.
class TileKernel : public Kernel {
 public:
  explicit TileKernel(const Node&) {}
  void run(KernelContext& ctx) override {
    const Tensor& x = ctx.input(0);
    const std::vector<int64_t> reps = host_ints(ctx, 1, "repeats");
    const int64_t r = x.rank();
    if (static_cast<int64_t>(reps.size()) != r)
      ctx.error(str_cat("repeats ", dims_to_string(reps), " must have one entry per dim of ", x.describe()));
    const std::vector<int64_t> is = contiguous_strides(x.dims());
    std::vector<int64_t> od, dims2, src2;
    for (int64_t i = 0; i < r; ++i) {
      if (reps[i] < 0) ctx.error(str_cat("repeats ", dims_to_string(reps), " has a negative entry"));
      od.push_back(x.dims()[i] * reps[i]);
      dims2.insert(dims2.end(), {reps[i], x.dims()[i]});
      src2.insert(src2.end(), {0, is[i]});
    }
    Tensor& out = ctx.allocate_output(0, x.dtype(), od);
    strided_copy(ctx, x.dtype(), out.raw(), contiguous_strides(dims2), x.raw(), src2, dims2);
  }
};

class GatherKernel : public Kernel {
 public:
  explicit GatherKernel(const Node& n)
      : axis_(n.attr_i("axis", 0)),
        reporter_(n, [](const DeviceError& e) {
          return str_cat("index ", e.a, " (indices element ", e.b, ") is out of range for an axis of size ", e.c);
        }) {}
  void run(KernelContext& ctx) override {
    const Tensor& x = ctx.input(0);
    const Tensor& idx = ctx.input(1);
    const int64_t r = x.rank();
    if (r == 0) ctx.error("data must have rank >= 1");
    if (idx.dtype() != DataType::kInt64 && idx.dtype() != DataType::kInt32)
      ctx.error(str_cat("indices must be int64 or int32, got ", idx.describe()));
    const int64_t a = params::normalize_axis(ctx, axis_, r);
    std::vector<int64_t> od(x.dims().begin(), x.dims().begin() + a);
    od.insert(od.end(), idx.dims().begin(), idx.dims().end());
    od.insert(od.end(), x.dims().begin() + a + 1, x.dims().end());
    Tensor& out = ctx.allocate_output(0, x.dtype(), od);
    const int64_t n = out.numel();
    if (n == 0) return;
    int64_t inner = 1;
    for (int64_t k = a + 1; k < r; ++k) inner *= x.dims()[k];
    CudaDevice& dev = device_of(ctx);
    const int rep = reporter_.id(dev);
    dispatch_bytes(x.dtype(), [&](auto tag) {
      using T = typename decltype(tag)::type;
      auto launch = [&](auto* ip) {
        using I = std::remove_const_t<std::remove_pointer_t<decltype(ip)>>;
        gather_kernel<T, I><<<grid_for(n), kBlock, 0, dev.cuda_stream()>>>(
            n, static_cast<const T*>(x.raw()), ip, static_cast<T*>(out.raw()), idx.numel(), inner, x.dims()[a],
            dev.error_slot(), rep);
        OTTER_CUDA_LAUNCH_CHECK();
      };
      if (idx.dtype() == DataType::kInt64) launch(static_cast<const int64_t*>(idx.raw()));
      else launch(static_cast<const int32_t*>(idx.raw()));
    });
  }

 private:
  int64_t axis_;
  ErrorReporter reporter_;
};

class PadKernel : public Kernel {
 public:
  explicit PadKernel(const Node& n) : mode_(params::parse_pad_mode(n)) {}
  void run(KernelContext& ctx) override {
    const Tensor& x = ctx.input(0);
    const int64_t r = x.rank();
    if (r > kMaxDims) ctx.error(str_cat("Pad on CUDA takes at most ", kMaxDims, " dims, got ", x.describe()));
    const params::PadSpec p = params::resolve_pad(ctx, x, host_ints(ctx, 1, "pads"), optional_host_ints(ctx, 3, "axes"),
                                                  mode_);
    const PadGeometry g = pad_geometry(x.dims(), p);
    Tensor& out = ctx.allocate_output(0, x.dtype(), p.out_dims);
    const int64_t n = out.numel();
    if (n == 0) return;
    const void* value = nullptr;
    if (ctx.has_input(2) && ctx.input(2).numel() > 0) {
      if (ctx.input(2).dtype() != x.dtype())
        ctx.error(str_cat("constant_value is ", ctx.input(2).describe(), " but data is ", x.describe()));
      value = ctx.input(2).raw();
    }
    dispatch_bytes(x.dtype(), [&](auto tag) {
      using T = typename decltype(tag)::type;
      pad_kernel<T><<<grid_for(n), kBlock, 0, stream_of(ctx)>>>(n, static_cast<const T*>(x.raw()),
                                                                static_cast<T*>(out.raw()), g, mode_,
                                                                static_cast<const T*>(value));
      OTTER_CUDA_LAUNCH_CHECK();
    });
  }

 private:
  PadMode mode_ = PadMode::kConstant;
};

class TriluKernel : public Kernel {
 public:
  explicit TriluKernel(const Node& n) : upper_(n.attr_i("upper", 1) != 0) {}
  void run(KernelContext& ctx) override {
    const Tensor& x = ctx.input(0);
    const int64_t k = params::trilu_k(ctx, optional_host_ints(ctx, 1, "k"));
    Tensor& out = ctx.allocate_output(0, x.dtype(), x.dims());
    const int64_t n = x.numel();
    if (n == 0) return;
    dispatch_bytes(x.dtype(), [&](auto tag) {
      using T = typename decltype(tag)::type;
      trilu_kernel<T><<<grid_for(n), kBlock, 0, stream_of(ctx)>>>(n, static_cast<const T*>(x.raw()),
                                                                  static_cast<T*>(out.raw()), x.dim(-2), x.dim(-1), k,
                                                                  upper_);
      OTTER_CUDA_LAUNCH_CHECK();
    });
  }

 private:
  bool upper_;
};

class ConstantOfShapeKernel : public Kernel {
 public:
  explicit ConstantOfShapeKernel(const Node& n) : value_(params::constant_of_shape_value(n)) {}
  void run(KernelContext& ctx) override {
    Tensor& out =
        ctx.allocate_output(0, value_.dtype(), params::constant_of_shape_dims(ctx, host_ints(ctx, 0, "shape")));
    const int64_t n = out.numel();
    if (n == 0) return;
    dispatch_bytes(value_.dtype(), [&](auto tag) {
      using T = typename decltype(tag)::type;
      T v;
      std::memcpy(&v, value_.raw(), sizeof(T));
      fill_kernel<T><<<grid_for(n), kBlock, 0, stream_of(ctx)>>>(n, static_cast<T*>(out.raw()), v);
      OTTER_CUDA_LAUNCH_CHECK();
    });
  }

 private:
  Tensor value_;
};

}  // namespace

KernelFactory shape_kernel(const std::string& op) {
  if (op == "Transpose") return node_kernel<TransposeKernel>();
  if (op == "Concat") return node_kernel<ConcatKernel>();
  if (op == "Split") return node_kernel<SplitKernel>();
  if (op == "Slice") return node_kernel<SliceKernel>();
  if (op == "Expand") return node_kernel<ExpandKernel>();
  if (op == "Tile") return node_kernel<TileKernel>();
  if (op == "Gather") return node_kernel<GatherKernel>();
  if (op == "Pad") return node_kernel<PadKernel>();
  if (op == "Trilu") return node_kernel<TriluKernel>();
  if (op == "ConstantOfShape") return node_kernel<ConstantOfShapeKernel>();
  fail("shape_kernel: no CUDA kernel for ", op);
}

void copy_strided(const KernelContext& ctx, DataType t, void* dst, const std::vector<int64_t>& dst_strides,
                  const void* src, const std::vector<int64_t>& src_strides, const std::vector<int64_t>& dims) {
  strided_copy(ctx, t, dst, dst_strides, src, src_strides, dims);
}

}  // namespace otter::cuda
