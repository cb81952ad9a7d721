// add-loss pass (see add_loss.h).
#include "passes/add_loss.h"

#include "graph/error.h"
#include "graph/op_table.h"

namespace otter {

namespace {

Node* add(Graph& g, const std::string& op, const std::vector<Value*>& ins, const std::string& out,
          std::map<std::string, Attribute> attrs = {}) {
  Node* n = g.add_node(op, ins, {g.unique_name(out)});
  for (auto& [k, a] : attrs) n->set_attr(k, a);
  infer_node(*n);
  return n;
}

Value* int_const(Graph& g, const std::string& name, const std::vector<int64_t>& v) {
  return g.add_initializer(g.unique_name(name), Tensor::from_vector<int64_t>({static_cast<int64_t>(v.size())}, v), false);
}

}  // namespace

const EnumNames<LossType>& enum_names(LossType) {
  static const EnumNames<LossType> names{{LossType::kCe, "ce"}, {LossType::kMse, "mse"}};
  return names;
}

const OptionTable<AddLossOptions>& AddLossOptions::table() {
  using S = AddLossOptions;
  static const OptionTable<S> t{
      option("type", &S::type, "loss function").always(),
      option("output", &S::output, "model output the loss reads (default: the first output)"),
      option("labels", &S::labels, "name of the labels graph input"),
  };
  return t;
}

Value* add_loss(Graph& g, const AddLossOptions& opts) {
  AddLossOptions::table().check(opts, "add-loss");
  OTTER_CHECK(!g.outputs().empty(), "add-loss: the graph has no outputs");
  Value* out = opts.output.empty() ? g.outputs()[0] : g.find_value(opts.output);
  if (!out) {
    std::string outs;
    for (Value* o : g.outputs()) outs += (outs.empty() ? "" : ", ") + o->name();
    fail("add-loss: no value '", opts.output, "' (graph outputs: ", outs, ")");
  }
  OTTER_CHECK(!g.has_value(opts.loss), "add-loss: the graph already has a value named '", opts.loss,
              "' (use --loss model:", opts.loss, " to train on it)");
  OTTER_CHECK(is_float(out->dtype()), "add-loss: output '", out->name(), "' is not float");
  const Shape& s = out->shape();
  OTTER_CHECK(s.rank_known, "add-loss: output '", out->name(), "' has unknown rank");
  Value* loss = nullptr;
  if (opts.type == LossType::kCe) {
    OTTER_CHECK(s.rank() >= 2, "add-loss{type=ce}: scores '", out->name(), "' must have a batch and a class axis, got ",
                s.to_string());
    std::vector<Dim> label_dims(s.dims.begin(), s.dims.end() - 1);
    Value* labels = g.find_value(opts.labels);
    if (labels) {
      OTTER_CHECK(labels->kind() == ValueKind::kInput, "add-loss: labels '", opts.labels, "' exists and is not a graph input");
      OTTER_CHECK(labels->dtype() == DataType::kInt64 || labels->dtype() == DataType::kInt32,
                  "add-loss{type=ce}: labels '", opts.labels, "' must be int64 or int32");
    } else {
      labels = g.add_input(opts.labels, DataType::kInt64, Shape(label_dims));
    }
    Value* scores = out;
    Value* lab = labels;
    if (s.rank() > 2) {
      const Dim& classes = s.dims.back();
      OTTER_CHECK(classes.is_static(), "add-loss{type=ce}: the class axis of '", out->name(), "' must be static");
      scores = add(g, "Reshape", {out, int_const(g, out->name() + ".flat_shape", {-1, classes.value})},
                   out->name() + ".flat")->output(0);
      lab = add(g, "Reshape", {labels, int_const(g, labels->name() + ".flat_shape", {-1})}, labels->name() + ".flat")->output(0);
    }
    loss = add(g, "SoftmaxCrossEntropyLoss", {scores, lab}, opts.loss, {{"reduction", Attribute("mean")}})->output(0);
  } else {
    Value* labels = g.find_value(opts.labels);
    if (labels) {
      OTTER_CHECK(labels->dtype() == out->dtype(), "add-loss{type=mse}: labels '", opts.labels, "' must be ",
                  dtype_name(out->dtype()));
    } else {
      labels = g.add_input(opts.labels, out->dtype(), s);
    }
    Value* diff = add(g, "Sub", {out, labels}, out->name() + ".err")->output(0);
    Value* sq = add(g, "Mul", {diff, diff}, out->name() + ".sqerr")->output(0);
    loss = add(g, "ReduceMean", {sq}, opts.loss, {{"keepdims", Attribute(int64_t{0})}})->output(0);
  }
  std::vector<Value*> outs{loss};
  for (Value* o : g.outputs()) outs.push_back(o);
  g.set_outputs(outs);
  return loss;
}

std::string AddLossPass::summary() const {
  return "append a cross-entropy or mean-squared-error loss as the scalar output 'loss'";
}

void AddLossPass::run(Graph& g, PassContext&) {
  reset_counters();
  add_loss(g, opts_);
  count("losses_added");
}

}  // namespace otter
