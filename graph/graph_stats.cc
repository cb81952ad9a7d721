// Graph statistics: counts, bytes, FLOP estimates, activation liveness (see graph_stats.h).
#include "graph/graph_stats.h"

#include <algorithm>
#include <cstdio>
#include <unordered_map>
#include <unordered_set>

#include "graph/graph_part.h"
#include "graph/json_writer.h"
#include "graph/liveness.h"
#include "graph/op_table.h"
#include "graph/ops/infer_util.h"

namespace otter {

namespace {

// Sizes of values with symbolic dims resolved through the bindings; -1 when unknown.
class Sizer {
 public:
  Sizer(const DimBindings& b, std::set<std::string>& unbound) : bindings_(b), unbound_(unbound) {}

  // A symbolic dim is a product "5*N*T" (infer_util.h): every symbol in it must be bound.
  int64_t dim(const Dim& d) const {
    if (d.is_static()) return d.value;
    if (!d.is_symbolic()) return -1;
    infer::DimProduct p = infer::factor(d);
    if (!p.known) return -1;
    int64_t v = p.coef;
    for (const std::string& sym : p.syms) {
      auto it = bindings_.find(sym);
      if (it == bindings_.end()) {
        unbound_.insert(sym);
        v = -1;
      } else if (v >= 0) {
        v *= it->second;
      }
    }
    return v;
  }
  int64_t dim(const Value* v, int64_t i) const {
    const Shape& s = v->shape();
    if (!s.rank_known || s.rank() == 0) return -1;
    if (i < 0) i += s.rank();
    return i >= 0 && i < s.rank() ? dim(s.dims[i]) : -1;
  }
  int64_t numel(const Value* v) const {
    if (!v || !v->shape().rank_known) return -1;
    int64_t n = 1;
    bool known = true;
    for (const Dim& d : v->shape().dims) {  // visit every dim so each unbound symbol is recorded
      int64_t k = dim(d);
      known &= k >= 0;
      n *= std::max<int64_t>(k, 0);
    }
    return known ? n : -1;
  }
  int64_t bytes(const Value* v) const {
    int64_t n = numel(v);
    return n < 0 ? -1 : n * static_cast<int64_t>(dtype_size(v->dtype()));
  }

 private:
  const DimBindings& bindings_;
  std::set<std::string>& unbound_;
};

// Adds b to a when both are known; an unknown term makes the sum unknown.
void add_known(int64_t& a, int64_t b) { a = (a < 0 || b < 0) ? -1 : a + b; }
int64_t mul_known(int64_t a, int64_t b) { return (a < 0 || b < 0) ? -1 : a * b; }

enum class Cost : uint8_t {
  kElementwise, kNone, kMatMul, kGemm, kGemmAccumulate, kConv, kConvTranspose, kConvGrad, kPool, kPoolGrad, kReduce,
  kAttention, kAttentionGrad
};

Cost cost_class(const Node& n) {
  static const std::unordered_map<std::string, Cost> kOnnx = {
      {"MatMul", Cost::kMatMul}, {"Gemm", Cost::kGemm}, {"Conv", Cost::kConv},
      {"ConvTranspose", Cost::kConvTranspose}, {"MaxPool", Cost::kPool}, {"AveragePool", Cost::kPool},
      {"GlobalAveragePool", Cost::kReduce}, {"GlobalMaxPool", Cost::kReduce},
      {"SoftmaxCrossEntropyLoss", Cost::kReduce}, {"NegativeLogLikelihoodLoss", Cost::kReduce},
      {"Reshape", Cost::kNone}, {"Flatten", Cost::kNone}, {"Squeeze", Cost::kNone}, {"Unsqueeze", Cost::kNone},
      {"Transpose", Cost::kNone}, {"Concat", Cost::kNone}, {"Split", Cost::kNone}, {"Slice", Cost::kNone},
      {"Gather", Cost::kNone}, {"Expand", Cost::kNone}, {"Identity", Cost::kNone}, {"Shape", Cost::kNone},
      {"Size", Cost::kNone}, {"Constant", Cost::kNone}, {"ConstantOfShape", Cost::kNone}, {"Cast", Cost::kNone},
      {"CastLike", Cost::kNone}, {"Pad", Cost::kNone}, {"Tile", Cost::kNone}, {"Range", Cost::kNone},
  };
  static const std::unordered_map<std::string, Cost> kOtter = {
      {"GemmAccumulate", Cost::kGemmAccumulate}, {"SumToShape", Cost::kReduce},
      {"ConvGrad", Cost::kConvGrad}, {"MaxPoolGrad", Cost::kPoolGrad}, {"AveragePoolGrad", Cost::kPoolGrad},
      {"GlobalNormSq", Cost::kReduce}, {"AllFinite", Cost::kReduce},
      {"Attention", Cost::kAttention}, {"AttentionGrad", Cost::kAttentionGrad},
  };
  const auto& table = n.domain() == kOtterDomain ? kOtter : kOnnx;
  auto it = table.find(n.op_type());
  if (it != table.end()) return it->second;
  if (n.domain().empty() && n.op_type().rfind("Reduce", 0) == 0) return Cost::kReduce;
  return Cost::kElementwise;
}

// Multiply-adds per output element of a convolution with filter `w` [M, C/group, k...].
int64_t filter_size(const Value* w, const Sizer& s) {
  int64_t m = s.dim(w, 0), n = s.numel(w);
  return m <= 0 || n < 0 ? -1 : n / m;
}

// K of a 2-D GEMM whose first operand is `a` (transposed when trans_a).
int64_t gemm_k(const Node& n, const Sizer& s) { return s.dim(n.input(0), n.attr_i("transA", 0) ? 0 : 1); }

int64_t node_flops(const Node& n, const Sizer& s) {
  int64_t out = s.numel(n.output(0));
  switch (cost_class(n)) {
    case Cost::kNone: return 0;
    case Cost::kMatMul: return mul_known(mul_known(2, out), s.dim(n.input(0), -1));
    // The GEMMs of the unfused graph it replaces (masked blocks counted too): Q Kt and P V forward,
    // twice that backward (dV, dP, dQ, dK; the recomputed scores are not counted).
    case Cost::kAttention:
    case Cost::kAttentionGrad: {
      const bool grad = cost_class(n) == Cost::kAttentionGrad;
      int64_t qv = s.numel(n.input(grad ? 1 : 0));  // Q
      add_known(qv, s.numel(grad ? n.input(5) : n.output(0)));  // Y
      return mul_known(mul_known(grad ? 4 : 2, qv), s.dim(n.input(grad ? 2 : 1), -1));
    }
    case Cost::kGemm: {
      int64_t f = mul_known(mul_known(2, out), gemm_k(n, s));
      if (n.has_input(2)) add_known(f, out);
      return f;
    }
    case Cost::kGemmAccumulate: {
      int64_t f = mul_known(mul_known(2, out), gemm_k(n, s));
      add_known(f, out);
      return f;
    }
    case Cost::kConv:
    case Cost::kConvTranspose: {
      int64_t base = cost_class(n) == Cost::kConv ? out : s.numel(n.input(0));
      int64_t f = mul_known(mul_known(2, base), filter_size(n.input(1), s));
      if (n.has_input(2)) add_known(f, out);
      return f;
    }
    case Cost::kConvGrad: {  // ConvGrad(dY, X, W) -> dX?, dW?, dB?: a GEMM of the forward's size per output
      int64_t dy = s.numel(n.input(0));
      int64_t gemm = mul_known(mul_known(2, dy), filter_size(n.input(2), s));
      int64_t f = 0;
      for (int i = 0; i < n.num_outputs(); ++i)
        if (n.output(i)) add_known(f, i < 2 ? gemm : dy);
      return f;
    }
    case Cost::kPool:
    case Cost::kPoolGrad: {  // per output (of the forward: dY for the gradient) and window element
      int64_t window = 1;
      for (int64_t k : n.attr_ints("kernel_shape")) window *= k;
      return mul_known(cost_class(n) == Cost::kPool ? out : s.numel(n.input(0)), window);
    }
    case Cost::kReduce: {
      int64_t f = 0;
      for (const Value* in : n.inputs())
        if (in && is_float(in->dtype())) add_known(f, s.numel(in));
      return f;
    }
    case Cost::kElementwise: break;
  }
  int64_t f = 0;
  for (const Value* o : n.outputs())
    if (o) add_known(f, s.numel(o));
  return f;
}

void add_tensor(TensorTotal& t, const Value* v, const Sizer& s) {
  ++t.tensors;
  add_known(t.elements, s.numel(v));
  add_known(t.bytes, s.bytes(v));
}

void count_ops(const Graph& g, GraphStats& st) {
  std::map<std::pair<std::string, std::string>, GraphStats::OpCount> by_key;
  for (const auto& n : g.nodes()) {
    std::string op = (n->domain().empty() ? "" : n->domain() + ".") + n->op_type();
    const Value* first = nullptr;  // the first output present (ConvGrad may produce only dW)
    for (const Value* o : n->outputs())
      if (!first) first = o;
    std::string dtype(first ? dtype_name(first->dtype()) : "-");
    auto& c = by_key[{op, dtype}];
    c.op = op;
    c.dtype = dtype;
    ++(n->program() == Program::kApply ? c.apply : c.micro_step);
  }
  for (auto& [k, c] : by_key) st.ops.push_back(c);
}

// The node that writes state `v` (the producer of its new contents), or nullptr.
const Node* writer_of(const Graph& g, const Value* v) {
  auto upd = g.state_updates.find(const_cast<Value*>(v));
  return upd != g.state_updates.end() && upd->second ? upd->second->producer() : nullptr;
}

// State by role: accumulators (Graph::gradients), the loss scale and what its update node also
// writes (the good-step count), half-precision weight copies and other state written by the apply
// program (optimizer moments, step counters), and the rest (running statistics).
// The ZeRO-1 sharded masters and their parameters by name (metadata otter.training.zero_masters,
// MASTER=PARAMETER,..., written by passes/all_reduce_zero.cc).
std::map<std::string, std::string> sharded_masters(const Graph& g) {
  std::map<std::string, std::string> out;
  auto it = g.metadata.find("otter.training.zero_masters");
  if (it == g.metadata.end()) return out;
  const std::string& text = it->second;
  for (size_t pos = 0; pos < text.size();) {
    size_t end = text.find(',', pos);
    if (end == std::string::npos) end = text.size();
    const std::string item = text.substr(pos, end - pos);
    const size_t eq = item.find('=');
    if (eq != std::string::npos) out[item.substr(0, eq)] = item.substr(eq + 1);
    pos = end + 1;
  }
  return out;
}

void count_state(const Graph& g, const Value* v, const Sizer& s, GraphStats& st) {
  if (sharded_masters(g).count(v->name())) {
    add_tensor(st.master_shards, v, s);
    return;
  }
  std::unordered_set<const Value*> accumulators;
  for (const auto& [p, acc] : g.gradients) accumulators.insert(acc);
  const Node* writer = writer_of(g, v);
  const Node* scaler = g.loss_scale ? writer_of(g, g.loss_scale) : nullptr;
  bool half = v->dtype() == DataType::kFloat16 || v->dtype() == DataType::kBFloat16;
  if (accumulators.count(v)) add_tensor(st.accumulators, v, s);
  else if (v == g.loss_scale || (writer && writer == scaler)) add_tensor(st.loss_scale, v, s);
  else if (writer && writer->program() == Program::kApply) add_tensor(half ? st.half_copies : st.optimizer_state, v, s);
  else add_tensor(st.model_state, v, s);
}

void count_roles(const Graph& g, const Value* v, const Sizer& s, GraphStats& st) {
  bool trained = v->trainable();
  if (!g.gradients.empty()) {
    trained = false;
    for (const auto& [p, acc] : g.gradients) trained |= p == v;
  }
  if (trained) add_tensor(st.trainable_params, v, s);
  else if (is_float(v->dtype()) && v->shape().rank_known && v->shape().rank() >= 1) add_tensor(st.frozen_params, v, s);
}

void count_tensors(const Graph& g, const Sizer& s, GraphStats& st) {
  std::set<std::string> sharded;
  for (const auto& [master, p] : sharded_masters(g)) sharded.insert(p);
  for (const Value* v : g.values()) {
    if (v->kind() == ValueKind::kInitializer && sharded.count(v->name())) add_tensor(st.sharded_params, v, s);
    if (v->kind() == ValueKind::kInitializer) count_roles(g, v, s, st);
    if (v->kind() == ValueKind::kInput) {
      add_tensor(st.inputs, v, s);
    } else if (v->kind() == ValueKind::kInitializer) {
      add_tensor(v->trainable() ? st.param_total : st.constants, v, s);
      if (v->trainable()) st.params.push_back({v->name(), v->type_string(), s.bytes(v)});
    } else if (v->kind() == ValueKind::kState) {
      count_state(g, v, s, st);
    }
  }
}

void count_flops(const Graph& g, const Sizer& s, GraphStats& st) {
  auto parts = classify_parts(g);
  for (const auto& n : g.nodes()) {
    GraphPart p = parts.at(n.get());
    int64_t f = node_flops(*n, s);
    switch (p) {
      case GraphPart::kForward: ++st.forward_nodes; add_known(st.forward_flops, f); break;
      case GraphPart::kBackward: ++st.backward_nodes; add_known(st.backward_flops, f); break;
      case GraphPart::kApply: ++st.apply_nodes; add_known(st.apply_flops, f); break;
    }
  }
}

// Liveness from graph/liveness.h (views share their root's buffer, which lives until the view's
// last read); graph outputs and values the apply program reads live to the end of the micro-step.
void measure_activations(const Graph& g, const Sizer& s, GraphStats& st) {
  std::vector<const Node*> order = program_nodes(g, Program::kMicroStep);
  std::vector<Lifetime> lives = program_lifetimes(g, Program::kMicroStep);
  if (order.empty()) return;
  const int end = static_cast<int>(order.size()) - 1;
  std::unordered_set<const Value*> state_contents, kept;
  for (const auto& [state, u] : g.state_updates) state_contents.insert(u);
  for (const Value* o : g.outputs()) kept.insert(o);
  for (const auto& n : g.nodes())
    if (n->program() == Program::kApply)
      for (const Value* in : n->inputs()) kept.insert(in);
  std::unordered_map<const Value*, Lifetime*> by_value;
  for (Lifetime& lt : lives) by_value[lt.value] = &lt;
  for (Lifetime& lt : lives) {
    if (!kept.count(lt.value)) continue;
    Lifetime* root = lt.view_of && by_value.count(lt.view_of) ? by_value.at(lt.view_of) : &lt;
    root->last = end;
  }
  std::vector<int64_t> allocated(order.size(), 0), freed(order.size(), 0);
  for (const Lifetime& lt : lives) {
    if (lt.view_of || state_contents.count(lt.value)) continue;
    int64_t b = s.bytes(lt.value);
    if (b < 0) {
      st.activation_peak_bytes = -1;
      return;
    }
    allocated[lt.first] += b;
    freed[lt.last] += b;
  }
  int64_t live = 0;
  for (size_t i = 0; i < order.size(); ++i) {
    live += allocated[i];
    if (live > st.activation_peak_bytes) {
      st.activation_peak_bytes = live;
      st.activation_peak_at = order[i]->describe();
    }
    live -= freed[i];
  }
}

std::string with_unit(int64_t n, const char* unit, int base) {
  if (n < 0) return "unknown";
  static const char* kPrefix[] = {"", "K", "M", "G", "T", "P"};
  double x = static_cast<double>(n);
  int k = 0;
  while (x >= base && k < 5) {
    x /= base;
    ++k;
  }
  char buf[64];
  if (k == 0) std::snprintf(buf, sizeof buf, "%lld %s", static_cast<long long>(n), unit);
  else
    std::snprintf(buf, sizeof buf, "%lld %s (%.3g %s%s%s)", static_cast<long long>(n), unit, x, kPrefix[k],
                  base == 1024 ? "i" : "", unit);
  return buf;
}
std::string bytes_str(int64_t n) { return with_unit(n, "B", 1024); }
std::string flops_str(int64_t n) { return with_unit(n, "FLOP", 1000); }

std::string total_str(const TensorTotal& t) {
  return str_cat(t.tensors, " tensor", t.tensors == 1 ? "" : "s", ", ",
                 t.elements < 0 ? std::string("unknown") : std::to_string(t.elements), " element",
                 t.elements == 1 ? "" : "s", ", ", bytes_str(t.bytes));
}

std::string unbound_note(const GraphStats& s) {
  if (s.unbound.empty()) return "";
  std::string names;
  for (const auto& u : s.unbound) names += (names.empty() ? "" : ", ") + u;
  return str_cat(" (symbolic dims ", names, " unbound: give --batch)");
}

// An unknown figure (-1) is null in JSON.
void known_field(JsonWriter& w, std::string_view k, int64_t v) {
  w.key(k);
  if (v < 0) w.null();
  else w.value(v);
}

void write_total(JsonWriter& w, std::string_view k, const TensorTotal& t) {
  w.key(k);
  w.begin_object();
  w.field("tensors", t.tensors);
  known_field(w, "elements", t.elements);
  known_field(w, "bytes", t.bytes);
  w.end_object();
}

// k: an array of one object per item of `items`, whose fields `fields(item)` writes.
template <typename List, typename F>
void write_object_array(JsonWriter& w, std::string_view k, const List& items, F&& fields) {
  w.key(k);
  w.begin_array();
  for (const auto& item : items) {
    w.begin_object();
    fields(item);
    w.end_object();
  }
  w.end_array();
}

}  // namespace

int64_t resident_param_bytes(const GraphStats& s) {
  int64_t b = s.param_total.bytes;
  add_known(b, s.master_shards.bytes);
  if (b >= 0 && s.sharded_params.bytes >= 0) return b - s.sharded_params.bytes;
  return -1;
}

GraphStats compute_graph_stats(const Graph& g, const DimBindings& bindings) {
  GraphStats st;
  st.bindings = bindings;
  Sizer s(bindings, st.unbound);
  count_ops(g, st);
  count_tensors(g, s, st);
  count_flops(g, s, st);
  measure_activations(g, s, st);
  for (const auto& [prog, plan] : g.memory_plans)
    st.memory_plans.push_back({prog == Program::kApply ? "apply" : "micro-step", plan.arena_bytes,
                               plan.unplanned_peak_bytes, static_cast<int64_t>(plan.buffers.size())});
  return st;
}

void print_graph_stats(const GraphStats& s, std::ostream& os) {
  std::string binds;
  for (const auto& [k, v] : s.bindings) binds += str_cat(binds.empty() ? " (" : ", ", k, "=", v);
  if (!binds.empty()) binds += ")";
  os << "graph statistics" << binds << ":\n";
  os << "  nodes: " << s.forward_nodes << " forward, " << s.backward_nodes << " backward, " << s.apply_nodes
     << " apply\n";
  size_t width = 2;
  for (const auto& c : s.ops) width = std::max(width, c.op.size());
  auto row = [&](const std::string& op, const std::string& dtype, const std::string& micro, const std::string& apply) {
    char line[256];
    std::snprintf(line, sizeof line, "    %-*s  %-5s %10s %6s\n", static_cast<int>(width), op.c_str(), dtype.c_str(),
                  micro.c_str(), apply.c_str());
    os << line;
  };
  os << "  nodes by op and dtype:\n";
  row("op", "dtype", "micro-step", "apply");
  for (const auto& c : s.ops) row(c.op, c.dtype, std::to_string(c.micro_step), std::to_string(c.apply));
  os << "  parameters: " << total_str(s.param_total) << "\n";
  for (const auto& p : s.params) os << "    %" << p.name << ": " << p.type << "  " << bytes_str(p.bytes) << "\n";
  os << "  constants: " << total_str(s.constants) << "\n";
  os << "  state: gradient accumulators: " << total_str(s.accumulators) << "\n";
  os << "         optimizer state: " << total_str(s.optimizer_state) << "\n";
  os << "         half weight copies: " << total_str(s.half_copies) << "\n";
  if (s.master_shards.tensors)
    os << "         master weight shards: " << total_str(s.master_shards) << " (of parameters "
       << total_str(s.sharded_params) << ")\n";
  os << "         loss scale: " << total_str(s.loss_scale) << "\n";
  os << "         model state: " << total_str(s.model_state) << "\n";
  os << "  training memory: parameters trainable " << total_str(s.trainable_params) << ", frozen "
     << total_str(s.frozen_params) << "\n";
  os << "         gradients: trainable " << bytes_str(s.accumulators.bytes) << ", frozen 0 B; optimizer state: trainable "
     << bytes_str(s.optimizer_state.bytes) << ", frozen 0 B\n";
  const int64_t all = s.trainable_params.elements + s.frozen_params.elements;
  if (s.trainable_params.elements >= 0 && s.frozen_params.elements >= 0 && all > 0) {
    char frac[64];
    std::snprintf(frac, sizeof frac, "%.3g%%", 100.0 * static_cast<double>(s.trainable_params.elements) / all);
    os << "         trainable fraction: " << frac << " of " << all << " parameter elements\n";
  }
  int64_t micro = s.forward_flops;
  add_known(micro, s.backward_flops);
  std::string note = unbound_note(s);
  os << "  FLOPs per micro-step: " << flops_str(micro) << " (forward " << flops_str(s.forward_flops) << ", backward "
     << flops_str(s.backward_flops) << ")" << (micro < 0 ? note : "") << "\n";
  os << "  FLOPs per apply step: " << flops_str(s.apply_flops) << (s.apply_flops < 0 ? note : "") << "\n";
  os << "  activation memory of one micro-batch: peak " << bytes_str(s.activation_peak_bytes);
  if (!s.activation_peak_at.empty()) os << " at " << s.activation_peak_at;
  os << (s.activation_peak_bytes < 0 ? note : "") << "\n";
  os << "  micro-batch inputs: " << total_str(s.inputs) << (s.inputs.bytes < 0 ? note : "") << "\n";
  for (const auto& p : s.memory_plans)
    os << "  memory plan (" << p.program << "): arena " << bytes_str(p.arena_bytes) << " for " << p.buffers
       << " buffers (free after last use: " << bytes_str(p.unplanned_peak_bytes) << ")\n";
}

void write_graph_stats_json(const GraphStats& s, JsonWriter& w) {
  w.begin_object();
  w.key("bindings");
  w.begin_object();
  for (const auto& [k, v] : s.bindings) w.field(k, v);
  w.end_object();
  w.key("unbound");
  w.begin_array();
  for (const auto& u : s.unbound) w.value(u);
  w.end_array();
  w.key("nodes");
  w.begin_object();
  w.field("forward", s.forward_nodes);
  w.field("backward", s.backward_nodes);
  w.field("apply", s.apply_nodes);
  w.end_object();
  write_object_array(w, "ops", s.ops, [&](const auto& c) {
    w.field("op", c.op);
    w.field("dtype", c.dtype);
    w.field("micro_step", c.micro_step);
    w.field("apply", c.apply);
  });
  write_total(w, "parameters", s.param_total);
  write_object_array(w, "parameter_list", s.params, [&](const auto& p) {
    w.field("name", p.name);
    w.field("type", p.type);
    known_field(w, "bytes", p.bytes);
  });
  const std::pair<std::string_view, const TensorTotal*> totals[] = {
      {"constants", &s.constants},         {"trainable_parameters", &s.trainable_params},
      {"frozen_parameters", &s.frozen_params}, {"accumulators", &s.accumulators},
      {"optimizer_state", &s.optimizer_state}, {"half_copies", &s.half_copies},
      {"loss_scale", &s.loss_scale},       {"model_state", &s.model_state},
      {"master_shards", &s.master_shards}, {"sharded_parameters", &s.sharded_params},
      {"inputs", &s.inputs}};
  for (const auto& [k, t] : totals) write_total(w, k, *t);
  w.key("flops");
  w.begin_object();
  known_field(w, "forward", s.forward_flops);
  known_field(w, "backward", s.backward_flops);
  known_field(w, "apply", s.apply_flops);
  w.end_object();
  known_field(w, "activation_peak_bytes", s.activation_peak_bytes);
  w.field("activation_peak_at", s.activation_peak_at);
  write_object_array(w, "memory_plans", s.memory_plans, [&](const auto& p) {
    w.field("program", p.program);
    w.field("arena_bytes", p.arena_bytes);
    w.field("unplanned_peak_bytes", p.unplanned_peak_bytes);
    w.field("buffers", p.buffers);
  });
  w.end_object();
}

}  // namespace otter
