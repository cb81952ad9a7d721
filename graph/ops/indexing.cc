// Op-table rows of the element- and tuple-indexed ops: GatherElements, ScatterElements {reduction},
// GatherND {batch_dims} and ScatterND {reduction}, and the block moves DepthToSpace / SpaceToDepth. Gradients: a
// gather's data gradient is a scatter-add of dY into zeros; a scatter's data gradient is dY with the overwritten
// positions zeroed (or dY itself under reduction add) and its updates' gradient is the gather of dY. Kernels:
// kernels/cpu/gather_scatter.cc, kernels/cuda/gather_scatter.cu.
#include <algorithm>

#include "graph/gradient.h"
#include "graph/op_table.h"
#include "graph/ops/infer_util.h"

namespace otter {
namespace {

using infer::add;
using infer::Types;
using P = PrecisionClass;

void check_reduction(InferContext& ctx) {
  const std::string r = ctx.node().attr_s("reduction", "none");
  if (r != "none" && r != "add" && r != "mul" && r != "max" && r != "min")
    ctx.error("attribute 'reduction' must be \"none\", \"add\", \"mul\", \"max\" or \"min\", got \"" + r + "\"");
}

// GatherElements(data, indices) / ScatterElements(data, indices, updates): indices of data's rank.
InferFn infer_elements(bool scatter) {
  return [scatter](InferContext& ctx) {
    infer::check_arity(ctx, scatter ? 3 : 2, scatter ? 3 : 2);
    infer::check_type(ctx, 1, Types::kIndex);
    const Shape &x = ctx.in_shape(0), &idx = ctx.in_shape(1);
    if (x.rank_known) {
      if (x.rank() == 0) ctx.error(infer::input_desc(ctx, 0) + " (data) must have rank >= 1");
      normalize_axis(ctx, ctx.node().attr_i("axis", 0), x.rank());
      if (idx.rank_known && idx.rank() != x.rank())
        ctx.error(str_cat(infer::input_desc(ctx, 1), " (indices) of shape ", idx.to_string(),
                          " must have the rank of data ", x.to_string()));
    }
    if (!scatter) return ctx.set_output(0, ctx.in_dtype(0), idx);
    check_reduction(ctx);
    infer::check_same_type(ctx, 0, 2);
    const Shape& u = ctx.in_shape(2);
    if (u.rank_known && idx.rank_known) {
      bool ok = u.rank() == idx.rank();
      for (int64_t i = 0; ok && i < u.rank(); ++i)
        ok = !(u.dims[i].is_static() && idx.dims[i].is_static() && u.dims[i].value != idx.dims[i].value);
      if (!ok)
        ctx.error(str_cat(infer::input_desc(ctx, 2), " (updates) of shape ", u.to_string(),
                          " must have the shape of indices ", idx.to_string()));
    }
    ctx.set_output(0, ctx.in_dtype(0), x);
  };
}

// GatherND(data, indices) {batch_dims}: indices[:-1] + data[batch_dims + k:], k = indices[-1].
void infer_gather_nd(InferContext& ctx) {
  infer::check_arity(ctx, 2, 2);
  infer::check_type(ctx, 1, Types::kInt64);
  const Shape &x = ctx.in_shape(0), &idx = ctx.in_shape(1);
  const int64_t b = ctx.node().attr_i("batch_dims", 0);
  if (!x.rank_known || !idx.rank_known || idx.rank() == 0 || !idx.dims.back().is_static())
    return ctx.set_output(0, ctx.in_dtype(0), Shape::unknown());
  const int64_t k = idx.dims.back().value;
  if (b < 0 || b >= std::min(x.rank(), idx.rank()) || k < 1 || b + k > x.rank())
    ctx.error(str_cat("indices of shape ", idx.to_string(), " with batch_dims ", b, " do not index data of shape ",
                      x.to_string()));
  std::vector<Dim> out(idx.dims.begin(), idx.dims.end() - 1);
  out.insert(out.end(), x.dims.begin() + b + k, x.dims.end());
  ctx.set_output(0, ctx.in_dtype(0), Shape(out));
}

void infer_scatter_nd(InferContext& ctx) {
  infer::check_arity(ctx, 3, 3);
  infer::check_type(ctx, 1, Types::kInt64);
  infer::check_same_type(ctx, 0, 2);
  check_reduction(ctx);
  ctx.set_output(0, ctx.in_dtype(0), ctx.in_shape(0));
}

// dData = Scatter(zeros, indices, dY) with reduction add.
GradFn gather_grad(const char* scatter, std::vector<std::string> attrs) {
  return [scatter, attrs](GradContext& c) {
    if (c.node().attr_i("batch_dims", 0) != 0) c.unsupported("no gradient rule for GatherND with batch_dims != 0");
    auto a = c.forward_attrs(attrs);
    a["reduction"] = Attribute(std::string("add"));
    c.set_grad_input(0, c.emit(scatter, {c.zeros_like(c.input(0)), c.input(1), c.grad_output(0)}, a));
  };
}

// dData = dY where no update landed (reduction none) or dY (add); dUpdates = Gather(dY, indices).
GradFn scatter_grad(const char* gather, std::vector<std::string> attrs) {
  return [gather, attrs](GradContext& c) {
    const std::string red = c.node().attr_s("reduction", "none");
    if (red != "none" && red != "add") c.unsupported("no gradient rule for a scatter with reduction " + red);
    Value *dy = c.grad_output(0), *idx = c.input(1);
    auto a = c.forward_attrs(attrs);
    if (c.needs_grad(0)) {
      if (red == "add") {
        c.set_grad_input(0, dy);
      } else {
        const char* scatter = std::string(gather) == "GatherND" ? "ScatterND" : "ScatterElements";
        c.set_grad_input(0, c.emit(scatter, {dy, idx, c.zeros_like(c.input(2))}, a));
      }
    }
    if (c.needs_grad(2)) c.set_grad_input(2, c.emit(gather, {dy, idx}, a));
  };
}

// DepthToSpace {blocksize, mode} / SpaceToDepth {blocksize} of an NCHW input.
InferFn infer_space_depth(bool to_space) {
  return [to_space](InferContext& ctx) {
    infer::check_arity(ctx, 1, 1);
    const Shape& x = ctx.in_shape(0);
    const int64_t b = ctx.node().attr_i("blocksize", 0);
    if (b < 1) ctx.error(str_cat("attribute 'blocksize' must be positive, got ", b));
    const std::string mode = ctx.node().attr_s("mode", "DCR");
    if (to_space && mode != "DCR" && mode != "CRD")
      ctx.error("attribute 'mode' must be \"DCR\" or \"CRD\", got \"" + mode + "\"");
    if (!x.rank_known) return ctx.set_output(0, ctx.in_dtype(0), Shape::unknown());
    if (x.rank() != 4) ctx.error(str_cat(infer::input_desc(ctx, 0), " must be 4-D (N, C, H, W), got ", x.to_string()));
    auto div = [&](const Dim& d, int64_t k, const char* what) {
      if (d.is_static() && d.value % k)
        ctx.error(str_cat("the ", what, " of ", x.to_string(), " are not divisible by ", k));
      return d.is_static() ? Dim(d.value / k) : Dim();
    };
    auto mul = [](const Dim& d, int64_t k) { return d.is_static() ? Dim(d.value * k) : Dim(); };
    if (to_space)
      ctx.set_output(0, ctx.in_dtype(0),
                     Shape({x.dims[0], div(x.dims[1], b * b, "channels"), mul(x.dims[2], b), mul(x.dims[3], b)}));
    else
      ctx.set_output(
          0, ctx.in_dtype(0),
          Shape({x.dims[0], mul(x.dims[1], b * b), div(x.dims[2], b, "rows"), div(x.dims[3], b, "columns")}));
  };
}

// SpaceToDepth is the inverse of DepthToSpace in DCR order, and so each other's gradient; CRD order
// goes back through Reshape / Transpose / Reshape (C, H and W static).
void grad_depth_to_space(GradContext& c) {
  const int64_t b = c.node().attr_i("blocksize", 1);
  Value* dy = c.grad_output(0);
  if (c.node().attr_s("mode", "DCR") == "DCR")
    return c.set_grad_input(0, c.emit("SpaceToDepth", {dy}, {{"blocksize", Attribute(b)}}));
  const Shape& x = c.input(0)->shape();
  if (!x.rank_known || x.rank() != 4 || !x.dims[1].is_static() || !x.dims[2].is_static() || !x.dims[3].is_static())
    c.unsupported("the gradient of DepthToSpace in CRD mode needs static C, H and W");
  const int64_t ch = x.dims[1].value, h = x.dims[2].value, w = x.dims[3].value;
  Value* t = c.emit("Reshape", {dy, c.ints({0, ch / (b * b), h, b, w, b})});
  t = c.emit("Transpose", {t}, {{"perm", Attribute(std::vector<int64_t>{0, 1, 3, 5, 2, 4})}});
  c.set_grad_input(0, c.emit("Reshape", {t, c.ints({0, ch, h, w})}));
}

void grad_space_to_depth(GradContext& c) {
  c.set_grad_input(0, c.emit("DepthToSpace", {c.grad_output(0)}, c.forward_attrs({"blocksize"})));
}

}  // namespace

void register_indexing_ops(OpTable& t) {
  // GatherElements 13; ScatterElements 13, 16 (reduction add/mul), 18 (max/min); GatherND 13;
  // ScatterND 13, 16, 18 (the same reductions). One row each: the reduction attribute is read at any
  // opset (the gradient rules emit reduction add).
  add(t, "GatherElements", 13, infer_elements(false), P::kFollow, false,
      grad_rule(gather_grad("ScatterElements", {"axis"})), "data at the positions indices name along 'axis'");
  add(t, "ScatterElements", 13, infer_elements(true), P::kFollow, false,
      grad_rule(scatter_grad("GatherElements", {"axis"})),
      "data with updates written at the positions indices name along 'axis' {reduction}");
  add(t, "GatherND", 13, infer_gather_nd, P::kFollow, false, grad_rule(gather_grad("ScatterND", {})),
      "slices of data addressed by the last dim of indices {batch_dims}");
  add(t, "ScatterND", 13, infer_scatter_nd, P::kFollow, false, grad_rule(scatter_grad("GatherND", {})),
      "data with update slices written at the index tuples of indices {reduction}");
  // DepthToSpace 13; SpaceToDepth 13.
  add(t, "DepthToSpace", 13, infer_space_depth(true), P::kFollow, false, grad_rule(grad_depth_to_space),
      "channel blocks moved into blocksize x blocksize spatial blocks {mode: DCR or CRD}");
  add(t, "SpaceToDepth", 13, infer_space_depth(false), P::kFollow, false, grad_rule(grad_space_to_depth),
      "blocksize x blocksize spatial blocks moved into channels (DepthToSpace's DCR inverse)");
}

}  // namespace otter
