// BatchNorm training mode and parameter selection (see batchnorm_mode.h).
#include "passes/batchnorm_mode.h"

#include <algorithm>
#include <unordered_set>

#include "graph/error.h"
#include "graph/op_table.h"

namespace otter {
namespace {

bool in_training_mode(const Node& n) {
  if (n.opset() >= 14) return n.attr_i("training_mode", 0) != 0;
  for (int i = 1; i < n.num_outputs(); ++i)
    if (n.output(i)) return true;  // BatchNormalization-9 trains when the statistics are asked for
  return false;
}

// A copy of BatchNorm node n (inputs, attributes, opset, name) before n with the given outputs
// (empty names: absent), which then replaces n's Y.
Node* rebuild(Graph& g, Node* n, const std::vector<std::string>& outs, bool training) {
  Value* y = n->output(0);
  const std::string y_name = y->name();
  g.rename_value(y, g.unique_name(y_name + ".old"));
  std::vector<std::string> names = outs;
  names[0] = y_name;
  Node* bn = g.add_node("BatchNormalization", n->inputs(), names, "", n);
  bn->set_opset(n->opset());
  bn->set_name(n->name());
  for (const auto& [k, a] : n->attrs())
    if (k != "training_mode") bn->set_attr(k, a);
  if (training && n->opset() >= 14) bn->set_attr("training_mode", Attribute(int64_t{1}));
  infer_node(*bn);
  g.replace_all_uses(y, bn->output(0));
  return bn;
}

// Scalar constant of dtype t.
Value* scalar(Graph& g, const std::string& name, double v, DataType t) {
  Tensor s = t == DataType::kFloat64 ? Tensor::scalar<double>(v) : Tensor::scalar<float>(static_cast<float>(v));
  return g.add_initializer(g.unique_name(name), s, false);
}

Value* node1(Graph& g, const std::string& op, std::vector<Value*> in, const std::string& name,
             const std::vector<std::pair<std::string, Attribute>>& attrs = {}) {
  Node* n = g.add_node(op, in, {g.unique_name(name)});
  for (const auto& [k, a] : attrs) n->set_attr(k, a);
  infer_node(*n);
  return n->output(0);
}

// n/(n-1) and momentum/(n-1) for n the elements per channel of X: constants when X's shape is
// static (the session pins the batch), else computed from Size(X) when the step runs (otter-opt
// on an unpinned model; canonicalize folds them once the shape is known).
std::pair<Value*, Value*> unbias_factors(Graph& g, Node* bn, const std::string& base, double m, DataType t) {
  Value* x = bn->input(0);
  const Shape& s = x->shape();
  if (!s.rank_known || s.rank() < 2 || !s.dims[1].is_static())
    fail("batchnorm-mode: ", bn->describe(), " needs a known rank and channel count, got ", s.to_string());
  if (s.is_static()) {
    const double n = static_cast<double>(s.numel() / s.dims[1].value);
    if (n < 2)
      fail("batchnorm-mode: ", bn->describe(), " trains on ", n, " value per channel; PyTorch needs more than 1");
    return {scalar(g, base + ".unbias", n / (n - 1), t), scalar(g, base + ".momentum_unbias", m / (n - 1), t)};
  }
  Value* size = node1(g, "Cast", {node1(g, "Size", {x}, base + ".size")}, base + ".size_f",
                      {{"to", Attribute(static_cast<int64_t>(dtype_to_onnx(t)))}});
  Value* n = node1(g, "Div", {size, scalar(g, base + ".channels", static_cast<double>(s.dims[1].value), t)}, base + ".n");
  Value* n1 = node1(g, "Sub", {n, scalar(g, base + ".one", 1, t)}, base + ".n_minus_1");
  return {node1(g, "Div", {n, n1}, base + ".unbias"), node1(g, "Div", {scalar(g, base + ".m", m, t), n1}, base + ".momentum_unbias")};
}

// PyTorch's running_var from the ONNX one: var_out * n/(n-1) - var_old * momentum/(n-1), with n
// the elements per channel of X.
Value* unbiased_running_var(Graph& g, Node* bn, Value* var_out) {
  Value* var = bn->input(4);
  const double m = bn->attr_f("momentum", 0.9f);
  const std::string base = var->name();
  auto [unbias, momentum_unbias] = unbias_factors(g, bn, base, m, var->dtype());
  Value* a = node1(g, "Mul", {var_out, unbias}, base + ".scaled");
  Value* b = node1(g, "Mul", {var, momentum_unbias}, base + ".kept");
  return node1(g, "Sub", {a, b}, base + ".new");
}

// Whether v is a running statistic this pass may manage (an initializer or state, not computed).
bool statistic(const Value* v) { return v && (v->kind() == ValueKind::kInitializer || v->kind() == ValueKind::kState); }

void train_node(Graph& g, Node* n) {
  Value *mean = n->input(3), *var = n->input(4);
  for (Value* v : {mean, var}) {
    v->set_trainable(false);
    if (v->kind() != ValueKind::kState) g.set_kind(v, ValueKind::kState);
  }
  Node* bn = n;
  if (!in_training_mode(*n) || !n->output(1) || !n->output(2))
    bn = rebuild(
        g, n, {"", g.unique_name(mean->name() + ".batch_update"), g.unique_name(var->name() + ".batch_update")}, true);
  g.state_updates[mean] = bn->output(1);
  g.state_updates[var] = unbiased_running_var(g, bn, bn->output(2));
}

void freeze_node(Graph& g, Node* n) {
  Value *mean = n->input(3), *var = n->input(4);
  for (Value* v : {mean, var}) {
    v->set_trainable(false);
    g.state_updates.erase(v);
    if (v->kind() == ValueKind::kState) g.set_kind(v, ValueKind::kInitializer);
  }
  if (in_training_mode(*n)) rebuild(g, n, {""}, false);
}

// torch.onnx.export in eval mode deduplicates initializers with equal values: BatchNorms whose
// running statistics were equal (all zeros and ones before training) share one initializer, and the
// others read it through an Identity named after their own buffer. Each such BatchNorm gets its own
// copy, under the Identity's name (PyTorch's buffer name), so that its statistics can be state.
void own_statistics(Graph& g, Node* bn) {
  for (int i : {3, 4}) {
    Value* v = bn->input(i);
    Value* root = v;
    std::vector<Node*> chain;
    while (root && root->producer() && root->producer()->op_type() == "Identity" &&
           root->producer()->domain().empty()) {
      chain.push_back(root->producer());
      root = root->producer()->input(0);
    }
    if (chain.empty() || !root || root->kind() != ValueKind::kInitializer || v->uses().size() != 1) continue;
    const std::string name = v->name();
    Value* own = g.add_initializer(g.unique_name(name + ".own"), root->data().clone(), false);
    bn->set_input(i, own);
    g.remove_node(chain.front());
    g.rename_value(own, name);
  }
}

}  // namespace

int64_t batchnorm_mode(Graph& g, bool train) {
  int64_t changed = 0;
  for (Node* n : g.node_list())
    if (n->domain().empty() && n->op_type() == "BatchNormalization") own_statistics(g, n);
  for (Node* n : g.node_list()) {
    if (!n->domain().empty() || n->op_type() != "BatchNormalization") continue;
    if (!statistic(n->input(3)) || !statistic(n->input(4))) continue;
    train ? train_node(g, n) : freeze_node(g, n);
    ++changed;
  }
  g.remove_dead_nodes();
  return changed;
}

std::vector<std::string> freeze_unreachable(Graph& g, const std::string& loss) {
  // Values from which a differentiable path (float values, ops with gradients) reaches a target.
  std::unordered_set<const Value*> reaches;
  if (Value* l = g.find_value(loss))
    reaches.insert(l);
  else
    for (Value* o : g.outputs()) reaches.insert(o);
  const OpTable& table = OpTable::instance();
  std::vector<Node*> nodes = g.node_list();
  for (auto it = nodes.rbegin(); it != nodes.rend(); ++it) {
    Node* n = *it;
    if (table.get(*n).grad_kind == GradKind::kNoGradient) continue;
    bool live = false;
    for (Value* o : n->outputs()) live |= o && is_float(o->dtype()) && reaches.count(o);
    if (!live) continue;
    for (Value* in : n->inputs())
      if (in && is_float(in->dtype())) reaches.insert(in);
  }
  std::vector<std::string> frozen;
  for (Value* v : g.initializers())
    if (v->trainable() && !reaches.count(v)) {
      v->set_trainable(false);
      frozen.push_back(v->name());
    }
  return frozen;
}

const EnumNames<BatchNormMode>& enum_names(BatchNormMode) {
  static const EnumNames<BatchNormMode> names{{BatchNormMode::kTrain, "train"}, {BatchNormMode::kFrozen, "frozen"}};
  return names;
}

const OptionTable<BatchNormModeOptions>& BatchNormModeOptions::table() {
  using S = BatchNormModeOptions;
  static const OptionTable<S> t{
      option("mode", &S::mode, "train: as model.train() (batch statistics, momentum update); frozen: exported ones"),
  };
  return t;
}

std::string BatchNormModePass::summary() const {
  return "running statistics are never trainable; BatchNorm trains as model.train() or on frozen statistics";
}

void BatchNormModePass::run(Graph& g, PassContext&) {
  reset_counters();
  count("batchnorms", batchnorm_mode(g, opts_.mode == BatchNormMode::kTrain));
}

std::string FreezeUnreachablePass::summary() const {
  return "float initializers that no differentiable path takes to an output are not trained";
}

void FreezeUnreachablePass::run(Graph& g, PassContext&) {
  reset_counters();
  count("frozen", static_cast<int64_t>(freeze_unreachable(g, "").size()));
}

}  // namespace otter
