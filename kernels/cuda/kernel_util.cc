// Host-side helpers of the CUDA kernels.
#include "kernels/cuda/kernel_util.h"

#include "graph/error.h"

namespace otter::cuda {

void fail_dtype(DataType t, const char* expected) {
  fail(where(), "unsupported dtype ", dtype_name(t), " on CUDA (expected ", expected, ")");
}

Tensor host_tensor(const KernelContext& ctx, int i) {
  const Tensor& t = ctx.input(i);
  if (t.on_host()) return t;
  if (const Tensor* h = ctx.host_input(i)) return *h;
  return device_of(ctx).to_host(t);
}

std::vector<int64_t> host_ints(const KernelContext& ctx, int i, const char* what) {
  const Tensor& t = ctx.input(i);
  if (t.dtype() != DataType::kInt64 && t.dtype() != DataType::kInt32)
    ctx.error(str_cat("input ", i, " (", what, ") must be int64 or int32, got ", t.describe()));
  return host_tensor(ctx, i).to_int64_vector();
}

double host_scalar(const KernelContext& ctx, int i, const char* what) {
  const Tensor& t = ctx.input(i);
  if (t.numel() != 1) ctx.error(str_cat("input ", i, " (", what, ") must hold one element, got ", t.describe()));
  return host_tensor(ctx, i).get_as_double(0);
}

ErrorReporter::ErrorReporter(const Node& n, std::function<std::string(const DeviceError&)> what)
    : node_(n.describe()), what_(std::move(what)) {}

int ErrorReporter::id(CudaDevice& d) {
  if (device_ != &d) {
    id_ = d.add_error_reporter([node = node_, what = what_](const DeviceError& e) { return node + ": " + what(e); });
    device_ = &d;
  }
  return id_;
}

}  // namespace otter::cuda
