// The backward seed S/K (see backward_seed.h).
#include "passes/backward_seed.h"

#include "passes/all_reduce.h"

#include "graph/error.h"
#include "graph/op_table.h"

namespace otter {

namespace {

Node* first_user(const Graph& g, const Value* v) {
  for (const auto& n : g.nodes())
    for (Value* in : n->inputs())
      if (in == v) return n.get();
  return nullptr;
}

// 1/K in the seed constant's own type.
void set_constant_seed(Value* seed, int64_t k) {
  Tensor t = seed->data().clone();
  for (int64_t i = 0; i < t.numel(); ++i) {
    if (t.dtype() == DataType::kFloat64) t.data<double>()[i] = 1.0 / static_cast<double>(k);
    else t.data<float>()[i] = 1.f / static_cast<float>(k);
  }
  seed->set_data(t);
}

// Replaces the seed constant by ScaleSeed(S) {k}, which takes the seed's name and place.
void make_scaled_seed(Graph& g, Value* seed, Value* scale, int64_t k, const std::string& pass) {
  OTTER_CHECK(seed->dtype() == DataType::kFloat32 && seed->data().numel() == 1, pass, ": the backward seed '",
              seed->name(), "' is not a float32 scalar (", seed->type_string(), ")");
  const std::string name = seed->name();
  g.rename_value(seed, g.unique_name(name + ".unscaled"));
  Node* n = g.add_node("ScaleSeed", {scale}, {name}, kOtterDomain, first_user(g, seed));
  n->set_attr("k", Attribute(k));
  infer_node(*n);
  g.replace_all_uses(seed, n->output(0));
  g.remove_value(seed);
}

}  // namespace

void update_backward_seed(Graph& g, const std::string& pass) {
  Value* seed = g.loss_seed;
  OTTER_CHECK(seed, pass, ": the graph has no backward seed (run autodiff first)");
  // K micro-batches on each of N data-parallel ranks (passes/all_reduce.h), whose AllReduce sums.
  const int64_t k = g.training_facts().accumulation_steps * data_parallel_ranks(g);
  Node* scaled = seed->producer();
  if (scaled) {
    OTTER_CHECK(scaled->domain() == kOtterDomain && scaled->op_type() == "ScaleSeed" && g.loss_scale, pass,
                ": unexpected backward seed '", seed->name(), "' (", scaled->describe(), ")");
    scaled->set_input(0, g.loss_scale);
    scaled->set_attr("k", Attribute(k));
    return;
  }
  OTTER_CHECK(seed->kind() == ValueKind::kInitializer, pass, ": the backward seed '", seed->name(),
              "' is neither a constant nor a ScaleSeed");
  if (g.loss_scale) make_scaled_seed(g, seed, g.loss_scale, k, pass);
  else set_constant_seed(seed, k);
}

}  // namespace otter
