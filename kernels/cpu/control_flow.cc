// CPU kernels of If, Loop and Scan (graph/control_flow.h): each runs its subgraphs through a
// SubgraphRunner (kernels/kernel.h) that the executor provides, built once per subgraph on first
// use, with the captured outer values fed by name. Control flow that canonicalize could not
// inline or unroll (a condition or trip count known only at run time) ends up here. CPU only:
// on CUDA, the executor reports the op as having no CUDA kernel (docs/ops.md).
#include <cstring>
#include <map>

#include "graph/control_flow.h"
#include "kernels/cpu/cpu_kernels.h"

namespace otter {
namespace {

// The runners of a node's subgraphs and the feeds of their captures.
class SubgraphKernel : public Kernel {
 protected:
  explicit SubgraphKernel(const Node& n) : node_(n) {
    int next = n.num_formal_inputs();
    for (const Graph* g : n.subgraphs()) {
      first_capture_[g] = next;
      next += static_cast<int>(g->captures().size());
    }
  }
  // Runs `g` with `feeds` plus its captures (from the node's implicit inputs).
  std::vector<Tensor> run_graph(KernelContext& ctx, const Graph& g, std::map<std::string, Tensor> feeds) {
    std::unique_ptr<SubgraphRunner>& r = runners_[&g];
    if (!r) {
      if (!ctx.subgraph_runner) ctx.error("no executor to run its subgraphs");
      r = (*ctx.subgraph_runner)(g, ctx.device);
    }
    const int first = first_capture_.at(&g);
    for (size_t i = 0; i < g.captures().size(); ++i) feeds[g.captures()[i]->name()] = ctx.input(first + static_cast<int>(i));
    return r->run(feeds);
  }
  static void copy_out(KernelContext& ctx, int i, const Tensor& t) {
    if (!ctx.has_output(i)) return;
    Tensor& o = ctx.allocate_output(i, t.dtype(), t.dims());
    if (t.nbytes()) std::memcpy(o.raw(), t.raw(), t.nbytes());
  }
  static bool scalar_bool(KernelContext& ctx, const Tensor& t, const char* what) {
    if (t.numel() != 1 || t.dtype() != DataType::kBool)
      ctx.error(str_cat(what, " must be one bool, got ", t.describe()));
    return t.data<bool>()[0];
  }
  const Node& node_;

 private:
  std::map<const Graph*, std::unique_ptr<SubgraphRunner>> runners_;
  std::map<const Graph*, int> first_capture_;
};

class IfKernel : public SubgraphKernel {
 public:
  explicit IfKernel(const Node& n)
      : SubgraphKernel(n), then_(subgraph_attr(n, "then_branch")), else_(subgraph_attr(n, "else_branch")) {}
  void run(KernelContext& ctx) override {
    const bool cond = scalar_bool(ctx, ctx.input(0), "the condition");
    std::vector<Tensor> outs = run_graph(ctx, cond ? then_ : else_, {});
    for (size_t i = 0; i < outs.size(); ++i) copy_out(ctx, static_cast<int>(i), outs[i]);
  }

 private:
  const Graph& then_;
  const Graph& else_;
};

// Copies slice `idx` along `axis` of x (contiguous) into a tensor without that axis.
Tensor slice_axis(const Tensor& x, int64_t axis, int64_t idx) {
  std::vector<int64_t> dims = x.dims();
  const int64_t len = dims[axis];
  dims.erase(dims.begin() + axis);
  Tensor out(x.dtype(), dims);
  int64_t outer = 1, inner = dtype_size(x.dtype());
  for (int64_t i = 0; i < axis; ++i) outer *= x.dim(i);
  for (int64_t i = axis + 1; i < x.rank(); ++i) inner *= x.dim(i);
  const char* src = static_cast<const char*>(x.raw());
  char* dst = static_cast<char*>(out.raw());
  for (int64_t o = 0; o < outer; ++o) std::memcpy(dst + o * inner, src + (o * len + idx) * inner, inner);
  return out;
}

// Stacks equally shaped tensors along a new `axis` into output i (elem_dims: their dims, for
// an empty sequence).
void stack_out(KernelContext& ctx, int i, const std::vector<Tensor>& ys, int64_t axis, bool reverse, DataType dtype,
               std::vector<int64_t> elem_dims) {
  if (!ys.empty()) elem_dims = ys[0].dims();
  std::vector<int64_t> dims = elem_dims;
  dims.insert(dims.begin() + axis, static_cast<int64_t>(ys.size()));
  Tensor& out = ctx.allocate_output(i, ys.empty() ? dtype : ys[0].dtype(), dims);
  int64_t outer = 1, inner = dtype_size(out.dtype());
  for (int64_t k = 0; k < axis; ++k) outer *= elem_dims[k];
  for (int64_t k = axis; k < static_cast<int64_t>(elem_dims.size()); ++k) inner *= elem_dims[k];
  const int64_t len = static_cast<int64_t>(ys.size());
  char* dst = static_cast<char*>(out.raw());
  for (int64_t t = 0; t < len; ++t) {
    const Tensor& y = ys[reverse ? len - 1 - t : t];
    if (y.dims() != elem_dims)
      ctx.error(str_cat("scan output ", i, " is ", dims_to_string(y.dims()), " in one iteration and ",
                        dims_to_string(elem_dims), " in another"));
    const char* src = static_cast<const char*>(y.raw());
    for (int64_t o = 0; o < outer; ++o) std::memcpy(dst + (o * len + t) * inner, src + o * inner, inner);
  }
}

// The static dims of a value's inferred shape, unknown ones as 0 (the elements of an empty stack).
std::vector<int64_t> empty_elem_dims(const Value* v) {
  std::vector<int64_t> dims;
  if (v->shape().rank_known)
    for (const Dim& d : v->shape().dims) dims.push_back(d.is_static() ? d.value : 0);
  return dims;
}

class LoopKernel : public SubgraphKernel {
 public:
  explicit LoopKernel(const Node& n) : SubgraphKernel(n), body_(subgraph_attr(n, "body")) {}
  void run(KernelContext& ctx) override {
    const int carried = node_.num_formal_inputs() - 2;
    const int scans = ctx.num_outputs() - carried;
    int64_t trips = ctx.has_input(0) ? ctx.input(0).to_int64_vector().at(0) : INT64_MAX;
    bool cond = ctx.has_input(1) ? scalar_bool(ctx, ctx.input(1), "the condition (input 1)") : true;
    std::vector<Tensor> v;
    for (int j = 0; j < carried; ++j) v.push_back(ctx.input(2 + j));
    std::vector<std::vector<Tensor>> ys(scans);
    for (int64_t it = 0; it < trips && cond; ++it) {
      std::map<std::string, Tensor> feeds;
      feeds[body_.inputs()[0]->name()] = Tensor::scalar<int64_t>(it);
      Tensor c(DataType::kBool, {});
      c.data<bool>()[0] = cond;
      feeds[body_.inputs()[1]->name()] = c;
      for (int j = 0; j < carried; ++j) feeds[body_.inputs()[2 + j]->name()] = v[j];
      std::vector<Tensor> outs = run_graph(ctx, body_, std::move(feeds));
      cond = scalar_bool(ctx, outs[0], "the body's condition output");
      for (int j = 0; j < carried; ++j) v[j] = outs[1 + j];
      for (int k = 0; k < scans; ++k) ys[k].push_back(outs[1 + carried + k]);
    }
    for (int j = 0; j < carried; ++j) copy_out(ctx, j, v[j]);
    for (int k = 0; k < scans; ++k) {
      const Value* y = body_.outputs()[1 + carried + k];
      if (ctx.has_output(carried + k)) stack_out(ctx, carried + k, ys[k], 0, false, y->dtype(), empty_elem_dims(y));
    }
  }

 private:
  const Graph& body_;
};

class ScanKernel : public SubgraphKernel {
 public:
  explicit ScanKernel(const Node& n) : SubgraphKernel(n), body_(subgraph_attr(n, "body")), spec_(scan_spec(n)) {}
  void run(KernelContext& ctx) override {
    const int ns = spec_.num_state;
    std::vector<Tensor> state;
    for (int j = 0; j < ns; ++j) state.push_back(ctx.input(j));
    std::vector<int64_t> axes;
    int64_t len = -1;
    for (int m = 0; m < spec_.num_scan_inputs; ++m) {
      const Tensor& x = ctx.input(ns + m);
      int64_t a = spec_.input_axes[m] < 0 ? spec_.input_axes[m] + x.rank() : spec_.input_axes[m];
      if (a < 0 || a >= x.rank()) ctx.error(str_cat("scan input ", m, " has no axis ", spec_.input_axes[m]));
      if (len >= 0 && x.dim(a) != len)
        ctx.error(str_cat("scan inputs have different sequence lengths: ", len, " and ", x.dim(a)));
      len = x.dim(a);
      axes.push_back(a);
    }
    std::vector<std::vector<Tensor>> ys(spec_.num_scan_outputs);
    for (int64_t t = 0; t < len; ++t) {
      std::map<std::string, Tensor> feeds;
      for (int j = 0; j < ns; ++j) feeds[body_.inputs()[j]->name()] = state[j];
      for (int m = 0; m < spec_.num_scan_inputs; ++m) {
        const int64_t idx = spec_.input_directions[m] ? len - 1 - t : t;
        feeds[body_.inputs()[ns + m]->name()] = slice_axis(ctx.input(ns + m), axes[m], idx);
      }
      std::vector<Tensor> outs = run_graph(ctx, body_, std::move(feeds));
      for (int j = 0; j < ns; ++j) state[j] = outs[j];
      for (int k = 0; k < spec_.num_scan_outputs; ++k) ys[k].push_back(outs[ns + k]);
    }
    for (int j = 0; j < ns; ++j) copy_out(ctx, j, state[j]);
    for (int k = 0; k < spec_.num_scan_outputs; ++k) {
      if (!ctx.has_output(ns + k)) continue;
      const Value* y = body_.outputs()[ns + k];
      std::vector<int64_t> elem = ys[k].empty() ? empty_elem_dims(y) : ys[k][0].dims();
      const int64_t rank = static_cast<int64_t>(elem.size()) + 1;
      int64_t a = spec_.output_axes[k] < 0 ? spec_.output_axes[k] + rank : spec_.output_axes[k];
      if (a < 0 || a >= rank) ctx.error(str_cat("scan output ", k, " has no axis ", spec_.output_axes[k]));
      stack_out(ctx, ns + k, ys[k], a, spec_.output_directions[k] != 0, y->dtype(), elem);
    }
  }

 private:
  const Graph& body_;
  ScanSpec spec_;
};

}  // namespace

void register_cpu_control_flow_kernels(KernelRegistry& r) {
  r.add({.domain = "", .op_type = "If", .create = node_kernel<IfKernel>()});
  r.add({.domain = "", .op_type = "Loop", .create = node_kernel<LoopKernel>()});
  r.add({.domain = "", .op_type = "Scan", .create = node_kernel<ScanKernel>()});
}

}  // namespace otter
