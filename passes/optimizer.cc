// optimizer pass (see optimizer.h).
#include "passes/optimizer.h"

#include <set>

#include "graph/error.h"
#include "graph/op_table.h"
#include "passes/mixed_precision.h"

namespace otter {

namespace {

Node* apply_node(Graph& g, const std::string& op, const std::vector<Value*>& ins, const std::vector<std::string>& outs,
                 std::map<std::string, Attribute> attrs = {}) {
  std::vector<std::string> names;
  for (const auto& o : outs) names.push_back(o.empty() ? "" : g.unique_name(o));
  Node* n = g.add_node(op, ins, names, kOtterDomain);
  n->set_program(Program::kApply);
  for (auto& [k, a] : attrs) n->set_attr(k, a);
  infer_node(*n);
  return n;
}

// Frozen parameters never change: their half copies become constants. Returns how many.
int64_t fold_frozen_weight_casts(Graph& g) {
  std::set<const Value*> updated;
  for (const auto& [p, acc] : g.gradients) updated.insert(p);
  int64_t n = 0;
  for (Value* v : g.initializers())
    if (v->trainable() && !updated.count(v)) n += hoist_weight_cast(g, v, /*frozen=*/true) != nullptr;
  return n;
}

// Appends the weight's half copy (when it has one) as the update's last input and output.
void with_half_copy(Value* half, std::vector<Value*>& ins, std::vector<std::string>& outs) {
  if (!half) return;
  ins.push_back(half);
  outs.push_back(half->name() + ".new");
}

// A LossScaleUpdate that loss-scale placed before the optimizer existed reads this finite check
// and moves to the end of the apply program, where loss-scale puts it when it runs second.
void wire_loss_scale_update(Graph& g, Value* finite) {
  for (Node* n : g.node_list()) {
    if (n->op_type() != "LossScaleUpdate" || n->has_input(2)) continue;
    n->set_input(2, finite);
    g.move_before(n, nullptr);
  }
}

}  // namespace

std::string optimizer_precondition(const Graph& g) {
  if (g.gradients.empty()) return "the graph has no gradients: run autodiff, then grad-accumulation first";
  for (const auto& [p, acc] : g.gradients)
    if (!acc || acc->kind() != ValueKind::kState)
      return str_cat("the gradient of '", p->name(), "' is not accumulated state: run grad-accumulation first");
  for (const auto& n : g.nodes())
    if (n->program() == Program::kApply && n->op_type() != "LossScaleUpdate")
      return str_cat("the graph already has an optimizer (", n->describe(), ")");
  return "";
}

OptimizerStats add_optimizer(Graph& g, const OptimizerConfig& cfg) {
  OptimizerConfig c = cfg;
  OTTER_CHECK(c.type == "sgd" || c.type == "momentum" || c.type == "adam" || c.type == "adamw",
              "optimizer: type must be sgd, momentum, adam or adamw, got '", c.type, "'");
  OTTER_CHECK(c.lr > 0, "optimizer: lr must be positive, got ", c.lr);
  OTTER_CHECK(c.schedule == "constant" || c.schedule == "linear-warmup" || c.schedule == "cosine",
              "optimizer: schedule must be constant, linear-warmup or cosine, got '", c.schedule, "'");
  OTTER_CHECK(c.schedule == "constant" || c.total > 0 || c.warmup > 0, "optimizer: schedule '", c.schedule,
              "' needs total (the number of optimizer steps)");
  if (c.weight_decay < 0) c.weight_decay = c.type == "adamw" ? 0.01 : 0.0;
  if (c.momentum < 0) c.momentum = c.type == "momentum" ? 0.9 : 0.0;
  std::string unmet = optimizer_precondition(g);
  OTTER_CHECK(unmet.empty(), "optimizer: ", unmet);
  g.opset_imports.emplace(kOtterDomain, 1);
  OptimizerStats st;

  std::vector<Value*> accs;
  for (auto& [p, acc] : g.gradients) accs.push_back(acc);
  Value* finite = apply_node(g, "AllFinite", accs, {"found.finite"})->output(0);
  Value* inv_scale;
  if (g.loss_scale) {
    inv_scale = apply_node(g, "LossScaleInverse", {g.loss_scale}, {"loss_scale.inv"})->output(0);
  } else {
    inv_scale = g.add_initializer(g.unique_name("loss_scale.inv"), Tensor::scalar<float>(1.f), false);
  }
  std::vector<Value*> gs_inputs{inv_scale};
  if (c.clip_norm > 0) gs_inputs.push_back(apply_node(g, "GlobalNormSq", accs, {"grad.norm_sq"})->output(0));
  std::map<std::string, Attribute> gs_attrs;
  if (c.clip_norm > 0) gs_attrs["max_norm"] = Attribute(static_cast<float>(c.clip_norm));
  Value* gscale = apply_node(g, "GradScale", gs_inputs, {"grad.scale"}, gs_attrs)->output(0);

  Value* step = g.add_state(g.unique_name("optimizer.step"), Tensor::scalar<int64_t>(0));
  ++st.state_tensors;
  std::map<std::string, Attribute> lr_attrs{{"lr", Attribute(static_cast<float>(c.lr))},
                                            {"schedule", Attribute(c.schedule)}};
  if (c.warmup) lr_attrs["warmup"] = Attribute(c.warmup);
  if (c.total) lr_attrs["total"] = Attribute(c.total);
  if (c.min_lr) lr_attrs["min_lr"] = Attribute(static_cast<float>(c.min_lr));
  Value* lr = apply_node(g, "LearningRate", {step}, {"lr"}, lr_attrs)->output(0);

  for (auto& [p, acc] : g.gradients) {
    OTTER_CHECK(p->dtype() == DataType::kFloat32 || p->dtype() == DataType::kFloat64, "optimizer: parameter '",
                p->name(), "' must be a float32 master weight");
    Tensor zeros(p->dtype(), p->shape().static_dims());
    Value* half = hoist_weight_cast(g, p);  // the micro-step program's half copy, now state
    if (c.type == "adam" || c.type == "adamw") {
      Value* m = g.add_state(g.unique_name(p->name() + ".exp_avg"), zeros);
      Value* v = g.add_state(g.unique_name(p->name() + ".exp_avg_sq"), zeros.clone());
      std::map<std::string, Attribute> a{{"beta1", Attribute(static_cast<float>(c.beta1))},
                                         {"beta2", Attribute(static_cast<float>(c.beta2))},
                                         {"eps", Attribute(static_cast<float>(c.eps))}};
      if (c.weight_decay) a["weight_decay"] = Attribute(static_cast<float>(c.weight_decay));
      if (c.type == "adamw") a["decoupled"] = Attribute(int64_t{1});
      std::vector<Value*> ins{p, acc, m, v, step, lr, gscale, finite};
      std::vector<std::string> outs{p->name() + ".new", m->name() + ".new", v->name() + ".new"};
      with_half_copy(half, ins, outs);
      Node* u = apply_node(g, "AdamUpdate", ins, outs, a);
      g.state_updates[p] = u->output(0);
      g.state_updates[m] = u->output(1);
      g.state_updates[v] = u->output(2);
      if (half) g.state_updates[half] = u->output(3);
      st.state_tensors += 2;
    } else {
      std::map<std::string, Attribute> a;
      if (c.momentum) a["momentum"] = Attribute(static_cast<float>(c.momentum));
      if (c.nesterov) a["nesterov"] = Attribute(int64_t{1});
      if (c.weight_decay) a["weight_decay"] = Attribute(static_cast<float>(c.weight_decay));
      Value* mom = nullptr;
      if (c.momentum) {
        mom = g.add_state(g.unique_name(p->name() + ".momentum_buffer"), zeros);
        ++st.state_tensors;
      }
      std::vector<Value*> ins{p, acc, mom, lr, gscale, finite};
      std::vector<std::string> outs{p->name() + ".new", mom ? mom->name() + ".new" : ""};
      with_half_copy(half, ins, outs);
      Node* u = apply_node(g, "SGDUpdate", ins, outs, a);
      g.state_updates[p] = u->output(0);
      if (mom) g.state_updates[mom] = u->output(1);
      if (half) g.state_updates[half] = u->output(2);
    }
    ++st.params_updated;
    st.half_copies += half != nullptr;
  }
  Value* step_new = apply_node(g, "StepCount", {step, finite}, {step->name() + ".new"})->output(0);
  g.state_updates[step] = step_new;
  wire_loss_scale_update(g, finite);
  st.half_copies += fold_frozen_weight_casts(g);
  // Metrics the apply program reports (the executor of each program returns the outputs it makes).
  g.add_output(lr);
  g.add_output(finite);
  return st;
}

std::string OptimizerPass::summary() const {
  return "append the apply program: finite check, unscale and clipping, torch.optim update, step count";
}

std::vector<PassOption> OptimizerPass::options() const {
  using T = PassOption::Type;
  return {
      {"type", T::kString, "adamw", "update rule", {"sgd", "momentum", "adam", "adamw"}},
      {"lr", T::kFloat, "1e-3", "learning rate", {}},
      {"beta1", T::kFloat, "0.9", "Adam beta1", {}},
      {"beta2", T::kFloat, "0.999", "Adam beta2", {}},
      {"eps", T::kFloat, "1e-8", "Adam epsilon", {}},
      {"weight_decay", T::kFloat, "0.01 (adamw), 0", "weight decay (decoupled for adamw)", {}},
      {"momentum", T::kFloat, "0.9 (momentum), 0", "SGD momentum", {}},
      {"nesterov", T::kBool, "false", "Nesterov momentum", {}},
      {"clip_norm", T::kFloat, "0", "clip gradients to this global norm (0: off)", {}},
      {"schedule", T::kString, "constant", "learning-rate schedule", {"constant", "linear-warmup", "cosine"}},
      {"warmup", T::kInt, "0", "linear warm-up steps", {}},
      {"total", T::kInt, "0", "total optimizer steps (for decaying schedules)", {}},
      {"min_lr", T::kFloat, "0", "final learning rate of decaying schedules", {}},
  };
}

std::string OptimizerPass::unmet_precondition(const Graph& g) const { return optimizer_precondition(g); }

void OptimizerPass::run(Graph& g, PassContext&) {
  reset_counters();
  OptimizerConfig c;
  c.type = opts_.get_string("type", c.type);
  c.lr = opts_.get_float("lr", c.lr);
  c.beta1 = opts_.get_float("beta1", c.beta1);
  c.beta2 = opts_.get_float("beta2", c.beta2);
  c.eps = opts_.get_float("eps", c.eps);
  c.weight_decay = opts_.get_float("weight_decay", c.weight_decay);
  c.momentum = opts_.get_float("momentum", c.momentum);
  c.nesterov = opts_.get_bool("nesterov", c.nesterov);
  c.clip_norm = opts_.get_float("clip_norm", c.clip_norm);
  c.schedule = opts_.get_string("schedule", c.schedule);
  c.warmup = opts_.get_int("warmup", c.warmup);
  c.total = opts_.get_int("total", c.total);
  c.min_lr = opts_.get_float("min_lr", c.min_lr);
  auto st = add_optimizer(g, c);
  count("params_updated", st.params_updated);
  count("state_tensors", st.state_tensors);
  count("half_copies", st.half_copies);
}

}  // namespace otter
