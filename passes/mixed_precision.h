// mixed-precision: runs the forward graph in float16 or bfloat16 where the op table says so,
// with Casts only at the boundaries between precision classes (docs/mixed-precision.md).
//
// `mixed-precision{dtype=fp16|bf16, loss=loss}`. Needs: the loss in the graph (add-loss) and no
// backward graph yet: it runs before autodiff, so the gradient of each Cast it inserts is a Cast
// back and weight gradients reach the fp32 accumulators in fp32. One forward sweep; each node's
// class comes from the op table (OpDef::precision, for the inputs OpDef::precision_inputs):
//   - LOW (MatMul, Gemm, Conv, ...): float inputs cast to the half type; output half.
//   - FP32 (Softmax, LayerNormalization, Exp, losses, ...) and every node of the loss subgraph
//     (the nodes between the model outputs the loss reads and the loss): half inputs cast to fp32.
//   - FOLLOW and the rest: run in the type of their float inputs; where they disagree, all are
//     cast to the widest. A rank-0 float constant does not vote (PyTorch's type promotion: a
//     0-dim tensor does not promote a dimensioned one), so `x * 0.5` stays half.
// Integer and bool tensors are never touched. Each value is converted once per target type,
// however many users it has: one Cast per weight (`%w.f16`), one per activation. Constants are
// converted at compile time into new constants (`%c.f16`, counter constants_converted), not by
// Cast nodes. A weight that reaches LOW ops only through single-input FOLLOW ops (the Transpose
// of an exported Linear) is cast itself and those ops run in half, since rounding commutes with
// moving data: the half copy is then of the weight, which hoist-weight-casts moves out of the
// micro-step program. Graph outputs and state updates keep their names and types (a half result
// is renamed `%y.f16` and `%y` becomes its Cast back). Counters: casts_inserted,
// constants_converted, ops_f16 / ops_bf16 / ops_f32 (float ops by the type they run in).
// Does not: remove Casts already in the model (cast-elimination does), make the weights' half
// copies state (hoist-weight-casts does, after the optimizer), or touch float64 values.
//
//   before: %h: f32[N,64] = Gemm(%x, %fc1.weight, %fc1.bias) {transB=1}
//           %logits: f32[N,10] = Gemm(%h, %fc2.weight, %fc2.bias) {transB=1}
//           %loss: f32[] = SoftmaxCrossEntropyLoss(%logits, %labels)
//   after:  %x.f16: f16[N,64] = Cast(%x) {to=10}
//           %fc1.weight.f16: f16[64,64] = Cast(%fc1.weight) {to=10}     (and the biases, fc2)
//           %h: f16[N,64] = Gemm(%x.f16, %fc1.weight.f16, %fc1.bias.f16) {transB=1}
//           %logits.f16: f16[N,10] = Gemm(%h, %fc2.weight.f16, %fc2.bias.f16) {transB=1}
//           %logits: f32[N,10] = Cast(%logits.f16) {to=1}
//           %loss: f32[] = SoftmaxCrossEntropyLoss(%logits, %labels)
#pragma once

#include "passes/pass.h"

namespace otter {

// The precision a model trains in: fp32, or mixed with fp16 or bf16 for the LOW ops.
enum class Precision : uint8_t { kFp32, kFp16, kBf16 };
const EnumNames<Precision>& enum_names(Precision);  // fp32, fp16, bf16
// The float type of a precision (float32, float16, bfloat16).
DataType precision_dtype(Precision p);

struct MixedPrecisionOptions {
  Precision dtype = Precision::kFp16;  // fp16 or bf16
  // The loss value, whose subgraph stays fp32; given, it must exist (unset: "loss" where present).
  std::optional<std::string> loss;
  bool operator==(const MixedPrecisionOptions&) const = default;
  static const OptionTable<MixedPrecisionOptions>& table();
};

struct MixedPrecisionStats {
  int64_t casts_inserted = 0;
  int64_t constants_converted = 0;
  int64_t ops_half = 0;  // float ops that run in the half type
  int64_t ops_fp32 = 0;  // float ops that run in fp32
};

MixedPrecisionStats mixed_precision(Graph& g, const MixedPrecisionOptions& o);

// A copy of a float tensor in another float type, rounded to nearest even (constant data).
Tensor convert_float_tensor(const Tensor& t, DataType to);

class MixedPrecisionPass : public PassWithOptions<MixedPrecisionOptions> {
 public:
  std::string name() const override { return "mixed-precision"; }
  std::string summary() const override;
  void run(Graph& g, PassContext& ctx) override;
};

}  // namespace otter
