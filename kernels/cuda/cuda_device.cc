// The CUDA device, its caching allocator, and the backend's entry points (cuda_available,
// make_cuda_device).
#include "kernels/cuda/cuda_device.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <unordered_map>

#include "graph/error.h"
#include "kernels/cuda/cuda_check.h"

namespace otter::cuda {

// ---- failures name the node --------------------------------------------------------------------

namespace {
thread_local const Node* t_node = nullptr;

const char* base_name(const char* path) {
  const char* slash = std::strrchr(path, '/');
  return slash ? slash + 1 : path;
}
}  // namespace

const Node* current_node() { return t_node; }
NodeScope::NodeScope(const Node* n) : prev_(t_node) { t_node = n; }
NodeScope::~NodeScope() { t_node = prev_; }

std::string where() { return t_node ? t_node->describe() + ": " : std::string("CUDA device: "); }

void fail_call(const char* call, const std::string& why, const char* file, int line) {
  fail(where(), call, " failed: ", why, " (", base_name(file), ":", line, ")");
}

// ---- caching allocator -------------------------------------------------------------------------

struct CachingAllocator::Pool {
  std::mutex mu;
  std::unordered_map<size_t, std::vector<void*>> free_blocks;  // by size class
  Stats stats;

  ~Pool() { release_cached_locked(); }

  void give_back(void* p, size_t cls) {
    std::lock_guard<std::mutex> lock(mu);
    free_blocks[cls].push_back(p);
    stats.in_use -= cls;
  }
  void release_cached_locked() {
    for (auto& [cls, blocks] : free_blocks) {
      for (void* p : blocks) {
        cudaFree(p);  // errors ignored: also runs at exit, after the runtime may be gone
        stats.reserved -= cls;
      }
      blocks.clear();
    }
  }
};

CachingAllocator::CachingAllocator() : pool_(std::make_shared<Pool>()) {}

CachingAllocator::~CachingAllocator() { release_cached(); }

size_t CachingAllocator::size_class(size_t bytes) {
  if (bytes <= 512) return 512;
  const size_t step = std::max<size_t>(std::bit_floor(bytes) / 4, 512);
  return (bytes + step - 1) / step * step;
}

std::shared_ptr<void> CachingAllocator::allocate_bytes(size_t bytes) {
  if (bytes == 0) return nullptr;
  const size_t cls = size_class(bytes);
  void* p = nullptr;
  {
    std::lock_guard<std::mutex> lock(pool_->mu);
    auto& list = pool_->free_blocks[cls];
    if (!list.empty()) {
      p = list.back();
      list.pop_back();
    } else {
      cudaError_t e = cudaMalloc(&p, cls);
      if (e == cudaErrorMemoryAllocation) {  // give the cached blocks back and try once more
        (void)cudaGetLastError();
        pool_->release_cached_locked();
        e = cudaMalloc(&p, cls);
      }
      if (e != cudaSuccess) {
        (void)cudaGetLastError();
        const Stats& s = pool_->stats;
        fail(where(), "cannot allocate ", cls, " bytes of device memory (", cudaGetErrorString(e), "; ",
             s.in_use, " bytes in use, ", s.reserved, " reserved)");
      }
      ++pool_->stats.device_mallocs;
      pool_->stats.reserved += cls;
      pool_->stats.peak_reserved = std::max(pool_->stats.peak_reserved, pool_->stats.reserved);
    }
    pool_->stats.in_use += cls;
    pool_->stats.peak_in_use = std::max(pool_->stats.peak_in_use, pool_->stats.in_use);
  }
  std::shared_ptr<Pool> pool = pool_;
  return std::shared_ptr<void>(p, [pool, cls](void* q) { pool->give_back(q, cls); });
}

Tensor CachingAllocator::allocate(DataType t, const std::vector<int64_t>& dims) {
  const int64_t n = num_elements(dims);
  OTTER_CHECK(n >= 0, where(), "cannot allocate a tensor of shape ", dims_to_string(dims));
  const size_t bytes = static_cast<size_t>(n) * dtype_size(t);
  std::shared_ptr<void> block = allocate_bytes(bytes);
  void* data = block.get();
  return Tensor(t, dims, std::make_shared<Storage>(data, bytes, std::move(block), DeviceType::kCuda));
}

CachingAllocator::Stats CachingAllocator::stats() const {
  std::lock_guard<std::mutex> lock(pool_->mu);
  return pool_->stats;
}

void CachingAllocator::release_cached() {
  std::lock_guard<std::mutex> lock(pool_->mu);
  pool_->release_cached_locked();
}

// ---- the device --------------------------------------------------------------------------------

// A pinned host buffer that uploads are staged through; `done` is recorded after its last copy.
struct CudaDevice::Staging {
  void* host = nullptr;
  size_t capacity = 0;
  cudaEvent_t done = nullptr;
};

namespace {
constexpr size_t kMaxStagingBuffers = 4;
}

CudaDevice::CudaDevice(int ordinal) : ordinal_(ordinal) {
  try {
    OTTER_CUDA_CHECK(cudaSetDevice(ordinal));
    OTTER_CUDA_CHECK(cudaGetDeviceProperties(&props_, ordinal));
    OTTER_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    workspace_ = allocator_.allocate_bytes(kWorkspaceBytes);
    OTTER_CUBLAS_CHECK(cublasLtCreate(&cublaslt_));
    OTTER_CUDNN_CHECK(cudnnCreate(&cudnn_));
    OTTER_CUDNN_CHECK(cudnnSetStream(cudnn_, stream_));
    OTTER_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&error_device_), sizeof(DeviceError)));
    OTTER_CUDA_CHECK(cudaMemset(error_device_, 0, sizeof(DeviceError)));
    OTTER_CUDA_CHECK(cudaMallocHost(reinterpret_cast<void**>(&error_host_), sizeof(DeviceError)));
    std::memset(error_host_, 0, sizeof(DeviceError));
  } catch (...) {
    release();
    throw;
  }
}

CudaDevice::~CudaDevice() { release(); }

// Frees what the constructor made (any prefix of it); errors are ignored (also runs at exit).
void CudaDevice::release() {
  if (stream_) cudaStreamSynchronize(stream_);
  for (auto& s : staging_) {
    if (s->done) cudaEventDestroy(s->done);
    if (s->host) cudaFreeHost(s->host);
  }
  staging_.clear();
  if (error_host_) cudaFreeHost(error_host_);
  if (gather_host_) cudaFreeHost(gather_host_);
  gather_host_ = nullptr;
  gather_bytes_ = 0;
  if (error_device_) cudaFree(error_device_);
  error_host_ = error_device_ = nullptr;
  if (cudnn_) cudnnDestroy(cudnn_);
  if (cublaslt_) cublasLtDestroy(cublaslt_);
  cudnn_ = nullptr;
  cublaslt_ = nullptr;
  workspace_.reset();
  if (stream_) cudaStreamDestroy(stream_);
  stream_ = nullptr;
}

std::string CudaDevice::describe() const {
  return str_cat(props_.name, " (sm_", props_.major, props_.minor, ", ", props_.totalGlobalMem >> 30, " GiB, ",
                 props_.multiProcessorCount, " SMs)");
}

void CudaDevice::copy_async(void* dst, const void* src, size_t bytes) {
  if (bytes == 0 || dst == src) return;
  OTTER_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, stream_));
}

// Copies `bytes` from host memory `src` to device memory `dst`, staged through a pinned buffer
// whose previous copy has finished (waiting for the oldest one when all are busy).
void CudaDevice::upload(void* dst, const void* src, size_t bytes) {
  Staging* pick = nullptr;
  for (auto& s : staging_) {
    const cudaError_t q = cudaEventQuery(s->done);
    if (q == cudaErrorNotReady) {
      (void)cudaGetLastError();
      continue;
    }
    OTTER_CUDA_CHECK(q);
    if (!pick || (pick->capacity < bytes && s->capacity > pick->capacity)) pick = s.get();
  }
  if (!pick && staging_.size() < kMaxStagingBuffers) {
    staging_.push_back(std::make_unique<Staging>());
    pick = staging_.back().get();
    OTTER_CUDA_CHECK(cudaEventCreateWithFlags(&pick->done, cudaEventDisableTiming));
  }
  if (!pick) {  // all busy: wait for one, taking them in turn
    std::rotate(staging_.begin(), staging_.begin() + 1, staging_.end());
    pick = staging_.back().get();
    OTTER_CUDA_CHECK(cudaEventSynchronize(pick->done));
  }
  if (pick->capacity < bytes) {
    if (pick->host) OTTER_CUDA_CHECK(cudaFreeHost(pick->host));
    pick->host = nullptr;
    pick->capacity = 0;
    OTTER_CUDA_CHECK(cudaMallocHost(&pick->host, bytes));
    pick->capacity = bytes;
  }
  std::memcpy(pick->host, src, bytes);
  OTTER_CUDA_CHECK(cudaMemcpyAsync(dst, pick->host, bytes, cudaMemcpyHostToDevice, stream_));
  OTTER_CUDA_CHECK(cudaEventRecord(pick->done, stream_));
}

Tensor CudaDevice::to_device(const Tensor& t) {
  if (!t.defined() || t.device() == DeviceType::kCuda) return t;
  Tensor out = allocator_.allocate(t.dtype(), t.dims());
  if (t.nbytes()) upload(out.raw(), t.raw(), t.nbytes());
  return out;
}

Tensor CudaDevice::to_host(const Tensor& t) {
  if (!t.defined() || t.on_host()) return t;
  Tensor out(t.dtype(), t.dims());
  OTTER_CUDA_CHECK(cudaMemcpyAsync(error_host_, error_device_, sizeof(DeviceError), cudaMemcpyDeviceToHost, stream_));
  if (t.nbytes()) OTTER_CUDA_CHECK(cudaMemcpyAsync(out.raw(), t.raw(), t.nbytes(), cudaMemcpyDeviceToHost, stream_));
  OTTER_CUDA_CHECK(cudaStreamSynchronize(stream_));
  raise_reported_error();
  return out;
}

std::vector<Tensor> CudaDevice::to_host_all(const std::vector<Tensor>& ts) {
  size_t total = 0;
  for (const Tensor& t : ts)
    if (t.defined() && !t.on_host()) total += (t.nbytes() + 15) / 16 * 16;
  if (total > gather_bytes_) {
    if (gather_host_) OTTER_CUDA_CHECK(cudaFreeHost(gather_host_));
    gather_host_ = nullptr;
    OTTER_CUDA_CHECK(cudaMallocHost(&gather_host_, total));
    gather_bytes_ = total;
  }
  // Every copy is queued into pinned memory, then one wait.
  OTTER_CUDA_CHECK(cudaMemcpyAsync(error_host_, error_device_, sizeof(DeviceError), cudaMemcpyDeviceToHost, stream_));
  std::vector<size_t> offsets(ts.size(), 0);
  size_t off = 0;
  for (size_t i = 0; i < ts.size(); ++i) {
    const Tensor& t = ts[i];
    if (!t.defined() || t.on_host()) continue;
    offsets[i] = off;
    if (t.nbytes())
      OTTER_CUDA_CHECK(cudaMemcpyAsync(static_cast<char*>(gather_host_) + off, t.raw(), t.nbytes(),
                                       cudaMemcpyDeviceToHost, stream_));
    off += (t.nbytes() + 15) / 16 * 16;
  }
  OTTER_CUDA_CHECK(cudaStreamSynchronize(stream_));
  raise_reported_error();
  std::vector<Tensor> out;
  out.reserve(ts.size());
  for (size_t i = 0; i < ts.size(); ++i) {
    const Tensor& t = ts[i];
    if (!t.defined() || t.on_host()) {
      out.push_back(t);
      continue;
    }
    Tensor h(t.dtype(), t.dims());
    if (t.nbytes()) std::memcpy(h.raw(), static_cast<const char*>(gather_host_) + offsets[i], t.nbytes());
    out.push_back(h);
  }
  return out;
}

void CudaDevice::synchronize() {
  OTTER_CUDA_CHECK(cudaMemcpyAsync(error_host_, error_device_, sizeof(DeviceError), cudaMemcpyDeviceToHost, stream_));
  OTTER_CUDA_CHECK(cudaStreamSynchronize(stream_));
  raise_reported_error();
}

int CudaDevice::add_error_reporter(ErrorFormatter f) {
  std::lock_guard<std::mutex> lock(reporters_mutex_);
  reporters_.push_back(std::move(f));
  return static_cast<int>(reporters_.size()) - 1;
}

void CudaDevice::raise_reported_error() {
  if (error_host_->code == 0) return;
  const DeviceError e = *error_host_;
  std::memset(error_host_, 0, sizeof(DeviceError));
  OTTER_CUDA_CHECK(cudaMemsetAsync(error_device_, 0, sizeof(DeviceError), stream_));
  ErrorFormatter f;
  {
    std::lock_guard<std::mutex> lock(reporters_mutex_);
    if (e.reporter >= 0 && e.reporter < static_cast<int>(reporters_.size())) f = reporters_[e.reporter];
  }
  if (!f) fail("CUDA device: a kernel reported error code ", e.code, " from an unknown reporter ", e.reporter);
  fail(f(e));
}

CudaDevice& device_of(const KernelContext& ctx) {
  auto* d = dynamic_cast<CudaDevice*>(ctx.device);
  if (!d) ctx.error("this CUDA kernel needs a CUDA device in its context");
  return *d;
}

}  // namespace otter::cuda

// ---- entry points of the backend ---------------------------------------------------------------

namespace otter {

namespace {
struct Probe {
  int count = 0;
  std::string reason;  // empty when count > 0
};

// Asks the runtime once; a machine without a driver or device answers with an error code.
const Probe& probe() {
  static const Probe p = [] {
    Probe r;
    int n = 0;
    const cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess) {
      (void)cudaGetLastError();
      r.reason = str_cat("no CUDA device: ", cudaGetErrorString(e));
    } else if (n <= 0) {
      r.reason = "no CUDA device: cudaGetDeviceCount found none";
    } else {
      r.count = n;
    }
    return r;
  }();
  return p;
}
}  // namespace

bool cuda_available() {
  try {
    return probe().count > 0;
  } catch (...) {
    return false;
  }
}

std::string cuda_unavailable_reason() { return probe().reason; }

std::unique_ptr<Device> make_cuda_device(int ordinal) {
  if (!cuda_available()) fail("--device cuda: ", cuda_unavailable_reason());
  if (ordinal < 0 || ordinal >= probe().count)
    fail("--device cuda: device ", ordinal, " does not exist (", probe().count, " CUDA device",
         probe().count == 1 ? "" : "s", " present)");
  return std::make_unique<cuda::CudaDevice>(ordinal);
}

}  // namespace otter
