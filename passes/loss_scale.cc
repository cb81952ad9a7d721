// loss-scale pass (see loss_scale.h).
#include "passes/loss_scale.h"

#include <algorithm>
#include <cmath>

#include "graph/error.h"
#include "graph/op_table.h"

namespace otter {

namespace {

// K from the seed constant 1/K that autodiff (1) and grad-accumulation (1/K) leave.
int64_t accumulation_steps(const Value* seed) {
  OTTER_CHECK(seed->kind() == ValueKind::kInitializer && seed->dtype() == DataType::kFloat32 &&
                  seed->data().numel() == 1,
              "loss-scale: the backward seed '", seed->name(), "' is not a float32 constant (", seed->type_string(),
              ")");
  const double c = seed->data().get_as_double(0);
  const int64_t k = c > 0 ? std::llround(1.0 / c) : 0;
  OTTER_CHECK(k >= 1 && std::abs(static_cast<double>(k) * c - 1.0) < 1e-6, "loss-scale: the backward seed is ", c,
              ", not 1/K for a whole number of micro-batches K");
  return k;
}

Node* first_user(const Graph& g, const Value* v) {
  for (const auto& n : g.nodes())
    for (Value* in : n->inputs())
      if (in == v) return n.get();
  return nullptr;
}

Node* find_apply_node(const Graph& g, const std::string& op) {
  for (const auto& n : g.nodes())
    if (n->program() == Program::kApply && n->domain() == kOtterDomain && n->op_type() == op) return n.get();
  return nullptr;
}

// Replaces the seed constant by ScaleSeed(S) {k}, which takes the seed's name.
void scale_seed(Graph& g, Value* scale) {
  Value* seed = g.loss_seed;
  const int64_t k = accumulation_steps(seed);
  const std::string name = seed->name();
  g.rename_value(seed, g.unique_name(name + ".unscaled"));
  Node* n = g.add_node("ScaleSeed", {scale}, {name}, kOtterDomain, first_user(g, seed));
  n->set_attr("k", Attribute(k));
  infer_node(*n);
  g.replace_all_uses(seed, n->output(0));
  g.remove_value(seed);
}

// An optimizer that ran before scaling was on unscales by a constant 1: it now reads 1/S from
// LossScaleInverse, which takes the constant's name and place (right after the finite check), as
// when the optimizer runs after this pass.
void unscale_existing_optimizer(Graph& g, Value* scale) {
  Node* gs = find_apply_node(g, "GradScale");
  if (!gs) return;
  Value* one = gs->input(0);
  OTTER_CHECK(one->kind() == ValueKind::kInitializer, "loss-scale: the optimizer's unscale '", one->name(),
              "' is not the constant 1");
  const std::string name = one->name();
  std::vector<Node*> nodes = g.node_list();
  auto after_check = std::find(nodes.begin(), nodes.end(), find_apply_node(g, "AllFinite"));
  Node* before = after_check != nodes.end() && after_check + 1 != nodes.end() ? *(after_check + 1) : gs;
  Node* inv = g.add_node("LossScaleInverse", {scale}, {g.unique_name(name + ".scaled")}, kOtterDomain, before);
  inv->set_program(Program::kApply);
  infer_node(*inv);
  gs->set_input(0, inv->output(0));
  if (one->uses().empty()) {
    g.remove_value(one);
    g.rename_value(inv->output(0), name);
  }
}

void add_scale_update(Graph& g, Value* scale, const LossScaleOptions& o) {
  Value* good = g.add_state(g.unique_name(scale->name() + ".good_steps"), Tensor::scalar<int64_t>(0));
  std::vector<Value*> ins{scale, good};
  Node* all_finite = find_apply_node(g, "AllFinite");
  if (all_finite) ins.push_back(all_finite->output(0));
  Node* u = g.add_node("LossScaleUpdate", ins,
                       {g.unique_name(scale->name() + ".new"), g.unique_name(good->name() + ".new")}, kOtterDomain);
  u->set_program(Program::kApply);
  u->set_attr("growth", Attribute(static_cast<float>(o.growth)));
  u->set_attr("backoff", Attribute(static_cast<float>(o.backoff)));
  u->set_attr("interval", Attribute(o.interval));
  u->set_attr("min_scale", Attribute(kMinLossScale));
  u->set_attr("max_scale", Attribute(kMaxLossScale));
  infer_node(*u);
  g.state_updates[scale] = u->output(0);
  g.state_updates[good] = u->output(1);
}

}  // namespace

LossScaleStats loss_scale(Graph& g, const LossScaleOptions& o) {
  LossScaleStats st;
  OTTER_CHECK(o.mode == "dynamic" || o.mode == "static" || o.mode == "off",
              "loss-scale: mode must be dynamic, static or off, got '", o.mode, "'");
  if (o.mode == "off") return st;
  OTTER_CHECK(o.init > 0 && std::isfinite(o.init), "loss-scale: init must be a positive number, got ", o.init);
  OTTER_CHECK(o.growth >= 1, "loss-scale: growth must be >= 1, got ", o.growth);
  OTTER_CHECK(o.backoff > 0 && o.backoff < 1, "loss-scale: backoff must be in (0, 1), got ", o.backoff);
  OTTER_CHECK(o.interval >= 1, "loss-scale: interval must be >= 1, got ", o.interval);
  OTTER_CHECK(g.loss_seed, "loss-scale: the graph has no backward seed (run autodiff first)");
  OTTER_CHECK(!g.loss_scale, "loss-scale: the graph is already scaled by '", g.loss_scale->name(), "'");
  g.opset_imports.emplace(kOtterDomain, 1);
  const float init = std::clamp(static_cast<float>(o.init), kMinLossScale, kMaxLossScale);
  Value* scale = g.add_state(g.unique_name("loss_scale"), Tensor::scalar<float>(init));
  g.loss_scale = scale;
  ++st.scale_state;
  scale_seed(g, scale);
  ++st.seed_scaled;
  unscale_existing_optimizer(g, scale);
  if (o.mode == "dynamic") {
    add_scale_update(g, scale, o);
    ++st.scale_state;
  }
  return st;
}

std::string LossScalePass::summary() const {
  return "seed the backward pass with the loss scale S/K; unscale, skip on overflow and adapt S in the apply program";
}

std::vector<PassOption> LossScalePass::options() const {
  using T = PassOption::Type;
  return {
      {"mode", T::kString, "dynamic", "dynamic scaling, a fixed scale, or none", {"dynamic", "static", "off"}},
      {"init", T::kFloat, "65536", "initial (dynamic) or fixed (static) scale, clamped to [1, 2^24]", {}},
      {"growth", T::kFloat, "2", "factor after `interval` steps with finite gradients", {}},
      {"backoff", T::kFloat, "0.5", "factor after a step with an inf/NaN gradient (skipped)", {}},
      {"interval", T::kInt, "2000", "consecutive good steps before the scale grows", {}},
  };
}

void LossScalePass::run(Graph& g, PassContext&) {
  reset_counters();
  LossScaleOptions o;
  o.mode = opts_.get_string("mode", o.mode);
  o.init = opts_.get_float("init", o.init);
  o.growth = opts_.get_float("growth", o.growth);
  o.backoff = opts_.get_float("backoff", o.backoff);
  o.interval = opts_.get_int("interval", o.interval);
  auto st = loss_scale(g, o);
  count("scale_state", st.scale_state);
  count("seed_scaled", st.seed_scaled);
}

}  // namespace otter
