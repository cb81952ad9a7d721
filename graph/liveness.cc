// Value lifetimes per program and the soundness check of memory plans.
#include "graph/liveness.h"

#include <unordered_map>

#include "graph/error.h"
#include "graph/op_table.h"

namespace otter {

std::vector<const Node*> program_nodes(const Graph& g, Program p) {
  std::vector<const Node*> out;
  for (const auto& n : g.nodes())
    if (n->program() == p) out.push_back(n.get());
  return out;
}

int64_t value_bytes(const Value* v) { return v->shape().numel() * static_cast<int64_t>(dtype_size(v->dtype())); }

std::vector<Lifetime> program_lifetimes(const Graph& g, Program p) {
  std::vector<const Node*> nodes = program_nodes(g, p);
  std::vector<Lifetime> out;
  std::unordered_map<const Value*, size_t> index;
  std::unordered_map<const Value*, const Value*> root;  // view -> the buffer it lives in
  auto root_of = [&](const Value* v) {
    auto it = root.find(v);
    return it == root.end() ? v : it->second;
  };
  std::unordered_map<const Value*, bool> kept;  // outputs and state updates: never planned
  for (const Value* o : g.outputs()) kept[o] = true;
  for (const auto& [s, u] : g.state_updates) kept[u] = true;
  const OpTable& table = OpTable::instance();
  for (int i = 0; i < static_cast<int>(nodes.size()); ++i) {
    const Node* n = nodes[i];
    for (const Value* in : n->inputs()) {
      if (!in) continue;
      auto it = index.find(root_of(in));
      if (it != index.end()) out[it->second].last = i;
    }
    const OpDef* def = table.find(*n);
    for (int k = 0; k < n->num_outputs(); ++k) {
      const Value* v = n->output(k);
      if (!v) continue;
      Lifetime lt;
      lt.value = v;
      lt.first = lt.last = i;
      if (def)
        for (auto [o, in] : def->views)
          if (o == k && n->input(in)) lt.view_of = root_of(n->input(in));
      if (lt.view_of) root[v] = lt.view_of;
      lt.plannable = !lt.view_of && !kept.count(v) && v->shape().rank_known && v->shape().is_static();
      index[v] = out.size();
      out.push_back(lt);
    }
  }
  return out;
}

namespace {

const char* program_name(Program p) { return p == Program::kApply ? "apply" : "micro-step"; }

bool overlap(int64_t a0, int64_t a1, int64_t b0, int64_t b1) { return a0 < b1 && b0 < a1; }

}  // namespace

std::vector<std::string> check_memory_plans(const Graph& g) {
  std::vector<std::string> problems;
  for (const auto& [prog, plan] : g.memory_plans) {
    const char* pn = program_name(prog);
    std::map<std::string, const Lifetime*> life;
    std::vector<Lifetime> lifetimes = program_lifetimes(g, prog);
    for (const Lifetime& lt : lifetimes) life[lt.value->name()] = &lt;
    std::vector<std::pair<std::string, const MemoryPlan::Buffer*>> bufs;
    for (const auto& [name, b] : plan.buffers) {
      auto it = life.find(name);
      if (it == life.end()) {
        problems.push_back(str_cat("memory plan (", pn, "): '", name, "' is not a value of the program"));
        continue;
      }
      const Lifetime& lt = *it->second;
      if (!lt.plannable || value_bytes(lt.value) != b.bytes)
        problems.push_back(str_cat("memory plan (", pn, "): '", name, "' is no longer plannable as ", b.bytes, " bytes"));
      if (lt.first != b.first || lt.last != b.last)
        problems.push_back(str_cat("memory plan (", pn, "): '", name, "' lives over nodes [", lt.first, "..", lt.last,
                                   "] but the plan says [", b.first, "..", b.last, "]"));
      if (b.offset < 0 || b.offset + b.bytes > plan.arena_bytes)
        problems.push_back(str_cat("memory plan (", pn, "): '", name, "' lies outside the arena"));
      bufs.emplace_back(name, &b);
    }
    for (size_t i = 0; i < bufs.size(); ++i) {
      for (size_t j = i + 1; j < bufs.size(); ++j) {
        const auto& [na, a] = bufs[i];
        const auto& [nb, b] = bufs[j];
        if (!overlap(a->first, a->last + 1, b->first, b->last + 1)) continue;
        if (!overlap(a->offset, a->offset + a->bytes, b->offset, b->offset + b->bytes)) continue;
        // An in-place handover: the new value is written by the node that reads the old one last.
        bool handover = (b->reuses == na && a->last == b->first) || (a->reuses == nb && b->last == a->first);
        if (!handover)
          problems.push_back(str_cat("memory plan (", pn, "): '", na, "' and '", nb, "' are live together and overlap"));
      }
    }
  }
  return problems;
}

}  // namespace otter
