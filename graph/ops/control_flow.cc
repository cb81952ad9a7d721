// Op-table rows of the control-flow ops If, Loop and Scan (graph/control_flow.h): inference runs
// over their subgraphs after typing the subgraphs' inputs and captures from the node. Kernels:
// kernels/cpu/control_flow.cc (CPU only); canonicalize inlines or unrolls them where the
// condition or trip count is constant (passes/control_flow.cc).
#include "graph/control_flow.h"

#include "graph/gradient.h"
#include "graph/op_table.h"
#include "graph/ops/infer_util.h"

namespace otter {

void bind_captures(const Node& n) {
  int next = n.num_formal_inputs();
  for (Graph* g : n.subgraphs())
    for (Value* c : g->captures()) {
      const Value* outer = n.input(next++);
      OTTER_CHECK(outer, n.describe(), ": capture '", c->name(), "' of subgraph '", g->name, "' has no value");
      c->set_dtype(outer->dtype());
      c->set_shape(outer->shape());
    }
}

std::optional<Tensor> constant_value(const Value* v) {
  if (!v) return std::nullopt;
  if (v->kind() == ValueKind::kInitializer && !v->trainable() && v->has_data()) return v->data();
  const Node* p = v->producer();
  if (!p || !p->domain().empty() || p->op_type() != "Constant") return std::nullopt;
  const Attribute* a = p->find_attr("value");
  if (a && a->kind() == Attribute::Kind::kTensor) return a->t();
  if (const Attribute* i = p->find_attr("value_int"); i && i->kind() == Attribute::Kind::kInt)
    return Tensor::scalar<int64_t>(i->i());
  return std::nullopt;
}

std::optional<bool> constant_bool(const Value* v) {
  std::optional<Tensor> t = constant_value(v);
  if (!t || t->numel() != 1 || t->dtype() != DataType::kBool) return std::nullopt;
  return t->get_as_double(0) != 0;
}

Graph& subgraph_attr(const Node& n, const char* name) {
  const Attribute* a = n.find_attr(name);
  OTTER_CHECK(a, n.describe(), ": missing graph attribute '", name, "'");
  OTTER_CHECK(a->kind() == Attribute::Kind::kGraph && a->g(), n.describe(), ": attribute '", name,
              "' must be a graph");
  return *a->g();
}

std::optional<int64_t> loop_static_trip_count(const Node& loop) {
  std::optional<Tensor> m = constant_value(loop.input(0));
  if (!m || m->numel() != 1 || !is_integer(m->dtype())) return std::nullopt;
  if (loop.input(1) && constant_bool(loop.input(1)) != true) return std::nullopt;
  const Graph& body = subgraph_attr(loop, "body");
  if (body.inputs().size() < 2 || body.outputs().empty()) return std::nullopt;
  const Value* c = body.outputs()[0];
  // Identity chains (PyTorch's exporter writes one) pass the condition through unchanged.
  while (c && c->producer() && c->producer()->op_type() == "Identity" && c->producer()->domain().empty())
    c = c->producer()->input(0);
  if (c != body.inputs()[1] && constant_bool(c) != true) return std::nullopt;
  return std::max<int64_t>(0, static_cast<int64_t>(m->get_as_double(0)));
}

ScanSpec scan_spec(const Node& n) {
  ScanSpec s;
  const Graph& body = subgraph_attr(n, "body");
  s.num_scan_inputs = static_cast<int>(n.attr_i("num_scan_inputs", -1));
  const int formal = n.num_formal_inputs();
  OTTER_CHECK(s.num_scan_inputs >= 1 && s.num_scan_inputs <= formal, n.describe(),
              ": attribute 'num_scan_inputs' must be in [1, ", formal, "] (the inputs), got ", s.num_scan_inputs);
  s.num_state = formal - s.num_scan_inputs;
  s.num_scan_outputs = n.num_outputs() - s.num_state;
  OTTER_CHECK(s.num_scan_outputs >= 0, n.describe(), ": has ", n.num_outputs(), " outputs, fewer than its ",
              s.num_state, " state variables");
  OTTER_CHECK(static_cast<int>(body.inputs().size()) == formal, n.describe(), ": body takes ", body.inputs().size(),
              " inputs, but the node has ", formal, " (state variables and scan inputs)");
  OTTER_CHECK(static_cast<int>(body.outputs().size()) == n.num_outputs(), n.describe(), ": body returns ",
              body.outputs().size(), " values, but the node has ", n.num_outputs(), " outputs");
  auto list = [&](const char* name, int count) {
    std::vector<int64_t> v = n.attr_ints(name, std::vector<int64_t>(count, 0));
    OTTER_CHECK(static_cast<int>(v.size()) == count, n.describe(), ": attribute '", name, "' has ", v.size(),
                " entries, expected ", count);
    return v;
  };
  s.input_axes = list("scan_input_axes", s.num_scan_inputs);
  s.input_directions = list("scan_input_directions", s.num_scan_inputs);
  s.output_axes = list("scan_output_axes", s.num_scan_outputs);
  s.output_directions = list("scan_output_directions", s.num_scan_outputs);
  for (int64_t d : s.input_directions) OTTER_CHECK(d == 0 || d == 1, n.describe(), ": scan directions are 0 or 1");
  for (int64_t d : s.output_directions) OTTER_CHECK(d == 0 || d == 1, n.describe(), ": scan directions are 0 or 1");
  return s;
}

namespace {

// The shape both a and b fit: dims they agree on, unknown dims elsewhere (unknown rank if the
// ranks differ).
Shape merge_shapes(const Shape& a, const Shape& b) {
  if (!a.rank_known || !b.rank_known || a.rank() != b.rank()) return Shape::unknown();
  Shape out;
  for (int64_t i = 0; i < a.rank(); ++i) out.dims.push_back(a.dims[i] == b.dims[i] ? a.dims[i] : Dim());
  return out;
}

void infer_subgraph(InferContext& ctx, Graph& g, const char* attr) {
  try {
    infer_graph(g);
  } catch (const Error& e) {
    ctx.error(str_cat(attr, " '", g.name, "': ", e.what()));
  }
}

void check_formal(InferContext& ctx, int lo, int hi) {
  const int formal = ctx.node().num_formal_inputs();
  if (formal < lo || formal > hi)
    ctx.error(str_cat("takes ", lo == hi ? std::to_string(lo) : str_cat(lo, " to ", hi), " inputs, got ", formal));
}

// If: outputs typed from the branches; where the branches disagree on a dim, it is unknown.
void infer_if(InferContext& ctx) {
  Node& n = ctx.node();
  check_formal(ctx, 1, 1);
  infer::check_type(ctx, 0, infer::Types::kBool);
  Graph& then_g = subgraph_attr(n, "then_branch");
  Graph& else_g = subgraph_attr(n, "else_branch");
  bind_captures(n);
  for (Graph* g : {&then_g, &else_g}) {
    if (!g->inputs().empty()) ctx.error(str_cat("branch '", g->name, "' must take no inputs, takes ", g->inputs().size()));
    if (static_cast<int>(g->outputs().size()) != n.num_outputs())
      ctx.error(str_cat("branch '", g->name, "' returns ", g->outputs().size(), " values but the node has ",
                        n.num_outputs(), " outputs"));
  }
  infer_subgraph(ctx, then_g, "then_branch");
  infer_subgraph(ctx, else_g, "else_branch");
  for (int i = 0; i < n.num_outputs(); ++i) {
    const Value* a = then_g.outputs()[i];
    const Value* b = else_g.outputs()[i];
    if (infer::dtype_known(a->dtype()) && infer::dtype_known(b->dtype()) && a->dtype() != b->dtype())
      ctx.error(str_cat("output ", i, ": then_branch returns ", dtype_name(a->dtype()), ", else_branch ",
                        dtype_name(b->dtype())));
    ctx.set_output(i, infer::dtype_known(a->dtype()) ? a->dtype() : b->dtype(), merge_shapes(a->shape(), b->shape()));
  }
}

// Loop: carried values keep their types (dims that change across iterations become unknown);
// scan outputs gain a leading dim, static where the trip count is.
void infer_loop(InferContext& ctx) {
  Node& n = ctx.node();
  const int formal = n.num_formal_inputs();
  if (formal < 2) ctx.error(str_cat("takes at least 2 inputs (M, cond), got ", formal));
  const int carried = formal - 2;
  if (ctx.has_input(0)) infer::check_type(ctx, 0, infer::Types::kInt64);
  if (ctx.has_input(1)) infer::check_type(ctx, 1, infer::Types::kBool);
  Graph& body = subgraph_attr(n, "body");
  const int scans = n.num_outputs() - carried;
  if (static_cast<int>(body.inputs().size()) != carried + 2 || scans < 0 ||
      static_cast<int>(body.outputs().size()) != 1 + carried + scans)
    ctx.error(str_cat("body takes ", body.inputs().size(), " inputs and returns ", body.outputs().size(),
                      " values; with ", carried, " loop-carried values and ", n.num_outputs(),
                      " outputs it must take ", carried + 2, " and return ", 1 + n.num_outputs()));
  for (int j = 0; j < carried; ++j)
    if (!ctx.has_input(2 + j)) ctx.error(str_cat("loop-carried input ", 2 + j, " is missing"));
  bind_captures(n);
  body.inputs()[0]->set_dtype(DataType::kInt64);
  body.inputs()[0]->set_shape(Shape(std::vector<Dim>{}));
  body.inputs()[1]->set_dtype(DataType::kBool);
  body.inputs()[1]->set_shape(Shape(std::vector<Dim>{}));
  for (int j = 0; j < carried; ++j) {
    body.inputs()[2 + j]->set_dtype(ctx.in_dtype(2 + j));
    body.inputs()[2 + j]->set_shape(ctx.in_shape(2 + j));
  }
  // A second round where an iteration changes a carried value's shape (then merged).
  for (int round = 0; round < 2; ++round) {
    infer_subgraph(ctx, body, "body");
    bool changed = false;
    for (int j = 0; j < carried; ++j) {
      Value* in = body.inputs()[2 + j];
      const Value* out = body.outputs()[1 + j];
      if (infer::dtype_known(out->dtype()) && out->dtype() != in->dtype())
        ctx.error(str_cat("loop-carried value ", j, " enters the body as ", dtype_name(in->dtype()),
                          " and leaves it as ", dtype_name(out->dtype())));
      Shape merged = merge_shapes(in->shape(), out->shape());
      if (!(merged == in->shape())) {
        in->set_shape(merged);
        changed = true;
      }
    }
    if (!changed) break;
  }
  const std::optional<int64_t> trips = loop_static_trip_count(n);
  for (int j = 0; j < carried; ++j)
    ctx.set_output(j, body.inputs()[2 + j]->dtype(), body.inputs()[2 + j]->shape());
  for (int k = 0; k < scans; ++k) {
    const Value* y = body.outputs()[1 + carried + k];
    Shape s = Shape::unknown();
    if (y->shape().rank_known) {
      s = y->shape();
      s.dims.insert(s.dims.begin(), trips ? Dim(*trips) : Dim());
    }
    ctx.set_output(carried + k, y->dtype(), s);
  }
}

// Scan: the body sees one slice of each scan input (the scan axis removed); each scan output
// gains the sequence dim at its output axis.
void infer_scan(InferContext& ctx) {
  Node& n = ctx.node();
  const ScanSpec spec = scan_spec(n);  // its errors name the node
  Graph& body = subgraph_attr(n, "body");
  bind_captures(n);
  Dim seq;
  for (int j = 0; j < spec.num_state; ++j) {
    body.inputs()[j]->set_dtype(ctx.in_dtype(j));
    body.inputs()[j]->set_shape(ctx.in_shape(j));
  }
  for (int m = 0; m < spec.num_scan_inputs; ++m) {
    const int i = spec.num_state + m;
    const Shape& x = ctx.in_shape(i);
    Shape slice = Shape::unknown();
    if (x.rank_known) {
      int64_t axis = normalize_axis(ctx, spec.input_axes[m], x.rank());
      slice = x;
      if (m == 0 || !infer::dim_known(seq)) seq = x.dims[axis];
      slice.dims.erase(slice.dims.begin() + axis);
    }
    body.inputs()[i]->set_dtype(ctx.in_dtype(i));
    body.inputs()[i]->set_shape(slice);
  }
  infer_subgraph(ctx, body, "body");
  for (int j = 0; j < spec.num_state; ++j)
    ctx.set_output(j, body.outputs()[j]->dtype(), merge_shapes(ctx.in_shape(j), body.outputs()[j]->shape()));
  for (int k = 0; k < spec.num_scan_outputs; ++k) {
    const Value* y = body.outputs()[spec.num_state + k];
    Shape s = Shape::unknown();
    if (y->shape().rank_known) {
      s = y->shape();
      int64_t axis = normalize_axis(ctx, spec.output_axes[k], s.rank() + 1);
      s.dims.insert(s.dims.begin() + axis, seq);
    }
    ctx.set_output(spec.num_state + k, y->dtype(), s);
  }
}

}  // namespace

void register_control_flow_ops(OpTable& t) {
  using infer::add;
  // Not differentiable as nodes: autodiff differentiates what canonicalize inlined, and names
  // what would let it inline the rest (passes/autodiff.cc).
  add(t, "If", 13, infer_if, PrecisionClass::kNone, false, not_differentiable(),
      "runs then_branch or else_branch by a bool condition (subgraphs in the IR)");
  add(t, "Loop", 13, infer_loop, PrecisionClass::kNone, false, not_differentiable(),
      "runs its body up to M times while cond holds, carrying values and stacking scan outputs");
  add(t, "Scan", 11, infer_scan, PrecisionClass::kNone, false, not_differentiable(),
      "runs its body over slices of its scan inputs, carrying state and stacking scan outputs");
}

}  // namespace otter
