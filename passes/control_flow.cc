// Inlining of If and unrolling of Loop and Scan (see control_flow.h).
#include "passes/control_flow.h"

#include <algorithm>
#include <map>
#include <set>

#include "graph/control_flow.h"
#include "graph/error.h"
#include "graph/op_table.h"

namespace otter {

namespace {

// Copies of subgraphs inserted before one node, with the names and constants they need.
class Inliner {
 public:
  Inliner(Graph& g, Node* at) : g_(g), at_(at), base_(at->output(0) ? at->output(0)->name() : at->op_type()) {}

  // One copy of `sub` reading `bind` (its inputs, in order) and its captures from the node's
  // implicit inputs; returns the copy's outputs.
  std::vector<Value*> copy(const Graph& sub, const std::vector<Value*>& bind) {
    std::map<const Value*, Value*> map;
    OTTER_CHECK(bind.size() == sub.inputs().size(), at_->describe(), ": subgraph '", sub.name, "' takes ",
                sub.inputs().size(), " inputs");
    for (size_t i = 0; i < bind.size(); ++i) map[sub.inputs()[i]] = bind[i];
    int next = at_->num_formal_inputs();
    for (const Graph* s : at_->subgraphs()) {
      for (const Value* c : s->captures()) {
        if (s == &sub) map[c] = at_->input(next);
        ++next;
      }
    }
    for (const Value* v : sub.initializers())
      map[v] = g_.add_initializer(g_.unique_name(str_cat(base_, ".", v->name())), v->data(), false);
    for (const auto& np : sub.nodes()) {
      std::vector<Value*> ins;
      for (const Value* in : np->inputs()) ins.push_back(in ? map.at(in) : nullptr);
      std::vector<std::string> names;
      for (const Value* o : np->outputs()) names.push_back(o ? g_.unique_name(str_cat(base_, ".", o->name())) : "");
      Node* m = g_.add_node(np->op_type(), ins, names, np->domain(), at_);
      m->set_opset(np->opset());
      m->set_program(at_->program());
      if (!np->name().empty()) m->set_name(str_cat(at_->name().empty() ? base_ : at_->name(), "/", np->name()));
      for (const auto& [k, a] : np->attrs()) m->set_attr(k, a);
      for (int i = 0; i < np->num_outputs(); ++i) {
        if (!np->output(i)) continue;
        m->output(i)->set_dtype(np->output(i)->dtype());
        m->output(i)->set_shape(np->output(i)->shape());
        map[np->output(i)] = m->output(i);
        made_.insert(m->output(i));
      }
      infer_node(*m);
    }
    std::vector<Value*> outs;
    for (const Value* o : sub.outputs()) outs.push_back(map.at(o));
    return outs;
  }

  Value* constant(Tensor t, const std::string& what) {
    return g_.add_initializer(g_.unique_name(str_cat(base_, ".", what)), std::move(t), false);
  }
  Value* emit(const std::string& op, const std::vector<Value*>& ins, std::map<std::string, Attribute> attrs = {}) {
    Node* m = g_.add_node(op, ins, {g_.unique_name(str_cat(base_, ".", op))}, "", at_);
    m->set_program(at_->program());
    for (auto& [k, a] : attrs) m->set_attr(k, std::move(a));
    infer_node(*m);
    made_.insert(m->output(0));
    return m->output(0);
  }
  // Stacks `ys` along a new `axis` (Unsqueeze each, then Concat).
  Value* stack(const std::vector<Value*>& ys, int64_t axis) {
    Value* ax = constant(Tensor::from_vector<int64_t>({1}, {axis}), "axis");
    std::vector<Value*> parts;
    for (Value* y : ys) parts.push_back(emit("Unsqueeze", {y, ax}));
    return emit("Concat", parts, {{"axis", Attribute(axis)}});
  }

  // Replaces the node's outputs by `vals` under the outputs' names, then removes the node. A
  // value this inliner made takes the name; any other (an input, a constant, a value used twice)
  // is renamed through an Identity where the output was a graph output.
  void finish(const std::vector<Value*>& vals) {
    std::vector<std::string> names;
    std::vector<std::vector<size_t>> positions;  // where each output is a graph output
    for (int i = 0; i < at_->num_outputs(); ++i) {
      Value* o = at_->output(i);
      names.push_back(o ? o->name() : "");
      positions.emplace_back();
      for (size_t p = 0; p < g_.outputs().size(); ++p)
        if (o && g_.outputs()[p] == o) positions.back().push_back(p);
      if (o) g_.replace_all_uses(o, vals[i]);
    }
    g_.remove_node(at_);
    std::vector<Value*> outs = g_.outputs();
    for (size_t i = 0; i < vals.size(); ++i) {
      if (names[i].empty()) continue;
      Value* v = vals[i];
      if (made_.count(v) && !renamed_.count(v)) {
        g_.rename_value(v, names[i]);
        renamed_.insert(v);
      } else if (!positions[i].empty()) {
        Node* id = g_.add_node("Identity", {v}, {names[i]});
        id->set_program(v->producer() ? v->producer()->program() : Program::kMicroStep);
        infer_node(*id);
        for (size_t p : positions[i]) outs[p] = id->output(0);
      }
    }
    g_.set_outputs(outs);
  }

 private:
  Graph& g_;
  Node* at_;
  std::string base_;
  std::set<const Value*> made_, renamed_;
};

bool inline_if(Graph& g, Node* n) {
  std::optional<bool> cond = constant_bool(n->input(0));
  if (!cond) return false;
  Inliner in(g, n);
  std::vector<Value*> outs = in.copy(subgraph_attr(*n, *cond ? "then_branch" : "else_branch"), {});
  in.finish(outs);
  return true;
}

bool unroll_loop(Graph& g, Node* n) {
  std::optional<int64_t> trips = loop_static_trip_count(*n);
  if (!trips || *trips > kMaxUnrolledIterations) return false;
  const Graph& body = subgraph_attr(*n, "body");
  const int carried = n->num_formal_inputs() - 2;
  const int scans = n->num_outputs() - carried;
  if (*trips == 0 && scans > 0) return false;  // empty scan outputs would need their element shapes
  Inliner in(g, n);
  std::vector<Value*> v;
  for (int j = 0; j < carried; ++j) v.push_back(n->input(2 + j));
  std::vector<std::vector<Value*>> ys(scans);
  Tensor yes(DataType::kBool, {});
  yes.data<bool>()[0] = true;
  Value* cond = *trips ? in.constant(yes, "cond") : nullptr;
  for (int64_t it = 0; it < *trips; ++it) {
    std::vector<Value*> bind{in.constant(Tensor::scalar<int64_t>(it), str_cat("iter", it)), cond};
    bind.insert(bind.end(), v.begin(), v.end());
    std::vector<Value*> outs = in.copy(body, bind);
    for (int j = 0; j < carried; ++j) v[j] = outs[1 + j];
    for (int k = 0; k < scans; ++k) ys[k].push_back(outs[1 + carried + k]);
  }
  for (int k = 0; k < scans; ++k) v.push_back(in.stack(ys[k], 0));
  in.finish(v);
  return true;
}

bool unroll_scan(Graph& g, Node* n) {
  const ScanSpec spec = scan_spec(*n);
  int64_t len = -1;
  std::vector<int64_t> axes;
  for (int m = 0; m < spec.num_scan_inputs; ++m) {
    const Shape& x = n->input(spec.num_state + m)->shape();
    if (!x.rank_known) return false;
    int64_t a = spec.input_axes[m] < 0 ? spec.input_axes[m] + x.rank() : spec.input_axes[m];
    if (a < 0 || a >= x.rank() || !x.dims[a].is_static()) return false;
    if (len >= 0 && len != x.dims[a].value) return false;
    len = x.dims[a].value;
    axes.push_back(a);
  }
  if (len <= 0 || len > kMaxUnrolledIterations) return false;
  const Graph& body = subgraph_attr(*n, "body");
  for (int k = 0; k < spec.num_scan_outputs; ++k)
    if (!body.outputs()[spec.num_state + k]->shape().rank_known) return false;
  Inliner in(g, n);
  std::vector<Value*> state;
  for (int j = 0; j < spec.num_state; ++j) state.push_back(n->input(j));
  std::vector<std::vector<Value*>> ys(spec.num_scan_outputs);
  for (int64_t t = 0; t < len; ++t) {
    std::vector<Value*> bind = state;
    for (int m = 0; m < spec.num_scan_inputs; ++m) {
      const int64_t idx = spec.input_directions[m] ? len - 1 - t : t;
      Value* i = in.constant(Tensor::scalar<int64_t>(idx), str_cat("t", idx));
      bind.push_back(in.emit("Gather", {n->input(spec.num_state + m), i}, {{"axis", Attribute(axes[m])}}));
    }
    std::vector<Value*> outs = in.copy(body, bind);
    for (int j = 0; j < spec.num_state; ++j) state[j] = outs[j];
    for (int k = 0; k < spec.num_scan_outputs; ++k) ys[k].push_back(outs[spec.num_state + k]);
  }
  for (int k = 0; k < spec.num_scan_outputs; ++k) {
    if (spec.output_directions[k]) std::reverse(ys[k].begin(), ys[k].end());
    const int64_t rank = ys[k][0]->shape().rank() + 1;
    const int64_t a = spec.output_axes[k] < 0 ? spec.output_axes[k] + rank : spec.output_axes[k];
    state.push_back(in.stack(ys[k], a));
  }
  in.finish(state);
  return true;
}

}  // namespace

bool inline_control_flow(Graph& g, Node* n) {
  if (!n->domain().empty()) return false;
  if (n->op_type() == "If") return inline_if(g, n);
  if (n->op_type() == "Loop") return unroll_loop(g, n);
  if (n->op_type() == "Scan") return unroll_scan(g, n);
  return false;
}

}  // namespace otter
