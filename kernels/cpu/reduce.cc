// CPU reduction kernels (ReduceSum, ReduceMean, ReduceMax, ReduceMin, ReduceSumSquare, ReduceL2,
// ReduceProd, ReduceL1, ReduceLogSum, ReduceLogSumExp, and ai.otter.ReduceSumF32).
//
// The input's dims are collapsed into alternating kept / reduced blocks; each reduced block is
// removed by one pass over a contiguous [outer, R, inner] view (innermost block first), so the hot
// loops only add or compare along contiguous memory and never divide indices. Float inputs
// (f32, f16, bf16, f64) accumulate in double: a 1e5-element f32 sum then has the error of one final
// rounding instead of up to ~n ulps of a float running sum. Integers accumulate in int64.
#include <cmath>
#include <cstring>
#include <limits>

#include "graph/op_table.h"
#include "kernels/common/elementwise.h"
#include "kernels/cpu/broadcast.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/isa.h"

namespace otter {
namespace {

using cpu::compute_t;
using cpu::load;
using cpu::store;

enum class ReduceKind { kSum, kMean, kMax, kMin, kSumSquare, kL2, kProd, kL1, kLogSum, kLogSumExp };

template <typename S>
using acc_t = std::conditional_t<std::is_floating_point_v<compute_t<S>>, double, int64_t>;

template <typename A>
A reduce_init(ReduceKind k) {
  if (k == ReduceKind::kProd) return A(1);
  if (k == ReduceKind::kMax) {
    if constexpr (std::is_floating_point_v<A>) return -std::numeric_limits<A>::infinity();
    else return std::numeric_limits<A>::lowest();
  }
  if (k == ReduceKind::kMin) {
    if constexpr (std::is_floating_point_v<A>) return std::numeric_limits<A>::infinity();
    else return std::numeric_limits<A>::max();
  }
  return A(0);
}

// The combining step of each kind (SumSquare and L2 square their input on the first pass only).
template <ReduceKind K>
struct Combine {
  template <typename A> A operator()(A acc, A v) const {
    if constexpr (K == ReduceKind::kMax) return MaxOp{}(acc, v);
    else if constexpr (K == ReduceKind::kMin) return MinOp{}(acc, v);
    else if constexpr (K == ReduceKind::kProd) return acc * v;
    else return acc + v;
  }
};

// y[o, i] = combine over r of pre(x[o, r, i]) for a contiguous [outer, R, inner] block.
template <typename In, typename A, typename C, typename Pre>
void reduce_pass(const In* x, A* y, int64_t outer, int64_t R, int64_t inner, A init, C comb,
                 Pre pre) {
  const int nt = omp_get_max_threads();
  // The ISA variants for float inputs (float32 and the half types; the sums are double, so
  // deciding by the accumulator type ran them all on the baseline loop): each output's additions
  // keep their order, so every variant gives the same bits.
  constexpr bool kWide = std::is_same_v<compute_t<In>, float>;
  if (inner == 1) {
    // Each output is a contiguous run of R values: 8 independent accumulators per run so the
    // loop is not one long dependency chain.
    auto run = [&](const In* p, int64_t b, int64_t e) {
      A lane[8];
      for (A& l : lane) l = init;
      int64_t r = b;
      for (; r + 8 <= e; r += 8)
        for (int k = 0; k < 8; ++k) lane[k] = comb(lane[k], pre(static_cast<A>(load(p[r + k]))));
      A acc = init;
      for (; r < e; ++r) acc = comb(acc, pre(static_cast<A>(load(p[r]))));
      for (A l : lane) acc = comb(acc, l);
      return acc;
    };
    if (outer >= nt || outer * R < cpu::kParallelThreshold) {
      cpu::parallel_ranges(outer, [&](int64_t b, int64_t e) {
        cpu::isa_dispatch_if<kWide>([&] {
          for (int64_t o = b; o < e; ++o) y[o] = run(x + o * R, 0, R);
        });
      }, R);
    } else {
      // Few long runs: split each run across threads and combine the partial results.
      std::vector<A> part(static_cast<size_t>(nt));
      for (int64_t o = 0; o < outer; ++o) {
        std::fill(part.begin(), part.end(), init);
        const In* p = x + o * R;
        cpu::parallel_ranges(R, [&](int64_t b, int64_t e) {
          cpu::isa_dispatch_if<kWide>(
              [&] { part[static_cast<size_t>(omp_get_thread_num())] = run(p, b, e); });
        });
        A acc = init;
        for (A v : part) acc = comb(acc, v);
        y[o] = acc;
      }
    }
    return;
  }
  // inner > 1: accumulate whole rows of `inner` contiguous values (vectorisable).
  auto rows = [&](int64_t o, int64_t ib, int64_t ie) {
    A* out = y + o * inner;
    for (int64_t i = ib; i < ie; ++i) out[i] = init;
    const In* p = x + o * R * inner;
    for (int64_t r = 0; r < R; ++r, p += inner)
      for (int64_t i = ib; i < ie; ++i) out[i] = comb(out[i], pre(static_cast<A>(load(p[i]))));
  };
  if (outer >= nt) {
    cpu::parallel_ranges(outer, [&](int64_t b, int64_t e) {
      cpu::isa_dispatch_if<kWide>([&] {
        for (int64_t o = b; o < e; ++o) rows(o, 0, inner);
      });
    }, R * inner);
  } else {
    for (int64_t o = 0; o < outer; ++o)
      cpu::parallel_ranges(
          inner, [&](int64_t b, int64_t e) { cpu::isa_dispatch_if<kWide>([&] { rows(o, b, e); }); },
          R);
  }
}

struct Block {
  int64_t size;
  bool reduced;
};

class ReduceKernel : public Kernel {
 public:
  // f32_out: ai.otter.ReduceSumF32, the sum of a half X written as float32.
  ReduceKernel(const Node& n, ReduceKind kind, bool axes_input, bool f32_out = false)
      : kind_(kind), axes_input_(axes_input), f32_out_(f32_out) {
    keepdims_ = n.attr_i("keepdims", 1) != 0;
    noop_empty_ = n.attr_i("noop_with_empty_axes", 0) != 0;
    if (!axes_input_) axes_ = n.attr_ints("axes");
  }

  void run(KernelContext& ctx) override {
    const Tensor& x = ctx.input(0);
    std::vector<int64_t> axes = axes_;
    if (axes_input_ && ctx.has_input(1)) axes = ctx.input(1).to_int64_vector();
    const int64_t rank = x.rank();
    std::vector<bool> red(static_cast<size_t>(rank), false);
    if (axes.empty()) {
      if (noop_empty_ && !f32_out_) {  // identity
        Tensor& out = ctx.allocate_output(0, x.dtype(), x.dims());
        if (x.nbytes() && out.raw() != x.raw()) std::memcpy(out.raw(), x.raw(), x.nbytes());
        return;
      }
      red.assign(static_cast<size_t>(rank), true);
    }
    for (int64_t a : axes) {
      if (a < -rank || a >= rank)
        ctx.error(str_cat("axis ", a, " is out of range for input ", x.describe()));
      red[static_cast<size_t>(a < 0 ? a + rank : a)] = true;
    }
    std::vector<int64_t> out_dims;
    int64_t count = 1;
    for (int64_t i = 0; i < rank; ++i) {
      if (red[i]) count *= x.dims()[i];
      if (!red[i]) out_dims.push_back(x.dims()[i]);
      else if (keepdims_) out_dims.push_back(1);
    }
    if (kind_ == ReduceKind::kMean || kind_ == ReduceKind::kSumSquare || kind_ == ReduceKind::kL2 ||
        kind_ == ReduceKind::kLogSum || kind_ == ReduceKind::kLogSumExp) {
      if (!is_float(x.dtype()))
        ctx.error(str_cat("input must be a float tensor, got ", x.describe()));
    }
    Tensor& out = ctx.allocate_output(0, f32_out_ ? DataType::kFloat32 : x.dtype(), out_dims);
    if (out.numel() == 0) return;

    // Collapse into alternating blocks; dims of size 1 change nothing and are dropped.
    std::vector<Block> blocks;
    for (int64_t i = 0; i < rank; ++i) {
      int64_t d = x.dims()[i];
      if (d == 1) continue;
      if (!blocks.empty() && blocks.back().reduced == red[i]) blocks.back().size *= d;
      else blocks.push_back({d, static_cast<bool>(red[i])});
    }
    cpu::visit_numeric(x.dtype(), [&](auto tag) {
      using S = typename decltype(tag)::type;
      switch (kind_) {
        case ReduceKind::kMax: return reduce<S, ReduceKind::kMax>(x, out, blocks, count);
        case ReduceKind::kMin: return reduce<S, ReduceKind::kMin>(x, out, blocks, count);
        case ReduceKind::kSum: return reduce<S, ReduceKind::kSum>(x, out, blocks, count);
        case ReduceKind::kMean: return reduce<S, ReduceKind::kMean>(x, out, blocks, count);
        case ReduceKind::kSumSquare: return reduce<S, ReduceKind::kSumSquare>(x, out, blocks, count);
        case ReduceKind::kL2: return reduce<S, ReduceKind::kL2>(x, out, blocks, count);
        case ReduceKind::kProd: return reduce<S, ReduceKind::kProd>(x, out, blocks, count);
        case ReduceKind::kL1: return reduce<S, ReduceKind::kL1>(x, out, blocks, count);
        case ReduceKind::kLogSum: return reduce<S, ReduceKind::kLogSum>(x, out, blocks, count);
        case ReduceKind::kLogSumExp: return log_sum_exp<S>(x, out, blocks, red, count);
      }
    });
  }

 private:
  // log(sum(exp(x))) computed as m + log(sum(exp(x - m))) with m the maximum (0 where it is not
  // finite), so large inputs do not overflow.
  template <typename S>
  void log_sum_exp(const Tensor& x, Tensor& out, const std::vector<Block>& blocks, const std::vector<bool>& red,
                   int64_t count) {
    std::vector<int64_t> kept = x.dims();
    for (size_t i = 0; i < kept.size(); ++i)
      if (red[i]) kept[i] = 1;
    Tensor m(x.dtype(), kept), e(DataType::kFloat64, x.dims()), s(DataType::kFloat64, kept);
    reduce<S, ReduceKind::kMax>(x, m, blocks, count);
    std::vector<double> shift(static_cast<size_t>(m.numel()));
    for (int64_t i = 0; i < m.numel(); ++i) {
      const double v = m.get_as_double(i);
      shift[static_cast<size_t>(i)] = std::isfinite(v) ? v : 0.0;
    }
    if (x.numel() > 0) {
      cpu::BroadcastPlan<2> plan({&x.dims(), &kept}, x.dims());
      const auto st = plan.inner_strides();
      const S* px = x.data<S>();
      double* pe = e.data<double>();
      plan.for_each_run([&](int64_t o, const std::array<int64_t, 2>& offs, int64_t len) {
        for (int64_t j = 0; j < len; ++j)
          pe[o + j] = std::exp(static_cast<double>(load(px[offs[0] + j * st[0]])) - shift[offs[1] + j * st[1]]);
      });
    }
    reduce<double, ReduceKind::kSum>(e, s, blocks, count);
    S* y = out.data<S>();
    for (int64_t i = 0; i < out.numel(); ++i)
      y[i] = store<S>(static_cast<compute_t<S>>(std::log(s.data<double>()[i]) + shift[static_cast<size_t>(i)]));
  }

  template <typename S, ReduceKind K>
  void reduce(const Tensor& x, Tensor& out, std::vector<Block> blocks, int64_t count) {
    using A = acc_t<S>;
    const A init = reduce_init<A>(K);
    constexpr bool kSquare = K == ReduceKind::kSumSquare || K == ReduceKind::kL2;
    constexpr bool kAbs = K == ReduceKind::kL1;
    auto square = [](A v) { return v * v; };
    auto absolute = [](A v) { return v < A(0) ? A(-v) : v; };
    auto ident = [](A v) { return v; };
    Combine<K> comb;
    std::vector<A> cur, next;
    bool first = true;
    // Remove the innermost reduced block until none is left (an all-kept view is a copy).
    while (true) {
      int j = -1;
      for (int i = 0; i < static_cast<int>(blocks.size()); ++i)
        if (blocks[i].reduced) j = i;
      if (j < 0 && !first) break;
      int64_t outer = 1, inner = 1, R = 1;
      for (int i = 0; i < static_cast<int>(blocks.size()); ++i) {
        if (i < j) outer *= blocks[i].size;
        else if (i > j) inner *= blocks[i].size;
        else R = blocks[i].size;
      }
      if (j < 0) {  // nothing to reduce at all: inner holds every element
        inner = 1;
        outer = x.numel();
      }
      next.assign(static_cast<size_t>(outer * inner), init);
      if (first) {
        if constexpr (kSquare) reduce_pass(x.data<S>(), next.data(), outer, R, inner, init, comb, square);
        else if constexpr (kAbs) reduce_pass(x.data<S>(), next.data(), outer, R, inner, init, comb, absolute);
        else reduce_pass(x.data<S>(), next.data(), outer, R, inner, init, comb, ident);
      } else {
        reduce_pass(cur.data(), next.data(), outer, R, inner, init, comb, ident);
      }
      first = false;
      cur.swap(next);
      if (j < 0) break;
      // Drop block j and merge the kept neighbours it separated.
      blocks.erase(blocks.begin() + j);
      if (j > 0 && j < static_cast<int>(blocks.size()) && !blocks[j - 1].reduced && !blocks[j].reduced) {
        blocks[j - 1].size *= blocks[j].size;
        blocks.erase(blocks.begin() + j);
      }
    }
    auto write = [&](auto* y) {
      using O = std::remove_pointer_t<decltype(y)>;
      const int64_t n = out.numel();
      for (int64_t i = 0; i < n; ++i) {
        A v = cur[static_cast<size_t>(i)];
        if constexpr (K == ReduceKind::kMean) v = v / static_cast<A>(count);
        if constexpr (K == ReduceKind::kL2) v = std::sqrt(v);
        if constexpr (K == ReduceKind::kLogSum) v = static_cast<A>(std::log(v));
        y[i] = store<O>(static_cast<compute_t<S>>(v));
      }
    };
    // A float32 output of a half input (ReduceSumF32) takes the value a float32 input's would.
    if constexpr (std::is_same_v<compute_t<S>, float>) {
      if (out.dtype() == DataType::kFloat32) return write(out.data<float>());
    }
    write(out.data<S>());
  }

  ReduceKind kind_;
  bool axes_input_, f32_out_;
  bool keepdims_ = true, noop_empty_ = false;
  std::vector<int64_t> axes_;
};

// Registers one kernel per op-table definition of op, over its opsets; axes move from an
// attribute to an input at `axes_input_since`.
void add(KernelRegistry& r, const char* op, ReduceKind kind, std::vector<DataType> types,
         int axes_input_since) {
  for (const OpDef* o : OpTable::instance().all()) {
    if (!o->domain.empty() || o->op_type != op) continue;
    const bool axes_input = o->since_version >= axes_input_since;
    KernelDef d;
    d.op_type = op;
    d.since_version = o->since_version;
    d.until_version = o->until_version;
    d.dtypes = types;
    d.create = [kind, axes_input](const Node& n) -> std::unique_ptr<Kernel> {
      return std::make_unique<ReduceKernel>(n, kind, axes_input);
    };
    r.add(std::move(d));
  }
}

}  // namespace

void register_cpu_reduce_kernels(KernelRegistry& r) {
  const std::vector<DataType> fl = {DataType::kFloat32, DataType::kFloat64, DataType::kFloat16,
                                    DataType::kBFloat16};
  std::vector<DataType> fl_int = fl;
  fl_int.insert(fl_int.end(), {DataType::kInt64, DataType::kInt32});
  add(r, "ReduceSum", ReduceKind::kSum, fl_int, 13);
  add(r, "ReduceMean", ReduceKind::kMean, fl, 18);
  add(r, "ReduceMax", ReduceKind::kMax, fl_int, 18);
  add(r, "ReduceMin", ReduceKind::kMin, fl_int, 18);
  add(r, "ReduceSumSquare", ReduceKind::kSumSquare, fl, 18);
  add(r, "ReduceL2", ReduceKind::kL2, fl, 18);
  add(r, "ReduceProd", ReduceKind::kProd, fl_int, 18);
  add(r, "ReduceL1", ReduceKind::kL1, fl_int, 18);
  add(r, "ReduceLogSum", ReduceKind::kLogSum, fl, 18);
  add(r, "ReduceLogSumExp", ReduceKind::kLogSumExp, fl, 18);
  KernelDef d;
  d.domain = kOtterDomain;
  d.op_type = "ReduceSumF32";
  d.dtypes = {DataType::kFloat32, DataType::kFloat16, DataType::kBFloat16};
  d.create = [](const Node& n) -> std::unique_ptr<Kernel> {
    return std::make_unique<ReduceKernel>(n, ReduceKind::kSum, true, true);
  };
  r.add(std::move(d));
}

}  // namespace otter
