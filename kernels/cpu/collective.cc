// CPU kernels of the collective ops (ai.otter.AllReduce): they hand host tensors to the job's host
// communicator (kernels/collective.h; MPI when the runtime joined a job), in place.
#include "graph/op_table.h"
#include "kernels/collective.h"
#include "kernels/cpu/cpu_kernels.h"

namespace otter {

namespace {

// AllReduce(x0, ..., xn) {op=avg|sum, world=N} -> y0, ..., yn: yi is xi's buffer, now holding the
// mean (or sum) of xi over the N ranks.
void all_reduce_kernel(KernelContext& ctx) { run_all_reduce(ctx, /*on_host=*/true); }

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
