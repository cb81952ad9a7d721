// Graph verifier.
#include "graph/verifier.h"

#include <set>
#include <unordered_set>

#include "graph/error.h"
#include "graph/liveness.h"
#include "graph/op_table.h"

namespace otter {

namespace {

// Re-infers node n's outputs into scratch copies of the declared types and reports differences;
// the declared types are restored.
void recheck_types(const Node& n, const OpDef& def, std::vector<std::string>& problems) {
  auto bad = [&](auto&&... parts) { problems.push_back(str_cat(parts...)); };
  std::vector<std::pair<DataType, Shape>> saved;
  for (Value* o : n.outputs()) saved.emplace_back(o ? o->dtype() : DataType::kUndefined, o ? o->shape() : Shape());
  try {
    InferContext ctx(const_cast<Node&>(n));
    def.infer(ctx);
    for (int i = 0; i < n.num_outputs(); ++i) {
      Value* o = n.output(i);
      if (!o) continue;
      if (o->dtype() != saved[i].first || !(o->shape() == saved[i].second))
        bad(n.describe(), ": output '", o->name(), "' is declared ", dtype_name(saved[i].first),
            saved[i].second.to_string(), " but inference gives ", o->type_string());
    }
  } catch (const Error& e) {
    bad(e.what());
  }
  for (int i = 0; i < n.num_outputs(); ++i)
    if (Value* o = n.output(i)) {
      o->set_dtype(saved[i].first);
      o->set_shape(saved[i].second);
    }
}

}  // namespace

std::vector<std::string> verify_graph(const Graph& g, const VerifyOptions& opts) {
  std::vector<std::string> problems;
  auto bad = [&](auto&&... parts) { problems.push_back(str_cat(parts...)); };

  std::unordered_set<const Value*> defined;
  std::unordered_set<const Value*> all;
  for (const Value* v : g.values()) {
    all.insert(v);
    if (g.find_value(v->name()) != v) bad("value '", v->name(), "' is not registered under its name");
    switch (v->kind()) {
      case ValueKind::kNode:
        if (!v->producer()) bad("value '", v->name(), "' has no producer");
        break;
      case ValueKind::kInput:
        defined.insert(v);
        break;
      case ValueKind::kInitializer:
      case ValueKind::kState:
        defined.insert(v);
        if (!v->has_data()) bad(v->kind() == ValueKind::kState ? "state '" : "initializer '", v->name(), "' has no data");
        else if (v->dtype() != v->data().dtype() || !(v->shape() == Shape::of(v->data().dims())))
          bad("initializer '", v->name(), "' declares ", v->type_string(), " but holds ", v->data().describe());
        break;
    }
    if (v->dtype() == DataType::kUndefined) bad("value '", v->name(), "' has no data type");
  }
  for (const auto& np : g.nodes()) {
    const Node& n = *np;
    for (int i = 0; i < n.num_inputs(); ++i) {
      const Value* in = n.input(i);
      if (!in) continue;
      if (!all.count(in)) { bad(n.describe(), ": input ", i, " refers to a removed value"); continue; }
      if (!defined.count(in)) bad(n.describe(), ": input '", in->name(), "' is used before it is defined");
      bool listed = false;
      for (auto [u, k] : in->uses())
        if (u == &n && k == i) listed = true;
      if (!listed) bad(n.describe(), ": use of '", in->name(), "' is not recorded");
    }
    for (int i = 0; i < n.num_outputs(); ++i) {
      const Value* o = n.output(i);
      if (!o) continue;
      if (o->producer() != &n || o->producer_output() != i)
        bad(n.describe(), ": output '", o->name(), "' does not point back at its producer");
      if (defined.count(o)) bad("value '", o->name(), "' is defined twice");
      defined.insert(o);
    }
    const OpDef* def = OpTable::instance().find(n);
    if (!def) {
      bad(n.describe(), ": unknown op at opset ", n.opset());
      continue;
    }
    if (opts.check_types && def->infer) recheck_types(n, *def, problems);
    for (const Graph* sub : n.subgraphs())
      for (const std::string& p : verify_graph(*sub, opts)) bad(n.describe(), ": subgraph '", sub->name, "': ", p);
  }
  for (const Value* o : g.outputs()) {
    if (!o) bad("graph output is null");
    else if (!all.count(o)) bad("graph output refers to a removed value");
  }
  for (const auto& [s, u] : g.state_updates) {
    if (s->kind() != ValueKind::kState && !(s->kind() == ValueKind::kInitializer && s->trainable()))
      bad("state update of '", s->name(), "', which is neither state nor a parameter");
    if (!u || !all.count(u)) bad("state update of '", s->name(), "' refers to a removed value");
    else if (u->dtype() != s->dtype()) bad("state update of '", s->name(), "' has type ", dtype_name(u->dtype()));
  }
  if (problems.empty())
    for (std::string& p : check_memory_plans(g)) problems.push_back(std::move(p));
  return problems;
}

void verify_or_throw(const Graph& g, const std::string& context, const VerifyOptions& opts) {
  auto problems = verify_graph(g, opts);
  if (problems.empty()) return;
  std::string msg = str_cat("graph verification failed after ", context, " (", problems.size(), " problem",
                            problems.size() == 1 ? "" : "s", "):");
  for (const auto& p : problems) msg += "\n  " + p;
  fail(msg);
}

}  // namespace otter
