// Unrolling of the recurrent ops RNN, GRU and LSTM into primitive ops, done by canonicalize on each
// such node, so that autodiff, mixed precision and both backends see only ops they already have.
//
// Follows the ONNX definitions (opset 14): directions forward, reverse and bidirectional; the
// optional inputs B, sequence_lens, initial_h, initial_c and the LSTM peepholes P; the activations
// Relu, Tanh, Sigmoid, Affine, LeakyRelu, ThresholdedRelu, ScaledTanh, HardSigmoid, Elu, Softsign and
// Softplus with activation_alpha / activation_beta (consumed in order by the activations that take
// them; the defaults of the matching ONNX ops otherwise); clip; layout 0 and 1; GRU
// linear_before_reset 0 and 1. The input projection X W^T + biases is one MatMul per direction over
// the whole sequence; each step is a Gemm with R (the projection as its C), a Split into gates, the
// activations and element-wise Mul / Add / Sub. sequence_lens, when present, masks each step (a
// sequence's state stops at its length, its Y entries beyond are 0, and the reverse direction starts
// at its last element); where it is a constant equal to the sequence length everywhere it is dropped.
// Needs: a static sequence length (X's dimension 0, or 1 with layout 1) and static W and R shapes;
// the node type-inferred. Does not: support LSTM input_forget=1 (an error naming the node).
//
//   before: %y, %yh = RNN(%x, %w, %r) {hidden_size=4}                  (x: f32[2,1,3], so T = 2)
//   after:  %w0 = Squeeze(%w, [0]); %r0 = Squeeze(%r, [0]); %xp = MatMul(%x, Transpose(%w0))
//           %x0, %x1 = Split(%xp, [1,1]) {axis=0}; %h0 = Tanh(Squeeze(%x0, [0]))
//           %h1 = Tanh(Gemm(%h0, %r0, Squeeze(%x1, [0])) {transB=1})
//           %y = Transpose(Reshape(Concat(%h0, %h1) {axis=1}, [0,2,1,4])) {perm=[1,2,0,3]}
//           %yh = Transpose(Reshape(%h1, [0,1,4])) {perm=[1,0,2]}
#pragma once

#include "graph/ir.h"

namespace otter {

// RNN, GRU or LSTM of the default domain.
bool is_recurrent(const Node& n);

// Replaces the type-inferred recurrent node `n` by its unrolled form, inserted where n was; its
// outputs keep their names. Fails naming the node where the sequence length is not static or an
// attribute is outside the ONNX definition.
void unroll_recurrent(Graph& g, Node* n);

// Unrolls every recurrent node of `g` (type-inferring each first); returns how many. For callers
// that execute an imported graph without canonicalize (the conformance runner).
int unroll_recurrent_ops(Graph& g);

}  // namespace otter
