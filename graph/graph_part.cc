// Forward / backward / apply classification of nodes (see graph_part.h).
#include "graph/graph_part.h"

#include <unordered_set>
#include <vector>

namespace otter {

std::string_view graph_part_name(GraphPart p) {
  switch (p) {
    case GraphPart::kForward: return "forward";
    case GraphPart::kBackward: return "backward";
    case GraphPart::kApply: return "apply";
  }
  return "?";
}

namespace {

// Micro-step nodes that (transitively) read `seed`.
std::unordered_set<const Node*> descendants(const Value* seed) {
  std::unordered_set<const Node*> out;
  std::vector<const Value*> work{seed};
  while (!work.empty()) {
    const Value* v = work.back();
    work.pop_back();
    for (const auto& [n, idx] : v->uses()) {
      if (n->program() != Program::kMicroStep || !out.insert(n).second) continue;
      for (const Value* o : n->outputs())
        if (o) work.push_back(o);
    }
  }
  return out;
}

// Values the forward computation must deliver: graph outputs, state updates and values the apply
// program reads, when produced by a micro-step node outside the backward.
std::vector<const Value*> forward_roots(const Graph& g, const std::unordered_set<const Node*>& backward) {
  std::vector<const Value*> roots;
  auto consider = [&](const Value* v) {
    const Node* p = v ? v->producer() : nullptr;
    if (p && p->program() == Program::kMicroStep && !backward.count(p)) roots.push_back(v);
  };
  for (const Value* v : g.outputs()) consider(v);
  for (const auto& [s, u] : g.state_updates) consider(u);
  for (const auto& n : g.nodes())
    if (n->program() == Program::kApply)
      for (const Value* v : n->inputs()) consider(v);
  return roots;
}

}  // namespace

std::unordered_map<const Node*, GraphPart> classify_parts(const Graph& g) {
  std::unordered_map<const Node*, GraphPart> parts;
  std::unordered_set<const Node*> backward;
  if (g.loss_seed) backward = descendants(g.loss_seed);
  std::unordered_set<const Node*> forward;
  std::vector<const Value*> work = forward_roots(g, backward);
  while (!work.empty()) {
    const Value* v = work.back();
    work.pop_back();
    const Node* p = v->producer();
    if (!p || p->program() != Program::kMicroStep || backward.count(p) || !forward.insert(p).second) continue;
    for (const Value* in : p->inputs())
      if (in) work.push_back(in);
  }
  for (const auto& n : g.nodes()) {
    GraphPart part = GraphPart::kApply;
    if (n->program() == Program::kMicroStep)
      part = (!g.loss_seed || forward.count(n.get())) ? GraphPart::kForward : GraphPart::kBackward;
    parts[n.get()] = part;
  }
  return parts;
}

}  // namespace otter
