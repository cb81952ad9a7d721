// fuse-bias-gelu pass (see fuse_bias_gelu.h).
#include "passes/fuse_bias_gelu.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <vector>

#include "graph/error.h"
#include "graph/op_table.h"
#include "passes/pattern.h"

namespace otter {

const OptionTable<FuseBiasGeluOptions>& FuseBiasGeluOptions::table() {
  using S = FuseBiasGeluOptions;
  static const OptionTable<S> t{
      option("enabled", &S::enabled, "fuse (false: leave the graph as it is)"),
      option("bias", &S::bias, "absorb the bias Add before the GELU chain into BiasGelu"),
  };
  return t;
}

namespace {

using pattern::const_scalar;
using pattern::is_op;

// The single consumer of v when v feeds nothing else and is not a graph output.
Node* single_user(const Value* v) { return pattern::single_use(v) ? v->uses()[0].first : nullptr; }

// Whether v is a one-element constant equal to `want` to float precision (exports store float32).
bool is_const(const Value* v, double want) {
  std::optional<double> c = const_scalar(v);
  return c && std::abs(*c - want) <= 1e-6 * std::abs(want);
}

// For a binary node n with `v` as one operand: the index of the other operand, or -1.
int other_operand(const Node* n, const Value* v) {
  if (n->num_inputs() != 2) return -1;
  if (n->input(0) == v) return 1;
  if (n->input(1) == v) return 0;
  return -1;
}

// n is Mul(v, c) or Mul(c, v) with c the constant `want`.
bool mul_by(const Node* n, const Value* v, double want) {
  const int o = is_op(n, "Mul") ? other_operand(n, v) : -1;
  return o >= 0 && is_const(n->input(o), want);
}

struct Match {
  Value* p = nullptr;  // the pre-activation
  Node* out = nullptr;  // the node making y
  std::vector<Node*> chain;  // consumer first, p's producer excluded
  Value *h = nullptr, *bias = nullptr;  // when the bias Add is absorbed
  Node* bias_add = nullptr;
};

// The chain through Erf node `erf`; fills m.p, m.out, m.chain.
bool match_chain(Node* erf, Match& m) {
  if (!is_op(erf, "Erf")) return false;
  Value* u = erf->input(0);
  Node* scale = u->producer();
  if (!scale || single_user(u) != erf) return false;
  Value* p = nullptr;
  if (is_op(scale, "Div") && is_const(scale->input(1), 1.4142135623730951)) {
    p = scale->input(0);
  } else if (is_op(scale, "Mul")) {
    for (int i : {0, 1})
      if (is_const(scale->input(1 - i), 0.7071067811865476)) p = scale->input(i);
  }
  if (!p || !is_float(p->dtype()) || !p->shape().rank_known) return false;
  Value* e = erf->output(0);
  Node* add1 = single_user(e);
  const int one = add1 && is_op(add1, "Add") ? other_operand(add1, e) : -1;
  if (one < 0 || !is_const(add1->input(one), 1.0)) return false;
  Value* a = add1->output(0);
  Node* mul_a = single_user(a);
  const int o = mul_a && is_op(mul_a, "Mul") ? other_operand(mul_a, a) : -1;
  if (o < 0) return false;
  Value* x = mul_a->input(o);
  std::vector<Node*> chain;
  if (x == p) {  // y = Mul(Mul(p, a), 0.5)
    Node* half = single_user(mul_a->output(0));
    if (!mul_by(half, mul_a->output(0), 0.5)) return false;
    chain = {half, mul_a, add1, erf, scale};
  } else {  // y = Mul(Mul(p, 0.5), a)
    Node* half = x->producer();
    if (single_user(x) != mul_a || !mul_by(half, p, 0.5)) return false;
    chain = {mul_a, half, add1, erf, scale};
  }
  // p feeds exactly the scale and the Mul that reads it.
  if (p->uses().size() != 2) return false;
  for (const auto& use : p->uses())
    if (use.first != scale && use.first != chain[1] && use.first != chain[0]) return false;
  for (const Node* n : chain)
    if (!(n->output(0)->shape() == p->shape()) || n->output(0)->dtype() != p->dtype()) return false;
  m.p = p;
  m.out = chain[0];
  m.chain = chain;
  return true;
}

// Absorbs p = Add(h, b) | Add(b, h), b 1-D of p's last-axis length, h of p's shape.
bool match_bias(Match& m) {
  Node* add = m.p->producer();
  if (!is_op(add, "Add") || m.p->is_graph_output()) return false;
  const Shape& ps = m.p->shape();
  if (ps.rank() < 1) return false;
  for (int b : {1, 0}) {
    Value *bias = add->input(b), *h = add->input(1 - b);
    const Shape& bs = bias->shape();
    if (bias->dtype() != m.p->dtype() || h->dtype() != m.p->dtype() || !bs.rank_known || bs.rank() != 1) continue;
    if (!bs.dims[0].is_static() || !(bs.dims[0] == ps.dims[ps.rank() - 1]) || !(h->shape() == ps)) continue;
    m.bias_add = add;
    m.h = h;
    m.bias = bias;
    return true;
  }
  return false;
}

void replace(Graph& g, const Match& m) {
  Value* y = m.out->output(0);
  const std::string name = y->name();
  g.rename_value(y, g.unique_name(name + ".unfused"));
  std::vector<Value*> ins = m.bias ? std::vector<Value*>{m.h, m.bias} : std::vector<Value*>{m.p};
  if (!g.opset_imports.count(kOtterDomain)) g.opset_imports[kOtterDomain] = 1;
  Node* f = g.add_node("BiasGelu", ins, {name}, kOtterDomain, m.out);
  f->set_name(m.out->name().empty() ? name : m.out->name() + "/BiasGelu");
  infer_node(*f);
  g.replace_all_uses(y, f->output(0));
  std::vector<Node*> chain = m.chain;
  if (m.bias_add) chain.push_back(m.bias_add);
  for (Node* n : chain) g.remove_node(n);  // consumer first: each node's outputs are unused when it goes
}

}  // namespace

FuseBiasGeluStats fuse_bias_gelu(Graph& g, const FuseBiasGeluOptions& o) {
  FuseBiasGeluStats st;
  if (!o.enabled) return st;
  // The Erfs first: replace() removes a chain's other nodes, which a walk over the node list would
  // then read after they were freed. A chain holds one Erf, so no listed Erf goes before its turn.
  std::vector<Node*> erfs;
  for (Node* n : g.node_list())
    if (is_op(n, "Erf")) erfs.push_back(n);
  for (Node* n : erfs) {
    Match m;
    if (!match_chain(n, m)) continue;
    const bool biased = o.bias && match_bias(m);
    replace(g, m);
    ++st.fused;
    st.biased += biased;
  }
  return st;
}

std::string FuseBiasGeluPass::summary() const {
  return "replace the exported erf GELU chain (and its bias Add) with ai.otter.BiasGelu (one kernel; the "
         "gradient recomputes the pre-activation)";
}

std::string FuseBiasGeluPass::unmet_precondition(const Graph& g) const { return before_autodiff(g); }

void FuseBiasGeluPass::run(Graph& g, PassContext&) {
  reset_counters();
  FuseBiasGeluStats st = fuse_bias_gelu(g, opts_);
  count("fused", st.fused);
  count("biased", st.biased);
}

}  // namespace otter
