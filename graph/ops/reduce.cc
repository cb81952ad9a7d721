// Reductions of the default domain (ReduceSum, ReduceMean, ReduceMax, ReduceMin, ReduceSumSquare,
// ReduceL2, ReduceProd, ReduceL1, ReduceLogSum, ReduceLogSumExp): axes from the attribute
// (before opset 18; ReduceSum before 13) or from the optional 'axes' input, keepdims and
// noop_with_empty_axes.
#include <algorithm>

#include "graph/gradient.h"
#include "graph/op_table.h"
#include "graph/ops/infer_util.h"

namespace otter {
namespace {

using infer::Types;

InferFn reduce(bool axes_input, Types types) {
  return [axes_input, types](InferContext& ctx) {
    infer::check_arity(ctx, 1, axes_input ? 2 : 1);
    infer::check_type(ctx, 0, types);
    const Shape& x = ctx.in_shape(0);
    DataType t = ctx.in_dtype(0);
    bool keep = ctx.node().attr_i("keepdims", 1) != 0;
    bool noop_empty = axes_input && ctx.node().attr_i("noop_with_empty_axes", 0) != 0;
    if (!axes_input && ctx.node().has_attr("noop_with_empty_axes"))
      ctx.error("attribute 'noop_with_empty_axes' needs the axes-as-input form (opset 18, ReduceSum 13)");
    if (axes_input && ctx.node().has_attr("axes"))
      ctx.error(str_cat("attribute 'axes' is not allowed at opset ", ctx.node().opset(), "; axes are input 1"));
    std::optional<std::vector<int64_t>> axes;
    if (axes_input) {
      if (ctx.has_input(1)) {
        infer::check_type(ctx, 1, Types::kInt64);
        const Shape& as = ctx.in_shape(1);
        if (as.rank_known && as.rank() != 1)
          ctx.error("input 1 (axes) must be 1-D, got shape " + as.to_string());
        axes = infer::const_ints(ctx, 1);
        if (!axes) {
          // Unknown axes: with keepdims every dim may become 1; without, the rank drops by their count.
          auto len = infer::static_length(ctx, 1);
          if (len && *len == 0) {
            axes.emplace();
          } else {
            if (!x.rank_known) return ctx.set_output(0, t, Shape::unknown());
            if (keep) return ctx.set_output(0, t, Shape(std::vector<Dim>(x.rank())));
            if (!len) return ctx.set_output(0, t, Shape::unknown());
            if (*len > x.rank())
              ctx.error(str_cat("input 1 (axes) has ", *len, " entries for a rank-", x.rank(), " input"));
            return ctx.set_output(0, t, Shape(std::vector<Dim>(x.rank() - *len)));
          }
        }
      } else {
        axes.emplace();
      }
    } else {
      axes = ctx.node().attr_ints("axes");
    }
    if (axes->empty() && noop_empty) return ctx.set_output(0, t, x);
    if (!x.rank_known) return ctx.set_output(0, t, Shape::unknown());
    std::vector<int64_t> ax = infer::normalize_axes(ctx, *axes, x.rank());
    bool all = ax.empty();
    std::vector<Dim> out;
    for (int64_t i = 0; i < x.rank(); ++i) {
      bool reduced = all || std::find(ax.begin(), ax.end(), i) != ax.end();
      if (!reduced) out.push_back(x.dims[i]);
      else if (keep) out.emplace_back(int64_t{1});
    }
    ctx.set_output(0, t, Shape(out));
  };
}

// ---- gradient rules -----------------------------------------------------------------------------
// The reduced axes of a reduction node as the rule sees them.
struct Reduced {
  bool identity = false;     // noop_with_empty_axes with no axes: Y = X
  bool keepdims = true;
  Value* axes_value = nullptr;  // the axes input, when axes are a runtime input
  std::optional<std::vector<int64_t>> axes;  // normalised and sorted when known; empty: all axes
};

Reduced reduced_axes(GradContext& c, bool axes_input) {
  const Node& n = c.node();
  Reduced r;
  r.keepdims = n.attr_i("keepdims", 1) != 0;
  int64_t rank = c.rank_of(c.input(0));
  std::vector<int64_t> axes;
  if (!axes_input) {
    axes = n.attr_ints("axes");
  } else if (Value* a = n.input(1)) {
    if (!a->has_data() || a->kind() != ValueKind::kInitializer) {
      r.axes_value = a;
      r.axes.reset();
      return r;
    }
    axes = a->data().to_int64_vector();
  }
  r.identity = axes_input && axes.empty() && n.attr_i("noop_with_empty_axes", 0) != 0;
  for (int64_t& a : axes) a = a < 0 ? a + rank : a;
  std::sort(axes.begin(), axes.end());
  r.axes = axes;
  return r;
}

// The reduced axes as an int64 tensor: the node's own axes input when axes are a runtime input,
// else one constant made on first use; nullptr when every axis is reduced.
Value* axes_tensor(GradContext& c, Reduced& r) {
  if (!r.axes_value && r.axes && !r.axes->empty()) r.axes_value = c.ints(*r.axes);
  return r.axes_value;
}

// v (the reduction's output or its gradient) with the reduced axes restored as size 1, so that it
// broadcasts against X.
Value* keep_dims(GradContext& c, Reduced& r, Value* v) {
  if (r.keepdims || (r.axes && r.axes->empty())) return v;
  if (!r.axes) c.unsupported("keepdims=0 with axes that are not constant");
  return c.emit("Unsqueeze", {v, axes_tensor(c, r)});
}

GradFn grad_reduce_sum(bool axes_input) {
  return [axes_input](GradContext& c) {
    Reduced r = reduced_axes(c, axes_input);
    Value* dy = c.grad_output(0);
    if (r.identity) return c.set_grad_input(0, dy);
    c.set_grad_input(0, c.expand_like(keep_dims(c, r, dy), c.input(0)));
  };
}

GradFn grad_reduce_mean(bool axes_input) {
  return [axes_input](GradContext& c) {
    Reduced r = reduced_axes(c, axes_input);
    Value *dy = c.grad_output(0), *x = c.input(0);
    if (r.identity) return c.set_grad_input(0, dy);
    Value* spread = c.expand_like(keep_dims(c, r, dy), x);
    c.set_grad_input(0, c.emit("Mul", {spread, c.numel_ratio(c.output(0), x, x)}));
  };
}

// ReduceMax (and ReduceMin): dY goes to the elements equal to the result, split evenly between ties.
GradFn grad_reduce_max(bool axes_input) {
  return [axes_input](GradContext& c) {
    Reduced r = reduced_axes(c, axes_input);
    Value *dy = c.grad_output(0), *x = c.input(0);
    if (r.identity) return c.set_grad_input(0, dy);
    Value* mask = c.cast(c.emit("Equal", {x, keep_dims(c, r, c.output(0))}), x->dtype());
    Value* count = c.emit("ReduceSum", {mask, axes_tensor(c, r)}, {{"keepdims", Attribute(int64_t{1})}});
    c.set_grad_input(0, c.emit("Div", {c.emit("Mul", {mask, keep_dims(c, r, dy)}), count}));
  };
}

// ReduceSumSquare and ReduceL2: dX = X * expand(coeff(dY, Y)), with coeff 2 dY for the sum of
// squares (d/dx sum(x^2) = 2x) and dY / Y for the norm (d/dx |x| = x / |x|, taken as 0 where the
// norm is 0: PyTorch's subgradient). With noop_with_empty_axes and no axes, Y = X and dX = dY.
GradFn grad_x_times(bool axes_input, Value* (*coeff)(GradContext&, Value* dy, Value* y)) {
  return [axes_input, coeff](GradContext& c) {
    Reduced r = reduced_axes(c, axes_input);
    Value *dy = c.grad_output(0), *x = c.input(0);
    if (r.identity) return c.set_grad_input(0, dy);
    c.set_grad_input(0, c.emit("Mul", {x, c.expand_like(keep_dims(c, r, coeff(c, dy, c.output(0))), x)}));
  };
}

GradFn grad_reduce_sum_square(bool axes_input) {
  return grad_x_times(axes_input, [](GradContext& c, Value* dy, Value*) {
    return c.emit("Mul", {dy, c.scalar_like(2, dy)});
  });
}

GradFn grad_reduce_l2(bool axes_input) {
  return grad_x_times(axes_input, [](GradContext& c, Value* dy, Value* y) {
    Value* zero = c.scalar_like(0, y);
    Value* is_zero = c.emit("Equal", {y, zero});
    Value* safe_y = c.emit("Where", {is_zero, c.scalar_like(1, y), y});
    return c.emit("Where", {is_zero, zero, c.emit("Div", {dy, safe_y})});
  });
}

// v reduced over r's axes with keepdims=1 by `op` (axes as an input or an attribute, as the opset
// of the forward node's form asks).
Value* reduce_keep(GradContext& c, Reduced& r, bool axes_input, const char* op, Value* v) {
  std::map<std::string, Attribute> attrs = {{"keepdims", Attribute(int64_t{1})}};
  if (axes_input || std::string(op) == "ReduceSum") return c.emit(op, {v, axes_tensor(c, r)}, attrs);
  if (r.axes && !r.axes->empty()) attrs["axes"] = Attribute(*r.axes);
  return c.emit(op, {v}, attrs);
}

// ReduceProd: dX = dY * (product of the other elements), exact where X holds zeros: with none it
// is Y / X, with one zero only that element gets the product of the rest, with more all get 0.
GradFn grad_reduce_prod(bool axes_input) {
  return [axes_input](GradContext& c) {
    Reduced r = reduced_axes(c, axes_input);
    Value *dy = c.grad_output(0), *x = c.input(0);
    if (r.identity) return c.set_grad_input(0, dy);
    Value *zero = c.scalar_like(0, x), *one = c.scalar_like(1, x);
    Value* is_zero = c.emit("Equal", {x, zero});
    Value* zeros = reduce_keep(c, r, axes_input, "ReduceSum", c.cast(is_zero, x->dtype()));
    Value* safe = c.emit("Where", {is_zero, one, x});
    Value* rest = reduce_keep(c, r, axes_input, "ReduceProd", safe);  // product of the nonzero elements
    Value* none_zero = c.emit("Div", {rest, safe});
    Value* one_zero = c.emit("Where", {is_zero, rest, zero});
    Value* g = c.emit("Where", {c.emit("Equal", {zeros, zero}), none_zero,
                                c.emit("Where", {c.emit("Equal", {zeros, one}), one_zero, zero})});
    c.set_grad_input(0, c.emit("Mul", {g, c.expand_like(keep_dims(c, r, dy), x)}));
  };
}

// ReduceL1: dX = dY * sign(X) (0 at 0, PyTorch's subgradient).
GradFn grad_reduce_l1(bool axes_input) {
  return [axes_input](GradContext& c) {
    Reduced r = reduced_axes(c, axes_input);
    Value *dy = c.grad_output(0), *x = c.input(0);
    if (r.identity) return c.set_grad_input(0, dy);
    c.set_grad_input(0, c.emit("Mul", {c.emit("Sign", {x}), c.expand_like(keep_dims(c, r, dy), x)}));
  };
}

// ReduceLogSum: Y = log(S), dX = dY / S = dY * exp(-Y), spread over the reduced axes.
GradFn grad_reduce_log_sum(bool axes_input) {
  return [axes_input](GradContext& c) {
    Reduced r = reduced_axes(c, axes_input);
    Value *dy = c.grad_output(0), *x = c.input(0);
    if (r.identity) return c.set_grad_input(0, dy);
    Value* per = c.emit("Div", {dy, c.emit("Exp", {c.output(0)})});
    c.set_grad_input(0, c.expand_like(keep_dims(c, r, per), x));
  };
}

// ReduceLogSumExp: dX = dY * exp(X - Y) (the softmax of X over the reduced axes).
GradFn grad_reduce_log_sum_exp(bool axes_input) {
  return [axes_input](GradContext& c) {
    Reduced r = reduced_axes(c, axes_input);
    Value *dy = c.grad_output(0), *x = c.input(0);
    if (r.identity) return c.set_grad_input(0, dy);
    Value* soft = c.emit("Exp", {c.emit("Sub", {x, keep_dims(c, r, c.output(0))})});
    c.set_grad_input(0, c.emit("Mul", {soft, c.expand_like(keep_dims(c, r, dy), x)}));
  };
}

void add(OpTable& t, const char* op, int since, int until, bool axes_input, Types types, PrecisionClass p,
         GradFn (*grad)(bool), const char* summary) {
  infer::add(t, op, since, until, reduce(axes_input, types), p, false, grad_rule(grad(axes_input)), summary);
}

}  // namespace

void register_reduce_ops(OpTable& t) {
  using P = PrecisionClass;
  constexpr int kMax = kMaxOnnxOpset;
  // ai.otter.ReduceSumF32(X, axes?) {keepdims}: ReduceSum(Cast(X, float32), axes) in one pass, X
  // float16, bfloat16 or float32 (cast-elimination makes it from a float32 bias gradient's sum of a
  // widened half value; passes/cast_elimination.h). The sums are those of ReduceSum on the widened
  // values, so the result has the same bits.
  infer::add_otter_op(
      t, "ReduceSumF32",
      [](InferContext& ctx) {
        reduce(true, Types::kFloat)(ctx);
        const DataType t = ctx.in_dtype(0);
        if (t != DataType::kFloat32 && t != DataType::kFloat16 && t != DataType::kBFloat16)
          ctx.error(str_cat("input 0 must be float32, float16 or bfloat16, got ", dtype_name(t)));
        ctx.set_output(0, DataType::kFloat32, ctx.node().output(0)->shape());
      },
      P::kFp32, "ReduceSumF32(X, axes?) {keepdims} -> Y: ReduceSum(Cast(X, float32), axes) in one pass");
  add(t, "ReduceSum", 13, kMax, true, Types::kNumeric, P::kFp32, grad_reduce_sum,
      "sum over input 'axes' (all when empty)");
  // The others: 13 (axes attribute), 18 (axes input); ReduceMax and ReduceMin 20 also take bool
  // inputs. ReduceMin's gradient goes to the minima, split between ties, like ReduceMax's.
  // ReduceProd, the norms and the log-sums run in fp32 as PyTorch's autocast runs them.
  struct Family {
    const char* op;
    Types types, types18;
    PrecisionClass p;
    GradFn (*grad)(bool);
    const char* what;
  };
  constexpr Types kNum = Types::kNumeric, kFlt = Types::kFloat;
  for (const Family& f :
       {Family{"ReduceMean", kNum, kNum, P::kFollow, grad_reduce_mean, "mean"},
        Family{"ReduceMax", kNum, Types::kAny, P::kFollow, grad_reduce_max, "max"},
        Family{"ReduceMin", kNum, Types::kAny, P::kFollow, grad_reduce_max, "min"},
        Family{"ReduceSumSquare", kFlt, kFlt, P::kFp32, grad_reduce_sum_square, "sum of squares"},
        Family{"ReduceL2", kFlt, kFlt, P::kFp32, grad_reduce_l2, "Euclidean norm"},
        Family{"ReduceProd", kNum, kNum, P::kFp32, grad_reduce_prod, "product"},
        Family{"ReduceL1", kNum, kNum, P::kFp32, grad_reduce_l1, "sum of absolute values"},
        Family{"ReduceLogSum", kFlt, kFlt, P::kFp32, grad_reduce_log_sum, "log of the sum"},
        Family{"ReduceLogSumExp", kFlt, kFlt, P::kFp32, grad_reduce_log_sum_exp, "log of the sum of exp"}}) {
    add(t, f.op, 13, 17, false, f.types, f.p, f.grad,
        str_cat(f.what, " over attribute 'axes' (all when absent)").c_str());
    add(t, f.op, 18, kMax, true, f.types18, f.p, f.grad,
        str_cat(f.what, " over input 'axes' (all when empty)").c_str());
  }
}

}  // namespace otter
