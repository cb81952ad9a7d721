// Finite-difference checks of ai.otter.Attention's gradient rule (graph/ops/attention.cc), whose
// AttentionGrad kernel recomputes the probabilities block by block (kernels/cpu/attention.cc):
// no mask, additive masks (also trained ones), bool masks filling -inf or a finite value where true or false,
// grouped-query heads, rank-2 operands, and shapes spanning several blocks.
#include "tests/passes/gradcheck.h"

namespace otter::testing {
namespace {

// A bool [s, t] mask, true above the diagonal (the causal pattern: masked where true).
Tensor causal(int64_t s, int64_t t) {
  std::vector<bool> v;
  for (int64_t i = 0; i < s; ++i)
    for (int64_t j = 0; j < t; ++j) v.push_back(j > i);
  Tensor m(DataType::kBool, {s, t});
  for (int64_t k = 0; k < s * t; ++k) m.data<bool>()[k] = v[k];
  return m;
}

GradCheck attention(std::vector<std::vector<int64_t>> shapes, double scale) {
  return {.op = "Attention",
          .domain = kOtterDomain,
          .shapes = std::move(shapes),
          .attrs = {{"scale", Attribute(static_cast<float>(scale))}},
          .num_outputs = 2,
          .checked_outputs = {0},
          .tol = 2e-6};
}

TEST(GradCheckAttention, NoMask) {
  check_gradients_both(attention({{2, 3, 2}, {2, 2, 4}, {2, 4, 3}}, 0.7));
  check_gradients(attention({{3, 2}, {2, 5}, {5, 3}}, 1.3));  // rank 2: one head
}

TEST(GradCheckAttention, AdditiveMask) {
  GradCheck c = attention({{1, 2, 3, 2}, {1, 2, 2, 4}, {1, 2, 4, 2}, {3, 4}}, 0.5);
  c.attrs["mask_mode"] = Attribute("add");
  c.no_grad = {3};  // the mask is fed but carries no gradient
  check_gradients(c);
}

// A trained additive mask (T5's relative position bias): its gradient is AttentionGrad's dScores,
// summed over the axes the mask broadcasts along (here the batch; then none).
TEST(GradCheckAttention, TrainedAdditiveMask) {
  GradCheck c = attention({{2, 2, 3, 2}, {2, 2, 2, 4}, {2, 2, 4, 2}, {2, 3, 4}}, 0.5);
  c.attrs["mask_mode"] = Attribute("add");
  check_gradients_both(c);
  c.shapes[3] = {2, 2, 3, 4};
  check_gradients(c);
}

TEST(GradCheckAttention, CausalFill) {
  GradCheck c = attention({{2, 2, 4, 3}, {2, 2, 3, 4}, {2, 2, 4, 2}, {}}, 0.6);
  c.fixed = {{3, causal(4, 4)}};
  c.attrs["mask_mode"] = Attribute("fill_true");
  c.attrs["fill"] = Attribute(-INFINITY);
  check_gradients_both(c);
  c.attrs["mask_mode"] = Attribute("fill_false");  // keeps the upper triangle: row 3 all filled
  c.attrs["fill"] = Attribute(-2.5f);
  check_gradients(c);
}

TEST(GradCheckAttention, GroupedQueryHeads) {
  GradCheck c = attention({{1, 4, 3, 2}, {1, 2, 2, 5}, {1, 2, 5, 3}, {}}, 0.8);
  c.fixed = {{3, causal(3, 5)}};
  c.attrs["mask_mode"] = Attribute("fill_true");
  check_gradients(c);
}

// D = 40 makes key blocks of 96 (kernels/cpu/attention.cc Blocks), so 130 queries and keys span
// three query blocks and two key blocks, with dead (fully masked) blocks skipped.
TEST(GradCheckAttention, SeveralBlocks) {
  GradCheck c = attention({{1, 1, 130, 40}, {1, 1, 40, 130}, {1, 1, 130, 1}, {}}, 0.15);
  c.fixed = {{3, causal(130, 130)}};
  c.attrs["mask_mode"] = Attribute("fill_true");
  c.no_grad = {0, 1};  // dV only (about 130 checks); dQ and dK: tests/runtime/attention_test.cc
  check_gradients(c);
}

// A trained per-key bias over 130 queries: dScores gathered from every query and key block.
TEST(GradCheckAttention, SeveralBlocksTrainedMask) {
  GradCheck c = attention({{1, 1, 130, 40}, {1, 1, 40, 130}, {1, 1, 130, 1}, {1, 130}}, 0.15);
  c.attrs["mask_mode"] = Attribute("add");
  c.no_grad = {0, 1, 2};
  check_gradients(c);
}

Tensor seed(int64_t v) {
  Tensor t(DataType::kInt64, {});
  t.data<int64_t>()[0] = v;
  return t;
}

// Dropout inside Attention under a fixed seed (input 4): AttentionGrad regenerates the forward's
// mask from the Seed output (kernels/common/attention_dropout.h). With a ratio of 0.3 over 36
// probabilities per head some are dropped; tests/kernels/attention_dropout_test.cc checks which.
TEST(GradCheckAttention, Dropout) {
  GradCheck c = attention({{2, 2, 3, 2}, {2, 2, 2, 6}, {2, 2, 6, 2}, {}, {}}, 0.5);
  c.fixed = {{3, Tensor()}, {4, seed(42)}};
  c.attrs["dropout"] = Attribute(0.3f);
  c.num_outputs = 3;
  check_gradients_both(c);
}

// Dropout with a causal mask over several blocks (dV; dQ and dK: GradCheckAttention.Dropout).
TEST(GradCheckAttention, DropoutSeveralBlocks) {
  GradCheck c = attention({{1, 1, 130, 40}, {1, 1, 40, 130}, {1, 1, 130, 1}, {}, {}}, 0.15);
  c.fixed = {{3, causal(130, 130)}, {4, seed(7)}};
  c.attrs["mask_mode"] = Attribute("fill_true");
  c.attrs["dropout"] = Attribute(0.2f);
  c.num_outputs = 3;
  c.no_grad = {0, 1};
  check_gradients(c);
}

}  // namespace
}  // namespace otter::testing
