// mixed-precision pass (see mixed_precision.h).
#include "passes/mixed_precision.h"

#include <algorithm>
#include <map>
#include <unordered_map>
#include <unordered_set>

#include "graph/error.h"
#include "graph/half.h"  // float16/bfloat16 rounding (RNE) and double -> float round-to-odd
#include "graph/op_table.h"
#include "passes/pattern.h"

namespace otter {

namespace {

using pattern::add_cast;
using pattern::suffixed;

// The wider of two float types: f64 > f32 > the half types; float16 with bfloat16 gives fp32
// (neither holds the other), as PyTorch promotes them.
DataType widest(DataType a, DataType b) {
  if (a == b) return a;
  if (a == DataType::kFloat64 || b == DataType::kFloat64) return DataType::kFloat64;
  return DataType::kFloat32;
}

bool is_constant(const Value* v) { return v->kind() == ValueKind::kInitializer && !v->trainable(); }
bool is_scalar_constant(const Value* v) {
  return is_constant(v) && v->shape().rank_known && v->shape().rank() == 0;
}

// Indices of the float inputs that take the op's precision.
std::vector<int> precision_inputs(const Node& n, const OpDef& d) {
  std::vector<int> out;
  for (int i = 0; i < n.num_inputs(); ++i) {
    const Value* in = n.input(i);
    if (!in || !is_float(in->dtype())) continue;
    if (!d.precision_inputs.empty() &&
        std::find(d.precision_inputs.begin(), d.precision_inputs.end(), i) == d.precision_inputs.end())
      continue;
    out.push_back(i);
  }
  return out;
}

class MixedPrecision {
 public:
  MixedPrecision(Graph& g, const MixedPrecisionOptions& o)
      : g_(g), half_(precision_dtype(o.dtype)), loss_(o.loss.value_or("loss")), require_loss_(o.loss.has_value()),
        table_(OpTable::instance()) {}

  MixedPrecisionStats run() {
    for (Value* v : g_.outputs()) keep_type_.emplace(v, v->dtype());
    for (auto& [s, u] : g_.state_updates) keep_type_.emplace(u, u->dtype());
    find_loss_subgraph();
    order_ = g_.node_list();
    for (pos_ = 0; pos_ < order_.size(); ++pos_) {
      process(*order_[pos_]);
      restore_outputs(*order_[pos_]);
    }
    remove_unused(replaced_constants_);
    count_ops();
    return st_;
  }

 private:
  // The nodes between the model outputs the loss reads and the loss (both ends included).
  void find_loss_subgraph() {
    Value* loss = g_.find_value(loss_);
    if (!loss) {
      OTTER_CHECK(!require_loss_, "mixed-precision: no loss value '", loss_, "' in the graph");
      return;
    }
    std::unordered_set<const Node*> ancestors;
    std::unordered_set<const Value*> feeds_loss{loss};
    std::vector<Node*> work;
    if (loss->producer()) work.push_back(loss->producer());
    while (!work.empty()) {
      Node* n = work.back();
      work.pop_back();
      if (!ancestors.insert(n).second) continue;
      for (Value* in : n->inputs()) {
        if (!in) continue;
        feeds_loss.insert(in);
        if (in->producer()) work.push_back(in->producer());
      }
    }
    std::vector<const Value*> frontier;
    for (Value* o : g_.outputs())
      if (o != loss && feeds_loss.count(o)) frontier.push_back(o);
    while (!frontier.empty()) {
      const Value* v = frontier.back();
      frontier.pop_back();
      for (auto [user, idx] : v->uses()) {
        if (!ancestors.count(user) || !loss_nodes_.insert(user).second) continue;
        for (Value* o : user->outputs())
          if (o) frontier.push_back(o);
      }
    }
  }

  PrecisionClass class_of(const Node& n) const {
    return loss_nodes_.count(&n) ? PrecisionClass::kFp32 : table_.get(n).precision;
  }

  // Casts the node's inputs to the types its class asks for and re-infers it (its inputs' types
  // may also have changed upstream).
  void process(Node& n) {
    std::vector<int> ins = precision_inputs(n, table_.get(n));
    const PrecisionClass cls = class_of(n);
    DataType target = DataType::kUndefined;
    if (cls == PrecisionClass::kFollow || cls == PrecisionClass::kNone) target = vote(n, ins);
    for (int i : ins) {
      DataType t = n.input(i)->dtype();
      DataType want = t;
      if (cls == PrecisionClass::kLow) want = half_;
      else if (cls == PrecisionClass::kFp32) want = is_half(t) ? DataType::kFloat32 : t;
      else want = target;
      if (want == t) continue;
      n.set_input(i, convert(n.input(i), want, &n));
    }
    infer_node(n);
  }

  // The widest type among the float inputs; rank-0 constants vote only when nothing else does.
  DataType vote(const Node& n, const std::vector<int>& ins) const {
    DataType t = DataType::kUndefined;
    for (bool scalars : {false, true}) {
      for (int i : ins) {
        const Value* v = n.input(i);
        if (is_scalar_constant(v) != scalars) continue;
        t = t == DataType::kUndefined ? v->dtype() : widest(t, v->dtype());
      }
      if (t != DataType::kUndefined) break;
    }
    return t;
  }

  // `v` in type `to`, made once per (value, type): a converted constant, a weight chain run in
  // half, or a Cast placed before its first user.
  Value* convert(Value* v, DataType to, Node* user) {
    auto key = std::make_pair(v, to);
    auto it = converted_.find(key);
    if (it != converted_.end()) return it->second;
    Value* out = nullptr;
    if (is_constant(v)) {
      out = g_.add_initializer(g_.unique_name(suffixed(v->name(), to)), convert_float_tensor(v->data(), to), false);
      replaced_constants_.push_back(v);
      ++st_.constants_converted;
    } else if (is_half(to) && rerun_weight_chain_in_half(v)) {
      out = v;
    } else {
      out = add_cast(g_, v, to, g_.unique_name(suffixed(v->name(), to)), user)->output(0);
      ++st_.casts_inserted;
    }
    converted_[key] = out;
    return out;
  }

  // When v = F_k(...F_1(w)) for a parameter or constant w (a frozen weight) through FOLLOW nodes with one float input each, every
  // intermediate used only by the next and v only by LOW nodes: casts w instead and re-infers the
  // chain, which then runs in half (exact: rounding commutes with moving data).
  bool rerun_weight_chain_in_half(Value* v) {
    if (keep_type_.count(v) || v->uses().empty()) return false;
    for (auto [user, idx] : v->uses())
      if (class_of(*user) != PrecisionClass::kLow) return false;
    std::vector<Node*> chain;
    Value* cur = v;
    while (cur->kind() != ValueKind::kInitializer) {
      Node* p = cur->producer();
      if (!p || p->num_outputs() != 1 || class_of(*p) != PrecisionClass::kFollow) return false;
      std::vector<int> ins = precision_inputs(*p, table_.get(*p));
      if (ins.size() != 1) return false;
      if (cur != v && (cur->uses().size() != 1 || keep_type_.count(cur))) return false;
      chain.push_back(p);
      cur = p->input(ins[0]);
    }
    if (chain.empty()) return false;
    for (auto it = chain.rbegin(); it != chain.rend(); ++it) {
      Node* p = *it;
      int i = precision_inputs(*p, table_.get(*p))[0];
      if (p->input(i)->dtype() != half_) p->set_input(i, convert(p->input(i), half_, p));
      infer_node(*p);
    }
    return true;
  }

  // Graph outputs and state updates keep their type: a changed one is renamed `<name>.<type>` and
  // a Cast right after its producer takes the original name.
  void restore_outputs(Node& n) {
    for (Value* v : n.outputs()) {
      auto it = keep_type_.find(v);
      if (!v || it == keep_type_.end() || v->dtype() == it->second) continue;
      const std::string name = v->name();
      g_.rename_value(v, g_.unique_name(suffixed(name, v->dtype())));
      Node* next = pos_ + 1 < order_.size() ? order_[pos_ + 1] : nullptr;
      Value* back = add_cast(g_, v, it->second, name, next)->output(0);
      ++st_.casts_inserted;
      std::vector<Value*> outs = g_.outputs();
      std::replace(outs.begin(), outs.end(), v, back);
      g_.set_outputs(outs);
      for (auto& [s, u] : g_.state_updates)
        if (u == v) u = back;
      converted_[{v, it->second}] = back;
    }
  }

  void remove_unused(const std::vector<Value*>& constants) {
    for (Value* c : constants)
      if (c->uses().empty() && !c->is_graph_output()) g_.remove_value(c);
  }

  void count_ops() {
    for (Node* n : order_) {
      if (table_.get(*n).precision == PrecisionClass::kNone && !loss_nodes_.count(n)) continue;
      for (Value* o : n->outputs()) {
        if (!o || !is_float(o->dtype())) continue;
        if (is_half(o->dtype())) ++st_.ops_half;
        else if (o->dtype() == DataType::kFloat32) ++st_.ops_fp32;
        break;
      }
    }
  }

  Graph& g_;
  const DataType half_;
  const std::string loss_;
  const bool require_loss_;
  const OpTable& table_;
  MixedPrecisionStats st_;
  std::unordered_set<const Node*> loss_nodes_;
  std::map<std::pair<Value*, DataType>, Value*> converted_;
  std::unordered_map<const Value*, DataType> keep_type_;
  std::vector<Value*> replaced_constants_;
  std::vector<Node*> order_;
  size_t pos_ = 0;
};

}  // namespace

Tensor convert_float_tensor(const Tensor& t, DataType to) {
  OTTER_CHECK(is_float(t.dtype()) && is_float(to), "convert_float_tensor: ", t.describe(), " to ", dtype_name(to));
  Tensor out(to, t.dims());
  for (int64_t i = 0; i < t.numel(); ++i) {
    double d = t.get_as_double(i);
    // From float64, round to odd first so that the half rounding equals rounding d directly.
    float f = t.dtype() == DataType::kFloat64 ? double_to_float_round_odd(d) : static_cast<float>(d);
    switch (to) {
      case DataType::kFloat64: out.data<double>()[i] = d; break;
      case DataType::kFloat32: out.data<float>()[i] = static_cast<float>(d); break;
      case DataType::kFloat16: static_cast<uint16_t*>(out.raw())[i] = float_to_half(f); break;
      default: static_cast<uint16_t*>(out.raw())[i] = float_to_bf16(f); break;
    }
  }
  return out;
}

const EnumNames<Precision>& enum_names(Precision) {
  static const EnumNames<Precision> names{
      {Precision::kFp32, "fp32"}, {Precision::kFp16, "fp16"}, {Precision::kBf16, "bf16"}};
  return names;
}

DataType precision_dtype(Precision p) {
  switch (p) {
    case Precision::kFp16: return DataType::kFloat16;
    case Precision::kBf16: return DataType::kBFloat16;
    default: return DataType::kFloat32;
  }
}

const OptionTable<MixedPrecisionOptions>& MixedPrecisionOptions::table() {
  using S = MixedPrecisionOptions;
  static const OptionTable<S> t{
      option("dtype", &S::dtype, "the half type").among({Precision::kFp16, Precision::kBf16}).always(),
      option("loss", &S::loss, "the loss value, whose subgraph stays fp32 (given: it must exist)")
          .default_text("loss"),
  };
  return t;
}

MixedPrecisionStats mixed_precision(Graph& g, const MixedPrecisionOptions& o) {
  MixedPrecisionOptions::table().check(o, "mixed-precision");
  OTTER_CHECK(g.gradients.empty() && !g.loss_seed,
              "mixed-precision: the graph already has a backward graph; run mixed-precision before autodiff");
  return MixedPrecision(g, o).run();
}

std::string MixedPrecisionPass::summary() const {
  return "run LOW ops in fp16/bf16 and FP32 ops and the loss in fp32, with Casts at class boundaries";
}

void MixedPrecisionPass::run(Graph& g, PassContext&) {
  auto st = mixed_precision(g, opts_);
  set_counters({{"casts_inserted", st.casts_inserted},
                {"constants_converted", st.constants_converted},
                {opts_.dtype == Precision::kFp16 ? "ops_f16" : "ops_bf16", st.ops_half},
                {"ops_f32", st.ops_fp32}});
}

}  // namespace otter
