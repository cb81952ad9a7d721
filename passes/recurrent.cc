// Unrolling of RNN, GRU and LSTM (see recurrent.h): the node's attributes and inputs, the builder
// that emits primitive ops before the node, the three cells, and the assembly of Y, Y_h, Y_c.
#include "passes/recurrent.h"

#include <algorithm>
#include <cctype>
#include <map>
#include <optional>

#include "graph/dtype.h"
#include "graph/error.h"
#include "graph/op_table.h"

namespace otter {

namespace {

enum class Cell : uint8_t { kRnn, kGru, kLstm };

struct Activation {
  std::string name;  // canonical spelling
  float alpha = 0, beta = 0;
};

// An activation the ONNX recurrent ops accept: whether it reads alpha / beta, and their defaults.
struct ActivationDef {
  const char* name;
  bool has_alpha, has_beta;
  float alpha, beta;
};

constexpr ActivationDef kActivations[] = {
    {"Relu", false, false, 0, 0},           {"Tanh", false, false, 0, 0},     {"Sigmoid", false, false, 0, 0},
    {"Softsign", false, false, 0, 0},       {"Softplus", false, false, 0, 0}, {"LeakyRelu", true, false, 0.01f, 0},
    {"ThresholdedRelu", true, false, 1, 0}, {"Elu", true, false, 1, 0},       {"HardSigmoid", true, true, 0.2f, 0.5f},
    {"Affine", true, true, 1, 0},           {"ScaledTanh", true, true, 1, 1},
};

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// The activations of every direction, `per` of them each (f; f, g; f, g, h), from the attributes.
std::vector<Activation> read_activations(const Node& n, Cell cell, int64_t dirs) {
  static const std::vector<std::string> kDefaults[] = {{"Tanh"}, {"Sigmoid", "Tanh"}, {"Sigmoid", "Tanh", "Tanh"}};
  const std::vector<std::string>& dflt = kDefaults[static_cast<int>(cell)];
  const size_t per = dflt.size();
  std::vector<std::string> names;
  if (const Attribute* a = n.find_attr("activations")) names = a->strings();
  if (names.empty()) names = dflt;
  if (names.size() == per && dirs == 2) {
    const std::vector<std::string> one = names;  // the same functions for both directions
    names.insert(names.end(), one.begin(), one.end());
  }
  if (names.size() != per * static_cast<size_t>(dirs))
    fail(n.describe(), ": attribute 'activations' must name ", per, " function(s) per direction (", per * dirs,
         " in all), got ", names.size());
  const std::vector<float> alphas = n.attr_floats("activation_alpha"), betas = n.attr_floats("activation_beta");
  size_t ai = 0, bi = 0;
  std::vector<Activation> out;
  for (const std::string& name : names) {
    const ActivationDef* def = nullptr;
    for (const ActivationDef& d : kActivations)
      if (lower(d.name) == lower(name)) def = &d;
    if (!def)
      fail(n.describe(), ": activation '", name,
           "' is not one of Relu, Tanh, Sigmoid, Affine, LeakyRelu, ThresholdedRelu, ScaledTanh, HardSigmoid, Elu, "
           "Softsign, Softplus");
    Activation a{def->name, def->alpha, def->beta};
    if (def->has_alpha && ai < alphas.size()) a.alpha = alphas[ai++];
    if (def->has_beta && bi < betas.size()) a.beta = betas[bi++];
    out.push_back(a);
  }
  return out;
}

// The recurrent state of one direction: h and (LSTM) c; nullptr stands for zeros.
struct State {
  Value* h = nullptr;
  Value* c = nullptr;
};

// One direction's weights, each without the direction axis.
struct DirWeights {
  Value* r = nullptr;     // [G*H, H]
  Value* r_zr = nullptr;  // GRU (linear_before_reset 0): R's update and reset rows [2H, H]
  Value* r_h = nullptr;   // GRU (linear_before_reset 0): R's hidden rows [H, H]
  Value* rb = nullptr;    // GRU (linear_before_reset 1): R's bias [3H]
  Value* p_i = nullptr;   // LSTM peepholes [H]
  Value* p_o = nullptr;
  Value* p_f = nullptr;
  State init;
  std::vector<Activation> acts;
};

class Unroller {
 public:
  Unroller(Graph& g, Node* n);
  void run();

 private:
  // ---- builder: nodes go before n_, type-inferred; nullptr operands stand for zeros
  std::vector<Value*> emit_multi(const std::string& op, const std::vector<Value*>& ins, int outs,
                                 const std::map<std::string, Attribute>& attrs = {});
  Value* emit(const std::string& op, const std::vector<Value*>& ins,
              const std::map<std::string, Attribute>& attrs = {}) {
    return emit_multi(op, ins, 1, attrs)[0];
  }
  Value* ints(const std::vector<int64_t>& v);
  Value* scalar(double v);
  Value* add(Value* a, Value* b) { return !a ? b : !b ? a : emit("Add", {a, b}); }
  Value* mul(Value* a, Value* b) { return (a && b) ? emit("Mul", {a, b}) : nullptr; }
  Value* sub(Value* a, Value* b) { return emit("Sub", {a, b}); }
  Value* gemm(Value* h, Value* w, Value* c);
  Value* squeeze(Value* v, int64_t axis) { return emit("Squeeze", {v, ints({axis})}); }
  std::vector<Value*> split(Value* v, int64_t axis, const std::vector<int64_t>& sizes);
  std::vector<Value*> per_direction(Value* v, int64_t axis);
  Value* activate(const Activation& a, Value* x);
  Value* clip(Value* x) { return clip_ ? emit("Clip", {x, scalar(-*clip_), scalar(*clip_)}) : x; }

  // ---- the unrolling
  void read_attributes();
  std::vector<Value*> project_inputs(Value* w, Value* b, bool fold_rb);
  DirWeights direction_weights(int64_t d, const std::vector<Value*>& r, const std::vector<Value*>& b,
                               const std::vector<Value*>& p, const std::vector<Value*>& h0,
                               const std::vector<Value*>& c0);
  void build_masks();
  State step(const DirWeights& w, const State& s, Value* x);
  State rnn_step(const DirWeights& w, const State& s, Value* x);
  State gru_step(const DirWeights& w, const State& s, Value* x);
  State lstm_step(const DirWeights& w, const State& s, Value* x);
  void assemble_outputs(const std::vector<std::vector<Value*>>& ys, const std::vector<State>& last);
  void replace_output(int i, Value* v);
  bool wanted(int i) const;

  Graph& g_;
  Node* n_;
  std::string base_;
  int counter_ = 0;
  Cell cell_ = Cell::kRnn;
  DataType dtype_ = DataType::kFloat32;
  int64_t gates_ = 1, seq_ = 0, hidden_ = 0, dirs_ = 1, layout_ = 0;
  bool reverse_only_ = false, linear_before_reset_ = false;
  std::optional<float> clip_;
  std::vector<Activation> acts_;
  std::map<std::vector<int64_t>, Value*> int_constants_;  // one initializer per distinct shape or axes list
  std::vector<Value*> masks_;  // per time step, [N,1] of dtype_; empty when every sequence is full
};

Unroller::Unroller(Graph& g, Node* n) : g_(g), n_(n) {
  base_ = n->name();
  for (Value* o : n->outputs())
    if (base_.empty() && o) base_ = o->name();
  if (base_.empty()) base_ = n->op_type();
}

std::vector<Value*> Unroller::emit_multi(const std::string& op, const std::vector<Value*>& ins, int outs,
                                         const std::map<std::string, Attribute>& attrs) {
  std::vector<std::string> names;
  for (int i = 0; i < outs; ++i) names.push_back(g_.unique_name(str_cat(base_, ".u", counter_++)));
  Node* m = g_.add_node(op, ins, names, "", n_);
  for (const auto& [k, a] : attrs) m->set_attr(k, a);
  infer_node(*m);
  return m->outputs();
}

Value* Unroller::ints(const std::vector<int64_t>& v) {
  Value*& c = int_constants_[v];
  if (!c)
    c = g_.add_initializer(g_.unique_name(str_cat(base_, ".c", counter_++)),
                           Tensor::from_vector<int64_t>({static_cast<int64_t>(v.size())}, v), false);
  return c;
}

Value* Unroller::scalar(double v) {
  const std::string name = g_.unique_name(str_cat(base_, ".c", counter_++));
  if (dtype_ == DataType::kFloat64) return g_.add_initializer(name, Tensor::scalar<double>(v), false);
  Value* f = g_.add_initializer(name, Tensor::scalar<float>(static_cast<float>(v)), false);
  if (dtype_ == DataType::kFloat32) return f;
  return emit("Cast", {f}, {{"to", Attribute(int64_t{dtype_to_onnx(dtype_)})}});
}

// h R^T + c, or c alone when h is zero.
Value* Unroller::gemm(Value* h, Value* w, Value* c) {
  if (!h) return c;
  std::vector<Value*> ins = {h, w};
  if (c) ins.push_back(c);
  return emit("Gemm", ins, {{"transB", Attribute(int64_t{1})}});
}

std::vector<Value*> Unroller::split(Value* v, int64_t axis, const std::vector<int64_t>& sizes) {
  return emit_multi("Split", {v, ints(sizes)}, static_cast<int>(sizes.size()), {{"axis", Attribute(axis)}});
}

// The direction slices of an input whose axis `axis` is the direction (nullptrs when it is absent).
std::vector<Value*> Unroller::per_direction(Value* v, int64_t axis) {
  if (!v) return std::vector<Value*>(dirs_, nullptr);
  if (dirs_ == 1) return {squeeze(v, axis)};
  std::vector<Value*> parts = split(v, axis, {1, 1});
  return {squeeze(parts[0], axis), squeeze(parts[1], axis)};
}

Value* Unroller::activate(const Activation& a, Value* x) {
  const std::string& f = a.name;
  if (f == "Relu" || f == "Tanh" || f == "Sigmoid" || f == "Softplus" || f == "Softsign") return emit(f, {x});
  if (f == "LeakyRelu" || f == "ThresholdedRelu" || f == "Elu") return emit(f, {x}, {{"alpha", Attribute(a.alpha)}});
  if (f == "HardSigmoid") return emit(f, {x}, {{"alpha", Attribute(a.alpha)}, {"beta", Attribute(a.beta)}});
  if (f == "Affine") return add(emit("Mul", {x, scalar(a.alpha)}), scalar(a.beta));
  // ScaledTanh: alpha * tanh(beta * x).
  return emit("Mul", {emit("Tanh", {emit("Mul", {x, scalar(a.beta)})}), scalar(a.alpha)});
}

void Unroller::read_attributes() {
  const Node& n = *n_;
  cell_ = n.op_type() == "RNN" ? Cell::kRnn : n.op_type() == "GRU" ? Cell::kGru : Cell::kLstm;
  gates_ = cell_ == Cell::kRnn ? 1 : cell_ == Cell::kGru ? 3 : 4;
  const std::string dir = n.attr_s("direction", "forward");
  dirs_ = dir == "bidirectional" ? 2 : 1;
  reverse_only_ = dir == "reverse";
  layout_ = n.attr_i("layout", 0);
  linear_before_reset_ = cell_ == Cell::kGru && n.attr_i("linear_before_reset", 0) != 0;
  if (n.has_attr("clip")) clip_ = n.attr_f("clip", 0);
  if (cell_ == Cell::kLstm && n.attr_i("input_forget", 0) != 0)
    fail(n.describe(), ": input_forget=1 (coupled input and forget gates) is not supported");
  Value* x = n.input(0);
  dtype_ = x->dtype();
  const int64_t time_axis = layout_ == 0 ? 0 : 1;
  if (!x->shape().rank_known || x->shape().rank() != 3)
    fail(n.describe(), ": X must have rank 3 to unroll the recurrence, got ", x->shape().to_string());
  const Dim t = x->shape().dims[time_axis];
  if (!t.is_static() || t.value == 0)
    fail(n.describe(), ": the sequence length (dimension ", time_axis, " of X '", x->name(), "', ", t.to_string(),
         ") must be static and positive: canonicalize unrolls ", n.op_type(),
         " over it (export the model with a fixed sequence length)");
  seq_ = t.value;
  for (int i : {1, 2})
    if (!n.input(i)->shape().is_static())
      fail(n.describe(), ": input ", i, " ('", n.input(i)->name(), "') must have a static shape, got ",
           n.input(i)->shape().to_string());
  hidden_ = n.input(2)->shape().dims[2].value;
  acts_ = read_activations(n, cell_, dirs_);
}

// X W^T + Wb (+ Rb unless GRU's linear_before_reset keeps it apart), cut into the time steps
// ([N, G*H] each).
std::vector<Value*> Unroller::project_inputs(Value* w, Value* b, bool fold_rb) {
  const int64_t gh = gates_ * hidden_, time_axis = layout_ == 0 ? 0 : 1;
  Value* xp = emit("MatMul", {n_->input(0), emit("Transpose", {w}, {{"perm", Attribute(std::vector<int64_t>{1, 0})}})});
  if (b) {
    std::vector<Value*> wb_rb = split(b, 0, {gh, gh});
    xp = add(xp, fold_rb ? add(wb_rb[0], wb_rb[1]) : wb_rb[0]);
  }
  if (seq_ == 1) return {squeeze(xp, time_axis)};
  std::vector<Value*> steps = split(xp, time_axis, std::vector<int64_t>(seq_, 1));
  for (Value*& s : steps) s = squeeze(s, time_axis);
  return steps;
}

DirWeights Unroller::direction_weights(int64_t d, const std::vector<Value*>& r, const std::vector<Value*>& b,
                                       const std::vector<Value*>& p, const std::vector<Value*>& h0,
                                       const std::vector<Value*>& c0) {
  DirWeights w;
  const int64_t per = static_cast<int64_t>(acts_.size()) / dirs_;
  w.acts.assign(acts_.begin() + d * per, acts_.begin() + (d + 1) * per);
  w.r = r[d];
  w.init = {h0[d], c0[d]};
  if (cell_ == Cell::kGru && !linear_before_reset_) {
    std::vector<Value*> parts = split(r[d], 0, {2 * hidden_, hidden_});
    w.r_zr = parts[0];
    w.r_h = parts[1];
  }
  if (cell_ == Cell::kGru && linear_before_reset_ && b[d]) w.rb = split(b[d], 0, {3 * hidden_, 3 * hidden_})[1];
  if (p[d]) {
    std::vector<Value*> parts = split(p[d], 0, {hidden_, hidden_, hidden_});
    w.p_i = parts[0];
    w.p_o = parts[1];
    w.p_f = parts[2];
  }
  return w;
}

// Step t of a sequence counts when t < sequence_lens[n]: masks_[t] = Cast(t < sequence_lens)[:, None].
void Unroller::build_masks() {
  Value* lens = n_->input(4);
  if (!lens) return;
  if (lens->kind() == ValueKind::kInitializer && !lens->trainable() && lens->has_data()) {
    const std::vector<int64_t> v = lens->data().to_int64_vector();
    if (std::all_of(v.begin(), v.end(), [&](int64_t l) { return l == seq_; })) return;
  }
  for (int64_t t = 0; t < seq_; ++t) {
    Tensor tt = lens->dtype() == DataType::kInt32 ? Tensor::scalar<int32_t>(static_cast<int32_t>(t))
                                                  : Tensor::scalar<int64_t>(t);
    Value* tv = g_.add_initializer(g_.unique_name(str_cat(base_, ".c", counter_++)), tt, false);
    Value* on = emit("Cast", {emit("Less", {tv, lens})}, {{"to", Attribute(int64_t{dtype_to_onnx(dtype_)})}});
    masks_.push_back(emit("Unsqueeze", {on, ints({1})}));
  }
}

State Unroller::step(const DirWeights& w, const State& s, Value* x) {
  switch (cell_) {
    case Cell::kRnn:
      return rnn_step(w, s, x);
    case Cell::kGru:
      return gru_step(w, s, x);
    default:
      return lstm_step(w, s, x);
  }
}

// h' = f(x + h R^T).
State Unroller::rnn_step(const DirWeights& w, const State& s, Value* x) {
  return {activate(w.acts[0], clip(gemm(s.h, w.r, x))), nullptr};
}

// z, r = f(x_zr + h R_zr^T); h~ = g(x_h + (r h) R_h^T), or with linear_before_reset
// g(x_h + r (h R_h^T + Rb_h)); h' = h~ + z (h - h~).
State Unroller::gru_step(const DirWeights& w, const State& s, Value* x) {
  std::vector<Value*> xs = split(x, 1, {2 * hidden_, hidden_});
  Value *zr_pre = nullptr, *h_pre = nullptr, *r = nullptr, *z = nullptr;
  if (!linear_before_reset_) {
    std::vector<Value*> zr = split(activate(w.acts[0], clip(gemm(s.h, w.r_zr, xs[0]))), 1, {hidden_, hidden_});
    z = zr[0];
    r = zr[1];
    h_pre = gemm(s.h ? mul(r, s.h) : nullptr, w.r_h, xs[1]);
  } else {
    Value* rec = s.h ? gemm(s.h, w.r, w.rb) : w.rb;  // [N, 3H], [3H] or zero
    std::vector<Value*> parts = rec ? split(rec, -1, {2 * hidden_, hidden_}) : std::vector<Value*>{nullptr, nullptr};
    zr_pre = add(xs[0], parts[0]);
    std::vector<Value*> zr = split(activate(w.acts[0], clip(zr_pre)), 1, {hidden_, hidden_});
    z = zr[0];
    r = zr[1];
    h_pre = add(xs[1], mul(r, parts[1]));
  }
  Value* hh = activate(w.acts[1], clip(h_pre));
  return {s.h ? add(hh, mul(z, sub(s.h, hh))) : sub(hh, mul(z, hh)), nullptr};
}

// i, o, f, c~ = x + h R^T (+ peepholes on the old c for i and f, on the new c for o);
// c' = f(f) c + f(i) g(c~); h' = f(o) h(c').
State Unroller::lstm_step(const DirWeights& w, const State& s, Value* x) {
  std::vector<Value*> g = split(gemm(s.h, w.r, x), 1, {hidden_, hidden_, hidden_, hidden_});
  Value* i = activate(w.acts[0], clip(add(g[0], mul(w.p_i, s.c))));
  Value* f = activate(w.acts[0], clip(add(g[2], mul(w.p_f, s.c))));
  Value* c = add(mul(f, s.c), mul(i, activate(w.acts[1], clip(g[3]))));
  Value* o = activate(w.acts[0], clip(add(g[1], mul(w.p_o, c))));
  return {mul(o, activate(w.acts[2], c)), c};
}

bool Unroller::wanted(int i) const {
  Value* o = n_->output(i);
  return o && (!o->uses().empty() || o->is_graph_output());
}

void Unroller::replace_output(int i, Value* v) {
  Value* old = n_->output(i);
  const std::string name = old->name();
  g_.rename_value(old, g_.unique_name(name + ".rolled"));
  g_.rename_value(v, name);
  g_.replace_all_uses(old, v);
}

// Y [T,D,N,H] (layout 1: [N,T,D,H]) from the per-step outputs ys[d][t] ([N,H]); Y_h, Y_c [D,N,H]
// (layout 1: [N,D,H]) from the last states. The pieces are joined along H and reshaped with 0 for N
// (so a symbolic batch keeps its name), then transposed into place for layout 0.
void Unroller::assemble_outputs(const std::vector<std::vector<Value*>>& ys, const std::vector<State>& last) {
  auto stack = [&](const std::vector<Value*>& parts, std::vector<int64_t> shape, std::vector<int64_t> perm) {
    Value* cat = parts.size() == 1 ? parts[0] : emit("Concat", parts, {{"axis", Attribute(int64_t{1})}});
    Value* v = emit("Reshape", {cat, ints(shape)});
    return layout_ == 0 ? emit("Transpose", {v}, {{"perm", Attribute(perm)}}) : v;
  };
  if (wanted(0)) {
    std::vector<Value*> parts;
    for (int64_t t = 0; t < seq_; ++t)
      for (int64_t d = 0; d < dirs_; ++d) parts.push_back(ys[d][t]);
    replace_output(0, stack(parts, {0, seq_, dirs_, hidden_}, {1, 2, 0, 3}));
  }
  for (int i : {1, 2}) {
    if (i >= n_->num_outputs() || !wanted(i)) continue;
    std::vector<Value*> parts;
    for (const State& s : last) parts.push_back(i == 1 ? s.h : s.c);
    replace_output(i, stack(parts, {0, dirs_, hidden_}, {1, 0, 2}));
  }
}

void Unroller::run() {
  read_attributes();
  const Node& n = *n_;
  const bool lstm = cell_ == Cell::kLstm;
  const int64_t state_axis = layout_ == 0 ? 0 : 1;
  std::vector<Value*> w = per_direction(n.input(1), 0), r = per_direction(n.input(2), 0);
  std::vector<Value*> b = per_direction(n.input(3), 0), p = per_direction(lstm ? n.input(7) : nullptr, 0);
  std::vector<Value*> h0 = per_direction(n.input(5), state_axis);
  std::vector<Value*> c0 = per_direction(lstm ? n.input(6) : nullptr, state_axis);
  build_masks();
  std::vector<std::vector<Value*>> ys(dirs_, std::vector<Value*>(seq_, nullptr));
  std::vector<State> last;
  for (int64_t d = 0; d < dirs_; ++d) {
    const bool reverse = reverse_only_ || d == 1;
    DirWeights dw = direction_weights(d, r, b, p, h0, c0);
    std::vector<Value*> xs = project_inputs(w[d], b[d], !linear_before_reset_);
    State s = dw.init;
    for (int64_t k = 0; k < seq_; ++k) {
      const int64_t t = reverse ? seq_ - 1 - k : k;
      State next = step(dw, s, xs[t]);
      if (masks_.empty()) {
        ys[d][t] = next.h;
        s = next;
        continue;
      }
      Value* m = masks_[t];
      ys[d][t] = mul(m, next.h);
      s.h = s.h ? add(s.h, mul(m, sub(next.h, s.h))) : ys[d][t];
      if (lstm) s.c = s.c ? add(s.c, mul(m, sub(next.c, s.c))) : mul(m, next.c);
    }
    last.push_back(s);
  }
  assemble_outputs(ys, last);
  g_.remove_node(n_);
}

}  // namespace

bool is_recurrent(const Node& n) {
  return n.domain().empty() && (n.op_type() == "RNN" || n.op_type() == "GRU" || n.op_type() == "LSTM");
}

void unroll_recurrent(Graph& g, Node* n) { Unroller(g, n).run(); }

int unroll_recurrent_ops(Graph& g) {
  int count = 0;
  for (Node* n : g.node_list()) {
    if (!is_recurrent(*n)) continue;
    infer_node(*n);
    unroll_recurrent(g, n);
    ++count;
  }
  return count;
}

}  // namespace otter
