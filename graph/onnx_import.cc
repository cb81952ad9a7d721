// ONNX import: ModelProto -> Graph, in stages (opsets, model info, inputs and initializers, nodes,
// outputs and declared types, state, training facts recorded by otter, shape inference), each
// failing with one message that names the culprit.
#include <algorithm>
#include <cstdlib>
#include <map>
#include <set>
#include <unordered_map>
#include <unordered_set>

#include "graph/error.h"
#include "graph/limits.h"
#include "graph/op_table.h"
#include "graph/onnx_proto.h"

namespace otter::onnx_detail {

namespace {

// "14-21" style list of the opsets at which otter defines an op (clipped to the supported range).
std::string supported_opsets(const std::string& domain, const std::string& op) {
  std::vector<std::string> ranges;
  for (const OpDef* d : OpTable::instance().all()) {
    if (d->domain != domain || d->op_type != op) continue;
    int lo = d->since_version, hi = d->until_version;
    if (domain.empty()) {
      lo = std::max(lo, kMinOnnxOpset);
      hi = std::min(hi, kMaxOnnxOpset);
      if (lo > hi) continue;
    }
    ranges.push_back(lo == hi ? std::to_string(lo)
                     : hi >= (1 << 29) ? str_cat(lo, "+")
                                       : str_cat(lo, "-", hi));
  }
  return join(ranges, ", ");
}

// Fails with one message listing every node whose op otter cannot import.
void check_ops(const onnx::GraphProto& gp, const std::map<std::string, int>& imports, const std::string& what,
               std::vector<std::string>& bad, int depth) {
  const OpTable& table = OpTable::instance();
  for (int i = 0; i < gp.node_size(); ++i) {
    const auto& n = gp.node(i);
    if (depth <= kMaxSubgraphDepth)  // deeper nesting is refused, with its own message, by import_subgraph
      for (const auto& a : n.attribute()) {
        if (a.has_g()) check_ops(a.g(), imports, what, bad, depth + 1);
        for (const auto& sub : a.graphs()) check_ops(sub, imports, what, bad, depth + 1);
      }
    std::string domain = normalize_domain(n.domain());
    std::string label = node_label(n, i);
    std::string op = domain.empty() ? n.op_type() : domain + "." + n.op_type();
    if (!domain.empty() && domain != kOtterDomain && domain != kTrainingDomain) {
      bad.push_back(str_cat(op, " (", label, "; domain '", domain, "' is not supported)"));
      continue;
    }
    auto it = imports.find(domain);
    if (it == imports.end()) {
      bad.push_back(str_cat(op, " (", label, "; the model imports no opset of ", domain_label(domain), ")"));
      continue;
    }
    if (table.find(domain, n.op_type(), it->second)) continue;
    if (table.knows(domain, n.op_type())) {
      bad.push_back(str_cat(op, " (", label, "; not supported at ", domain_label(domain), " opset ", it->second,
                            ", only at opsets ", supported_opsets(domain, n.op_type()), ")"));
    } else {
      bad.push_back(str_cat(op, " (", label, ")"));
    }
  }
}

void check_ops(const onnx::GraphProto& gp, const std::map<std::string, int>& imports, const std::string& what) {
  std::vector<std::string> bad;
  check_ops(gp, imports, what, bad, 1);
  if (!bad.empty()) fail(what, ": unsupported ops: ", join(bad, ", "));
}

// Names a cycle among nodes that Kahn's algorithm could not order.
[[noreturn]] void fail_cycle(const Graph& g, const std::string& what) {
  std::vector<Node*> nodes = g.node_list();
  std::unordered_map<Node*, int> pending;
  for (Node* n : nodes) {
    std::set<Node*> deps;
    for (Value* in : n->inputs())
      if (in && in->producer()) deps.insert(in->producer());
    pending[n] = static_cast<int>(deps.size());
  }
  // Peel off every node that is not on or after a cycle.
  std::vector<Node*> work;
  for (Node* n : nodes)
    if (pending[n] == 0) work.push_back(n);
  std::unordered_set<Node*> done;
  while (!work.empty()) {
    Node* n = work.back();
    work.pop_back();
    done.insert(n);
    std::set<Node*> users;
    for (Value* o : n->outputs())
      if (o)
        for (auto [u, k] : o->uses()) users.insert(u);
    for (Node* u : users)
      if (--pending[u] == 0) work.push_back(u);
  }
  // Walk backwards through unfinished producers until a node repeats: that loop is a cycle.
  Node* start = nullptr;
  for (Node* n : nodes)
    if (!done.count(n)) { start = n; break; }
  std::vector<Node*> path;
  std::unordered_map<Node*, size_t> pos;
  Node* cur = start;
  while (cur && !pos.count(cur)) {
    pos[cur] = path.size();
    path.push_back(cur);
    Node* next = nullptr;
    for (Value* in : cur->inputs())
      if (in && in->producer() && !done.count(in->producer())) { next = in->producer(); break; }
    cur = next;
  }
  std::vector<std::string> names;
  if (cur) {
    // path[pos[cur]..] walks producer-wards; print it in data-flow order.
    for (size_t i = path.size(); i-- > pos[cur];) names.push_back(path[i]->describe());
    names.push_back(path.back()->describe());
  }
  fail(what, ": graph '", g.name, "' has a cycle: ", join(names, " -> "));
}

std::set<std::string> name_set(const std::map<std::string, std::string>& meta, const char* key) {
  std::set<std::string> out;
  auto it = meta.find(key);
  if (it == meta.end()) return out;
  for (auto& s : split(it->second, ','))
    if (!s.empty()) out.insert(s);
  return out;
}

// What import carries between its stages.
struct ImportState {
  const onnx::ModelProto& m;
  const std::string& base_dir;
  const ImportOptions& opts;
  const std::string& what;
  std::unique_ptr<Graph> g = std::make_unique<Graph>();
  std::map<std::string, int> imports;             // domain -> opset
  std::map<std::string, std::string> otter_meta;  // otter's own metadata keys
  // Every name is defined once; `defined_by` says by what, for the duplicate message.
  std::unordered_map<std::string, std::string> defined_by;
  std::vector<Node*> created;  // in file order
  std::unordered_map<std::string, DeclaredType> declared;
  std::unordered_set<std::string> output_names;

  void define(const std::string& name, const std::string& by) {
    OTTER_CHECK(!name.empty(), what, ": ", by, " has no name");
    auto [it, fresh] = defined_by.emplace(name, by);
    if (!fresh) fail(what, ": duplicate value name '", name, "': defined by ", it->second, " and by ", by);
  }
};

// Opsets: the default domain in 13..21, ai.otter and ai.onnx.preview.training at 1; other domains
// are refused where used.
void read_opsets(ImportState& s) {
  for (const auto& op : s.m.opset_import()) {
    std::string domain = normalize_domain(op.domain());
    int64_t version = op.version();
    if (domain.empty()) {
      if (version < kMinOnnxOpset || version > kMaxOnnxOpset)
        fail(s.what, ": opset ", version, " of the default domain (ai.onnx) is not supported; otter supports opsets ",
             kMinOnnxOpset, " to ", kMaxOnnxOpset);
    } else if (domain == kOtterDomain) {
      OTTER_CHECK(version == 1, s.what, ": opset ", version, " of domain ai.otter is not supported (only 1)");
    } else if (domain == kTrainingDomain) {
      OTTER_CHECK(version == 1, s.what, ": opset ", version, " of domain ", kTrainingDomain, " is not supported (only 1)");
    }
    auto [it, fresh] = s.imports.emplace(domain, static_cast<int>(version));
    OTTER_CHECK(fresh || it->second == version, s.what, ": domain ", domain_label(domain),
                " is imported twice, at opsets ", it->second, " and ", version);
  }
  for (const auto& [d, v] : s.imports)
    if (d.empty() || d == kOtterDomain || d == kTrainingDomain) s.g->opset_imports[d] = v;
}

void read_model_info(ImportState& s) {
  const onnx::ModelProto& m = s.m;
  Graph& g = *s.g;
  if (m.ir_version() > 0) g.ir_version = m.ir_version();
  g.producer_name = m.producer_name();
  g.producer_version = m.producer_version();
  g.doc_string = m.doc_string();
  for (const auto& kv : m.metadata_props()) {
    const std::string& k = kv.key();
    bool own = std::any_of(std::begin(kOwnKeys), std::end(kOwnKeys), [&](const char* o) { return k == o; });
    (own ? s.otter_meta : g.metadata)[k] = kv.value();
  }
  if (!m.graph().name().empty()) g.name = m.graph().name();
}

// The nodes of gp that read value `name`, for messages ("TfIdfVectorizer 'tfidf'"); empty if none.
std::string readers_of(const onnx::GraphProto& gp, const std::string& name) {
  std::vector<std::string> out;
  for (const auto& np : gp.node())
    if (std::find(np.input().begin(), np.input().end(), name) != np.input().end()) out.push_back(describe_proto(np));
  return join(out, ", ");
}

// Graph inputs (those that are also initializers, as older exporters list them, are initializers)
// and initializers.
void add_inputs_and_initializers(ImportState& s) {
  const onnx::GraphProto& gp = s.m.graph();
  std::unordered_set<std::string> init_names;
  for (const auto& t : gp.initializer()) init_names.insert(t.name());
  for (int i = 0; i < gp.input_size(); ++i) {
    const auto& in = gp.input(i);
    if (!in.name().empty() && init_names.count(in.name())) continue;
    std::string by = str_cat("graph input '", in.name(), "'");
    s.define(in.name(), in.name().empty() ? str_cat("graph input #", i) : by);
    DeclaredType t;
    try {
      t = type_from_proto(in.type(), by);
    } catch (const Error& e) {
      // An unsupported type (a STRING input of TfIdfVectorizer, say): name the nodes reading it.
      const std::string readers = readers_of(gp, in.name());
      if (readers.empty()) throw;
      fail(e.what(), "; read by ", readers);
    }
    s.g->add_input(in.name(), t.dtype, t.shape);
  }
  const std::set<std::string> frozen = name_set(s.otter_meta, kFrozenKey);
  for (int i = 0; i < gp.initializer_size(); ++i) {
    const auto& tp = gp.initializer(i);
    s.define(tp.name(), tp.name().empty() ? str_cat("initializer #", i) : str_cat("initializer '", tp.name(), "'"));
    Tensor t = tensor_from_proto(tp, str_cat("initializer '", tp.name(), "'"), s.base_dir);
    bool trainable = s.opts.float_initializers_trainable && is_float(t.dtype()) && !frozen.count(tp.name());
    s.g->add_initializer(tp.name(), std::move(t), trainable);
  }
}

// Nodes: create every output first, then wire inputs (ONNX files need not be sorted).
void add_nodes(ImportState& s) {
  const onnx::GraphProto& gp = s.m.graph();
  for (int i = 0; i < gp.node_size(); ++i) {
    const auto& np = gp.node(i);
    std::string desc = describe_proto(np);
    std::vector<std::string> outs;
    for (const auto& o : np.output()) {
      if (!o.empty()) s.define(o, str_cat("output of ", desc));
      outs.push_back(o);
    }
    std::string domain = normalize_domain(np.domain());
    Node* n = s.g->add_node(np.op_type(), {}, outs, domain);
    n->set_name(np.name());
    n->set_opset(s.imports.at(domain));
    for (const auto& a : np.attribute()) {
      OTTER_CHECK(!n->has_attr(a.name()), s.what, ": ", desc, ": attribute '", a.name(), "' is given twice");
      n->set_attr(a.name(), node_attr_from_proto(a, SubgraphContext{s.imports, s.base_dir, str_cat(s.what, ": ", desc)}));
    }
    s.created.push_back(n);
  }
  std::vector<std::string> undefined;
  for (int i = 0; i < gp.node_size(); ++i) {
    for (const auto& in : gp.node(i).input()) {
      if (in.empty()) {
        s.created[i]->add_input(nullptr);
        continue;
      }
      Value* v = s.g->find_value(in);
      if (!v) undefined.push_back(str_cat("'", in, "' (input of ", s.created[i]->describe(), ")"));
      s.created[i]->add_input(v);
    }
    wire_implicit_inputs(*s.created[i], [&](const std::string& name) {
      Value* v = s.g->find_value(name);
      if (!v) undefined.push_back(str_cat("'", name, "' (read by a subgraph of ", s.created[i]->describe(), ")"));
      return v;
    });
  }
  if (!undefined.empty()) fail(s.what, ": undefined values: ", join(undefined, ", "));
  if (auto it = s.otter_meta.find(kApplyNodesKey); it != s.otter_meta.end())
    for (const std::string& idx : split(it->second, ',')) {
      char* end = nullptr;
      long k = std::strtol(idx.c_str(), &end, 10);
      OTTER_CHECK(!idx.empty() && *end == '\0' && k >= 0 && k < static_cast<long>(s.created.size()), s.what,
                  ": metadata ", kApplyNodesKey, ": '", idx, "' is not a node index");
      s.created[k]->set_program(Program::kApply);
    }
  try {
    s.g->topo_sort();
  } catch (const Error&) {
    fail_cycle(*s.g, s.what);
  }
}

// Graph outputs and the declared types of values (value_info first, graph outputs win).
void add_outputs_and_types(ImportState& s) {
  const onnx::GraphProto& gp = s.m.graph();
  for (const auto& vi : gp.value_info()) {
    if (vi.type().has_tensor_type())
      s.declared[vi.name()] = type_from_proto(vi.type(), str_cat("value_info of '", vi.name(), "'"));
  }
  for (int i = 0; i < gp.output_size(); ++i) {
    const auto& o = gp.output(i);
    OTTER_CHECK(!o.name().empty(), s.what, ": graph output #", i, " has no name");
    Value* v = s.g->find_value(o.name());
    OTTER_CHECK(v, s.what, ": graph output '", o.name(), "' is not defined by any node, input or initializer");
    s.declared[o.name()] = type_from_proto(o.type(), str_cat("graph output '", o.name(), "'"));
    s.output_names.insert(o.name());
    s.g->add_output(v);
  }
  for (Node* n : s.g->node_list())
    for (Value* o : n->outputs()) {
      if (!o) continue;
      auto it = s.declared.find(o->name());
      if (it == s.declared.end()) continue;
      o->set_dtype(it->second.dtype);
      o->set_shape(it->second.shape);
    }
}

// otter's own record of state values and their updates.
void restore_recorded_state(ImportState& s) {
  Graph& g = *s.g;
  for (const std::string& name : name_set(s.otter_meta, kStateKey)) {
    Value* v = g.find_value(name);
    OTTER_CHECK(v && v->kind() == ValueKind::kInitializer, s.what, ": metadata ", kStateKey, " names '", name,
                "', which is not an initializer");
    v->set_trainable(false);
    g.set_kind(v, ValueKind::kState);
  }
  auto it = s.otter_meta.find(kStateUpdatesKey);
  if (it == s.otter_meta.end()) return;
  for (const std::string& entry : split(it->second, ',')) {
    if (entry.empty()) continue;
    size_t eq = entry.find('=');
    OTTER_CHECK(eq != std::string::npos, s.what, ": metadata ", kStateUpdatesKey, ": entry '", entry,
                "' is not state=value");
    Value* st = g.find_value(entry.substr(0, eq));
    Value* u = g.find_value(entry.substr(eq + 1));
    bool target = st && (st->kind() == ValueKind::kState || st->kind() == ValueKind::kInitializer);
    OTTER_CHECK(target && u, s.what, ": metadata ", kStateUpdatesKey, ": entry '", entry,
                "' does not name a state value or initializer and a value");
    g.state_updates[st] = u;
  }
}

// Without otter's metadata: BatchNorm running statistics in training mode are state.
void infer_batchnorm_state(Graph& g) {
  for (Node* n : g.node_list()) {
    if (n->domain() != "" || n->op_type() != "BatchNormalization" || n->opset() < 14) continue;
    if (n->attr_i("training_mode", 0) != 1) continue;
    for (int i : {3, 4}) {
      Value* v = n->input(i);
      if (!v || v->kind() == ValueKind::kNode || v->kind() == ValueKind::kInput) continue;
      if (v->kind() == ValueKind::kInitializer) {
        v->set_trainable(false);
        g.set_kind(v, ValueKind::kState);
      }
      if (Value* upd = n->output(i - 2)) g.state_updates[v] = upd;
    }
  }
}

// Training facts recorded by otter's passes: gradients, loss seed and loss scale.
void restore_training_facts(ImportState& s) {
  Graph& g = *s.g;
  if (auto it = s.otter_meta.find(kGradientsKey); it != s.otter_meta.end())
    for (const std::string& entry : split(it->second, ',')) {
      size_t eq = entry.find('=');
      Value* p = eq == std::string::npos ? nullptr : g.find_value(entry.substr(0, eq));
      Value* gr = eq == std::string::npos || eq + 1 == entry.size() ? nullptr : g.find_value(entry.substr(eq + 1));
      OTTER_CHECK(p && (gr || eq + 1 == entry.size()), s.what, ": metadata ", kGradientsKey, ": entry '", entry,
                  "' does not name a parameter and its gradient");
      g.gradients.emplace_back(p, gr);
    }
  for (auto [key, slot] : {std::pair{kLossSeedKey, &g.loss_seed}, std::pair{kLossScaleKey, &g.loss_scale}}) {
    auto it = s.otter_meta.find(key);
    if (it == s.otter_meta.end() || it->second.empty()) continue;
    *slot = g.find_value(it->second);
    OTTER_CHECK(*slot, s.what, ": metadata ", key, " names '", it->second, "', which is not a value");
  }
}

// The op table's shape inference; declared types fill what it cannot say, and a graph output's
// declared dtype must match what its node produces.
void infer_shapes(ImportState& s) {
  for (Node* n : s.g->node_list()) {
    try {
      infer_node(*n);
    } catch (const Error& e) {
      fail(s.what, ": shape inference failed: ", e.what());
    }
    for (Value* o : n->outputs()) {
      if (!o) continue;
      auto it = s.declared.find(o->name());
      if (it == s.declared.end()) continue;
      const DeclaredType& d = it->second;
      if (s.output_names.count(o->name()) && d.dtype != DataType::kUndefined && o->dtype() != DataType::kUndefined &&
          o->dtype() != d.dtype)
        fail(s.what, ": graph output '", o->name(), "' is declared ", dtype_name(d.dtype), " but ", n->describe(),
             " produces ", dtype_name(o->dtype()));
      if (o->dtype() == DataType::kUndefined) o->set_dtype(d.dtype);
      if (!o->shape().rank_known && d.shape.rank_known) o->set_shape(d.shape);
    }
  }
}

std::unique_ptr<Graph> import_model_unchecked(const onnx::ModelProto& m, const std::string& base_dir,
                                              const ImportOptions& opts, const std::string& what) {
  OTTER_CHECK(m.has_graph(), what, ": not an ONNX model (no graph)");
  ImportState s{m, base_dir, opts, what};
  read_opsets(s);
  read_model_info(s);
  check_ops(m.graph(), s.imports, what);
  OTTER_CHECK(m.graph().sparse_initializer_size() == 0, what, ": sparse initializers are not supported");
  add_inputs_and_initializers(s);
  add_nodes(s);
  add_outputs_and_types(s);
  if (s.otter_meta.count(kStateKey)) restore_recorded_state(s);
  else infer_batchnorm_state(*s.g);
  restore_training_facts(s);
  if (opts.infer_shapes) infer_shapes(s);
  return std::move(s.g);
}

}  // namespace

// Imports, prefixing every error with `what` (the file or text being read).
std::unique_ptr<Graph> import_model(const onnx::ModelProto& m, const std::string& base_dir,
                                    const ImportOptions& opts, const std::string& what) {
  try {
    std::optional<onnx::ModelProto> upgraded = upgrade_opset(m, what);
    if (!upgraded) return import_model_unchecked(m, base_dir, opts, what);
    std::unique_ptr<Graph> g = import_model_unchecked(*upgraded, base_dir, opts, what);
    g->upgraded_from_opset = default_domain_opset(m);
    return g;
  } catch (const Error& e) {
    std::string msg = e.what();
    if (msg.rfind(what, 0) == 0) throw;
    fail(what, ": ", msg);
  }
}

}  // namespace otter::onnx_detail
