// CPU data-movement kernels (Transpose, Concat, Split, Slice, Gather, Expand, Tile, Pad):
// type-agnostic, they move bytes of any dtype; their parameters are resolved by
// kernels/common/shape_params.h, as on CUDA, and Concat, Split and Slice are the shared kernels of
// kernels/common/movement_kernels.h over the CPU copies here.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "kernels/common/indexing.h"
#include "kernels/common/movement_kernels.h"
#include "kernels/cpu/broadcast.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/dispatch.h"
#include "kernels/cpu/shape_util.h"

namespace otter {
namespace {

using cpu::contiguous_strides;
using cpu::for_each_row;
using cpu::int_input;

// ---- Transpose ----------------------------------------------------------------------------------
// The transposition of one input shape, collapsed (no size-1 dims, no two input dims that stay
// adjacent in the output) with the strides its loops need. A kernel keeps it until the input's
// shape changes, so a small transpose costs no index set-up per call.
struct TransposePlan {
  std::vector<int64_t> in_dims, out_dims;  // the uncollapsed shapes
  std::vector<int64_t> d, p;               // collapsed input dims and permutation
  std::vector<int64_t> is, od, os_of_in;   // input strides, output dims, output stride of each input dim
  // The innermost dim stays innermost: whole rows of od.back() elements, row r's input offset from
  // the strides `ist` (input strides in output order).
  bool rows = false;
  std::vector<int64_t> ist;
  // Otherwise a tiled 2-D transpose between input dim A (innermost in the input) and input dim B
  // (innermost in the output), batched over the other dims.
  int a = 0, b = 0;
  std::vector<int> batch_dims;
  int64_t nbatch = 1;
};

TransposePlan plan_transpose(const std::vector<int64_t>& in_dims, const std::vector<int64_t>& perm) {
  TransposePlan t;
  t.in_dims = in_dims;
  const int64_t r = static_cast<int64_t>(in_dims.size());
  t.out_dims.resize(static_cast<size_t>(r));
  for (int64_t i = 0; i < r; ++i) t.out_dims[i] = in_dims[perm[i]];
  // Collapse: drop size-1 dims, then merge input dims that stay adjacent in the output.
  std::vector<int64_t> keep_id(static_cast<size_t>(r), -1);
  std::vector<int64_t> kd;
  for (int64_t i = 0; i < r; ++i)
    if (in_dims[i] != 1) { keep_id[i] = static_cast<int64_t>(kd.size()); kd.push_back(in_dims[i]); }
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
  std::sort(order.begin(), order.end(), [&](int64_t x, int64_t y) { return groups[x][0] < groups[y][0]; });
  t.d.resize(groups.size());
  t.p.resize(groups.size());
  for (size_t k = 0; k < order.size(); ++k) {
    int64_t size = 1;
    for (int64_t v : groups[order[k]]) size *= kd[v];
    t.d[k] = size;
    t.p[order[k]] = static_cast<int64_t>(k);
  }
  const int cr = static_cast<int>(t.d.size());
  if (cr <= 1) return t;
  t.is = contiguous_strides(t.d);
  t.od.resize(cr);
  t.os_of_in.resize(cr);
  for (int i = 0; i < cr; ++i) t.od[i] = t.d[t.p[i]];
  const std::vector<int64_t> os = contiguous_strides(t.od);
  for (int i = 0; i < cr; ++i) t.os_of_in[t.p[i]] = os[i];
  t.rows = t.p[cr - 1] == cr - 1;
  if (t.rows) {
    t.ist.resize(cr);
    for (int i = 0; i < cr; ++i) t.ist[i] = t.is[t.p[i]];
    return t;
  }
  t.a = cr - 1;
  t.b = static_cast<int>(t.p[cr - 1]);
  for (int i = 0; i < cr; ++i)
    if (i != t.a && i != t.b) {
      t.batch_dims.push_back(i);
      t.nbatch *= t.d[i];
    }
  return t;
}

// out[i * osa + j] = in[j * isb + i] for i in [a0, a1), j in [b0, b1): one tile of a 2-D transpose.
template <typename T>
void transpose_tile(const T* in, T* out, int64_t isb, int64_t osa, int64_t a0, int64_t a1, int64_t b0, int64_t b1) {
  for (int64_t j = b0; j < b1; ++j) {
    const T* src = in + j * isb;
    T* dst = out + j;
    for (int64_t i = a0; i < a1; ++i) dst[i * osa] = src[i];
  }
}

#if defined(__SSE2__)
// 2-byte elements (fp16, bf16, int16): 8 x 8 blocks through SSE2 unpacks, 8 loads and 8 stores of
// 16 bytes instead of 64 scattered 2-byte stores; the ragged edges element by element.
template <>
void transpose_tile<uint16_t>(const uint16_t* in, uint16_t* out, int64_t isb, int64_t osa, int64_t a0, int64_t a1,
                              int64_t b0, int64_t b1) {
  int64_t j0 = b0;
  for (; j0 + 8 <= b1; j0 += 8) {
    int64_t i0 = a0;
    for (; i0 + 8 <= a1; i0 += 8) {
      __m128i r[8], t[8], u[8];
      for (int k = 0; k < 8; ++k)
        r[k] = _mm_loadu_si128(reinterpret_cast<const __m128i*>(in + (j0 + k) * isb + i0));
      for (int k = 0; k < 4; ++k) {
        t[2 * k] = _mm_unpacklo_epi16(r[2 * k], r[2 * k + 1]);
        t[2 * k + 1] = _mm_unpackhi_epi16(r[2 * k], r[2 * k + 1]);
      }
      for (int h = 0; h < 2; ++h)  // h = 0: columns 0..3 (from t[0], t[2], t[4], t[6]); 1: 4..7
        for (int q = 0; q < 2; ++q) {
          u[4 * h + q] = _mm_unpacklo_epi32(t[h + 4 * q], t[h + 4 * q + 2]);
          u[4 * h + q + 2] = _mm_unpackhi_epi32(t[h + 4 * q], t[h + 4 * q + 2]);
        }
      // u[4h + q]: columns 4h + {0, 1} of rows 4q..4q+3; u[4h + q + 2]: columns 4h + {2, 3}.
      for (int h = 0; h < 2; ++h)
        for (int c = 0; c < 2; ++c) {
          const __m128i lo = u[4 * h + 2 * c], hi = u[4 * h + 2 * c + 1];
          const int64_t col = 4 * h + 2 * c;
          _mm_storeu_si128(reinterpret_cast<__m128i*>(out + (i0 + col) * osa + j0), _mm_unpacklo_epi64(lo, hi));
          _mm_storeu_si128(reinterpret_cast<__m128i*>(out + (i0 + col + 1) * osa + j0), _mm_unpackhi_epi64(lo, hi));
        }
    }
    for (int64_t j = j0; j < j0 + 8; ++j)
      for (int64_t i = i0; i < a1; ++i) out[i * osa + j] = in[j * isb + i];
  }
  for (int64_t j = j0; j < b1; ++j)
    for (int64_t i = a0; i < a1; ++i) out[i * osa + j] = in[j * isb + i];
}
#endif

template <typename T>
void transpose_impl(const T* in, T* out, const TransposePlan& t) {
  if (t.rows) {
    const int64_t n = t.od.back();
    for_each_row(t.od, t.ist, [&](int64_t row, int64_t off) { std::memcpy(out + row * n, in + off, n * sizeof(T)); });
    return;
  }
  constexpr int64_t kTile = 32;
  const int64_t na = t.d[t.a], nb = t.d[t.b], isb = t.is[t.b], osa = t.os_of_in[t.a];
  const int64_t ta = (na + kTile - 1) / kTile, tb = (nb + kTile - 1) / kTile;
  cpu::parallel_ranges(t.nbatch * ta * tb, [&](int64_t b, int64_t e) {
    for (int64_t item = b; item < e; ++item) {
      int64_t rem = item / (ta * tb), tile = item % (ta * tb);
      int64_t ioff = 0, ooff = 0;
      for (size_t k = t.batch_dims.size(); k-- > 0;) {
        const int dim = t.batch_dims[k];
        const int64_t v = rem % t.d[dim];
        rem /= t.d[dim];
        ioff += v * t.is[dim];
        ooff += v * t.os_of_in[dim];
      }
      const int64_t a0 = (tile / tb) * kTile, b0 = (tile % tb) * kTile;
      const int64_t a1 = std::min(na, a0 + kTile), b1 = std::min(nb, b0 + kTile);
      transpose_tile<T>(in + ioff, out + ooff, isb, osa, a0, a1, b0, b1);
    }
  }, kTile * kTile);
}

class TransposeKernel : public Kernel {
 public:
  explicit TransposeKernel(const Node& n) : perm_(n.attr_ints("perm")), has_perm_(n.has_attr("perm")) {}
  void run(KernelContext& ctx) override {
    const Tensor& x = ctx.input(0);
    if (!planned_ || x.dims() != plan_.in_dims) {
      plan_ = plan_transpose(x.dims(), params::resolve_perm(ctx, perm_, has_perm_, x.rank()));
      planned_ = true;
    }
    Tensor& out = ctx.allocate_output(0, x.dtype(), plan_.out_dims);
    if (x.numel() == 0) return;
    if (plan_.d.size() <= 1) {
      std::memcpy(out.raw(), x.raw(), x.nbytes());
      return;
    }
    OTTER_DISPATCH_BYTES(x.dtype(), T, [&] {
      transpose_impl(static_cast<const T*>(x.raw()), static_cast<T*>(out.raw()), plan_);
    });
  }

 private:
  std::vector<int64_t> perm_;
  bool has_perm_;
  bool planned_ = false;
  TransposePlan plan_;
};

// ---- Concat, Split, Slice (kernels/common/movement_kernels.h) ----------------------------------
struct CpuMoves {
  static std::vector<int64_t> ints(const KernelContext& ctx, int i, const char* what) { return int_input(ctx, i, what); }
  static void copy_rows(KernelContext&, DataType t, int64_t outer, int64_t len, void* dst, int64_t dst_row,
                        const void* src, int64_t src_row) {
    const size_t es = dtype_size(t);
    cpu::parallel_ranges(outer, [&](int64_t b, int64_t e) {
      for (int64_t o = b; o < e; ++o)
        std::memcpy(static_cast<char*>(dst) + o * dst_row * es, static_cast<const char*>(src) + o * src_row * es,
                    len * es);
    }, len);
  }
  static void copy_view(KernelContext&, DataType t, void* dst, const void* src, const params::SliceView& v) {
    const std::vector<int64_t>& od = v.out_dims;
    const int64_t r = static_cast<int64_t>(od.size());
    OTTER_DISPATCH_BYTES(t, T, [&] {
      const T* in = static_cast<const T*>(src);
      T* o = static_cast<T*>(dst);
      if (r == 0) { o[0] = in[0]; return; }
      const int64_t len = od[r - 1], inner_step = v.strides[r - 1];
      for_each_row(od, v.strides, [&](int64_t row, int64_t off) {
        T* d = o + row * len;
        const T* s = in + off;
        if (inner_step == 1) std::memcpy(d, s, len * sizeof(T));
        else for (int64_t j = 0; j < len; ++j) d[j] = s[j * inner_step];
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
    const params::GatherSpec g = params::resolve_gather(ctx, x.dims(), idx, axis_, "data");
    const std::vector<int64_t> ind = cpu::gather_indices(ctx, idx, g.axis, x.dims());
    Tensor& out = ctx.allocate_output(0, x.dtype(), g.out_dims);
    if (out.numel() == 0) return;
    const int64_t n = g.axis_len, outer = g.outer, inner = g.inner;
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
  explicit PadKernel(const Node& n) : mode_(cpu::parse_pad_mode(n)) {}
  int64_t source(int64_t s, int64_t n) const { return pad_source(mode_, s, n); }
  void run(KernelContext& ctx) override {
    const Tensor& x = ctx.input(0);
    const int64_t r = x.rank();
    const params::PadSpec p =
        params::resolve_pad(ctx, x, int_input(ctx, 1, "pads"), cpu::optional_int_input(ctx, 3, "axes"), mode_);
    const std::vector<int64_t>& lo = p.lo;
    const std::vector<int64_t>& od = p.out_dims;
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
  PadMode mode_;
};

}  // namespace

void register_cpu_movement_kernels(KernelRegistry& r) {
  cpu::add_any_type(r, "Transpose", node_kernel<TransposeKernel>());
  cpu::add_any_type(r, "Concat", node_kernel<params::ConcatKernelT<CpuMoves>>());
  cpu::add_any_type(r, "Split", node_kernel<params::SplitKernelT<CpuMoves>>());
  cpu::add_any_type(r, "Slice", node_kernel<params::SliceKernelT<CpuMoves>>());
  cpu::add_any_type(r, "Gather", node_kernel<GatherKernel>());
  cpu::add_any_type(r, "Expand", node_kernel<ExpandKernel>());
  cpu::add_any_type(r, "Tile", node_kernel<TileKernel>());
  cpu::add_any_type(r, "Pad", node_kernel<PadKernel>());
}

}  // namespace otter
