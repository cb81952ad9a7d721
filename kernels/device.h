// A device kernels run on: its allocator, its stream, and copies between it and the host. The CPU
// device is always there; the CUDA device comes from the CUDA backend where it is built.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "kernels/kernel.h"

namespace otter {

class Device {
 public:
  virtual ~Device() = default;
  virtual DeviceType type() const = 0;
  // "cpu (2 threads)", "NVIDIA H200 (sm_90, 139 GiB)".
  virtual std::string describe() const = 0;
  // Allocates outputs and scratch memory on this device.
  virtual Allocator& allocator() = 0;
  // The stream kernels are launched on (a cudaStream_t on CUDA; nullptr on the CPU).
  virtual void* stream() { return nullptr; }
  // A copy of `t` on this device (`t` itself when it already lives here). Asynchronous on CUDA:
  // ordered on stream() before later kernels.
  virtual Tensor to_device(const Tensor& t) = 0;
  // A host copy of `t` (`t` itself when it is a host tensor); waits for the stream.
  virtual Tensor to_host(const Tensor& t) = 0;
  // Host copies of several (small) tensors with one wait: the metrics of a training step.
  virtual std::vector<Tensor> to_host_all(const std::vector<Tensor>& ts);
  // Waits for all work queued on the stream.
  virtual void synchronize() {}
  // Bytes of device memory held at most so far by this device's allocator (0 where not tracked).
  virtual size_t peak_bytes() const { return 0; }
};

// The host as a device (HostAllocator, no stream).
Device& cpu_device();

// True where this build has the CUDA backend and a CUDA device is present; never throws.
bool cuda_available();
// A short reason why cuda_available() is false ("this build has no CUDA backend", "no CUDA
// device: <driver message>"), empty when it is true.
std::string cuda_unavailable_reason();
// The CUDA device `ordinal`; fails with cuda_unavailable_reason() where there is none.
std::unique_ptr<Device> make_cuda_device(int ordinal = 0);

}  // namespace otter
