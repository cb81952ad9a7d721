// The backward seed as a function of the graph's training facts. autodiff seeds the backward pass
// with the constant 1 (Graph::loss_seed); loss scaling multiplies it by the state S
// (Graph::loss_scale, recorded by loss-scale) and accumulation divides it by K
// (TrainingFacts::accumulation_steps, recorded by grad-accumulation). Each of those passes records
// its fact and calls update_backward_seed, which makes the seed S/K from the facts, whichever ran
// (S/(N*K) once all-reduce has recorded N data-parallel ranks, whose gradients it then sums),
// first: the constant 1/K without scaling, else `ai.otter.ScaleSeed(%loss_scale) {k=K}` under the
// seed's name. So neither pass edits the other's nodes, and both orders give the same graph.
#pragma once

#include "graph/ir.h"

namespace otter {

// Fails naming `pass` when the graph has no backward seed (autodiff has not run).
void update_backward_seed(Graph& g, const std::string& pass);

}  // namespace otter
