// fuse-attention pass (see fuse_attention.h). Identity Casts (to the input's own type, as GPT-2's and
// LLaMA's exports keep `.to(dtype)` calls) between the steps of the chain are looked through and removed.
#include "passes/fuse_attention.h"

#include <algorithm>
#include <cmath>
#include <optional>

#include "graph/error.h"
#include "graph/op_table.h"
#include "passes/pattern.h"

namespace otter {

const OptionTable<FuseAttentionOptions>& FuseAttentionOptions::table() {
  using S = FuseAttentionOptions;
  static const OptionTable<S> t{
      option("enabled", &S::enabled, "fuse (false: leave the graph as it is)"),
      option("gqa", &S::gqa, "read K and V expanded from fewer heads (repeat_kv) unexpanded"),
  };
  return t;
}

namespace {

using pattern::const_scalar;
using pattern::is_op;

// The producer of v when v feeds nothing else and is not a graph output.
Node* single_use_producer(const Value* v) { return pattern::single_use(v) ? v->producer() : nullptr; }

// What the matcher found, from the final MatMul up.
struct Match {
  Node *out = nullptr, *dropout = nullptr, *softmax = nullptr, *mask = nullptr, *scale = nullptr, *scores = nullptr;
  // BART's layout: scores [B*H, S, T] reshaped to [B, H, S, T] (split) for the mask, and back (merge).
  Node *split = nullptr, *merge = nullptr;
  Value *q = nullptr, *kt = nullptr, *v = nullptr, *mask_value = nullptr;
  double scale_value = 1, fill = -INFINITY, dropout_ratio = 0;
  std::string mask_mode = "none";
  std::vector<Node*> casts;  // identity Casts looked through
};

// A Cast to its input's own type (exports keep `.to(dtype)` calls that are identities in fp32).
bool is_identity_cast(const Node* n) {
  return is_op(n, "Cast") && n->output(0) && n->input(0)->dtype() == n->output(0)->dtype();
}

// single_use_producer(v), looking through identity Casts (recorded in `casts` when given).
Node* producer(const Value* v, std::vector<Node*>* casts = nullptr) {
  Node* p = single_use_producer(v);
  while (is_identity_cast(p)) {
    if (casts) casts->push_back(p);
    p = single_use_producer(p->input(0));
  }
  return p;
}

// The ratio of a Dropout that drops in training with constant ratio and training_mode and whose
// mask output nobody reads: Attention's own dropout takes its place. nullopt otherwise.
std::optional<double> fusable_dropout(const Node& d) {
  if (d.num_outputs() > 1 && !pattern::unread(d.output(1))) return std::nullopt;
  std::optional<double> training = d.has_input(2) ? const_scalar(d.input(2)) : std::nullopt;
  std::optional<double> ratio = d.has_input(1) ? const_scalar(d.input(1)) : std::optional<double>(0.5);
  if (!training || *training == 0 || !ratio || !(*ratio > 0 && *ratio < 1)) return std::nullopt;
  return ratio;
}

// Dropout that returns its input unchanged: no training_mode, or a constant false one, or ratio 0.
bool dropout_is_identity(const Node& d) {
  if (d.num_outputs() > 1 && d.output(1) && !d.output(1)->uses().empty()) return false;
  if (!d.has_input(2)) return true;
  std::optional<double> training = const_scalar(d.input(2));
  if (training && *training == 0) return true;
  std::optional<double> ratio = d.has_input(1) ? const_scalar(d.input(1)) : std::optional<double>(0.5);
  return ratio && *ratio == 0;
}

bool softmax_on_last_axis(const Node& s) {
  const Shape& x = s.input(0)->shape();
  if (!x.rank_known || s.opset() < 13) return false;
  const int64_t axis = s.attr_i("axis", -1);
  return axis == -1 || axis == x.rank() - 1;
}

// The mask step Z -> X: Where(m, fill, X), Where(m, X, fill), Add(X, mask), Add(mask, X).
// Returns X, or nullptr when `n` is no mask step.
Value* match_mask(Node* n, Match& m) {
  if (is_op(n, "Where") && n->input(0)->dtype() == DataType::kBool) {
    for (int keep : {1, 2}) {
      std::optional<double> fill = const_scalar(n->input(3 - keep));
      if (!fill) continue;
      m.mask = n;
      m.mask_value = n->input(0);
      m.fill = *fill;
      m.mask_mode = keep == 2 ? "fill_true" : "fill_false";
      return n->input(keep);
    }
    return nullptr;
  }
  if (is_op(n, "Add")) {
    for (int x : {0, 1}) {
      Value* mask = n->input(1 - x);
      Node* p = producer(n->input(x));
      if (!is_float(mask->dtype()) || !p) continue;
      if (!is_op(p, "MatMul") && !is_op(p, "Mul") && !is_op(p, "Div") && !is_op(p, "Reshape")) continue;
      m.mask = n;
      m.mask_value = mask;
      m.mask_mode = "add";
      return n->input(x);
    }
  }
  return nullptr;
}

// BART's mask step: Z = Reshape(Add(Reshape(X, [B, H, S, T]), mask), [B*H, S, T]), `merge` the
// outer Reshape. Returns X, or nullptr.
Value* match_split_mask(Node* merge, Match& m) {
  Node* add = producer(merge->input(0), &m.casts);
  if (!is_op(add, "Add")) return nullptr;
  Value* x = match_mask(add, m);
  Node* split = x ? producer(x, &m.casts) : nullptr;
  if (!is_op(split, "Reshape")) return nullptr;
  m.split = split;
  m.merge = merge;
  return split->input(0);
}

// The scale step X -> S: Mul(S, c), Mul(c, S), Div(S, c). Returns S or nullptr.
Value* match_scale(Node* n, Match& m) {
  if (is_op(n, "Div")) {
    std::optional<double> c = const_scalar(n->input(1));
    if (!c || *c == 0) return nullptr;
    m.scale = n;
    m.scale_value = 1 / *c;
    return n->input(0);
  }
  if (!is_op(n, "Mul")) return nullptr;
  for (int s : {0, 1}) {
    std::optional<double> c = const_scalar(n->input(1 - s));
    if (!c) continue;
    m.scale = n;
    m.scale_value = *c;
    return n->input(s);
  }
  return nullptr;
}

// The split layout: scores [N, S, T] split into [B, H, S, T] and merged back, with H, S, T, D and Dv
// static, so that Q, Kt and V can be read as [B, H, S, D], [B, H, D, T] and [B, H, T, Dv].
bool split_fits(const Match& m) {
  const Shape &sc = m.scores->output(0)->shape(), &sp = m.split->output(0)->shape(), &y = m.out->output(0)->shape();
  if (!sc.rank_known || sc.rank() != 3 || !sp.rank_known || sp.rank() != 4 || !(m.merge->output(0)->shape() == sc))
    return false;
  if (!y.rank_known || y.rank() != 3 || !y.dims[1].is_static() || !y.dims[2].is_static()) return false;
  const Shape &q = m.q->shape(), &v = m.v->shape();
  for (const Dim& d : {sp.dims[1], sp.dims[2], sp.dims[3], q.dims[2], v.dims[2]})
    if (!d.is_static()) return false;
  if (!(sp.dims[2] == sc.dims[1]) || !(sp.dims[3] == sc.dims[2])) return false;
  const Dim n = sc.dims[0], b = sp.dims[0];
  return n.is_static() && b.is_static() ? n.value == b.value * sp.dims[1].value : !n.is_static() && !b.is_static();
}

// Whether Q, Kt and V have the shapes Attention takes ([..., H, S, D], [..., Hk, D, T], [..., Hk, T, Dv]).
bool operands_fit(const Match& m) {
  const Shape &q = m.q->shape(), &k = m.kt->shape(), &v = m.v->shape();
  if (!q.rank_known || !k.rank_known || !v.rank_known || q.rank() < 2 || k.rank() != q.rank() || v.rank() != q.rank())
    return false;
  if (!is_float(m.q->dtype()) || m.kt->dtype() != m.q->dtype() || m.v->dtype() != m.q->dtype()) return false;
  const int64_t r = q.rank();
  for (int64_t a = 0; a + 2 < r; ++a)
    if (!(k.dims[a] == q.dims[a]) || !(v.dims[a] == q.dims[a])) return false;
  // The mask and scale steps keep the scores' shape (a mask broadcasting them wider is not fused).
  const Shape& sc = m.scores->output(0)->shape();
  const Shape& masked = m.split ? m.split->output(0)->shape() : sc;
  if (m.scale && !(m.scale->output(0)->shape() == sc)) return false;
  if (m.mask && !(m.mask->output(0)->shape() == masked)) return false;
  if (m.split && !split_fits(m)) return false;
  if (!m.mask_value) return true;
  const Shape& mk = m.mask_value->shape();
  return mk.rank_known && mk.rank() <= masked.rank();
}

// Matches the chain ending at MatMul `out`; fills `m`. Sets *dropout_drops where only a dropping
// Dropout stood in the way.
bool match(Node* out, Match& m, bool* dropout_drops) {
  if (!is_op(out, "MatMul")) return false;
  m.out = out;
  m.v = out->input(1);
  Node* n = producer(out->input(0), &m.casts);
  if (is_op(n, "Dropout")) {
    if (!dropout_is_identity(*n)) {
      std::optional<double> ratio = fusable_dropout(*n);
      *dropout_drops = !ratio && is_op(producer(n->input(0)), "Softmax");
      if (!ratio) return false;
      m.dropout_ratio = *ratio;
    }
    m.dropout = n;
    n = producer(n->input(0), &m.casts);
  }
  if (!is_op(n, "Softmax") || !softmax_on_last_axis(*n)) return false;
  m.softmax = n;
  n = producer(n->input(0), &m.casts);
  if (is_op(n, "Reshape")) {
    Value* inner = match_split_mask(n, m);
    if (!inner) return false;
    n = producer(inner, &m.casts);
  } else if (Value* inner = match_mask(n, m)) {
    n = producer(inner, &m.casts);
  }
  if (Value* inner = match_scale(n, m)) n = producer(inner, &m.casts);
  if (!is_op(n, "MatMul")) return false;
  m.scores = n;
  m.q = n->input(0);
  m.kt = n->input(1);
  return operands_fit(m);
}

// kv = Reshape(Expand(Unsqueeze(kv0, axis 2)), [B, Hk*rep, T, D]) with the Expand making
// [B, Hk, rep, T, D] (static head counts): kv0, else nullptr.
Value* unexpanded(Value* kv) {
  Node* r = kv->producer();
  if (!is_op(r, "Reshape")) return nullptr;
  Node* e = r->input(0)->producer();
  if (!is_op(e, "Expand")) return nullptr;
  Node* u = e->input(0)->producer();
  if (!is_op(u, "Unsqueeze") || !u->has_input(1) || !u->input(1)->has_data()) return nullptr;
  const Tensor& axes = u->input(1)->data();
  if (axes.numel() != 1 || axes.get_as_double(0) != 2) return nullptr;
  Value* kv0 = u->input(0);
  const Shape &s0 = kv0->shape(), &se = e->output(0)->shape(), &sr = kv->shape();
  if (!s0.rank_known || !se.rank_known || !sr.rank_known || s0.rank() != 4 || se.rank() != 5 || sr.rank() != 4)
    return nullptr;
  const auto& d0 = s0.dims;
  const auto& de = se.dims;
  const auto& dr = sr.dims;
  const auto known = [](const Dim& d) { return d.is_static() || d.is_symbolic(); };
  for (const Dim& d : d0)
    if (!known(d)) return nullptr;
  if (!(de[0] == d0[0] && de[1] == d0[1] && de[3] == d0[2] && de[4] == d0[3])) return nullptr;
  if (!(dr[0] == d0[0] && dr[2] == d0[2] && dr[3] == d0[3])) return nullptr;
  if (!d0[1].is_static() || !de[2].is_static() || !dr[1].is_static() || dr[1].value != d0[1].value * de[2].value)
    return nullptr;
  return kv0;
}

// Reads K and V unexpanded where both are head-expanded copies (Kt through a Transpose of the last
// two axes). Returns whether it did.
bool look_through_repeat(Graph& g, Match& m) {
  Value* v0 = unexpanded(m.v);
  Node* t = m.kt->producer();
  if (!v0 || !is_op(t, "Transpose") || t->attr_ints("perm") != std::vector<int64_t>{0, 1, 3, 2}) return false;
  Value* k0 = unexpanded(t->input(0));
  if (!k0) return false;
  Node* kt0 = g.add_node("Transpose", {k0}, {g.unique_name(k0->name() + ".t")}, "", m.scores);
  kt0->set_attr("perm", Attribute(std::vector<int64_t>{0, 1, 3, 2}));
  infer_node(*kt0);
  m.kt = kt0->output(0);
  m.v = v0;
  return true;
}

// Reshape(v, dims) named `name`, before `before`.
Value* reshaped(Graph& g, Value* v, const std::vector<int64_t>& dims, const std::string& name, Node* before) {
  Value* shape = g.add_initializer(g.unique_name(name + ".shape"),
                                   Tensor::from_vector<int64_t>({static_cast<int64_t>(dims.size())}, dims), false);
  Node* r = g.add_node("Reshape", {v, shape}, {g.unique_name(name)}, "", before);
  infer_node(*r);
  return r->output(0);
}

// The split layout: Q, Kt and V read as [B, H, S, D], [B, H, D, T], [B, H, T, Dv] (B as -1, so a
// symbolic batch stays one). Returns the 4-D operands.
std::vector<Value*> split_operands(Graph& g, const Match& m) {
  const std::vector<Dim>& sp = m.split->output(0)->shape().dims;
  const int64_t h = sp[1].value, s = sp[2].value, t = sp[3].value;
  const int64_t d = m.q->shape().dims[2].value, dv = m.v->shape().dims[2].value;
  return {reshaped(g, m.q, {-1, h, s, d}, m.q->name() + ".heads", m.scores),
          reshaped(g, m.kt, {-1, h, d, t}, m.kt->name() + ".heads", m.scores),
          reshaped(g, m.v, {-1, h, t, dv}, m.v->name() + ".heads", m.scores)};
}

void replace(Graph& g, const Match& m) {
  Value* y = m.out->output(0);
  const std::string name = y->name();
  g.rename_value(y, g.unique_name(name + ".unfused"));
  std::vector<Value*> ins = m.split ? split_operands(g, m) : std::vector<Value*>{m.q, m.kt, m.v};
  if (m.mask_value) ins.push_back(m.mask_value);
  if (!g.opset_imports.count(kOtterDomain)) g.opset_imports[kOtterDomain] = 1;
  const std::string yname = m.split ? g.unique_name(name + ".heads") : name;
  std::vector<std::string> outs = {yname, g.unique_name(name + ".lse")};
  if (m.dropout_ratio > 0) outs.push_back(g.unique_name(name + ".seed"));
  Node* a = g.add_node("Attention", ins, outs, kOtterDomain, m.out);
  if (m.dropout_ratio > 0) a->set_attr("dropout", Attribute(static_cast<float>(m.dropout_ratio)));
  a->set_name(m.out->name().empty() ? name : m.out->name() + "/Attention");
  a->set_attr("scale", Attribute(static_cast<float>(m.scale_value)));
  if (m.mask_value) {
    a->set_attr("mask_mode", Attribute(m.mask_mode));
    if (m.mask_mode != "add") a->set_attr("fill", Attribute(static_cast<float>(m.fill)));
  }
  infer_node(*a);
  Value* fused = a->output(0);
  if (m.split) {  // back to [B*H, S, Dv], under Y's name (free since Y was renamed)
    const std::vector<Dim>& yd = y->shape().dims;
    fused = reshaped(g, fused, {-1, yd[1].value, yd[2].value}, name, m.out);
  }
  g.replace_all_uses(y, fused);
  // Consumer first: each node's outputs are unused when it goes.
  std::vector<Node*> chain = {m.out, m.dropout, m.softmax, m.merge, m.mask, m.split, m.scale, m.scores};
  chain.insert(chain.end(), m.casts.begin(), m.casts.end());
  std::erase(chain, nullptr);
  const auto unused = [](const Node* n) {
    return std::none_of(n->outputs().begin(), n->outputs().end(),
                        [](const Value* o) { return o && !o->uses().empty(); });
  };
  for (auto it = std::find_if(chain.begin(), chain.end(), unused); it != chain.end();
       it = std::find_if(chain.begin(), chain.end(), unused)) {
    g.remove_node(*it);
    chain.erase(it);
  }
}

}  // namespace

FuseAttentionStats fuse_attention(Graph& g, const FuseAttentionOptions& o) {
  FuseAttentionStats st;
  if (!o.enabled) return st;
  for (Node* n : g.node_list()) {
    Match m;
    bool dropout_drops = false;
    if (!match(n, m, &dropout_drops)) {
      st.skipped_dropout += dropout_drops;
      continue;
    }
    if (o.gqa && !m.split && look_through_repeat(g, m)) ++st.gqa;
    replace(g, m);
    ++st.fused;
    st.dropout += m.dropout_ratio > 0;
  }
  if (st.fused) g.remove_dead_nodes();
  return st;
}

std::string FuseAttentionPass::summary() const {
  return "replace MatMul-scale-mask-Softmax-MatMul attention with ai.otter.Attention (blocked, no stored "
         "probabilities)";
}

std::string FuseAttentionPass::unmet_precondition(const Graph& g) const { return before_autodiff(g); }

void FuseAttentionPass::run(Graph& g, PassContext&) {
  reset_counters();
  FuseAttentionStats st = fuse_attention(g, opts_);
  count("fused", st.fused);
  count("gqa", st.gqa);
  count("dropout", st.dropout);
  count("skipped_dropout", st.skipped_dropout);
}

}  // namespace otter
