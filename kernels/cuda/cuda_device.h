// The CUDA device: one stream, a caching allocator, pinned staging for uploads, the cuBLASLt and
// cuDNN handles, and a slot in device memory through which kernels report bad input (an
// out-of-range index) to the host at the next synchronisation instead of reading out of bounds.
#pragma once

#include <cublasLt.h>
#include <cuda_runtime.h>
#include <cudnn.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "kernels/device.h"

namespace otter::cuda {

// Device memory in size classes (four per power of two, at least 512 bytes): a block goes back to
// its class's free list when the last tensor using it goes, and is handed out again without a
// cudaMalloc. Blocks are reused in stream order: every kernel runs on the device's one stream, so
// a block freed on the host while a kernel still reads it is only written by later kernels.
class CachingAllocator : public Allocator {
 public:
  CachingAllocator();
  ~CachingAllocator() override;
  Tensor allocate(DataType t, const std::vector<int64_t>& dims) override;
  // A block of at least `bytes` bytes (256-byte aligned); null for 0 bytes. The block returns to
  // the cache when the returned pointer and all its copies are gone.
  std::shared_ptr<void> allocate_bytes(size_t bytes);

  struct Stats {
    size_t in_use = 0;       // bytes of blocks handed out and not yet returned
    size_t reserved = 0;     // bytes obtained from cudaMalloc (in use + cached)
    size_t peak_reserved = 0;
    size_t peak_in_use = 0;
    int64_t device_mallocs = 0;  // cudaMalloc calls so far
  };
  Stats stats() const;
  // Frees every cached (unused) block.
  void release_cached();
  // The size class of a request (exposed for tests).
  static size_t size_class(size_t bytes);

 private:
  struct Pool;
  std::shared_ptr<Pool> pool_;  // shared with the deleters of outstanding blocks
};

// A bad-input report from a kernel: `code` != 0 names the problem for the reporter's formatter.
struct DeviceError {
  int code;
  int reporter;
  long long a, b, c;
};

class CudaDevice : public Device {
 public:
  explicit CudaDevice(int ordinal);
  ~CudaDevice() override;
  CudaDevice(const CudaDevice&) = delete;
  CudaDevice& operator=(const CudaDevice&) = delete;

  DeviceType type() const override { return DeviceType::kCuda; }
  std::string describe() const override;
  Allocator& allocator() override { return allocator_; }
  void* stream() override { return stream_; }
  Tensor to_device(const Tensor& t) override;
  Tensor to_host(const Tensor& t) override;
  std::vector<Tensor> to_host_all(const std::vector<Tensor>& ts) override;
  void synchronize() override;
  size_t peak_bytes() const override { return allocator_.stats().peak_reserved; }

  cudaStream_t cuda_stream() const { return stream_; }
  CachingAllocator& caching_allocator() { return allocator_; }
  const cudaDeviceProp& properties() const { return props_; }
  int ordinal() const { return ordinal_; }
  cublasLtHandle_t cublaslt() const { return cublaslt_; }
  void* cublaslt_workspace() const { return workspace_.get(); }
  size_t cublaslt_workspace_bytes() const { return kWorkspaceBytes; }
  cudnnHandle_t cudnn() const { return cudnn_; }
  // Asynchronous device-to-device copy on the stream.
  void copy_async(void* dst, const void* src, size_t bytes);

  // Kernels that can meet bad input register a formatter once and pass reporter id and
  // error_slot() to their kernels; the first report is thrown as an Error at the next
  // synchronize() or to_host().
  using ErrorFormatter = std::function<std::string(const DeviceError&)>;
  int add_error_reporter(ErrorFormatter f);
  DeviceError* error_slot() const { return error_device_; }

 private:
  struct Staging;
  void upload(void* dst, const void* src, size_t bytes);  // host -> device through pinned staging
  void raise_reported_error();
  void release();

  static constexpr size_t kWorkspaceBytes = size_t{32} << 20;
  int ordinal_;
  cudaDeviceProp props_{};
  cudaStream_t stream_ = nullptr;
  CachingAllocator allocator_;
  std::shared_ptr<void> workspace_;
  cublasLtHandle_t cublaslt_ = nullptr;
  cudnnHandle_t cudnn_ = nullptr;
  std::vector<std::unique_ptr<Staging>> staging_;
  DeviceError* error_device_ = nullptr;  // written by kernels (first report wins)
  DeviceError* error_host_ = nullptr;    // pinned: copied from error_device_ before each sync
  void* gather_host_ = nullptr;          // pinned: to_host_all's landing area
  size_t gather_bytes_ = 0;
  std::vector<ErrorFormatter> reporters_;
  std::mutex reporters_mutex_;
};

// The CUDA device a kernel runs on; fails naming the node when the context has none.
CudaDevice& device_of(const KernelContext& ctx);

}  // namespace otter::cuda
