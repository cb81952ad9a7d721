// The MPI engine of the collective interface (kernels/collective.h) and joining an MPI job
// (runtime/distributed.h). Built when CMake finds MPI (OTTER_HAVE_MPI); runtime/no_mpi.cc stands in
// otherwise. Collectives are MPI's non-blocking ones, polled until done or until the deadline, so a
// rank that stops answering makes the others fail with a message naming the collective.
// Only the C API: Open MPI's deprecated C++ bindings stay out.
#define OMPI_SKIP_MPICXX 1
#include <mpi.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>

#include "graph/error.h"
#include "kernels/collective.h"
#include "runtime/distributed.h"

namespace otter {

namespace {

MPI_Datatype mpi_type(DataType t, const char* what) {
  switch (t) {
    case DataType::kFloat32: return MPI_FLOAT;
    case DataType::kFloat64: return MPI_DOUBLE;
    case DataType::kInt64: return MPI_INT64_T;
    default: fail(what, ": MPI collectives take float32, float64 or int64 tensors, got ", dtype_name(t));
  }
}

void check_host(const Tensor& t, const char* what) {
  OTTER_CHECK(t.on_host(), what, ": the MPI engine takes host tensors, got a device tensor ", t.describe());
}

class MpiCommunicator : public Communicator {
 public:
  MpiCommunicator() {
    MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
    MPI_Comm_size(MPI_COMM_WORLD, &size_);
  }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string engine() const override { return "mpi"; }

  void all_reduce(const std::vector<Tensor*>& tensors, ReduceOp op) override {
    std::vector<MPI_Request> reqs;
    for (Tensor* t : tensors) {
      check_host(*t, "all_reduce");
      OTTER_CHECK(op == ReduceOp::kSum || t->dtype() != DataType::kInt64, "all_reduce: cannot average int64");
      MPI_Request r;
      MPI_Iallreduce(MPI_IN_PLACE, t->raw(), static_cast<int>(t->numel()), mpi_type(t->dtype(), "all_reduce"),
                     MPI_SUM, MPI_COMM_WORLD, &r);
      reqs.push_back(r);
    }
    wait(reqs, "all_reduce");
    if (op == ReduceOp::kAvg)
      for (Tensor* t : tensors) host_scale(t->dtype(), t->raw(), t->numel(), 1.0 / size_);
  }

  void reduce_scatter(const Tensor& in, Tensor& out, ReduceOp op) override {
    check_host(in, "reduce_scatter");
    OTTER_CHECK(in.dtype() == out.dtype() && in.numel() == out.numel() * size_, "reduce_scatter: ", out.describe(),
                " is not 1/", size_, " of ", in.describe());
    MPI_Request r;
    MPI_Ireduce_scatter_block(in.raw(), out.raw(), static_cast<int>(out.numel()), mpi_type(in.dtype(), "reduce_scatter"),
                              MPI_SUM, MPI_COMM_WORLD, &r);
    std::vector<MPI_Request> reqs{r};
    wait(reqs, "reduce_scatter");
    if (op == ReduceOp::kAvg) host_scale(out.dtype(), out.raw(), out.numel(), 1.0 / size_);
  }

  void all_gather(const Tensor& in, Tensor& out) override {
    check_host(in, "all_gather");
    OTTER_CHECK(in.dtype() == out.dtype() && out.numel() == in.numel() * size_, "all_gather: ", out.describe(),
                " is not ", size_, " times ", in.describe());
    MPI_Request r;
    MPI_Datatype dt = mpi_type(in.dtype(), "all_gather");
    MPI_Iallgather(in.raw(), static_cast<int>(in.numel()), dt, out.raw(), static_cast<int>(in.numel()), dt,
                   MPI_COMM_WORLD, &r);
    std::vector<MPI_Request> reqs{r};
    wait(reqs, "all_gather");
  }

  void broadcast(Tensor& t, int root) override {
    check_host(t, "broadcast");
    MPI_Request r;
    MPI_Ibcast(t.raw(), static_cast<int>(t.nbytes()), MPI_BYTE, root, MPI_COMM_WORLD, &r);
    std::vector<MPI_Request> reqs{r};
    wait(reqs, "broadcast");
  }

  void barrier() override {
    MPI_Request r;
    MPI_Ibarrier(MPI_COMM_WORLD, &r);
    std::vector<MPI_Request> reqs{r};
    wait(reqs, "barrier");
  }

 private:
  // Polls until every request completes; past the deadline fails naming the collective.
  void wait(std::vector<MPI_Request>& reqs, const char* what) {
    using clock = std::chrono::steady_clock;
    const auto start = clock::now();
    const auto deadline = start + std::chrono::duration<double>(timeout_seconds);
    for (int64_t polls = 0;; ++polls) {
      int done = 0;
      MPI_Testall(static_cast<int>(reqs.size()), reqs.data(), &done, MPI_STATUSES_IGNORE);
      if (done) return;
      const auto now = clock::now();
      if (now > deadline)
        fail(what, " timed out after ", timeout_seconds, " s on rank ", rank_, " of ", size_,
             " (engine mpi): another rank died, hangs, or is running a different step");
      // Spin briefly (collectives of a step are short), then yield the core.
      if (now - start > std::chrono::milliseconds(2)) std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
  }
  int rank_ = 0, size_ = 1;
};

bool g_joined = false;

}  // namespace

bool mpi_built() { return true; }

DistributedInfo init_distributed(DistributedMode mode, double timeout_s) {
  if (mode == DistributedMode::kOff || (mode == DistributedMode::kAuto && !launched_by_mpi()))
    return distributed_info();
  if (!g_joined) {
    int initialized = 0;
    MPI_Initialized(&initialized);
    if (!initialized) {
      int provided = 0;
      MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided);
    }
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    g_joined = true;
  }
  auto comm = std::make_shared<MpiCommunicator>();
  comm->timeout_seconds = timeout_s;
  world().host = comm;
  return distributed_info();
}

void finalize_distributed() {
  if (!g_joined) return;
  world().host.reset();
  world().device.reset();
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Finalize();
  g_joined = false;
}

void abort_distributed(int code) {
  std::fflush(stdout);
  std::fflush(stderr);
  if (g_joined) MPI_Abort(MPI_COMM_WORLD, code);
  std::exit(code);
}

}  // namespace otter
