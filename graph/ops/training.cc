// Op-table rows of ONNX's training-preview optimizers (domain ai.onnx.preview.training, opset 1):
// Adagrad, Adam and Momentum, each updating any number of tensors in one node. Inputs are
// R (learning rate, float scalar), T (update count, int64 scalar), then X1..Xn, G1..Gn and one or
// two state lists; outputs the new X list then the new state lists. Not differentiable. Kernels:
// kernels/cpu/onnx_optim.cc (element math in kernels/common/onnx_optim.h).
#include "graph/op_table.h"
#include "graph/ops/infer_util.h"

namespace otter {
namespace {

// Inference of an optimizer whose node takes R, T and `lists` tensor lists of n tensors each
// (X, G, then lists - 2 state lists) and returns lists - 1 lists (X_new, then the new states).
InferFn infer_optimizer(int lists) {
  return [lists](InferContext& ctx) {
    const int tensors = ctx.num_inputs() - 2;
    if (tensors <= 0 || tensors % lists != 0)
      ctx.error(str_cat("expects R, T and ", lists, " lists of equally many tensors (X, G, state), got ",
                        ctx.num_inputs(), " inputs"));
    const int n = tensors / lists;
    if (ctx.num_outputs() != (lists - 1) * n)
      ctx.error(str_cat("updates ", n, " tensors, so it has ", (lists - 1) * n, " outputs, not ", ctx.num_outputs()));
    for (int i = 0; i < ctx.num_inputs(); ++i)
      if (!ctx.has_input(i)) ctx.error(str_cat("input ", i, " is missing"));
    infer::check_type(ctx, 0, infer::Types::kFloat);
    infer::check_scalar(ctx, 0, "R (the learning rate)");
    infer::check_type(ctx, 1, infer::Types::kInt64);
    infer::check_scalar(ctx, 1, "T (the update count)");
    for (int k = 0; k < n; ++k) {
      const int x = 2 + k;
      infer::check_type(ctx, x, infer::Types::kFloat);
      for (int l = 1; l < lists; ++l) {
        const int j = x + l * n;
        infer::check_same_type(ctx, x, j);
        const Shape &sx = ctx.in_shape(x), &sj = ctx.in_shape(j);
        if (!sx.rank_known || !sj.rank_known) continue;
        const std::string what = str_cat(infer::input_desc(ctx, j), " of shape ", sj.to_string(), " and ",
                                          infer::input_desc(ctx, x), " of shape ", sx.to_string());
        if (sx.rank() != sj.rank()) ctx.error(what + " differ in rank");
        for (int64_t d = 0; d < sx.rank(); ++d) infer::check_dims_match(ctx, sx.dims[d], sj.dims[d], what);
      }
      // Output l * n + k: X_new (l = 0), then the state lists (inputs 2 + (l + 1) * n + k).
      for (int l = 0; l < lists - 1; ++l) {
        const int src = l == 0 ? x : x + (l + 1) * n;
        ctx.set_output(l * n + k, ctx.in_dtype(src), ctx.in_shape(src));
      }
    }
  };
}

void infer_momentum(InferContext& ctx) {
  const std::string mode = ctx.node().attr_s("mode", "");
  if (mode != "standard" && mode != "nesterov")
    ctx.error(str_cat("attribute 'mode' must be \"standard\" or \"nesterov\", got \"", mode, "\""));
  for (const char* a : {"alpha", "beta", "norm_coefficient"})
    if (!ctx.node().has_attr(a)) ctx.error(str_cat("the required attribute '", a, "' is missing"));
  infer_optimizer(3)(ctx);
}

OpDef optimizer(const char* op, InferFn f, const char* summary) {
  OpDef d;
  d.domain = kTrainingDomain;
  d.op_type = op;
  d.since_version = 1;
  d.until_version = 1;
  d.infer = std::move(f);
  d.grad_kind = GradKind::kNotDifferentiable;
  d.summary = summary;
  return d;
}

}  // namespace

void register_training_ops(OpTable& t) {
  t.add(optimizer("Adagrad", infer_optimizer(3),
                  "ONNX Adagrad over n tensors: R, T, X..., G..., H... -> X_new..., H_new..."));
  t.add(optimizer("Adam", infer_optimizer(4),
                  "ONNX Adam over n tensors: R, T, X..., G..., V..., H... -> X_new..., V_new..., H_new..."));
  t.add(optimizer("Momentum", infer_momentum,
                  "ONNX Momentum (standard or nesterov) over n tensors: R, T, X..., G..., V... -> X_new..., V_new..."));
}

}  // namespace otter
