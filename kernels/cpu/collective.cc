// CPU kernels of the collective ops (ai.otter.AllReduce): they hand host tensors to the job's host
// communicator (kernels/collective.h; MPI when the runtime joined a job), in place.
#include "graph/op_table.h"
#include "kernels/collective.h"
#include "kernels/cpu/cpu_kernels.h"

namespace otter {

namespace {

// AllReduce(x0, ..., xn) {op=avg|sum, world=N} -> y0, ..., yn: yi is xi's buffer, now holding the
// mean (or sum) of xi over the N ranks.
void all_reduce_kernel(KernelContext& ctx) {
  const Node& n = ctx.node();
  const std::string op = n.attr_s("op", "avg");
  if (op != "avg" && op != "sum") ctx.error("op must be avg or sum, got '" + op + "'");
  const int world_size = static_cast<int>(n.attr_i("world", 1));
  Communicator& comm = communicator_for(/*on_host=*/true, world_size, n.describe());
  std::vector<Tensor> views;
  views.reserve(ctx.num_inputs());
  for (int i = 0; i < ctx.num_inputs(); ++i) {
    views.push_back(ctx.input(i));
    if (ctx.has_output(i)) ctx.alias_output(i, views.back(), views.back().dims());
  }
  std::vector<Tensor*> ptrs;
  for (Tensor& t : views) ptrs.push_back(&t);
  comm.all_reduce(ptrs, op == "avg" ? ReduceOp::kAvg : ReduceOp::kSum);
}

}  // namespace

void register_cpu_collective_kernels(KernelRegistry& r) {
  KernelDef d;
  d.domain = kOtterDomain;
  d.op_type = "AllReduce";
  d.dtypes = {DataType::kFloat32, DataType::kFloat64};
  d.create = simple_kernel(all_reduce_kernel);
  r.add(d);
}

}  // namespace otter
