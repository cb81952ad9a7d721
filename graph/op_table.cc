// Op table storage, lookup and whole-graph inference.
#include "graph/op_table.h"

#include <algorithm>
#include <set>

#include "graph/error.h"

namespace otter {

const char* precision_class_name(PrecisionClass c) {
  switch (c) {
    case PrecisionClass::kNone: return "none";
    case PrecisionClass::kLow: return "low";
    case PrecisionClass::kFp32: return "fp32";
    case PrecisionClass::kFollow: return "follow";
  }
  return "?";
}

DataType InferContext::in_dtype(int i) const {
  Value* v = node_.input(i);
  if (!v) error(str_cat("input ", i, " is missing"));
  return v->dtype();
}

const Shape& InferContext::in_shape(int i) const {
  Value* v = node_.input(i);
  if (!v) error(str_cat("input ", i, " is missing"));
  return v->shape();
}

const Tensor* InferContext::in_const(int i) const {
  Value* v = node_.input(i);
  if (!v || !v->has_data() || v->kind() == ValueKind::kState) return nullptr;
  if (v->kind() == ValueKind::kInitializer && v->trainable()) return nullptr;
  return &v->data();
}

void InferContext::set_output(int i, DataType t, Shape s) {
  Value* v = node_.output(i);
  if (!v) return;
  v->set_sym_data(std::nullopt);
  v->set_dtype(t);
  v->set_shape(std::move(s));
}

std::optional<std::vector<Dim>> InferContext::in_sym_data(int i) const {
  Value* v = node_.input(i);
  if (!v || !is_integer(v->dtype())) return std::nullopt;
  if (const Tensor* t = in_const(i)) {
    if (t->rank() > 1 || t->numel() > 64) return std::nullopt;
    std::vector<Dim> out;
    for (int64_t x : t->to_int64_vector()) out.emplace_back(x);
    return out;
  }
  return v->sym_data();
}

void InferContext::set_output_sym_data(int i, std::vector<Dim> d) {
  if (Value* v = node_.output(i)) v->set_sym_data(std::move(d));
}

void InferContext::error(const std::string& msg) const { fail(node_.describe(), ": ", msg); }

void register_select_ops(OpTable& t);  // graph/ops/select.cc
void register_recurrent_ops(OpTable& t);  // graph/ops/recurrent.cc

OpTable& OpTable::instance() {
  static OpTable* table = [] {
    auto* t = new OpTable();
    register_elementwise_ops(*t);
    register_nn_ops(*t);
    register_shape_ops(*t);
    register_reduce_ops(*t);
    register_internal_ops(*t);
    register_math_ops(*t);
    register_scan_ops(*t);
    register_integer_ops(*t);
    register_indexing_ops(*t);
    register_normalization_ops(*t);
    register_resize_ops(*t);
    register_training_ops(*t);
    register_einsum_ops(*t);
    register_lrn_det_ops(*t);
    register_grid_sample_ops(*t);
    register_control_flow_ops(*t);
    register_select_ops(*t);
    register_recurrent_ops(*t);
    return t;
  }();
  return *table;
}

void OpTable::add(OpDef def) {
  for (const OpDef& d : defs_) {
    bool overlap = d.domain == def.domain && d.op_type == def.op_type &&
                   !(def.until_version < d.since_version || d.until_version < def.since_version);
    OTTER_CHECK(!overlap, "op table: ", def.op_type, " registered twice for overlapping opsets");
  }
  defs_.push_back(std::move(def));
}

const OpDef* OpTable::find(const std::string& domain, const std::string& op_type, int version) const {
  for (const OpDef& d : defs_)
    if (d.domain == domain && d.op_type == op_type && version >= d.since_version &&
        version <= d.until_version)
      return &d;
  return nullptr;
}

OpDef* OpTable::mutable_find(const std::string& domain, const std::string& op_type, int version) {
  return const_cast<OpDef*>(find(domain, op_type, version));
}

const OpDef& OpTable::get(const Node& n) const {
  const OpDef* d = find(n);
  if (d) return *d;
  if (knows(n.domain(), n.op_type()))
    fail(n.describe(), ": opset ", n.opset(), " of ", n.op_type(), " is not supported");
  fail(n.describe(), ": unsupported op ", n.domain().empty() ? "" : n.domain() + ".", n.op_type());
}

bool OpTable::knows(const std::string& domain, const std::string& op_type) const {
  return std::any_of(defs_.begin(), defs_.end(),
                     [&](const OpDef& d) { return d.domain == domain && d.op_type == op_type; });
}

std::vector<const OpDef*> OpTable::all() const {
  std::vector<const OpDef*> out;
  for (const OpDef& d : defs_) out.push_back(&d);
  std::sort(out.begin(), out.end(), [](const OpDef* a, const OpDef* b) {
    return std::tie(a->domain, a->op_type, a->since_version) <
           std::tie(b->domain, b->op_type, b->since_version);
  });
  return out;
}

void infer_node(Node& n) {
  const OpDef& def = OpTable::instance().get(n);
  if (!def.infer) fail(n.describe(), ": op has no shape inference");
  InferContext ctx(n);
  def.infer(ctx);
}

void infer_graph(Graph& g) {
  for (Node* n : g.node_list()) infer_node(*n);
}

void pin_batch(Graph& g, int64_t b) {
  OTTER_CHECK(b >= 1, "the batch size must be positive, got ", b);
  for (Value* in : g.inputs()) {
    Shape s = in->shape();
    if (!s.rank_known || s.rank() == 0) continue;
    if (s.dims[0].is_static()) {
      OTTER_CHECK(s.dims[0].value == b, "model input '", in->name(), "' has a fixed batch of ", s.dims[0].value,
                  "; the batch size must be ", s.dims[0].value, ", got ", b);
      continue;
    }
    s.dims[0] = Dim(b);
    in->set_shape(s);
  }
  infer_graph(g);
}

Shape broadcast_shapes(InferContext& ctx, const std::vector<Shape>& shapes) {
  size_t rank = 0;
  for (const Shape& s : shapes) {
    if (!s.rank_known) return Shape::unknown();
    rank = std::max(rank, s.dims.size());
  }
  std::vector<Dim> out(rank, Dim(int64_t{1}));
  for (const Shape& s : shapes) {
    size_t off = rank - s.dims.size();
    for (size_t i = 0; i < s.dims.size(); ++i) {
      const Dim& d = s.dims[i];
      Dim& o = out[off + i];
      if (d.is_static() && d.value == 1) continue;
      if (o.is_static() && o.value == 1) { o = d; continue; }
      if (o == d) continue;
      if (o.is_static() && d.is_static())
        ctx.error(str_cat("shapes cannot broadcast: dimension ", o.value, " vs ", d.value));
      // Symbol against a different symbol or size: keep the static one when there is one
      // (the symbol must equal it for the program to be valid), else mark unknown.
      if (d.is_static()) o = d;
      else if (!o.is_static()) o = Dim();
    }
  }
  return Shape(out);
}

int64_t normalize_axis(InferContext& ctx, int64_t axis, int64_t rank) {
  if (axis < -rank || axis >= std::max<int64_t>(rank, 1))
    ctx.error(str_cat("axis ", axis, " is out of range for rank ", rank));
  return axis < 0 ? axis + rank : axis;
}

}  // namespace otter
