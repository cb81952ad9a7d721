// The CPU device.
#include "kernels/device.h"

#include <omp.h>

#include "graph/error.h"

namespace otter {

namespace {

class CpuDevice : public Device {
 public:
  DeviceType type() const override { return DeviceType::kCpu; }
  std::string describe() const override {
    const int n = omp_get_max_threads();
    return str_cat("cpu (", n, n == 1 ? " thread)" : " threads)");
  }
  Allocator& allocator() override { return HostAllocator::instance(); }
  size_t peak_bytes() const override { return static_cast<size_t>(host_peak_bytes()); }
  Tensor to_device(const Tensor& t) override { return to_host(t); }
  Tensor to_host(const Tensor& t) override {
    OTTER_CHECK(!t.defined() || t.on_host(), "cpu device: tensor ", t.describe(), " lives on ",
                device_name(t.device()), " (copy it with that device's to_host)");
    return t;
  }
};

}  // namespace

std::vector<Tensor> Device::to_host_all(const std::vector<Tensor>& ts) {
  std::vector<Tensor> out;
  out.reserve(ts.size());
  for (const Tensor& t : ts) out.push_back(to_host(t));
  return out;
}

Device& cpu_device() {
  static CpuDevice d;
  return d;
}

}  // namespace otter
