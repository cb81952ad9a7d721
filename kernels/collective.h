// The collective interface of data-parallel training: a communicator over the ranks of one job,
// with the operations the distributed passes and the runtime need (all-reduce, reduce-scatter,
// all-gather, broadcast, barrier). Engines implement it: MPI on host tensors (runtime/mpi_world.cc,
// built when CMake finds MPI), NCCL on CUDA tensors (kernels/cuda/nccl_communicator.cc, built with
// CUDA, NCCL and MPI), and `SelfCommunicator` (one rank: every collective is the identity).
//
// Kernels (the ai.otter.AllReduce CPU and CUDA kernels) reach the job's communicators through
// `world()`, which the runtime sets once per process (runtime/distributed.h); kernels/ never
// includes MPI or NCCL headers itself.
//
// Every collective has a deadline (`timeout_seconds`): a rank that died or never joins makes the
// others fail with "all_reduce timed out after 60 s on rank 1 of 2 (engine mpi) ..." rather than
// wait forever.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "graph/tensor.h"

namespace otter {

enum class ReduceOp : uint8_t { kSum, kAvg };

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual std::string engine() const = 0;  // "mpi", "nccl", "self"
  // In place, element-wise over the ranks: each tensor ends as the sum (or mean) of every rank's.
  // float32, float64 and int64 tensors (int64: kSum only).
  virtual void all_reduce(const std::vector<Tensor*>& tensors, ReduceOp op) = 0;
  // `out` (numel = in.numel() / size()) becomes rank()'s slice of the reduction of `in`.
  virtual void reduce_scatter(const Tensor& in, Tensor& out, ReduceOp op) = 0;
  // `out` (numel = size() * in.numel()) becomes every rank's `in`, in rank order.
  virtual void all_gather(const Tensor& in, Tensor& out) = 0;
  // Every rank's `t` becomes `root`'s.
  virtual void broadcast(Tensor& t, int root) = 0;
  virtual void barrier() = 0;
  double timeout_seconds = 300;
};

// One rank: every collective leaves its data as it is (the mean of one value is itself).
class SelfCommunicator : public Communicator {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  std::string engine() const override { return "self"; }
  void all_reduce(const std::vector<Tensor*>&, ReduceOp) override {}
  void reduce_scatter(const Tensor& in, Tensor& out, ReduceOp) override;
  void all_gather(const Tensor& in, Tensor& out) override;
  void broadcast(Tensor&, int) override {}
  void barrier() override {}
};

// The job's communicators: `host` for host tensors (MPI), `device` for CUDA tensors (NCCL), either
// null where the engine is absent. Both null: a single-process run.
struct World {
  std::shared_ptr<Communicator> host, device;
  int rank() const { return host ? host->rank() : 0; }
  int size() const { return host ? host->size() : 1; }
};
World& world();

// The communicator for a host (or device) tensor; fails naming `what` (the node)
// when the job has none of that kind, or when its size is not `expected_size`.
Communicator& communicator_for(bool on_host, int expected_size, const std::string& what);

// The device engine's communicator over the same ranks as `host` (NCCL on a CUDA device,
// bootstrapped over `host`); fails on builds without it (OTTER_HAVE_NCCL) or on another device.
class Device;
std::shared_ptr<Communicator> make_device_communicator(Communicator& host, Device& device);

// The body of the ai.otter.AllReduce kernels {op=avg|sum, world=N}: each output becomes its input's
// buffer, reduced in place over the ranks by the host (or device) communicator.
class KernelContext;
void run_all_reduce(KernelContext& ctx, bool on_host);

// Multiplies the `n` float32 or float64 elements at `data` by `factor` (the mean after a sum).
void host_scale(DataType t, void* data, int64_t n, double factor);

}  // namespace otter
