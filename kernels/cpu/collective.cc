// CPU kernels of the collective ops (ai.otter.AllReduce, and ZeRO-1's ReduceScatter, Shard, AllGather): they hand host
// tensors to the job's host communicator (kernels/collective.h; MPI when the runtime joined a job), in place.
#include "graph/op_table.h"
#include "kernels/collective.h"
#include "kernels/cpu/cpu_kernels.h"

namespace otter {

namespace {

// AllReduce(x0, ..., xn) {op=avg|sum, world=N} -> y0, ..., yn: yi is xi's buffer, now holding the
// mean (or sum) of xi over the N ranks.
void all_reduce_kernel(KernelContext& ctx) { run_all_reduce(ctx, /*on_host=*/true); }

// The ZeRO-1 ops (kernels/collective.h): reduce-scatter, this rank's shard, all-gather in place.
void reduce_scatter_kernel(KernelContext& ctx) { run_reduce_scatter(ctx, true, host_bytes()); }
void shard_kernel(KernelContext& ctx) { run_shard(ctx, true, host_bytes()); }
void all_gather_kernel(KernelContext& ctx) { run_all_gather(ctx, true, host_bytes()); }

}  // namespace

void register_cpu_collective_kernels(KernelRegistry& r) {
  KernelDef d;
  d.domain = kOtterDomain;
  d.op_type = "AllReduce";
  d.dtypes = {DataType::kFloat32, DataType::kFloat64};
  d.create = simple_kernel(all_reduce_kernel);
  r.add(d);
  d.op_type = "ReduceScatter";
  d.create = simple_kernel(reduce_scatter_kernel);
  r.add(d);
  d.dtypes = {DataType::kFloat32, DataType::kFloat64, DataType::kFloat16, DataType::kBFloat16};
  d.op_type = "Shard";
  d.create = simple_kernel(shard_kernel);
  r.add(d);
  d.op_type = "AllGather";
  d.create = simple_kernel(all_gather_kernel);
  r.add(d);
}

}  // namespace otter
