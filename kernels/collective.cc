// The job's communicators and the one-rank engine (see collective.h).
#include "kernels/collective.h"

#include <cstring>

#include "graph/error.h"
#include "kernels/kernel.h"

namespace otter {

World& world() {
  static World w;
  return w;
}

Communicator& communicator_for(bool on_host, int expected_size, const std::string& what) {
  World& w = world();
  Communicator* c = on_host ? w.host.get() : w.device.get();
  if (!c && expected_size == 1) {
    static SelfCommunicator self;
    return self;
  }
  OTTER_CHECK(c, what, ": needs a ", on_host ? "host (MPI)" : "device (NCCL)", " communicator of ", expected_size,
              " ranks, and this process has none (launch it with mpirun -np ", expected_size,
              ", or build otter with ", on_host ? "MPI" : "NCCL", ")");
  OTTER_CHECK(c->size() == expected_size, what, ": the graph was built for ", expected_size, " ranks, the job has ",
              c->size(), " (", c->engine(), ")");
  return *c;
}

#ifndef OTTER_HAVE_NCCL
std::shared_ptr<Communicator> make_device_communicator(Communicator&, Device&) {
  fail("data-parallel training on CUDA needs NCCL: this build of otter has none (configure with CUDA and MPI where "
       "the CUDA toolkit ships nccl.h), or train with --device cpu");
}
#endif

void run_all_reduce(KernelContext& ctx, bool on_host) {
  const Node& n = ctx.node();
  const std::string op = n.attr_s("op", "avg");
  if (op != "avg" && op != "sum") ctx.error("op must be avg or sum, got '" + op + "'");
  Communicator& comm = communicator_for(on_host, static_cast<int>(n.attr_i("world", 1)), n.describe());
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

void host_scale(DataType t, void* data, int64_t n, double factor) {
  if (t == DataType::kFloat32) {
    float* p = static_cast<float*>(data);
    const float f = static_cast<float>(factor);
    for (int64_t i = 0; i < n; ++i) p[i] *= f;
  } else if (t == DataType::kFloat64) {
    double* p = static_cast<double*>(data);
    for (int64_t i = 0; i < n; ++i) p[i] *= factor;
  } else {
    fail("collective: cannot average ", dtype_name(t), " tensors (float32 or float64 only)");
  }
}

void SelfCommunicator::reduce_scatter(const Tensor& in, Tensor& out, ReduceOp) {
  OTTER_CHECK(out.nbytes() == in.nbytes() && in.on_host(), "reduce_scatter: ", out.describe(), " for ", in.describe());
  std::memmove(out.raw(), in.raw(), in.nbytes());
}

void SelfCommunicator::all_gather(const Tensor& in, Tensor& out) {
  OTTER_CHECK(out.nbytes() == in.nbytes() && in.on_host(), "all_gather: ", out.describe(), " for ", in.describe());
  std::memmove(out.raw(), in.raw(), in.nbytes());
}

}  // namespace otter
