// all-reduce{zero=1}: ZeRO stage 1, the optimizer state sharded across the ranks (see all_reduce.h).
//
// Each tensor of n elements is cut into N shards of c = ceil(n/N) elements; rank r owns elements
// [r*c, min(n, (r+1)*c)), and the last shard is padded with zeros so that every rank's graph has the
// same shapes. Per trained parameter %w (accumulator %w.grad.acc, update u):
//   %w.grad.acc.shard = ai.otter.ReduceScatter(%w.grad.acc) {op=sum,world=N}   (before the apply program)
// and u reads it and the moments, now state of c elements. Where hoist-weight-casts made a half copy
// %w.f16 and nothing but u reads the fp32 master %w (the forward and backward read the half copy),
// the master itself is sharded: it becomes state %w.master of c elements (the runtime cuts the
// rank's shard of %w's initial value into it, runtime/data_parallel.cc), u reads and writes it in
// place, %w is updated no more, and only the half copy is gathered:
//   %w.f16.shard = ai.otter.Shard(%w.f16) {world=N}                              (before u)
//   %w.master.new, ..., %w.f16.shard.new = u(%w.master, %w.grad.acc.shard, ..., %w.f16.shard)
//   %w.f16.new   = ai.otter.AllGather(%w.f16.shard.new, %w.f16) {world=N}        (after u, into %w.f16)
// Any other master (fp32 training, or a weight mixed precision keeps in fp32 for some reader) stays
// whole: u reads %w.shard = ai.otter.Shard(%w) and %w.new = ai.otter.AllGather(%w.shard.new, %w)
// writes it back, with the same Shard/AllGather pair for a half copy. The finite check and the
// global norm read the gradient shards; their partial results are combined across the ranks (a sum
// of the non-finite flags, a sum of the squared norms) so every rank skips and clips on the full
// reduced gradient, as one process would.
#include <map>
#include <set>

#include "graph/error.h"
#include "graph/op_table.h"
#include "passes/all_reduce.h"
#include "passes/backward_seed.h"

namespace otter {

namespace {

constexpr const char* kShardsKey = "otter.training.zero_shards";
constexpr const char* kMastersKey = "otter.training.zero_masters";

int64_t shard_size(const Value* v, int64_t world) { return (v->shape().numel() + world - 1) / world; }

// The node after `n` in program order (null at the end).
Node* next_node(const Graph& g, const Node* n) {
  bool found = false;
  for (const auto& m : g.nodes()) {
    if (found) return m.get();
    found = m.get() == n;
  }
  return nullptr;
}

Node* apply_node(Graph& g, const std::string& op, const std::vector<Value*>& ins, const std::string& out, Node* before,
                 const std::map<std::string, Attribute>& attrs, const std::string& domain = kOtterDomain) {
  Node* n = g.add_node(op, ins, {g.unique_name(out)}, domain, before);
  n->set_program(Program::kApply);
  for (const auto& [k, a] : attrs) n->set_attr(k, a);
  infer_node(*n);
  return n;
}

// The input slots of an update op: its half copy, and its moment states.
struct UpdateSlots {
  int half_in, half_out;
  std::vector<int> moments;  // inputs that are state of the parameter's shape
};

UpdateSlots slots_of(const Node& u, const std::string& param) {
  if (u.domain() == kOtterDomain && u.op_type() == "AdamUpdate") return {8, 3, {2, 3}};
  if (u.domain() == kOtterDomain && u.op_type() == "SGDUpdate") return {6, 2, {2}};
  fail("all-reduce{zero=1}: the update of '", param, "' (", u.describe(), ") cannot be sharded (AdamUpdate or ",
       "SGDUpdate only)");
}

// Replaces every use of `from` by `to` in `users` (saved before `to` existed).
void redirect(Graph& g, Value* from, Value* to, const std::vector<std::pair<Node*, int>>& users, bool output) {
  for (auto [user, slot] : users) user->set_input(slot, to);
  if (!output) return;
  std::vector<Value*> outs = g.outputs();
  for (Value*& o : outs)
    if (o == from) o = to;
  g.set_outputs(outs);
}

// The finite flag of the whole gradient: every rank's flag over its shards, combined (a rank with a
// non-finite shard makes the sum of the "not finite" flags positive).
void combine_finite(Graph& g, int64_t world) {
  TrainingFacts facts = g.training_facts();
  Value* local = g.value(facts.finite);
  const auto users = local->uses();
  const bool output = local->is_graph_output();
  Node* before = next_node(g, local->producer());
  const std::map<std::string, Attribute> none;
  Value* bad = apply_node(g, "Not", {local}, local->name() + ".not", before, none, "")->output(0);
  Value* bad_f = apply_node(g, "Cast", {bad}, bad->name() + ".f32", before,
                            {{"to", Attribute(static_cast<int64_t>(dtype_to_onnx(DataType::kFloat32)))}}, "")
                     ->output(0);
  Value* bad_sum = apply_node(g, "AllReduce", {bad_f}, bad_f->name() + ".reduced", before,
                              {{"op", Attribute(std::string("sum"))}, {"world", Attribute(world)}})
                       ->output(0);
  Value* any_bad = apply_node(g, "Cast", {bad_sum}, local->name() + ".any_rank_not", before,
                              {{"to", Attribute(static_cast<int64_t>(dtype_to_onnx(DataType::kBool)))}}, "")
                       ->output(0);
  Value* global = apply_node(g, "Not", {any_bad}, local->name() + ".all_ranks", before, none, "")->output(0);
  redirect(g, local, global, users, output);
  facts.finite = global->name();
  g.set_training_facts(facts);
}

// Each GlobalNormSq of the gradient shards becomes the sum of the ranks' partial sums.
void combine_norms(Graph& g, int64_t world) {
  for (Node* n : g.node_list()) {
    if (n->program() != Program::kApply || n->domain() != kOtterDomain || n->op_type() != "GlobalNormSq") continue;
    Value* partial = n->output(0);
    const auto users = partial->uses();
    Value* total = apply_node(g, "AllReduce", {partial}, partial->name() + ".reduced", next_node(g, n),
                              {{"op", Attribute(std::string("sum"))}, {"world", Attribute(world)}})
                       ->output(0);
    redirect(g, partial, total, users, partial->is_graph_output());
  }
}

// True when the update `u` is the only reader of the fp32 master `p` and it has a half copy: then
// nothing needs the whole master between two updates (the forward reads the half copy).
bool master_only_updated(const Value* p, const Node* u, const Value* half) {
  if (!half || p->is_graph_output()) return false;
  for (auto [user, slot] : p->uses())
    if (user != u || slot != 0) return false;
  return true;
}

// Shards the update of parameter `p`: its moments made state of one shard, and its master either
// made state of one shard (with the half copy alone gathered) or read as a shard and gathered
// whole, as master_only_updated decides. Records the sharded states in `shards` (and the sharded
// masters in `masters`) as STATE=PARAMETER.
void shard_update(Graph& g, Value* p, Value* grad_shard, int64_t world, std::string& shards, std::string& masters,
                  ZeroStats& st) {
  auto it = g.state_updates.find(p);
  Node* u = it == g.state_updates.end() || !it->second ? nullptr : it->second->producer();
  OTTER_CHECK(u && u->program() == Program::kApply, "all-reduce{zero=1}: parameter '", p->name(),
              "' has no update in the apply program");
  const UpdateSlots s = slots_of(*u, p->name());
  const int64_t c = shard_size(p, world);
  auto record = [&](std::string& list, const Value* v) {
    list += str_cat(list.empty() ? "" : ",", v->name(), "=", p->name());
  };
  const std::map<std::string, Attribute> w{{"world", Attribute(world)}};
  Value* half = u->has_input(s.half_in) ? u->input(s.half_in) : nullptr;
  const bool shard_master = master_only_updated(p, u, half);
  const int64_t master_bytes = static_cast<int64_t>(p->data().nbytes());
  st.full_master_bytes += master_bytes;
  Value* master = nullptr;
  if (shard_master) {
    // Zeros here: every rank's graph is the same; the session cuts its shard of %w into it.
    master = g.add_state(g.unique_name(p->name() + ".master"), Tensor(p->dtype(), {c}));
    u->set_input(0, master);
    st.master_bytes += static_cast<int64_t>(master->data().nbytes());
    record(shards, master);
    record(masters, master);
  } else {
    u->set_input(0, apply_node(g, "Shard", {p}, p->name() + ".shard", u, w)->output(0));
    st.master_bytes += master_bytes;
  }
  u->set_input(1, grad_shard);
  if (half) u->set_input(s.half_in, apply_node(g, "Shard", {half}, half->name() + ".shard", u, w)->output(0));
  for (int m : s.moments) {
    if (!u->has_input(m)) continue;
    Value* v = u->input(m);
    OTTER_CHECK(v->kind() == ValueKind::kState, "all-reduce{zero=1}: input ", m, " of ", u->describe(),
                " is not optimizer state");
    st.full_state_bytes += static_cast<int64_t>(v->data().nbytes());
    Tensor zeros(v->dtype(), {c});
    v->set_data(zeros);
    v->set_shape(Shape::of({c}));
    st.state_bytes += static_cast<int64_t>(zeros.nbytes());
    record(shards, v);
  }
  infer_node(*u);
  Node* after = next_node(g, u);
  if (shard_master) {
    // The update writes the master shard in place; %w keeps its initial value and is updated no more.
    g.rename_value(u->output(0), g.unique_name(master->name() + ".new"));
    g.state_updates.erase(p);
    g.state_updates[master] = u->output(0);
  } else {
    // The update now writes shards (%w.shard.new); the gathered weight takes the name %w.new.
    g.rename_value(u->output(0), g.unique_name(p->name() + ".shard.new"));
    Value* full = apply_node(g, "AllGather", {u->output(0), p}, p->name() + ".new", after, w)->output(0);
    g.state_updates[p] = full;
    st.gather_bytes += master_bytes;
  }
  if (half) {
    g.rename_value(u->output(s.half_out), g.unique_name(half->name() + ".shard.new"));
    Value* h = apply_node(g, "AllGather", {u->output(s.half_out), half}, half->name() + ".new", after, w)->output(0);
    g.state_updates[half] = h;
    st.gather_bytes += static_cast<int64_t>(c * world * dtype_size(half->dtype()));
  }
}

}  // namespace

namespace {

// The STATE=PARAMETER list under metadata `key`.
std::map<std::string, std::string> read_pairs(const Graph& g, const char* key) {
  std::map<std::string, std::string> out;
  auto it = g.metadata.find(key);
  if (it == g.metadata.end()) return out;
  const std::string& text = it->second;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = text.find(',', pos);
    if (end == std::string::npos) end = text.size();
    const std::string item = text.substr(pos, end - pos);
    const size_t eq = item.find('=');
    OTTER_CHECK(eq != std::string::npos, "graph metadata ", key, ": '", item, "' is not STATE=PARAMETER");
    out[item.substr(0, eq)] = item.substr(eq + 1);
    pos = end + 1;
  }
  return out;
}

}  // namespace

std::map<std::string, std::string> zero_shards(const Graph& g) { return read_pairs(g, kShardsKey); }
std::map<std::string, std::string> zero_masters(const Graph& g) { return read_pairs(g, kMastersKey); }

ZeroStats shard_optimizer_state(Graph& g, int64_t world) {
  Node* first_apply = first_apply_node(g, "all-reduce{zero=1}");
  ZeroStats st;
  std::string shards, masters;
  // Every reduce-scatter first (the gradients of the whole step), then the apply program's readers
  // of each accumulator take its shard.
  std::vector<std::pair<Value*, Value*>> params;
  for (const auto& [p, acc] : g.gradients) {
    Node* rs = apply_node(g, "ReduceScatter", {acc}, acc->name() + ".shard", first_apply,
                          {{"op", Attribute(std::string("sum"))}, {"world", Attribute(world)}});
    const std::vector<std::pair<Node*, int>> uses = acc->uses();
    for (auto [user, slot] : uses)
      if (user->program() == Program::kApply && user != rs) user->set_input(slot, rs->output(0));
    params.emplace_back(p, rs->output(0));
    ++st.tensors;
    st.scatter_bytes += static_cast<int64_t>(acc->data().nbytes());
  }
  for (auto [p, shard] : params) shard_update(g, p, shard, world, shards, masters, st);
  // The step counter stays whole (one scalar per rank), as torch's ZeRO keeps it.
  for (Value* v : g.state()) {
    auto up = g.state_updates.find(v);
    Node* w = up == g.state_updates.end() || !up->second ? nullptr : up->second->producer();
    if (w && w->domain() == kOtterDomain && w->op_type() == "StepCount") {
      st.state_bytes += static_cast<int64_t>(v->data().nbytes());
      st.full_state_bytes += static_cast<int64_t>(v->data().nbytes());
    }
  }
  combine_finite(g, world);
  combine_norms(g, world);
  g.metadata[kShardsKey] = shards;
  if (!masters.empty()) g.metadata[kMastersKey] = masters;
  return st;
}

}  // namespace otter
