// Liveness of the node-produced values of one program: which node writes each value and which
// node reads it (or a view of it) last. Shared by the memory-plan pass and the verifier.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "graph/ir.h"

namespace otter {

struct Lifetime {
  const Value* value = nullptr;
  int first = 0;  // index of the writing node in the program's node order
  int last = 0;   // index of the last node reading it or any of its views
  // Plannable: static shape, not a graph output or state update, not a view of another value.
  bool plannable = false;
  const Value* view_of = nullptr;  // the value whose buffer this one may be a view of
};

// The nodes of `p`, in graph order.
std::vector<const Node*> program_nodes(const Graph& g, Program p);
// Lifetimes of every value produced by a node of `p`, in production order.
std::vector<Lifetime> program_lifetimes(const Graph& g, Program p);
// Bytes of a value of static shape.
int64_t value_bytes(const Value* v);

// Problems with the graph's memory plans: a planned value that is gone, changed size or is no
// longer plannable, a recorded interval that disagrees with the graph, a buffer outside its
// arena, two buffers live at once that overlap (other than an in-place handover). Empty when sound.
std::vector<std::string> check_memory_plans(const Graph& g);

}  // namespace otter
