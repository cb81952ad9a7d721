// Einsum equations ("ij,jk->ik", "...ii->...i", "bij,bjk"): parsing, the implicit output, and the
// expansion of each operand's term into one label per axis once the operands' ranks are known.
// Shared by Einsum's inference and gradient rule (graph/ops/einsum.cc) and its CPU kernel
// (kernels/cpu/einsum.cc).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace otter::einsum {

// One term of an equation: its letters in order, and where "..." stands (-1: no ellipsis), as an
// index into `letters` (the ellipsis comes before letters[ellipsis]).
struct Term {
  std::string letters;
  int ellipsis = -1;
  bool has_ellipsis() const { return ellipsis >= 0; }
  // The term as written ("...ij"), ellipsis included.
  std::string text() const;
};

struct Equation {
  std::vector<Term> inputs;
  Term output;           // the implicit output made explicit where the equation has no "->"
  bool explicit_output;  // the equation has "->"
};

// Parses `eq` for `num_operands` operands (spaces ignored). Returns an empty string and fills
// `out`, or a message saying what is wrong (the caller names the node and quotes the equation).
std::string parse(const std::string& eq, size_t num_operands, Equation* out);

// Labels per axis once ranks are known: the ellipsis's dims are labels 0..E-1 (E the largest
// ellipsis rank, right-aligned as in broadcasting), letter c is label E + letter_index(c).
struct Axes {
  int ellipsis_rank = 0;                    // E
  std::vector<std::vector<int>> operands;   // per operand, per axis: its label
  std::vector<int> output;                  // per output axis: its label
  int num_labels() const { return ellipsis_rank + 52; }
};
// 0..25 for 'A'..'Z', 26..51 for 'a'..'z' (ASCII order, the implicit output's order).
int letter_index(char c);
// Expands the terms for operands of the given ranks; returns an empty string or why it cannot.
std::string expand(const Equation& e, const std::vector<int64_t>& ranks, Axes* out);

}  // namespace otter::einsum
