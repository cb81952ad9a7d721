// optimizer pass (see optimizer.h).
#include "passes/optimizer.h"

#include <set>

#include "graph/error.h"
#include "graph/op_table.h"

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

// What every parameter's update reads besides its own tensors.
struct UpdateInputs {
  Value *step, *lr, *gscale, *finite;
  double weight_decay, momentum;  // the options' values, or the update rule's defaults
};

// The update of parameter `p` from its accumulated gradient `acc`, with its moments as new state.
void add_update(Graph& g, Value* p, Value* acc, const OptimizerOptions& c, const UpdateInputs& in,
                OptimizerStats& st) {
  OTTER_CHECK(p->dtype() == DataType::kFloat32 || p->dtype() == DataType::kFloat64, "optimizer: parameter '",
              p->name(), "' must be a float32 master weight");
  Tensor zeros(p->dtype(), p->shape().static_dims());
  if (c.type == OptimizerType::kAdam || c.type == OptimizerType::kAdamW) {
    Value* m = g.add_state(g.unique_name(p->name() + ".exp_avg"), zeros);
    Value* v = g.add_state(g.unique_name(p->name() + ".exp_avg_sq"), zeros.clone());
    std::map<std::string, Attribute> a{{"beta1", Attribute(static_cast<float>(c.beta1))},
                                       {"beta2", Attribute(static_cast<float>(c.beta2))},
                                       {"eps", Attribute(static_cast<float>(c.eps))}};
    if (in.weight_decay) a["weight_decay"] = Attribute(static_cast<float>(in.weight_decay));
    if (c.type == OptimizerType::kAdamW) a["decoupled"] = Attribute(int64_t{1});
    std::vector<Value*> ins{p, acc, m, v, in.step, in.lr, in.gscale, in.finite};
    std::vector<std::string> outs{p->name() + ".new", m->name() + ".new", v->name() + ".new"};
    Node* u = apply_node(g, "AdamUpdate", ins, outs, a);
    g.state_updates[p] = u->output(0);
    g.state_updates[m] = u->output(1);
    g.state_updates[v] = u->output(2);
    st.state_tensors += 2;
  } else {
    std::map<std::string, Attribute> a;
    if (in.momentum) a["momentum"] = Attribute(static_cast<float>(in.momentum));
    if (c.nesterov) a["nesterov"] = Attribute(int64_t{1});
    if (in.weight_decay) a["weight_decay"] = Attribute(static_cast<float>(in.weight_decay));
    Value* mom = nullptr;
    if (in.momentum) {
      mom = g.add_state(g.unique_name(p->name() + ".momentum_buffer"), zeros);
      ++st.state_tensors;
    }
    std::vector<Value*> ins{p, acc, mom, in.lr, in.gscale, in.finite};
    std::vector<std::string> outs{p->name() + ".new", mom ? mom->name() + ".new" : ""};
    Node* u = apply_node(g, "SGDUpdate", ins, outs, a);
    g.state_updates[p] = u->output(0);
    if (mom) g.state_updates[mom] = u->output(1);
  }
  ++st.params_updated;
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

const EnumNames<OptimizerType>& enum_names(OptimizerType) {
  static const EnumNames<OptimizerType> names{{OptimizerType::kSgd, "sgd"},
                                              {OptimizerType::kMomentum, "momentum"},
                                              {OptimizerType::kAdam, "adam"},
                                              {OptimizerType::kAdamW, "adamw"}};
  return names;
}

const EnumNames<LrSchedule>& enum_names(LrSchedule) {
  static const EnumNames<LrSchedule> names{
      {LrSchedule::kConstant, "constant"}, {LrSchedule::kLinearWarmup, "linear-warmup"}, {LrSchedule::kCosine, "cosine"}};
  return names;
}

const OptionTable<OptimizerOptions>& OptimizerOptions::table() {
  using S = OptimizerOptions;
  static const OptionTable<S> t{
      option("type", &S::type, "update rule").always(),
      option("lr", &S::lr, "learning rate").above(0).always(),
      option("beta1", &S::beta1, "Adam beta1").at_least(0).below(1),
      option("beta2", &S::beta2, "Adam beta2").at_least(0).below(1),
      option("eps", &S::eps, "Adam epsilon").above(0),
      option("weight_decay", &S::weight_decay, "weight decay (decoupled for adamw)")
          .at_least(0).default_text("0.01 (adamw), 0"),
      option("momentum", &S::momentum, "SGD momentum").at_least(0).default_text("0.9 (momentum), 0"),
      option("nesterov", &S::nesterov, "Nesterov momentum"),
      option("clip_norm", &S::clip_norm, "clip gradients to this global norm (0: off)").at_least(0),
      option("schedule", &S::schedule, "learning-rate schedule"),
      option("warmup", &S::warmup, "linear warm-up steps").at_least(0),
      option("total", &S::total, "total optimizer steps (for decaying schedules)").at_least(0),
      option("min_lr", &S::min_lr, "final learning rate of decaying schedules").at_least(0),
  };
  return t;
}

OptimizerStats add_optimizer(Graph& g, const OptimizerOptions& o) {
  OptimizerOptions::table().check(o, "optimizer");
  OTTER_CHECK(o.schedule == LrSchedule::kConstant || o.total > 0 || o.warmup > 0, "optimizer: schedule '",
              enum_name(o.schedule), "' needs total (the number of optimizer steps)");
  const OptimizerOptions& c = o;
  // The update rule's own defaults for what the options leave unset.
  const double weight_decay = o.weight_decay.value_or(o.type == OptimizerType::kAdamW ? 0.01 : 0.0);
  const double momentum = o.momentum.value_or(o.type == OptimizerType::kMomentum ? 0.9 : 0.0);
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
                                            {"schedule", Attribute(enum_name(c.schedule))}};
  if (c.warmup) lr_attrs["warmup"] = Attribute(c.warmup);
  if (c.total) lr_attrs["total"] = Attribute(c.total);
  if (c.min_lr) lr_attrs["min_lr"] = Attribute(static_cast<float>(c.min_lr));
  Value* lr = apply_node(g, "LearningRate", {step}, {"lr"}, lr_attrs)->output(0);

  const UpdateInputs in{step, lr, gscale, finite, weight_decay, momentum};
  for (auto& [p, acc] : g.gradients) add_update(g, p, acc, c, in, st);
  Value* step_new = apply_node(g, "StepCount", {step, finite}, {step->name() + ".new"})->output(0);
  g.state_updates[step] = step_new;
  wire_loss_scale_update(g, finite);
  // Metrics the apply program reports (the executor of each program returns the outputs it makes).
  g.add_output(lr);
  g.add_output(finite);
  TrainingFacts facts = g.training_facts();
  facts.learning_rate = lr->name();
  facts.finite = finite->name();
  g.set_training_facts(facts);
  return st;
}

std::string OptimizerPass::summary() const {
  return "append the apply program: finite check, unscale and clipping, torch.optim update, step count";
}

std::string OptimizerPass::unmet_precondition(const Graph& g) const { return optimizer_precondition(g); }

void OptimizerPass::run(Graph& g, PassContext&) {
  auto st = add_optimizer(g, opts_);
  set_counters({{"params_updated", st.params_updated}, {"state_tensors", st.state_tensors}});
}

}  // namespace otter
