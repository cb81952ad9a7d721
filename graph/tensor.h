// Host tensor: a dtype, static dims and a reference-counted, 64-byte aligned buffer.
#pragma once

#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "graph/dtype.h"
#include "graph/error.h"

namespace otter {

// Where a tensor's bytes live. Host code may only read the contents of kCpu tensors; a kCuda
// tensor's raw() is a device pointer for kernels of the CUDA backend.
enum class DeviceType : uint8_t { kCpu, kCuda };
const char* device_name(DeviceType d);

// A reference-counted block of bytes. Tensors that alias (views, Reshape) share one Storage.
class Storage {
 public:
  explicit Storage(size_t nbytes);
  // Wraps memory owned elsewhere (a planned arena, a device allocation); `keepalive` holds its
  // owner and releases the memory when the last tensor using it goes.
  Storage(void* data, size_t nbytes, std::shared_ptr<void> keepalive, DeviceType device = DeviceType::kCpu);
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;
  void* data() { return data_; }
  const void* data() const { return data_; }
  size_t nbytes() const { return nbytes_; }
  DeviceType device() const { return device_; }

 private:
  void* data_ = nullptr;
  DeviceType device_ = DeviceType::kCpu;
  size_t nbytes_ = 0;
  bool owned_ = true;
  std::shared_ptr<void> keepalive_;
};

// Bytes of host memory held by tensors this process allocated (not wrapped external memory): now,
// and the most at any time since the last reset_host_peak_bytes().
int64_t host_live_bytes();
int64_t host_peak_bytes();
void reset_host_peak_bytes();

int64_t num_elements(const std::vector<int64_t>& dims);
std::string dims_to_string(const std::vector<int64_t>& dims);

class Tensor {
 public:
  Tensor() = default;
  // Allocates a zero-filled tensor.
  Tensor(DataType dtype, std::vector<int64_t> dims);
  Tensor(DataType dtype, std::vector<int64_t> dims, std::shared_ptr<Storage> storage,
         size_t offset = 0);

  template <typename T>
  static Tensor from_vector(std::vector<int64_t> dims, const std::vector<T>& values) {
    Tensor t(DataTypeOf<T>::value, std::move(dims));
    OTTER_CHECK(static_cast<int64_t>(values.size()) == t.numel(), "from_vector: ", values.size(),
                " values for shape ", dims_to_string(t.dims()));
    if (!values.empty()) std::memcpy(t.raw(), values.data(), values.size() * sizeof(T));
    return t;
  }
  template <typename T>
  static Tensor scalar(T v) { return from_vector<T>({}, std::vector<T>{v}); }

  bool defined() const { return dtype_ != DataType::kUndefined; }
  DataType dtype() const { return dtype_; }
  const std::vector<int64_t>& dims() const { return dims_; }
  int64_t rank() const { return static_cast<int64_t>(dims_.size()); }
  int64_t dim(int64_t i) const { return dims_.at(i < 0 ? i + rank() : i); }
  int64_t numel() const { return num_elements(dims_); }
  size_t nbytes() const { return static_cast<size_t>(numel()) * dtype_size(dtype_); }
  DeviceType device() const { return storage_ ? storage_->device() : DeviceType::kCpu; }
  bool on_host() const { return device() == DeviceType::kCpu; }

  void* raw() { return storage_ ? static_cast<char*>(storage_->data()) + offset_ : nullptr; }
  const void* raw() const {
    return storage_ ? static_cast<const char*>(storage_->data()) + offset_ : nullptr;
  }
  template <typename T> T* data() { check_type<T>(); return static_cast<T*>(raw()); }
  template <typename T> const T* data() const { check_type<T>(); return static_cast<const T*>(raw()); }

  const std::shared_ptr<Storage>& storage() const { return storage_; }
  size_t offset() const { return offset_; }

  // data<T>() checks the element type only: on a kCuda tensor it is a device pointer. The
  // functions below that read contents (clone, bitwise_equal, get_as_double, to_int64_vector)
  // need a host tensor and fail clearly on a device one.

  // Same storage, other dims (element count must match).
  Tensor reshaped(std::vector<int64_t> dims) const;
  // Deep copy (host tensors).
  Tensor clone() const;
  // Byte-wise equality of dtype, dims and contents.
  bool bitwise_equal(const Tensor& o) const;
  // Reads element i converted to double (any dtype); for tests and printing.
  double get_as_double(int64_t i) const;
  // Reads all elements as int64 (integer and bool dtypes); for shape inputs.
  std::vector<int64_t> to_int64_vector() const;
  std::string describe() const;  // "f32[2,3]"

 private:
  void check_host(const char* what) const;
  template <typename T>
  void check_type() const {
    OTTER_CHECK(DataTypeOf<T>::value == dtype_, "tensor of type ", dtype_name(dtype_),
                " accessed as ", dtype_name(DataTypeOf<T>::value));
  }
  DataType dtype_ = DataType::kUndefined;
  std::vector<int64_t> dims_;
  std::shared_ptr<Storage> storage_;
  size_t offset_ = 0;
};

}  // namespace otter
