// The NCCL engine of the collective interface (kernels/collective.h) for CUDA tensors, and the CUDA
// kernels of ai.otter.AllReduce and of ZeRO-1's ReduceScatter, Shard and AllGather. Built with
// the CUDA backend where CMake finds NCCL and MPI (OTTER_HAVE_NCCL). NCCL is not linked: the first NCCL call
// opens it (kernels/cuda/lazy_libs.cc), so only a data-parallel CUDA run maps it. The communicator is bootstrapped
// over the host (MPI) communicator: rank 0 makes the ncclUniqueId and broadcasts it. NCCL runs non-blocking on the
// device's stream; the host polls the stream and the communicator's error state until done or until the deadline,
// then aborts the communicator and fails naming the collective.
#include <nccl.h>

#include <chrono>
#include <cstring>
#include <thread>

#include "graph/error.h"
#include "graph/op_table.h"
#include "kernels/collective.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/cuda_device.h"
#include "kernels/cuda/cuda_kernels.h"

namespace otter {

namespace {

void nccl_check(ncclResult_t r, const char* call) {
  if (r != ncclSuccess && r != ncclInProgress) fail("NCCL: ", call, " failed: ", ncclGetErrorString(r));
}

ncclDataType_t nccl_type(DataType t, const char* what) {
  switch (t) {
    case DataType::kFloat32: return ncclFloat32;
    case DataType::kFloat64: return ncclFloat64;
    case DataType::kFloat16: return ncclFloat16;
    case DataType::kBFloat16: return ncclBfloat16;
    case DataType::kInt64: return ncclInt64;
    default: fail(what, ": NCCL takes float or int64 tensors, got ", dtype_name(t));
  }
}

class NcclCommunicator : public Communicator {
 public:
  NcclCommunicator(Communicator& host, cudaStream_t stream) : stream_(stream), rank_(host.rank()), size_(host.size()) {
    timeout_seconds = host.timeout_seconds;
    ncclUniqueId id;
    Tensor buf(DataType::kUInt8, {static_cast<int64_t>(sizeof(id))});
    if (rank_ == 0) {
      nccl_check(ncclGetUniqueId(&id), "ncclGetUniqueId");
      std::memcpy(buf.raw(), &id, sizeof(id));
    }
    host.broadcast(buf, 0);
    std::memcpy(&id, buf.raw(), sizeof(id));
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;  // a peer that never joins times out instead of blocking forever
    nccl_check(ncclCommInitRankConfig(&comm_, size_, id, rank_, &config), "ncclCommInitRankConfig");
    wait("ncclCommInitRank", /*stream_too=*/false);
  }
  ~NcclCommunicator() override {
    if (comm_) ncclCommDestroy(comm_);
  }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string engine() const override { return "nccl"; }

  void all_reduce(const std::vector<Tensor*>& tensors, ReduceOp op) override {
    nccl_check(ncclGroupStart(), "ncclGroupStart");
    for (Tensor* t : tensors) {
      check_device(*t, "all_reduce");
      nccl_check(ncclAllReduce(t->raw(), t->raw(), static_cast<size_t>(t->numel()), nccl_type(t->dtype(), "all_reduce"),
                               op == ReduceOp::kAvg ? ncclAvg : ncclSum, comm_, stream_),
                 "ncclAllReduce");
    }
    nccl_check(ncclGroupEnd(), "ncclGroupEnd");
    wait("all_reduce");
  }
  void reduce_scatter(const Tensor& in, Tensor& out, ReduceOp op) override {
    check_device(in, "reduce_scatter");
    OTTER_CHECK(in.numel() == out.numel() * size_, "reduce_scatter: ", out.describe(), " is not 1/", size_, " of ",
                in.describe());
    nccl_check(ncclReduceScatter(in.raw(), out.raw(), static_cast<size_t>(out.numel()),
                                 nccl_type(in.dtype(), "reduce_scatter"), op == ReduceOp::kAvg ? ncclAvg : ncclSum,
                                 comm_, stream_),
               "ncclReduceScatter");
    wait("reduce_scatter");
  }
  void all_gather(const Tensor& in, Tensor& out) override {
    check_device(in, "all_gather");
    OTTER_CHECK(out.numel() == in.numel() * size_, "all_gather: ", out.describe(), " is not ", size_, " times ",
                in.describe());
    nccl_check(ncclAllGather(in.raw(), out.raw(), static_cast<size_t>(in.numel()), nccl_type(in.dtype(), "all_gather"),
                             comm_, stream_),
               "ncclAllGather");
    wait("all_gather");
  }
  void broadcast(Tensor& t, int root) override {
    check_device(t, "broadcast");
    nccl_check(ncclBroadcast(t.raw(), t.raw(), t.nbytes(), ncclUint8, root, comm_, stream_), "ncclBroadcast");
    wait("broadcast");
  }
  void barrier() override {
    Tensor one = Tensor::scalar<float>(0);
    (void)one;  // NCCL has no barrier: the stream drains, the peers meet in the host engine's barrier
    wait("barrier");
  }

 private:
  static void check_device(const Tensor& t, const char* what) {
    OTTER_CHECK(!t.on_host(), what, ": the NCCL engine takes CUDA tensors, got a host tensor ", t.describe());
  }
  // Polls the communicator (non-blocking calls may still be in progress) and the stream.
  void wait(const char* what, bool stream_too = true) {
    using clock = std::chrono::steady_clock;
    const auto start = clock::now();
    const auto deadline = start + std::chrono::duration<double>(timeout_seconds);
    auto done = [&] {
      busy_seconds += std::chrono::duration<double>(clock::now() - start).count();
      ++calls;
    };
    for (;;) {
      ncclResult_t state = ncclSuccess;
      ncclCommGetAsyncError(comm_, &state);
      if (state != ncclSuccess && state != ncclInProgress) {
        ncclCommAbort(comm_);
        comm_ = nullptr;
        fail(what, " failed on rank ", rank_, " of ", size_, " (engine nccl): ", ncclGetErrorString(state));
      }
      if (state == ncclSuccess) {
        if (!stream_too) return done();
        cudaError_t q = cudaStreamQuery(stream_);
        if (q == cudaSuccess) return done();
        if (q != cudaErrorNotReady) OTTER_CUDA_CHECK(q);
      }
      if (clock::now() > deadline) {
        ncclCommAbort(comm_);
        comm_ = nullptr;
        fail(what, " timed out after ", timeout_seconds, " s on rank ", rank_, " of ", size_,
             " (engine nccl): another rank died, hangs, or is running a different step");
      }
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  }
  cudaStream_t stream_;
  ncclComm_t comm_ = nullptr;
  int rank_, size_;
};

// AllReduce on CUDA tensors: in place, through the job's device communicator.
class AllReduceKernel : public Kernel {
 public:
  void run(KernelContext& ctx) override { run_all_reduce(ctx, /*on_host=*/false); }
};

// Byte copies on the kernel's stream, for the padding of the last ZeRO-1 shard.
const DeviceBytes& cuda_bytes() {
  static const DeviceBytes b{
      [](void* dst, const void* src, size_t n, void* stream) {
        if (n)
          OTTER_CUDA_CHECK(cudaMemcpyAsync(dst, src, n, cudaMemcpyDeviceToDevice, static_cast<cudaStream_t>(stream)));
      },
      [](void* dst, size_t n, void* stream) {
        if (n) OTTER_CUDA_CHECK(cudaMemsetAsync(dst, 0, n, static_cast<cudaStream_t>(stream)));
      }};
  return b;
}

// The ZeRO-1 ops on CUDA tensors (kernels/collective.h), through the device communicator.
class ZeroKernel : public Kernel {
 public:
  explicit ZeroKernel(void (*body)(KernelContext&, bool, const DeviceBytes&)) : body_(body) {}
  void run(KernelContext& ctx) override { body_(ctx, /*on_host=*/false, cuda_bytes()); }

 private:
  void (*body_)(KernelContext&, bool, const DeviceBytes&);
};

}  // namespace

std::shared_ptr<Communicator> make_device_communicator(Communicator& host, Device& device) {
  OTTER_CHECK(device.type() == DeviceType::kCuda, "device communicator: ", device.describe(), " is not a CUDA device");
  return std::make_shared<NcclCommunicator>(host, static_cast<cudaStream_t>(device.stream()));
}

void register_cuda_collective_kernels(KernelRegistry& r) {
  KernelDef d;
  d.domain = kOtterDomain;
  d.op_type = "AllReduce";
  d.device = DeviceType::kCuda;
  d.dtypes = {DataType::kFloat32, DataType::kFloat16, DataType::kBFloat16};
  d.create = [](const Node&) -> std::unique_ptr<Kernel> { return std::make_unique<AllReduceKernel>(); };
  r.add(d);
  d.op_type = "ReduceScatter";
  d.create = [](const Node&) -> std::unique_ptr<Kernel> { return std::make_unique<ZeroKernel>(run_reduce_scatter); };
  r.add(d);
  d.op_type = "Shard";
  d.create = [](const Node&) -> std::unique_ptr<Kernel> { return std::make_unique<ZeroKernel>(run_shard); };
  r.add(d);
  d.op_type = "AllGather";
  d.create = [](const Node&) -> std::unique_ptr<Kernel> { return std::make_unique<ZeroKernel>(run_all_gather); };
  r.add(std::move(d));
}

}  // namespace otter
