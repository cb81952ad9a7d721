// CPU kernels of GatherElements, ScatterElements, GatherND, ScatterND, DepthToSpace and
// SpaceToDepth (graph/ops/indexing.cc):
// the geometry and per-element offsets are those of kernels/common/gather_scatter.h. Gathers run in
// parallel; scatters run in index order, so repeated indices combine deterministically (the last
// update wins without a reduction).
#include <cstring>

#include "kernels/common/gather_scatter.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/dispatch.h"
#include "kernels/cpu/shape_util.h"

namespace otter {
namespace {

// Index element i of an int32 / int64 tensor.
int64_t index_at(const Tensor& idx, int64_t i) {
  return idx.dtype() == DataType::kInt64 ? idx.data<int64_t>()[i] : idx.data<int32_t>()[i];
}

void check_indices(const KernelContext& ctx, const Tensor& idx, bool int64_only) {
  if (idx.dtype() != DataType::kInt64 && (int64_only || idx.dtype() != DataType::kInt32))
    ctx.error(str_cat("indices must be ", int64_only ? "int64" : "int64 or int32", ", got ", idx.describe()));
}

// out[positions] combined with updates in order: f(k) gives the data offset of update run k (of
// `run` elements), or -1 after reporting.
template <typename Offset>
void scatter_runs(const Tensor& upd, Tensor& out, ScatterReduction red, int64_t runs, int64_t run, Offset offset) {
  if (red == ScatterReduction::kNone) {
    OTTER_DISPATCH_BYTES(out.dtype(), T, [&] {
      for (int64_t k = 0; k < runs; ++k)
        std::memcpy(static_cast<T*>(out.raw()) + offset(k), static_cast<const T*>(upd.raw()) + k * run,
                    static_cast<size_t>(run) * sizeof(T));
    });
    return;
  }
  cpu::visit_numeric(out.dtype(), [&](auto tag) {
    using S = typename decltype(tag)::type;
    S* o = out.data<S>();
    const S* u = upd.data<S>();
    for (int64_t k = 0; k < runs; ++k) {
      S* d = o + offset(k);
      for (int64_t j = 0; j < run; ++j) d[j] = scatter_combine(red, d[j], u[k * run + j]);
    }
  });
}

class ElementsKernel : public Kernel {
 public:
  ElementsKernel(const Node& n, bool scatter)
      : scatter_(scatter), axis_(n.attr_i("axis", 0)), red_(scatter ? scatter_reduction(n) : ScatterReduction::kNone) {}
  void run(KernelContext& ctx) override {
    const Tensor& x = ctx.input(0);
    const Tensor& idx = ctx.input(1);
    check_indices(ctx, idx, false);
    ElementsGeom g;
    if (std::string e = make_elements_geom(x.dims(), idx.dims(), axis_, &g); !e.empty())
      ctx.error(str_cat(e, " (data ", x.describe(), ", indices ", idx.describe(), ")"));
    std::vector<int64_t> offs(static_cast<size_t>(idx.numel()));
    for (int64_t i = 0; i < idx.numel(); ++i) {
      offs[i] = elements_offset(g, i, index_at(idx, i));
      if (offs[i] < 0)
        ctx.error(str_cat("index ", index_at(idx, i), " (indices element ", i, ") is out of range for an axis of size ",
                          g.axis_len));
    }
    if (!scatter_) {
      Tensor& out = ctx.allocate_output(0, x.dtype(), idx.dims());
      OTTER_DISPATCH_BYTES(x.dtype(), T, [&] {
        const T* src = static_cast<const T*>(x.raw());
        T* dst = static_cast<T*>(out.raw());
        cpu::parallel_ranges(out.numel(), [&](int64_t b, int64_t e) {
          for (int64_t i = b; i < e; ++i) dst[i] = src[offs[i]];
        });
      });
      return;
    }
    const Tensor& upd = ctx.input(2);
    if (upd.dims() != idx.dims() || upd.dtype() != x.dtype())
      ctx.error(str_cat("updates ", upd.describe(), " must have the shape of indices ", idx.describe(),
                        " and the type of data ", x.describe()));
    Tensor& out = ctx.allocate_output(0, x.dtype(), x.dims());
    if (out.raw() != x.raw() && x.nbytes()) std::memcpy(out.raw(), x.raw(), x.nbytes());
    scatter_runs(upd, out, red_, idx.numel(), 1, [&](int64_t k) { return offs[k]; });
  }

 private:
  bool scatter_;
  int64_t axis_;
  ScatterReduction red_;
};

class NdKernel : public Kernel {
 public:
  NdKernel(const Node& n, bool scatter)
      : scatter_(scatter),
        batch_dims_(scatter ? 0 : n.attr_i("batch_dims", 0)),
        red_(scatter ? scatter_reduction(n) : ScatterReduction::kNone) {}
  void run(KernelContext& ctx) override {
    const Tensor& x = ctx.input(0);
    const Tensor& idx = ctx.input(1);
    check_indices(ctx, idx, true);
    NdGeom g;
    if (std::string e = make_nd_geom(x.dims(), idx.dims(), batch_dims_, &g); !e.empty())
      ctx.error(str_cat(e, " (data ", x.describe(), ", indices ", idx.describe(), ")"));
    const int64_t n = g.batches * g.tuples;
    std::vector<int64_t> offs(static_cast<size_t>(n));
    for (int64_t t = 0; t < n; ++t) {
      int bad = 0;
      const int64_t* tuple = idx.data<int64_t>() + t * g.k;
      offs[t] = nd_offset(g, t, tuple, &bad);
      if (offs[t] < 0)
        ctx.error(str_cat("index ", tuple[bad], " (indices element ", t * g.k + bad,
                          ") is out of range for a dim of size ", g.dims[bad]));
    }
    if (!scatter_) {
      Tensor& out = ctx.allocate_output(0, x.dtype(), nd_gather_dims(x.dims(), idx.dims(), batch_dims_));
      OTTER_DISPATCH_BYTES(x.dtype(), T, [&] {
        for (int64_t t = 0; t < n; ++t)
          std::memcpy(static_cast<T*>(out.raw()) + t * g.slice, static_cast<const T*>(x.raw()) + offs[t],
                      static_cast<size_t>(g.slice) * sizeof(T));
      });
      return;
    }
    const Tensor& upd = ctx.input(2);
    if (upd.dims() != nd_gather_dims(x.dims(), idx.dims(), 0) || upd.dtype() != x.dtype())
      ctx.error(str_cat("updates ", upd.describe(), " must have shape indices[:-1] + data[k:] ",
                        dims_to_string(nd_gather_dims(x.dims(), idx.dims(), 0)), " and the type of data"));
    Tensor& out = ctx.allocate_output(0, x.dtype(), x.dims());
    if (out.raw() != x.raw() && x.nbytes()) std::memcpy(out.raw(), x.raw(), x.nbytes());
    scatter_runs(upd, out, red_, n, g.slice, [&](int64_t k) { return offs[k]; });
  }

 private:
  bool scatter_;
  int64_t batch_dims_;
  ScatterReduction red_;
};

class SpaceDepthKernel : public Kernel {
 public:
  SpaceDepthKernel(const Node& n, bool to_space)
      : to_space_(to_space), crd_(n.attr_s("mode", "DCR") == "CRD"), b_(n.attr_i("blocksize", 0)) {}
  void run(KernelContext& ctx) override {
    const Tensor& x = ctx.input(0);
    SpaceDepthGeom g;
    std::vector<int64_t> od;
    if (std::string e = make_space_depth_geom(x.dims(), b_, to_space_, crd_, &g, &od); !e.empty())
      ctx.error(str_cat(e, " (input ", x.describe(), ", blocksize ", b_, ")"));
    Tensor& out = ctx.allocate_output(0, x.dtype(), od);
    OTTER_DISPATCH_BYTES(x.dtype(), T, [&] {
      const T* src = static_cast<const T*>(x.raw());
      T* dst = static_cast<T*>(out.raw());
      cpu::parallel_ranges(out.numel(), [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i) dst[i] = src[space_depth_source(g, i)];
      });
    });
  }

 private:
  bool to_space_, crd_;
  int64_t b_;
};

}  // namespace

void register_cpu_gather_scatter_kernels(KernelRegistry& r) {
  cpu::add_any_type(r, "DepthToSpace", node_kernel<SpaceDepthKernel>(true));
  cpu::add_any_type(r, "SpaceToDepth", node_kernel<SpaceDepthKernel>(false));
  cpu::add_any_type(r, "GatherElements", node_kernel<ElementsKernel>(false));
  cpu::add_any_type(r, "ScatterElements", node_kernel<ElementsKernel>(true));
  cpu::add_any_type(r, "GatherND", node_kernel<NdKernel>(false));
  cpu::add_any_type(r, "ScatterND", node_kernel<NdKernel>(true));
}

}  // namespace otter
