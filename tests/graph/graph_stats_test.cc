// Graph statistics and the forward/backward/apply split, on small graphs whose figures are worked
// out by hand in the comments.
#include "graph/graph_stats.h"

#include <gtest/gtest.h>

#include "graph/graph_part.h"
#include "graph/onnx_io.h"

namespace otter {
namespace {

const GraphStats::OpCount* find_op(const GraphStats& s, const std::string& op) {
  for (const auto& c : s.ops)
    if (c.op == op) return &c;
  return nullptr;
}

TEST(GraphStats, FlopsOfGemmConvPoolAndDataMovement) {
  auto g = import_onnx_text(R"(
    <ir_version: 8, opset_import: ["" : 17]>
    agraph (float[2,3,8,8] x, float[2,5,4] a, float[4,3] p, float[4,5] q) => (float[2,4,4,4] pool, float[2,5,6] mm, float[3,5] gm, float[2,192] flat)
      <float[4,3,3,3] w = {0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0},
       float[4] b = {0,0,0,0}, float[4,6] m = {0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0}, float[5] c = {0,0,0,0,0},
       int64[2] shp = {2, 192}>
    {
      y = Conv<pads = [1,1,1,1], kernel_shape = [3,3]>(x, w, b)
      pool = MaxPool<kernel_shape = [2,2], strides = [2,2]>(y)
      mm = MatMul(a, m)
      gm = Gemm<transA = 1>(p, q, c)
      t = Transpose<perm = [0,2,3,1]>(x)
      flat = Reshape(t, shp)
    })");
  GraphStats s = compute_graph_stats(*g);
  // Conv: out 2*4*8*8 = 512 elements, each 3*3*3 = 27 multiply-adds, plus the bias: 2*512*27 + 512.
  // MaxPool: [2,4,8,8] -> [2,4,4,4] = 128 outputs of 2x2 windows: 512.
  // MatMul [2,5,4] x [4,6]: 60 outputs of K=4: 480. Gemm with transA, A [4,3]: K = 4, out [3,5],
  // plus C: 2*15*4 + 15 = 135. Transpose and Reshape move data: 0.
  EXPECT_EQ(s.forward_flops, 2 * 512 * 27 + 512 + 512 + 480 + 135);
  EXPECT_EQ(s.backward_flops, 0);
  EXPECT_EQ(s.apply_flops, 0);
  EXPECT_TRUE(s.unbound.empty());
  ASSERT_NE(find_op(s, "Conv"), nullptr);
  EXPECT_EQ(find_op(s, "Conv")->micro_step, 1);
  EXPECT_EQ(find_op(s, "Conv")->dtype, "f32");
  EXPECT_EQ(s.param_total.tensors, 4);  // w, b, m, c (float initializers are parameters)
  EXPECT_EQ(s.param_total.elements, 108 + 4 + 24 + 5);
  EXPECT_EQ(s.param_total.bytes, 4 * (108 + 4 + 24 + 5));
  EXPECT_EQ(s.constants.tensors, 1);
  EXPECT_EQ(s.constants.bytes, 16);
  EXPECT_EQ(s.inputs.bytes, 4 * (384 + 40 + 12 + 20));
}

TEST(GraphStats, ActivationPeakFollowsLiveness) {
  auto g = import_onnx_text(R"(
    <ir_version: 8, opset_import: ["" : 17]>
    agraph (float[10] x) => (float[10] d) {
      a = Relu(x)
      b = Relu(a)
      c = Add(a, b)
      d = Neg(c)
    })");
  GraphStats s = compute_graph_stats(*g);
  // a (40 B) lives until Add; at Add a, b and c are live: 120 B. At Neg b and a are freed: c + d.
  EXPECT_EQ(s.activation_peak_bytes, 120);
  EXPECT_EQ(s.activation_peak_at, "Add (output 'c')");
}

TEST(GraphStats, SymbolicDimsNeedBindings) {
  auto g = import_onnx_text(R"(
    <ir_version: 8, opset_import: ["" : 17]>
    agraph (float[N,4] x) => (float[N,4] y, float[4] z) <int64[1] ax = {0}> {
      y = Relu(x)
      z = ReduceSum<keepdims = 0>(y, ax)
    })");
  GraphStats unbound = compute_graph_stats(*g);
  EXPECT_EQ(unbound.forward_flops, -1);
  EXPECT_EQ(unbound.activation_peak_bytes, -1);
  EXPECT_EQ(unbound.unbound, std::set<std::string>{"N"});
  GraphStats bound = compute_graph_stats(*g, {{"N", 3}});
  // Relu 12 outputs, ReduceSum reads 12: 24. Both outputs are graph outputs: 48 + 16 B live.
  EXPECT_EQ(bound.forward_flops, 24);
  EXPECT_EQ(bound.activation_peak_bytes, 64);
  EXPECT_EQ(bound.inputs.bytes, 48);
}

TEST(GraphStats, ProductDimsResolve) {
  auto g = import_onnx_text(R"(
    <ir_version: 8, opset_import: ["" : 17]>
    agraph (float[N,5,4] x) => (float[20] y) <int64[2] shp = {-1, 4}, int64[1] ax = {0}> {
      f = Reshape(x, shp)
      y = Neg(f)
    })");
  // f is [5*N,4]; with N = 2 it is 40 elements and Neg costs 40.
  ASSERT_EQ(g->find_value("f")->shape().dims[0].symbol, "5*N");
  GraphStats s = compute_graph_stats(*g, {{"N", 2}});
  EXPECT_EQ(s.forward_flops, 40);
}

// A training graph in ONNX text with otter's metadata: a gradient accumulator, an optimizer moment
// written by the apply program, BatchNorm-like model state written by the micro-step, a loss scale,
// and (added below: ONNX text has no float16 literals) a half copy of the weight written by the
// apply program.
constexpr const char* kTrainingGraph = R"(
  <ir_version: 8, opset_import: ["" : 17], metadata_props: [
     "otter.frozen" : "seed",
     "otter.state" : "acc,mom,run,scale",
     "otter.state_updates" : "acc=acc_new,mom=mom_new,run=run_new,w=w_new,scale=scale_new",
     "otter.gradients" : "w=acc", "otter.loss_seed" : "seed", "otter.loss_scale" : "scale",
     "otter.apply_nodes" : "6,7,8"]>
  agraph (float[2,3] x) => (float loss, float[3] w_new, float[3] mom_new)
    <float[3] w = {1,2,3}, float seed = {1}, float[3] acc = {0,0,0}, float[3] mom = {0,0,0},
     float[3] run = {0,0,0}, float scale = {1}, int64[1] ax0 = {0}>
  {
    y = Mul(x, w)
    loss = ReduceSum<keepdims = 0>(y)
    run_new = Add(run, w)
    shape2 = Shape(x)
    y_grad = Expand(seed, shape2)
    acc_new = ReduceSum<keepdims = 0>(y_grad, ax0)
    mom_new = Add(mom, acc)
    w_new = Sub(w, mom_new)
    scale_new = Mul(scale, seed)
  })";

TEST(GraphStats, StateRolesAndParts) {
  auto g = import_onnx_text(kTrainingGraph);
  Value* w16 = g->add_state("w16", Tensor(DataType::kFloat16, {3}));
  Node* cast = g->add_node("Cast", {g->value("w_new")}, {"w16_new"});
  cast->set_attr("to", Attribute(int64_t{10}));
  cast->set_program(Program::kApply);
  cast->output(0)->set_dtype(DataType::kFloat16);
  cast->output(0)->set_shape(Shape::of({3}));
  g->state_updates[w16] = cast->output(0);
  auto parts = classify_parts(*g);
  auto part_of = [&](const std::string& out) { return parts.at(g->value(out)->producer()); };
  EXPECT_EQ(part_of("y"), GraphPart::kForward);
  EXPECT_EQ(part_of("loss"), GraphPart::kForward);
  EXPECT_EQ(part_of("run_new"), GraphPart::kForward);   // model state written by the forward
  EXPECT_EQ(part_of("y_grad"), GraphPart::kBackward);   // reads the seed
  EXPECT_EQ(part_of("shape2"), GraphPart::kBackward);   // only the backward needs it
  EXPECT_EQ(part_of("acc_new"), GraphPart::kBackward);
  EXPECT_EQ(part_of("mom_new"), GraphPart::kApply);
  GraphStats s = compute_graph_stats(*g);
  EXPECT_EQ(s.accumulators.tensors, 1);
  EXPECT_EQ(s.optimizer_state.tensors, 1);
  EXPECT_EQ(s.model_state.tensors, 1);
  EXPECT_EQ(s.loss_scale.tensors, 1);
  EXPECT_EQ(s.loss_scale.bytes, 4);
  EXPECT_EQ(s.half_copies.tensors, 1);
  EXPECT_EQ(s.half_copies.bytes, 6);
  EXPECT_EQ(s.forward_nodes, 3);
  EXPECT_EQ(s.backward_nodes, 3);
  EXPECT_EQ(s.apply_nodes, 4);
  // New contents of state (acc_new, run_new) are not activations: the micro-step's live values
  // are y (24 B), loss (4), y_grad (24) and shape2 (16): y dies at loss; peak at y_grad's Expand:
  // loss + shape2 + y_grad = 44 B (y is already freed).
  EXPECT_EQ(s.activation_peak_bytes, 44);
}

TEST(GraphParts, NoSeedMeansAllForward) {
  auto g = import_onnx_text(R"(
    <ir_version: 8, opset_import: ["" : 17]>
    agraph (float[2] x) => (float[2] y) { y = Relu(x) })");
  for (const auto& [n, p] : classify_parts(*g)) EXPECT_EQ(p, GraphPart::kForward);
}

}  // namespace
}  // namespace otter
