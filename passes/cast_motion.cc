// cast-elimination's moves and fusions (see cast_motion.h).
#include "passes/cast_motion.h"

#include <initializer_list>
#include <map>
#include <string>
#include <vector>

#include "passes/cast_elimination.h"
#include "passes/pattern.h"

namespace otter {

namespace {

using pattern::add_cast;
using pattern::is_op;
using pattern::is_otter_op;
using pattern::suffixed;

bool is_cast(const Node* n) { return is_op(n, "Cast"); }
bool is_movement(const Node* n) { return is_op(n, "Reshape") || is_op(n, "Transpose"); }

// Both int64 constants with the same contents.
bool same_ints(const Value* a, const Value* b) {
  if (a == b) return true;
  if (!a || !b || !a->has_data() || !b->has_data() || a->kind() != ValueKind::kInitializer ||
      b->kind() != ValueKind::kInitializer || a->trainable() || b->trainable())
    return false;
  const Tensor &x = a->data(), &y = b->data();
  if (x.dtype() != DataType::kInt64 || y.dtype() != DataType::kInt64 || x.dims() != y.dims()) return false;
  for (int64_t i = 0; i < x.numel(); ++i)
    if (x.data<int64_t>()[i] != y.data<int64_t>()[i]) return false;
  return true;
}

bool same_reshape(const Node* a, const Node* b) {
  return a->program() == b->program() && a->num_inputs() == 2 && b->num_inputs() == 2 &&
         a->attr_i("allowzero", 0) == b->attr_i("allowzero", 0) && same_ints(a->input(1), b->input(1)) &&
         a->output(0)->shape() == b->output(0)->shape();
}

// A copy of movement node m reading x instead of its input 0, placed before m.
Node* copy_movement(Graph& g, Node* m, Value* x, const std::string& name) {
  std::vector<Value*> ins = m->inputs();
  ins[0] = x;
  Node* c = g.add_node(m->op_type(), ins, {name}, m->domain(), m);
  for (const auto& [k, a] : m->attrs()) c->set_attr(k, a);
  c->set_program(m->program());
  c->set_name(m->name());
  infer_node(*c);
  return c;
}

// `now` takes over `old`'s readers, name and shape; the nodes in `gone` (the old producers, their
// outputs then unread) are removed first.
void take_place(Graph& g, Value* old, Value* now, std::initializer_list<Node*> gone) {
  const std::string name = old->name();
  const Shape shape = old->shape();
  g.replace_all_uses(old, now);
  for (Node* n : gone) g.remove_node(n);
  g.rename_value(now, name);
  now->set_shape(shape);
}

// Cast(M(y), narrow) -> M(Cast(y, narrow)); the moved M's output takes the Cast's name.
bool hoist_narrowing(Graph& g, Node* cast) {
  Node* m = cast->input(0)->producer();
  Value *mid = cast->input(0), *out = cast->output(0);
  if (!is_movement(m) || m->program() != cast->program() || mid->uses().size() != 1 ||
      is_pinned_value(g, mid) || is_pinned_value(g, out))
    return false;
  Value* y = m->input(0);
  if (!is_float(y->dtype()) || !is_float(out->dtype()) || dtype_size(out->dtype()) >= dtype_size(y->dtype()))
    return false;
  Node* narrow = add_cast(g, y, out->dtype(), g.unique_name(suffixed(y->name(), out->dtype())), m);
  Node* moved = copy_movement(g, m, narrow->output(0), g.unique_name(out->name() + ".moved"));
  take_place(g, out, moved->output(0), {cast, m});
  return true;
}

// M(Cast(x, wide)) -> Cast(M(x), wide) for an exact Cast; the new Cast's output takes M's name.
bool sink_widening(Graph& g, Node* cast) {
  Value *x = cast->input(0), *wide = cast->output(0);
  if (wide->uses().size() != 1 || is_pinned_value(g, wide)) return false;
  auto [m, slot] = wide->uses()[0];
  if (slot != 0 || !is_movement(m) || m->program() != cast->program() || is_pinned_value(g, m->output(0)))
    return false;
  if (!is_float(x->dtype()) || dtype_size(wide->dtype()) <= dtype_size(x->dtype()) ||
      !cast_is_exact(x->dtype(), wide->dtype()))
    return false;
  Value* out = m->output(0);
  Node* moved = copy_movement(g, m, x, g.unique_name(suffixed(out->name(), x->dtype())));
  Node* back = add_cast(g, moved->output(0), wide->dtype(), g.unique_name(out->name() + ".moved"), m);
  take_place(g, out, back->output(0), {m, cast});
  return true;
}

// x when v = Cast(x, f32) widens a half x exactly.
Value* widened_half(const Value* v) {
  const Node* c = v ? v->producer() : nullptr;
  if (!is_cast(c) || v->dtype() != DataType::kFloat32 || !is_half(c->input(0)->dtype())) return nullptr;
  return c->input(0);
}

bool fuse_bias_gelu(Graph& g, Node* n) {
  Value* x = widened_half(n->input(0));
  Value* y = n->output(0);
  if (!x || (n->has_input(1) && n->input(1)->dtype() != DataType::kFloat32) || is_pinned_value(g, y) ||
      y->uses().empty())
    return false;
  for (const auto& [u, slot] : y->uses())
    if (!is_cast(u) || dtype_from_onnx(static_cast<int>(u->attr_i("to", 0))) != x->dtype()) return false;
  n->set_input(0, x);
  y->set_dtype(x->dtype());  // each reader is now a Cast to y's own type, which eliminate_casts drops
  return true;
}

bool fuse_bias_gelu_grad(Node* n) {
  Value *dy = widened_half(n->input(0)), *x = widened_half(n->input(1));
  if (!dy || !x || dy->dtype() != x->dtype() || !n->has_input(2) || n->input(2)->dtype() != DataType::kFloat32)
    return false;
  n->set_input(0, dy);
  n->set_input(1, x);  // dX stays float32: the bias's type
  return true;
}

// The float32 bias and the half x of Add(bias, Cast(x, f32)) (either order), the bias of x's
// trailing shape (1-D along the last axis up to x's whole shape) and the sum of x's shape; a bias
// Cast(h, f32) of a half h of x's type comes back as h. {nullptr, nullptr} otherwise.
std::pair<Value*, Value*> bias_and_half(const Node* add) {
  for (int i = 0; i < 2; ++i) {
    Value *bias = add->input(i), *x = widened_half(add->input(1 - i));
    if (!x || bias->dtype() != DataType::kFloat32) continue;
    const Shape &bs = bias->shape(), &xs = x->shape();
    if (!bs.is_static() || bs.rank() < 1 || !xs.rank_known || xs.rank() < bs.rank() || !(xs == add->output(0)->shape()))
      continue;
    bool trailing = true;  // the bias has x's trailing shape: it broadcasts over x's leading axes only
    for (int64_t i = 1; trailing && i <= bs.rank(); ++i) {
      const Dim& d = xs.dims[xs.rank() - i];
      trailing = d.is_static() && d.value == bs.dims[bs.rank() - i].value && d.value > 0;
    }
    if (!trailing) continue;
    // A bias that is itself a widened value of x's type is read as it is: the float32 sum of two
    // widened halves is the one Add(Cast, Cast) computes.
    if (Value* hb = widened_half(bias); hb && hb->dtype() == x->dtype()) bias = hb;
    return {bias, x};
  }
  return {nullptr, nullptr};
}

// Add(bias, Cast(x, f32)) -> BiasAdd(x, bias) {to=f32}, or BiasAdd(x, bias): half where every
// reader casts the sum back to x's type.
bool fuse_bias_add(Graph& g, Node* add) {
  Value* out = add->output(0);
  if (add->num_inputs() != 2 || out->dtype() != DataType::kFloat32 || is_pinned_value(g, out)) return false;
  auto [bias, x] = bias_and_half(add);
  if (!x) return false;
  bool half_out = !out->uses().empty();
  for (const auto& [u, slot] : out->uses())
    half_out = half_out && is_cast(u) && dtype_from_onnx(static_cast<int>(u->attr_i("to", 0))) == x->dtype();
  Node* fused = g.add_node("BiasAdd", {x, bias}, {g.unique_name(out->name() + ".fused")}, kOtterDomain, add);
  fused->set_program(add->program());
  fused->set_name(add->name());
  if (!half_out) fused->set_attr("to", Attribute(static_cast<int64_t>(dtype_to_onnx(DataType::kFloat32))));
  infer_node(*fused);
  take_place(g, out, fused->output(0), {add});
  return true;
}

// ReduceSum(Cast(x, f32), axes) of a half x -> ai.otter.ReduceSumF32(x, axes): the sums of the
// widened values, in one pass over x.
bool fuse_reduce_sum(Graph& g, Node* n) {
  Value* x = widened_half(n->input(0));
  Value* out = n->output(0);
  if (!x || n->has_attr("noop_with_empty_axes") || n->opset() < 13 || is_pinned_value(g, out)) return false;
  std::vector<Value*> ins = n->inputs();
  ins[0] = x;
  Node* sum = g.add_node("ReduceSumF32", ins, {g.unique_name(out->name() + ".fused")}, kOtterDomain, n);
  sum->set_program(n->program());
  sum->set_name(n->name());
  if (n->has_attr("keepdims")) sum->set_attr("keepdims", *n->find_attr("keepdims"));
  infer_node(*sum);
  take_place(g, out, sum->output(0), {n});
  return true;
}

}  // namespace

bool is_pinned_value(const Graph& g, const Value* v) {
  if (v->is_graph_output() || g.loss_seed == v) return true;
  for (const auto& [s, u] : g.state_updates)
    if (u == v) return true;
  for (const auto& [p, gr] : g.gradients)
    if (gr == v) return true;
  return false;
}

int64_t merge_duplicate_reshapes(Graph& g) {
  int64_t merged = 0;
  std::map<const Value*, std::vector<Node*>> seen;  // data input -> Reshapes of it so far
  for (Node* n : g.node_list()) {
    if (!is_op(n, "Reshape") || n->num_inputs() != 2) continue;
    std::vector<Node*>& same_input = seen[n->input(0)];
    Node* first = nullptr;
    for (Node* m : same_input)
      if (same_reshape(m, n)) first = m;
    if (!first || is_pinned_value(g, n->output(0))) {
      same_input.push_back(n);
      continue;
    }
    g.replace_all_uses(n->output(0), first->output(0));
    g.remove_node(n);
    ++merged;
  }
  return merged;
}

int64_t move_casts(Graph& g) {
  int64_t moved = 0;
  for (bool again = true; again;) {
    again = false;
    for (Node* n : g.node_list()) {
      if (!is_cast(n)) continue;
      if (hoist_narrowing(g, n) || sink_widening(g, n)) {
        ++moved;
        again = true;
        break;  // n and its neighbour are gone: take a fresh node list
      }
    }
  }
  return moved;
}

int64_t fuse_casts(Graph& g) {
  int64_t fused = 0;
  // Each rewrite removes at most the node it was given (after which the loop moves on), so the
  // list's other nodes stay valid.
  for (Node* n : g.node_list()) {
    if (is_otter_op(n, "BiasGelu")) {
      fused += fuse_bias_gelu(g, n);
    } else if (is_otter_op(n, "BiasGeluGrad")) {
      fused += fuse_bias_gelu_grad(n);
    } else if (is_op(n, "Add")) {
      fused += fuse_bias_add(g, n);
    } else if (is_op(n, "ReduceSum")) {
      fused += fuse_reduce_sum(g, n);
    }
  }
  return fused;
}

}  // namespace otter
