// Initial values from a file (see initial_values.h).
#include "runtime/initial_values.h"

#include "graph/error.h"
#include "passes/autodiff.h"
#include "runtime/npz.h"

namespace otter {

namespace {

std::string describe_shape(DataType t, const std::vector<int64_t>& dims) {
  return std::string(dtype_name(t)) + Shape::of(dims).to_string();
}

// The shape adapter `name` of weight `w` must have at `lora`'s rank; fails when w is no target.
std::vector<int64_t> adapter_dims(const Value& w, const std::string& name, const std::string& source,
                                  const LoraOptions* lora) {
  OTTER_CHECK(lora, source, ": array '", name, "' is a LoRA adapter, but LoRA is off (give --lora)");
  bool targeted = false;
  for (const std::string& p : lora->targets) targeted |= glob_match(p, w.name());
  OTTER_CHECK(targeted, source, ": array '", name, "' adapts '", w.name(), "', which no --lora target selects");
  std::string why;
  LoraLayout l = lora_layout(w, &why);
  OTTER_CHECK(why.empty(), source, ": array '", name, "' adapts '", w.name(), "', which is not a MatMul/Gemm weight (",
              why, ")");
  const bool is_a = name.size() >= 7 && name.compare(name.size() - 7, 7, ".lora_A") == 0;
  return is_a ? std::vector<int64_t>{lora->rank, l.in} : std::vector<int64_t>{l.out, lora->rank};
}

}  // namespace

std::map<std::string, Tensor> read_initial_values(const std::string& path) {
  NpzArchive a = read_npz(path);
  std::map<std::string, Tensor> out;
  for (auto& [name, t] : a.arrays) out[name] = t;
  return out;
}

void apply_initial_values(Graph& g, const std::map<std::string, Tensor>& values, const std::string& source,
                          const LoraOptions* lora) {
  for (const auto& [name, t] : values) {
    Value* v = g.find_value(name);
    std::string wname;
    if (!v && is_lora_adapter_name(name, &wname) && g.find_value(wname)) {
      const Value* w = g.find_value(wname);
      std::vector<int64_t> dims = adapter_dims(*w, name, source, lora);
      OTTER_CHECK(t.dtype() == w->dtype() && t.dims() == dims, source, ": array '", name, "' is ", t.describe(),
                  "; the adapter of '", wname, "' at rank ", lora->rank, " must be ", describe_shape(w->dtype(), dims));
      g.add_initializer(name, t.clone(), /*trainable=*/true);
      continue;
    }
    OTTER_CHECK(v && v->kind() == ValueKind::kInitializer, source, ": array '", name,
                "' is not an initializer of the model (nor a LoRA adapter '<weight>.lora_A|B' of one of its weights)");
    OTTER_CHECK(t.dtype() == v->dtype() && Shape::of(t.dims()) == v->shape(), source, ": array '", name, "' is ",
                t.describe(), "; the model's initializer is ", v->type_string());
    v->set_data(t.clone());
  }
}

}  // namespace otter
