// Host tensor implementation.
#include "graph/tensor.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <sstream>

#if defined(__linux__)
#include <sys/mman.h>
#endif

#include "graph/element.h"
#include "graph/limits.h"

namespace otter {

namespace {
std::atomic<int64_t> g_live_bytes{0}, g_peak_bytes{0};

void count_host_bytes(int64_t delta) {
  int64_t now = g_live_bytes.fetch_add(delta, std::memory_order_relaxed) + delta;
  int64_t peak = g_peak_bytes.load(std::memory_order_relaxed);
  while (now > peak && !g_peak_bytes.compare_exchange_weak(peak, now, std::memory_order_relaxed)) {
  }
}
}  // namespace

int64_t host_live_bytes() { return g_live_bytes.load(std::memory_order_relaxed); }
int64_t host_peak_bytes() { return g_peak_bytes.load(std::memory_order_relaxed); }
void reset_host_peak_bytes() { g_peak_bytes.store(host_live_bytes(), std::memory_order_relaxed); }

// Owned blocks are 64-byte aligned and padded to a multiple of 64 (at least 64).
static size_t alloc_size(size_t nbytes) { return nbytes == 0 ? 64 : (nbytes + 63) / 64 * 64; }

namespace {
// Blocks of at least this size are aligned to it and marked for transparent huge pages (where the
// kernel's THP mode is "madvise", as on the development machine, anonymous memory gets none
// otherwise): the memory plan's arena, activations and weights of the larger models.
constexpr size_t kHugePage = size_t{2} << 20;

void* allocate_block(size_t alloc) {
  if (alloc < kHugePage) return std::aligned_alloc(64, alloc);
  const size_t pages = (alloc + kHugePage - 1) / kHugePage * kHugePage;  // aligned_alloc wants a multiple
  void* p = std::aligned_alloc(kHugePage, pages);
#if defined(__linux__) && defined(MADV_HUGEPAGE)
  if (p) madvise(p, pages, MADV_HUGEPAGE);  // a hint: failure is harmless
#endif
  return p;
}
}  // namespace

Storage::Storage(size_t nbytes) : nbytes_(nbytes) {
  const size_t alloc = alloc_size(nbytes);
  data_ = allocate_block(alloc);
  OTTER_CHECK(data_ != nullptr, "out of host memory allocating ", nbytes, " bytes");
  std::memset(data_, 0, alloc);
  count_host_bytes(static_cast<int64_t>(alloc));
}

Storage::Storage(void* data, size_t nbytes, std::shared_ptr<void> keepalive, DeviceType device)
    : data_(data), device_(device), nbytes_(nbytes), owned_(false), keepalive_(std::move(keepalive)) {}

const char* device_name(DeviceType d) { return d == DeviceType::kCpu ? "cpu" : "cuda"; }

void Tensor::check_host(const char* what) const {
  OTTER_CHECK(on_host(), what, ": tensor ", describe(), " lives on ", device_name(device()),
              "; copy it to the host first");
}

Storage::~Storage() {
  if (!owned_) return;
  std::free(data_);
  count_host_bytes(-static_cast<int64_t>(alloc_size(nbytes_)));
}

int64_t num_elements(const std::vector<int64_t>& dims) {
  int64_t n = 1;
  bool overflow = false;
  for (int64_t d : dims) overflow |= __builtin_mul_overflow(n, d, &n);
  if (overflow && std::find(dims.begin(), dims.end(), 0) == dims.end())
    fail("shape ", dims_to_string(dims), " has more elements than int64 can count");
  return n;
}

std::string dims_to_string(const std::vector<int64_t>& dims) {
  std::ostringstream os;
  os << '[';
  for (size_t i = 0; i < dims.size(); ++i) os << (i ? "," : "") << dims[i];
  os << ']';
  return os.str();
}

Tensor::Tensor(DataType dtype, std::vector<int64_t> dims) : dtype_(dtype), dims_(std::move(dims)) {
  for (int64_t d : dims_) OTTER_CHECK(d >= 0, "negative dimension in tensor shape ", dims_to_string(dims_));
  // Refused before allocating: a shape whose size overflows or exceeds OTTER_MAX_TENSOR_BYTES.
  int64_t n = 1;
  bool overflow = false;
  for (int64_t d : dims_) overflow |= __builtin_mul_overflow(n, d, &n);
  if ((overflow && n != 0) || static_cast<uint64_t>(n) > max_tensor_bytes() / std::max<size_t>(dtype_size(dtype_), 1)) {
    const std::string what = str_cat("tensor ", dtype_name(dtype_), dims_to_string(dims_));
    checked_tensor_bytes(static_cast<uint64_t>(checked_num_elements(dims_, what)), dtype_size(dtype_), what);
  }
  storage_ = std::make_shared<Storage>(nbytes());
}

Tensor::Tensor(DataType dtype, std::vector<int64_t> dims, std::shared_ptr<Storage> storage,
               size_t offset)
    : dtype_(dtype), dims_(std::move(dims)), storage_(std::move(storage)), offset_(offset) {
  OTTER_CHECK(storage_ && offset_ + nbytes() <= storage_->nbytes(), "tensor ", describe(),
              " does not fit its storage");
}

Tensor Tensor::reshaped(std::vector<int64_t> dims) const {
  OTTER_CHECK(num_elements(dims) == numel(), "cannot reshape ", describe(), " to ", dims_to_string(dims));
  Tensor t = *this;
  t.dims_ = std::move(dims);
  return t;
}

Tensor Tensor::clone() const {
  if (!defined()) return {};
  check_host("clone");
  Tensor t(dtype_, dims_);
  if (nbytes()) std::memcpy(t.raw(), raw(), nbytes());
  return t;
}

bool Tensor::bitwise_equal(const Tensor& o) const {
  if (dtype_ != o.dtype_ || dims_ != o.dims_) return false;
  check_host("bitwise_equal");
  o.check_host("bitwise_equal");
  return nbytes() == 0 || std::memcmp(raw(), o.raw(), nbytes()) == 0;
}

double Tensor::get_as_double(int64_t i) const {
  check_host("get_as_double");
  if (dtype_ == DataType::kUndefined) fail("get_as_double on an undefined tensor");
  return element_as_double(raw(), dtype_, i);
}

std::vector<int64_t> Tensor::to_int64_vector() const {
  check_host("to_int64_vector");
  std::vector<int64_t> out(static_cast<size_t>(numel()));
  const void* p = raw();
  for (int64_t i = 0; i < numel(); ++i) {
    switch (dtype_) {
      case DataType::kInt64: out[i] = static_cast<const int64_t*>(p)[i]; break;
      case DataType::kInt32: out[i] = static_cast<const int32_t*>(p)[i]; break;
      case DataType::kInt8: out[i] = static_cast<const int8_t*>(p)[i]; break;
      case DataType::kUInt8: out[i] = static_cast<const uint8_t*>(p)[i]; break;
      case DataType::kBool: out[i] = static_cast<const uint8_t*>(p)[i] != 0; break;
      case DataType::kInt16: out[i] = static_cast<const int16_t*>(p)[i]; break;
      case DataType::kUInt16: out[i] = static_cast<const uint16_t*>(p)[i]; break;
      case DataType::kUInt32: out[i] = static_cast<const uint32_t*>(p)[i]; break;
      case DataType::kUInt64: out[i] = static_cast<int64_t>(static_cast<const uint64_t*>(p)[i]); break;
      default: fail("expected an integer tensor, got ", describe());
    }
  }
  return out;
}

std::string Tensor::describe() const {
  return str_cat(dtype_name(dtype_), dims_to_string(dims_));
}

}  // namespace otter
