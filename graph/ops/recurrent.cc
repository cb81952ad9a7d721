// Op-table rows of the recurrent ops RNN, GRU and LSTM: type and shape inference only. They have no
// kernels and no gradient rule of their own: canonicalize unrolls each over its static sequence
// length into MatMul/Gemm, Split, the activations and element-wise ops (passes/recurrent.h), so the
// executor, autodiff and mixed precision only ever see those.
#include "graph/gradient.h"
#include "graph/op_table.h"
#include "graph/ops/infer_util.h"

namespace otter {
namespace {

using infer::Types;

// Number of gate blocks in W and R: RNN 1, GRU 3, LSTM 4.
int64_t gate_count(const std::string& op) { return op == "RNN" ? 1 : op == "GRU" ? 3 : 4; }

// Inputs: X, W, R, B?, sequence_lens?, initial_h? (LSTM: initial_c?, P?). Outputs: Y?, Y_h?
// (LSTM: Y_c?). Layout 0: X [T,N,I], Y [T,D,N,H], Y_h [D,N,H]; layout 1: X [N,T,I], Y [N,T,D,H],
// Y_h [N,D,H].
// The shapes the spec gives W, B, sequence_lens, initial_h, initial_c and P (the unroller cuts them
// by these dims, so a wrong one must fail here, naming the input).
void check_operand_shapes(InferContext& ctx, int64_t num_dir, const Dim& gates, const Dim& hidden, const Dim& batch,
                          int64_t layout) {
  const bool lstm = ctx.node().op_type() == "LSTM";
  const Dim dirs(num_dir), twice_gates = gates.is_static() ? Dim(2 * gates.value) : Dim();
  const Dim peep = hidden.is_static() ? Dim(3 * hidden.value) : Dim();
  auto expect = [&](int i, std::vector<Dim> want) {
    if (i >= ctx.num_inputs() || !ctx.has_input(i) || (i >= 6 && !lstm)) return;
    const Shape& s = ctx.in_shape(i);
    if (!s.rank_known) return;
    const std::string desc = infer::input_desc(ctx, i);
    if (s.rank() != static_cast<int64_t>(want.size()))
      ctx.error(str_cat(desc, " must have rank ", want.size(), ", got shape ", s.to_string()));
    for (size_t k = 0; k < want.size(); ++k)
      infer::check_dims_match(ctx, s.dims[k], want[k], str_cat(desc, " dimension ", k));
  };
  expect(1, {dirs, gates, infer::dim_at(ctx.in_shape(0), 2)});  // W [D, G*H, I]
  expect(3, {dirs, twice_gates});                               // B [D, 2*G*H]
  expect(4, {batch});                                           // sequence_lens [N]
  const std::vector<Dim> state = layout == 0 ? std::vector<Dim>{dirs, batch, hidden} : std::vector<Dim>{batch, dirs, hidden};
  expect(5, state);                                             // initial_h
  expect(6, state);                                             // initial_c (LSTM)
  expect(7, {dirs, peep});                                      // P (LSTM peepholes)
}

void infer_recurrent(InferContext& ctx) {
  const Node& n = ctx.node();
  const bool lstm = n.op_type() == "LSTM";
  infer::check_arity(ctx, 3, lstm ? 8 : 6, 0, lstm ? 3 : 2);
  for (int i : {0, 1, 2, 3, 5, 6, 7})
    if (i < ctx.num_inputs() && ctx.has_input(i) && (i < 6 || lstm)) {
      infer::check_type(ctx, i, Types::kFloat);
      infer::check_same_type(ctx, 0, i);
    }
  if (ctx.has_input(4)) infer::check_type(ctx, 4, Types::kIndex);
  const std::string dir = n.attr_s("direction", "forward");
  if (dir != "forward" && dir != "reverse" && dir != "bidirectional")
    ctx.error(str_cat("attribute 'direction' must be forward, reverse or bidirectional, got '", dir, "'"));
  const int64_t layout = n.attr_i("layout", 0);
  if (layout != 0 && layout != 1) ctx.error(str_cat("attribute 'layout' must be 0 or 1, got ", layout));
  const int64_t num_dir = dir == "bidirectional" ? 2 : 1;
  const Shape& x = ctx.in_shape(0);
  const Shape& r = ctx.in_shape(2);
  for (int i : {0, 1, 2})
    if (ctx.in_shape(i).rank_known && ctx.in_shape(i).rank() != 3)
      ctx.error(str_cat(infer::input_desc(ctx, i), " must have rank 3, got shape ", ctx.in_shape(i).to_string()));
  Dim hidden = n.has_attr("hidden_size") ? Dim(n.attr_i("hidden_size", 0)) : infer::dim_at(r, 2);
  infer::check_dims_match(ctx, infer::dim_at(r, 2), hidden, "R's last dimension and hidden_size");
  Dim gates = infer::dim_at(r, 1);
  if (gates.is_static() && hidden.is_static())
    infer::check_dims_match(ctx, gates, Dim(gate_count(n.op_type()) * hidden.value),
                            str_cat("R's dimension 1 and ", gate_count(n.op_type()), " x hidden_size"));
  infer::check_dims_match(ctx, infer::dim_at(r, 0), Dim(num_dir), "R's dimension 0 and the number of directions");
  const Dim seq = infer::dim_at(x, layout == 0 ? 0 : 1), batch = infer::dim_at(x, layout == 0 ? 1 : 0);
  check_operand_shapes(ctx, num_dir, gates, hidden, batch, layout);
  const DataType t = ctx.in_dtype(0);
  if (layout == 0) {
    ctx.set_output(0, t, Shape({seq, Dim(num_dir), batch, hidden}));
    for (int i = 1; i < ctx.num_outputs(); ++i) ctx.set_output(i, t, Shape({Dim(num_dir), batch, hidden}));
  } else {
    ctx.set_output(0, t, Shape({batch, seq, Dim(num_dir), hidden}));
    for (int i = 1; i < ctx.num_outputs(); ++i) ctx.set_output(i, t, Shape({batch, Dim(num_dir), hidden}));
  }
}

// Reached only when autodiff runs on a graph canonicalize has not seen.
void grad_recurrent(GradContext& c) {
  c.unsupported("RNN, GRU and LSTM are differentiated through their unrolled form: run canonicalize first");
}

void add(OpTable& t, const char* op, const char* summary) {
  t.add({.domain = "",
         .op_type = op,
         .since_version = kMinOnnxOpset,
         .until_version = kMaxOnnxOpset,
         .infer = infer_recurrent,
         .precision = PrecisionClass::kFollow,
         .grad_kind = GradKind::kRule,
         .grad = grad_recurrent,
         .summary = summary});
}

}  // namespace

void register_recurrent_ops(OpTable& t) {
  // RNN, GRU, LSTM 7 and 14 (14 adds layout); canonicalize unrolls them (passes/recurrent.h).
  add(t, "RNN", "Elman RNN over a static sequence {direction, activations, clip, layout}; unrolled by canonicalize");
  add(t, "GRU", "GRU over a static sequence {linear_before_reset, direction, activations, clip, layout}; unrolled");
  add(t, "LSTM",
      "LSTM with optional peepholes over a static sequence {direction, activations, clip, layout}; unrolled");
}

}  // namespace otter
