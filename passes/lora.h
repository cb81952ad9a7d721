// lora: low-rank adapters (LoRA) on the MatMul/Gemm weights named by globs, before autodiff.
//
// Needs: a forward graph (no backward graph yet), types and shapes inferred. Does: for every
// float initializer W that matches a target glob and is a MatMul/Gemm weight, adds the trainable
// initializers `W.lora_A` (r x in) and `W.lora_B` (out x r) and, at every node that reads W, the
// adapter branch y += (alpha/r) * x * A^T * B^T (y = x * W^T for a [out, in] weight, read by
// Gemm{transB=1} or through Transpose{perm=[1,0]} by MatMul; y = x * W for an [in, out] weight,
// read by Gemm{transB=0} or directly by MatMul; activations of any rank for MatMul). Every other
// parameter becomes a constant: no gradient, accumulator, optimizer state or fp32 master copy.
// A is Kaiming-uniform with a = sqrt(5) (PyTorch's nn.Linear and PEFT's default: U(-1/sqrt(in),
// 1/sqrt(in))), drawn from a generator seeded by (seed, W's name); B = 0, so the adapted model
// starts equal to the base model. An initializer already named W.lora_A / W.lora_B (values given
// with `otter-train --init`) is taken as the adapter as it is (its shape must fit).
// Does not: train anything itself, or touch weights that no target names.
//
//   before: %t: f32[32,32] = Transpose(%q.weight) {perm=[1,0]}   %y = MatMul(%x, %t)
//   after:  %y.base = MatMul(%x, %t)   %q.weight.lora_A.t = Transpose(%q.weight.lora_A) ...
//           %y.lora = MatMul(Mul(MatMul(%x, A^T), alpha/r), B^T)   %y = Add(%y.base, %y.lora)
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "passes/pass.h"

namespace otter {

struct LoraOptions {
  int64_t rank = 8;    // r
  double alpha = 16;   // the adapter's output is scaled by alpha / r
  GlobList targets;    // name globs of the weights to adapt (required)
  double dropout = 0;  // Dropout on the adapter's input (PEFT's lora_dropout)
  int64_t seed = 0;    // seeds A's initialisation
  double scale() const { return alpha / static_cast<double>(rank); }
  bool operator==(const LoraOptions&) const = default;
  static const OptionTable<LoraOptions>& table();
};

// How a MatMul/Gemm reads a weight: as [in, out] (y = x W) or as [out, in] (y = x W^T).
struct LoraLayout {
  bool in_out = false;  // true: W is [in, out]
  int64_t in = 0, out = 0;
};

struct LoraAdapter {
  std::string weight, a, b;  // W, W.lora_A, W.lora_B
  LoraLayout layout;
};

struct LoraResult {
  std::vector<LoraAdapter> adapters;  // in initializer order
  int64_t branches = 0;               // adapter branches added (one per node that reads a target)
  int64_t frozen = 0;                 // parameters made constant
  int64_t adapter_params = 0;         // elements of all A and B
  int64_t skipped = 0;                // glob matches that are not MatMul/Gemm weights (left alone)
};

LoraResult add_lora(Graph& g, const LoraOptions& o);

// What add_lora records in the graph (Graph::metadata, keys otter.lora.*), for the runtime: the
// adapted weights, in order, and the scale alpha/r. Empty `weights` when the graph has no adapters.
struct LoraFacts {
  std::vector<std::string> weights;
  double scale = 1;
};
LoraFacts lora_facts(const Graph& g);

// The layout in which every reader of `w` uses it, or "" in `why_not` and a default layout when
// some reader is not a MatMul/Gemm weight operand (then `why_not` names that reader).
LoraLayout lora_layout(const Value& w, std::string* why_not);

// Kaiming-uniform (a = sqrt(5)) A of shape [rank, in] for weight `weight`, from (seed, name).
Tensor lora_init_a(const std::string& weight, int64_t rank, int64_t in, DataType t, int64_t seed);

// Merges adapters into the weights of an inference graph: W += scale * B A in W's own layout
// (transposed for an [in, out] weight). `adapters` holds W.lora_A and W.lora_B for each adapted
// W (other entries are an error). Returns the number of weights merged.
int64_t merge_lora(Graph& g, const std::map<std::string, Tensor>& adapters, double scale);

// Parses the command-line form "rank=8,alpha=16,targets=*q*;*v*,dropout=0.1" (any order; rank and
// alpha default as in LoraOptions, targets required); errors name `flag` and the bad key or value.
LoraOptions parse_lora_spec(const std::string& spec, const std::string& flag = "--lora");

// True for the names the lora pass gives adapters ("<W>.lora_A", "<W>.lora_B"); sets `weight`.
bool is_lora_adapter_name(const std::string& name, std::string* weight = nullptr);

class LoraPass : public PassWithOptions<LoraOptions> {
 public:
  std::string name() const override { return "lora"; }
  std::string summary() const override;
  std::string unmet_precondition(const Graph& g) const override;
  void run(Graph& g, PassContext& ctx) override;
};

}  // namespace otter
