// loss-scale pass (see loss_scale.h).
#include "passes/loss_scale.h"

#include <algorithm>
#include <cmath>

#include "graph/error.h"
#include "graph/op_table.h"
#include "passes/backward_seed.h"

namespace otter {

namespace {

Node* find_apply_node(const Graph& g, const std::string& op) {
  for (const auto& n : g.nodes())
    if (n->program() == Program::kApply && n->domain() == kOtterDomain && n->op_type() == op) return n.get();
  return nullptr;
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
  // The step's finite flag, as the optimizer recorded it; when it has not run yet, it fills the input.
  const std::string finite = g.training_facts().finite;
  if (!finite.empty()) ins.push_back(g.value(finite));
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

const EnumNames<LossScaleMode>& enum_names(LossScaleMode) {
  static const EnumNames<LossScaleMode> names{
      {LossScaleMode::kDynamic, "dynamic"}, {LossScaleMode::kStatic, "static"}, {LossScaleMode::kOff, "off"}};
  return names;
}

const OptionTable<LossScaleOptions>& LossScaleOptions::table() {
  using S = LossScaleOptions;
  static const OptionTable<S> t{
      option("mode", &S::mode, "dynamic scaling, a fixed scale, or none").always(),
      option("init", &S::init, "initial (dynamic) or fixed (static) scale, clamped to [1, 2^24]").above(0).always(),
      option("growth", &S::growth, "factor after `interval` steps with finite gradients").at_least(1),
      option("backoff", &S::backoff, "factor after a step with an inf/NaN gradient (skipped)").above(0).below(1),
      option("interval", &S::interval, "consecutive good steps before the scale grows").at_least(1),
  };
  return t;
}

LossScaleStats loss_scale(Graph& g, const LossScaleOptions& o) {
  LossScaleStats st;
  LossScaleOptions::table().check(o, "loss-scale");
  if (o.mode == LossScaleMode::kOff) return st;
  OTTER_CHECK(g.loss_seed, "loss-scale: the graph has no backward seed (run autodiff first)");
  OTTER_CHECK(!g.loss_scale, "loss-scale: the graph is already scaled by '", g.loss_scale->name(), "'");
  g.opset_imports.emplace(kOtterDomain, 1);
  const float init = std::clamp(static_cast<float>(o.init), kMinLossScale, kMaxLossScale);
  Value* scale = g.add_state(g.unique_name("loss_scale"), Tensor::scalar<float>(init));
  g.loss_scale = scale;
  ++st.scale_state;
  update_backward_seed(g, "loss-scale");
  ++st.seed_scaled;
  unscale_existing_optimizer(g, scale);
  if (o.mode == LossScaleMode::kDynamic) {
    add_scale_update(g, scale, o);
    ++st.scale_state;
  }
  return st;
}

std::string LossScalePass::summary() const {
  return "seed the backward pass with the loss scale S/K; unscale, skip on overflow and adapt S in the apply program";
}

void LossScalePass::run(Graph& g, PassContext&) {
  reset_counters();
  auto st = loss_scale(g, opts_);
  count("scale_state", st.scale_state);
  count("seed_scaled", st.seed_scaled);
}

}  // namespace otter
