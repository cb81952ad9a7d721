// Tests of the deterministic graph printer against hand-written golden text.
#include <gtest/gtest.h>

#include "graph/ir.h"
#include "graph/printer.h"

namespace otter {
namespace {

// A small training-style graph: input, parameter, constant, state with an update, an internal op.
// Attributes are set out of alphabetical order on purpose.
std::unique_ptr<Graph> build_graph(bool reverse_attr_order) {
  auto g = std::make_unique<Graph>();
  g->opset_imports[""] = 17;
  g->opset_imports["ai.otter"] = 1;
  Value* x = g->add_input("x", DataType::kFloat32, Shape({Dim("N"), Dim(4)}));
  Value* w = g->add_initializer("fc.weight", Tensor::from_vector<float>({3, 4}, std::vector<float>(12, 0.25f)), true);
  Value* shape = g->add_initializer("shape", Tensor::from_vector<int64_t>({2}, {1, -1}), false);
  Value* step = g->add_state("step", Tensor::scalar<int64_t>(0));
  Value* one = g->add_initializer("one", Tensor::scalar<int64_t>(1), false);

  Node* gemm = g->add_node("Gemm", {x, w, nullptr}, {"y"});
  gemm->set_name("fc/Gemm");
  if (reverse_attr_order) {
    gemm->set_attr("transB", 1);
    gemm->set_attr("alpha", 0.5f);
  } else {
    gemm->set_attr("alpha", 0.5f);
    gemm->set_attr("transB", 1);
  }
  g->value("y")->set_dtype(DataType::kFloat32);
  g->value("y")->set_shape(Shape({Dim("N"), Dim(3)}));

  Node* reshape = g->add_node("Reshape", {g->value("y"), shape}, {"z"});
  g->value("z")->set_dtype(DataType::kFloat32);
  g->value("z")->set_shape(Shape({Dim(1), Dim()}));

  Node* add = g->add_node("Add", {step, one}, {"step.next"});
  add->set_name("inc");
  g->value("step.next")->set_dtype(DataType::kInt64);
  g->value("step.next")->set_shape(Shape());

  Node* scale = g->add_node("Scale", {g->value("z")}, {"z.scaled", ""}, "ai.otter");
  if (reverse_attr_order) {
    scale->set_attr("names", std::vector<std::string>{"a", "b"});
    scale->set_attr("axes", std::vector<int64_t>{0, -1});
  } else {
    scale->set_attr("axes", std::vector<int64_t>{0, -1});
    scale->set_attr("names", std::vector<std::string>{"a", "b"});
  }
  g->value("z.scaled")->set_dtype(DataType::kFloat16);

  g->state_updates[step] = add->output(0);
  g->add_output(g->value("z.scaled"));
  g->add_output(reshape->output(0));
  return g;
}

TEST(PrinterTest, GoldenText) {
  auto g = build_graph(true);
  // Written by hand from the format documented in graph/printer.h.
  const std::string expected =
      "graph main (ai.onnx 17, ai.otter 1) {\n"
      "  input %x: f32[N,4]\n"
      "  param %fc.weight: f32[3,4]\n"
      "  const %shape: i64[2] = [1,-1]\n"
      "  state %step: i64[]\n"
      "  const %one: i64[] = [1]\n"
      "  %y: f32[N,3] = Gemm(%x, %fc.weight, _) {alpha=0.5, transB=1}\n"
      "  %z: f32[1,?] = Reshape(%y, %shape)\n"
      "  %step.next: i64[] = Add(%step, %one)\n"
      "  %z.scaled: f16[...], _ = ai.otter.Scale(%z) {axes=[0,-1], names=[\"a\",\"b\"]}\n"
      "  update %step <- %step.next\n"
      "  output %z.scaled\n"
      "  output %z\n"
      "}\n";
  EXPECT_EQ(graph_to_string(*g), expected);
}

TEST(PrinterTest, NodeNamesOnRequest) {
  auto g = build_graph(false);
  PrintOptions opts;
  opts.show_node_names = true;
  std::string text = graph_to_string(*g, opts);
  EXPECT_NE(text.find("{alpha=0.5, transB=1}  # fc/Gemm\n"), std::string::npos) << text;
  EXPECT_NE(text.find("= Add(%step, %one)  # inc\n"), std::string::npos) << text;
  // Unnamed nodes get no comment.
  EXPECT_NE(text.find("= Reshape(%y, %shape)\n"), std::string::npos) << text;
}

TEST(PrinterTest, DeterministicAndAttributeOrderIndependent) {
  auto a = build_graph(true);
  auto b = build_graph(false);
  EXPECT_EQ(graph_to_string(*a), graph_to_string(*a));
  EXPECT_EQ(graph_to_string(*a), graph_to_string(*b));
}

TEST(PrinterTest, NodeToString) {
  Graph g;
  Value* x = g.add_input("x", DataType::kFloat32, Shape::of({2}));
  Node* n = g.add_node("LeakyRelu", {x}, {"y"});
  n->set_attr("alpha", 0.1f);
  EXPECT_EQ(node_to_string(*n), "%y: ?[...] = LeakyRelu(%x) {alpha=0.100000001}");
}

TEST(PrinterTest, LargeConstantsOmitData) {
  Graph g;
  g.add_initializer("big", Tensor::from_vector<int64_t>({9}, {1, 2, 3, 4, 5, 6, 7, 8, 9}), false);
  g.add_initializer("small", Tensor::from_vector<float>({2}, {1.5f, -2.0f}), false);
  EXPECT_EQ(graph_to_string(g),
            "graph main () {\n"
            "  const %big: i64[9]\n"
            "  const %small: f32[2] = [1.5,-2.0]\n"
            "}\n");
}

}  // namespace
}  // namespace otter
