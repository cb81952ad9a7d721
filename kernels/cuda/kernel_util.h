// Host-side helpers of the CUDA kernels: dtype dispatch to storage types, shape-like inputs read
// on the host, the kernel's stream, and registration of bad-input reporters.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "graph/dtype.h"
#include "kernels/common/checks.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/cuda_device.h"
#include "kernels/kernel.h"

namespace otter::cuda {

template <typename T> struct Tag { using type = T; };

[[noreturn]] void fail_dtype(DataType t, const char* expected);

// Calls f(Tag<S>{}) with S the storage type of dtype t; the sets are nested.
template <typename F>
decltype(auto) dispatch_float(DataType t, F&& f) {
  switch (t) {
    case DataType::kFloat32: return f(Tag<float>{});
    case DataType::kFloat16: return f(Tag<Half>{});
    case DataType::kBFloat16: return f(Tag<BFloat16>{});
    default: fail_dtype(t, "f32, f16 or bf16");
  }
}
template <typename F>
decltype(auto) dispatch_numeric(DataType t, F&& f) {
  switch (t) {
    case DataType::kInt64: return f(Tag<int64_t>{});
    case DataType::kInt32: return f(Tag<int32_t>{});
    case DataType::kInt8: return f(Tag<int8_t>{});
    case DataType::kUInt8: return f(Tag<uint8_t>{});
    default: return dispatch_float(t, std::forward<F>(f));
  }
}
// The unsigned integer types (BitShift).
template <typename F>
decltype(auto) dispatch_unsigned(DataType t, F&& f) {
  switch (t) {
    case DataType::kUInt8: return f(Tag<uint8_t>{});
    case DataType::kUInt16: return f(Tag<uint16_t>{});
    case DataType::kUInt32: return f(Tag<uint32_t>{});
    case DataType::kUInt64: return f(Tag<uint64_t>{});
    default: fail_dtype(t, "u8, u16, u32 or u64");
  }
}
template <typename F>
decltype(auto) dispatch_all(DataType t, F&& f) {
  if (t == DataType::kBool) return f(Tag<bool>{});
  return dispatch_numeric(t, std::forward<F>(f));
}
// By element size, for kernels that only move elements.
template <typename F>
decltype(auto) dispatch_bytes(DataType t, F&& f) {
  switch (dtype_size(t)) {
    case 1: return f(Tag<uint8_t>{});
    case 2: return f(Tag<uint16_t>{});
    case 4: return f(Tag<uint32_t>{});
    case 8: return f(Tag<uint64_t>{});
    default: fail_dtype(t, "an element of 1, 2, 4 or 8 bytes");
  }
}

inline cudaStream_t stream_of(const KernelContext& ctx) { return device_of(ctx).cuda_stream(); }

// Input i as a host tensor: itself when it lives on the host, the executor's host copy of
// constants and host feeds, else a download (a stream synchronisation: shape data computed on the
// device at run time).
Tensor host_tensor(const KernelContext& ctx, int i);
// The int32/int64 contents of input i (Reshape's shape, Slice's starts), read on the host.
std::vector<int64_t> host_ints(const KernelContext& ctx, int i, const char* what);
// host_ints of an optional input: nullopt where it is absent.
inline std::optional<std::vector<int64_t>> optional_host_ints(const KernelContext& ctx, int i, const char* what) {
  if (!ctx.has_input(i)) return std::nullopt;
  return host_ints(ctx, i, what);
}
// Element 0 of input i as a double, read on the host.
double host_scalar(const KernelContext& ctx, int i, const char* what);

// A kernel's formatter of bad-input reports, registered once with the device it runs on. `what`
// describes the problem; the message names the node in front of it.
class ErrorReporter {
 public:
  ErrorReporter(const Node& n, std::function<std::string(const DeviceError&)> what);
  int id(CudaDevice& d);

 private:
  std::string node_;
  std::function<std::string(const DeviceError&)> what_;
  CudaDevice* device_ = nullptr;
  int id_ = -1;
};


}  // namespace otter::cuda
