// The job's communicators and the one-rank engine (see collective.h).
#include "kernels/collective.h"

#include <algorithm>
#include <cstring>

#include "graph/error.h"
#include "kernels/device.h"
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

const DeviceBytes& host_bytes() {
  static const DeviceBytes b{[](void* dst, const void* src, size_t n, void*) { std::memmove(dst, src, n); },
                             [](void* dst, size_t n, void*) { std::memset(dst, 0, n); }};
  return b;
}

namespace {

// The job's communicator for a ZeRO-1 node, and the shard size c of its tensor of `numel` elements.
Communicator& zero_comm(KernelContext& ctx, bool on_host, int64_t numel, int64_t* c) {
  const Node& n = ctx.node();
  Communicator& comm = communicator_for(on_host, static_cast<int>(n.attr_i("world", 1)), n.describe());
  *c = (numel + comm.size() - 1) / comm.size();
  return comm;
}

void* stream_of(KernelContext& ctx) { return ctx.device ? ctx.device->stream() : nullptr; }

char* at(Tensor& t, int64_t elements) { return static_cast<char*>(t.raw()) + elements * dtype_size(t.dtype()); }

}  // namespace

void run_reduce_scatter(KernelContext& ctx, bool on_host, const DeviceBytes& bytes) {
  const Tensor& x = ctx.input(0);
  const std::string op = ctx.node().attr_s("op", "sum");
  if (op != "avg" && op != "sum") ctx.error("op must be avg or sum, got '" + op + "'");
  int64_t c = 0;
  Communicator& comm = zero_comm(ctx, on_host, x.numel(), &c);
  Tensor& y = ctx.allocate_output(0, x.dtype(), {c});
  const int64_t padded = c * comm.size();
  if (padded == x.numel()) {
    comm.reduce_scatter(x, y, op == "avg" ? ReduceOp::kAvg : ReduceOp::kSum);
    return;
  }
  Tensor full = ctx.scratch(x.dtype(), {padded});
  bytes.copy(full.raw(), x.raw(), x.nbytes(), stream_of(ctx));
  bytes.zero(at(full, x.numel()), full.nbytes() - x.nbytes(), stream_of(ctx));
  comm.reduce_scatter(full, y, op == "avg" ? ReduceOp::kAvg : ReduceOp::kSum);
}

void run_shard(KernelContext& ctx, bool on_host, const DeviceBytes& bytes) {
  const Tensor& x = ctx.input(0);
  int64_t c = 0;
  Communicator& comm = zero_comm(ctx, on_host, x.numel(), &c);
  Tensor& y = ctx.allocate_output(0, x.dtype(), {c});
  const int64_t begin = std::min<int64_t>(x.numel(), comm.rank() * c);
  const int64_t count = std::min<int64_t>(x.numel() - begin, c);
  const size_t es = dtype_size(x.dtype());
  bytes.copy(y.raw(), static_cast<const char*>(x.raw()) + begin * es, count * es, stream_of(ctx));
  if (count < c) bytes.zero(at(y, count), (c - count) * es, stream_of(ctx));
}

void run_all_gather(KernelContext& ctx, bool on_host, const DeviceBytes& bytes) {
  const Tensor& shard = ctx.input(0);
  const Tensor& dst = ctx.input(1);
  int64_t c = 0;
  Communicator& comm = zero_comm(ctx, on_host, dst.numel(), &c);
  if (shard.numel() != c || shard.dtype() != dst.dtype())
    ctx.error(str_cat("input 0 (", shard.describe(), ") is not a shard of ", c, " elements of ", dst.describe()));
  ctx.alias_output(0, dst, dst.dims());
  const int64_t padded = c * comm.size();
  Tensor whole(dst.dtype(), {dst.numel()}, dst.storage(), dst.offset());
  if (padded == dst.numel()) {
    comm.all_gather(shard, whole);
    return;
  }
  // The last shard's padding does not fit the weight: gather into scratch, copy the weight's part.
  Tensor full = ctx.scratch(dst.dtype(), {padded});
  comm.all_gather(shard, full);
  bytes.copy(whole.raw(), full.raw(), dst.nbytes(), stream_of(ctx));
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
