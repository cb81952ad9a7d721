// Bad input to the detection and sequence ops (graph/ops/detect.cc, kernels/cpu/detect.cc,
// kernels/cpu/unique.cc): shape inference and the CPU kernels fail with one message naming the
// culprit. Their results are checked against ONNX's test data by tests/conformance/conformance.cc.
#include <gtest/gtest.h>

#include "graph/op_table.h"
#include "tests/kernels/kernel_test_util.h"

namespace otter::testing {
namespace {

using Ints = std::vector<int64_t>;

Tensor f32(Ints dims, std::vector<float> v) { return Tensor::from_vector<float>(std::move(dims), v); }
Tensor i64(Ints dims, Ints v) { return Tensor::from_vector<int64_t>(std::move(dims), v); }
Tensor zeros(Ints dims) {
  Tensor t(DataType::kFloat32, std::move(dims));
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = 0;
  return t;
}

// The message of the error `f` throws (fails the test when it throws none).
template <typename F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  ADD_FAILURE() << "expected an error";
  return "";
}

// Shape inference of one node with graph inputs of the given dtypes and shapes.
std::string infer_error(const std::string& op, const std::vector<std::pair<DataType, Ints>>& ins,
                        const std::map<std::string, Attribute>& attrs = {}, int num_outputs = 1, int opset = 17) {
  Graph g;
  g.opset_imports[""] = opset;
  std::vector<Value*> vs;
  const char* names[] = {"a", "b", "c", "d", "e"};
  for (size_t i = 0; i < ins.size(); ++i) vs.push_back(g.add_input(names[i], ins[i].first, Shape::of(ins[i].second)));
  std::vector<std::string> outs;
  for (int i = 0; i < num_outputs; ++i) outs.push_back("y" + std::to_string(i));
  Node* n = g.add_node(op, vs, outs);
  n->set_name("the_node");
  for (const auto& [k, a] : attrs) n->set_attr(k, a);
  return error_of([&] { infer_node(*n); });
}

#define EXPECT_HAS(msg, part) EXPECT_NE((msg).find(part), std::string::npos) << (msg)

constexpr DataType kF = DataType::kFloat32;
constexpr DataType kI = DataType::kInt64;

TEST(NonMaxSuppression, BoxesNotBx4) {
  std::string e = infer_error("NonMaxSuppression", {{kF, {1, 6, 3}}, {kF, {1, 1, 6}}});
  EXPECT_HAS(e, "the_node");
  EXPECT_HAS(e, "boxes' last dimension");
  e = infer_error("NonMaxSuppression", {{kF, {6, 4}}, {kF, {1, 1, 6}}});
  EXPECT_HAS(e, "boxes (input 0 ('a')) must be [num_batches, spatial_dimension, 4], got [6,4]");
  e = infer_error("NonMaxSuppression", {{kF, {1, 6, 4}}, {kF, {1, 1, 5}}});
  EXPECT_HAS(e, "spatial_dimension of boxes and scores: 6 vs 5");
  e = error_of([] { run_op({"NonMaxSuppression", {zeros({2, 6, 3}), zeros({2, 1, 6})}}); });
  EXPECT_HAS(e, "boxes must be [num_batches, spatial_dimension, 4], got f32[2,6,3]");
  e = error_of([] { run_op({"NonMaxSuppression", {zeros({1, 6, 4}), zeros({1, 1, 6}), i64({1}, {-2})}}); });
  EXPECT_HAS(e, "max_output_boxes_per_class must not be negative, got -2");
  e = error_of([] {
    run_op({"NonMaxSuppression", {zeros({1, 6, 4}), zeros({1, 1, 6}), i64({1}, {3}), f32({1}, {1.5f})}});
  });
  EXPECT_HAS(e, "iou_threshold must be in [0, 1], got 1.5");
}

TEST(NonMaxSuppression, NoMaxOutputSelectsNothing) {
  // max_output_boxes_per_class absent: ONNX's default 0 selects no box.
  auto y = run_op({"NonMaxSuppression", {f32({1, 1, 4}, {0, 0, 1, 1}), f32({1, 1, 1}, {0.9f})}});
  EXPECT_EQ(y[0].dims(), (Ints{0, 3}));
}

TEST(Unique, AxisOutOfRange) {
  std::string e = infer_error("Unique", {{kF, {3, 3}}}, {{"axis", Attribute(int64_t{2})}}, 4);
  EXPECT_HAS(e, "the_node");
  EXPECT_HAS(e, "axis 2 is out of range for rank 2");
  e = error_of([] { run_op({"Unique", {zeros({3, 3})}, {{"axis", Attribute(int64_t{-3})}}, 4}); });
  EXPECT_HAS(e, "axis -3 is out of range for rank 2");
  e = infer_error("Unique", {{kF, {}}}, {{"axis", Attribute(int64_t{0})}}, 1);
  EXPECT_HAS(e, "X must have rank >= 1 when 'axis' is given");
}

TEST(ReverseSequence, BadLengthsAndAxes) {
  std::string e = error_of([] { run_op({"ReverseSequence", {zeros({4, 2}), i64({2}, {1, 5})}}); });
  EXPECT_HAS(e, "sequence_lens[1] = 5 is outside [0, 4] (time axis 0");
  e = error_of([] { run_op({"ReverseSequence", {zeros({4, 2}), i64({3}, {1, 2, 3})}}); });
  EXPECT_HAS(e, "sequence_lens has 3 entries, the batch axis 1 of input f32[4,2] has 2");
  e = infer_error("ReverseSequence", {{kF, {4, 2}}, {kI, {2}}},
                  {{"batch_axis", Attribute(int64_t{1})}, {"time_axis", Attribute(int64_t{1})}});
  EXPECT_HAS(e, "'batch_axis' and 'time_axis' must be 0 and 1 in either order, got 1 and 1");
}

TEST(MaxUnpool, IndexOutOfRange) {
  const std::map<std::string, Attribute> attrs = {{"kernel_shape", Attribute(Ints{2, 2})},
                                                  {"strides", Attribute(Ints{2, 2})}};
  std::string e = error_of([&] {
    run_op({"MaxUnpool", {zeros({1, 1, 2, 2}), i64({1, 1, 2, 2}, {5, 7, 16, 15})}, attrs});
  });
  EXPECT_HAS(e, "I holds index 16 at element 2, out of range for the output [1,1,4,4] (16 elements)");
  e = infer_error("MaxUnpool", {{kF, {1, 1, 2, 2}}, {kI, {1, 1, 2, 3}}}, attrs);
  EXPECT_HAS(e, "X and I: 2 vs 3");
  e = infer_error("MaxUnpool", {{kF, {1, 1, 2, 2}}, {kI, {1, 1, 2, 2}}});
  EXPECT_HAS(e, "attribute 'kernel_shape' is required");
}

TEST(RoiAlign, BadRoisAndBatchIndices) {
  std::string e = infer_error("RoiAlign", {{kF, {1, 1, 4, 4}}, {kF, {2, 5}}, {kI, {2}}});
  EXPECT_HAS(e, "rois' last dimension (x1, y1, x2, y2): 5 vs 4");
  e = infer_error("RoiAlign", {{kF, {1, 1, 4, 4}}, {kF, {2, 4}}, {kI, {2}}}, {{"mode", Attribute(std::string("min"))}});
  EXPECT_HAS(e, "attribute 'mode' must be avg or max, got 'min'");
  e = error_of([] { run_op({"RoiAlign", {zeros({1, 1, 4, 4}), zeros({2, 4}), i64({2}, {0, 1})}}); });
  EXPECT_HAS(e, "batch_indices[1] = 1 is out of range for X f32[1,1,4,4]");
}

}  // namespace
}  // namespace otter::testing
