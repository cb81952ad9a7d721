// The kernel context and the registry's lookup (the process-wide instance with every backend is
// built in kernels/backends.cc).
#include "kernels/kernel.h"

#include <algorithm>

#include "graph/error.h"
#include "graph/op_table.h"

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

void KernelRegistry::add(KernelDef def) {
  if (def.since_version == kOpTableOpsets) {
    // The union of the opset ranges the op table defines the op over (several definitions where
    // the op's schema changed, such as ReduceMean's axes moving to an input at 18).
    int since = 0, until = 0;
    for (const OpDef* o : OpTable::instance().all()) {
      if (o->domain != def.domain || o->op_type != def.op_type) continue;
      since = since == 0 ? o->since_version : std::min(since, o->since_version);
      until = std::max(until, o->until_version);
    }
    OTTER_CHECK(since != 0, "kernel registry: a ", device_name(def.device), " kernel for ",
                def.domain.empty() ? "" : def.domain + "::", def.op_type,
                " takes its opsets from the op table, which has no such op (graph/ops/*.cc)");
    def.since_version = since;
    def.until_version = until;
  }
  defs_.push_back(std::move(def));
}

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
