// Kernel registry and context.
#include "kernels/kernel.h"

#include "graph/error.h"

namespace otter {

HostAllocator& HostAllocator::instance() {
  static HostAllocator a;
  return a;
}

const Tensor& KernelContext::input(int i) const {
  if (!has_input(i)) error(str_cat("input ", i, " is missing"));
  return *inputs_[i];
}

Tensor& KernelContext::allocate_output(int i, DataType t, const std::vector<int64_t>& dims) {
  if (!has_output(i)) error(str_cat("output ", i, " is not requested"));
  Tensor& out = *outputs_[i];
  const bool preset = i < 64 && ((preset_outputs >> i) & 1u);
  if (out.defined() && out.dtype() == t && out.dims() == dims && (preset || out.storage().use_count() == 1))
    return out;
  out = alloc_.allocate(t, dims);
  return out;
}

void KernelContext::alias_output(int i, const Tensor& src, const std::vector<int64_t>& dims) {
  if (!has_output(i)) error(str_cat("output ", i, " is not requested"));
  *outputs_[i] = src.reshaped(dims);
}

void KernelContext::error(const std::string& msg) const { fail(node_.describe(), ": ", msg); }

KernelRegistry& KernelRegistry::instance() {
  static KernelRegistry* r = [] {
    auto* reg = new KernelRegistry();
    register_cpu_kernels(*reg);
    register_cuda_kernels(*reg);
    return reg;
  }();
  return *r;
}

void KernelRegistry::add(KernelDef def) { defs_.push_back(std::move(def)); }

DataType kernel_dtype(const Node& n) {
  for (Value* v : n.inputs())
    if (v && is_float(v->dtype())) return v->dtype();
  for (Value* v : n.inputs())
    if (v) return v->dtype();
  for (Value* v : n.outputs())
    if (v) return v->dtype();
  return DataType::kUndefined;
}

const KernelDef* KernelRegistry::find(const Node& n, DeviceType device, std::string* why) const {
  DataType t = kernel_dtype(n);
  bool op_known = false, dtype_ok = false;
  std::string reason;
  for (const KernelDef& d : defs_) {
    if (d.domain != n.domain() || d.op_type != n.op_type() || d.device != device) continue;
    op_known = true;
    if (n.opset() < d.since_version || n.opset() > d.until_version) continue;
    bool covers = d.dtypes.empty();
    for (DataType x : d.dtypes) covers |= (x == t);
    if (!covers) continue;
    dtype_ok = true;
    if (d.supports) {
      std::string r = d.supports(n);
      if (!r.empty()) { reason = r; continue; }
    }
    return &d;
  }
  if (why) {
    if (!op_known) *why = str_cat("no ", device_name(device), " kernel for ", n.op_type());
    else if (!dtype_ok) *why = str_cat("no ", device_name(device), " kernel for ", n.op_type(), " in ", dtype_name(t), " at opset ", n.opset());
    else *why = reason;
  }
  return nullptr;
}

}  // namespace otter
