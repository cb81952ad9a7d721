// Tests of the graph IR: construction, use lists, mutation, ordering, naming, shapes and host tensors.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "graph/error.h"
#include "graph/ir.h"

namespace otter {
namespace {

std::vector<std::string> op_order(const Graph& g) {
  std::vector<std::string> out;
  for (const auto& n : g.nodes()) out.push_back(n->name());
  return out;
}

TEST(IrTest, ConstructionRecordsProducersAndUses) {
  Graph g;
  g.opset_imports[""] = 17;
  Value* x = g.add_input("x", DataType::kFloat32, Shape({Dim("N"), Dim(4)}));
  Value* w = g.add_initializer("w", Tensor::from_vector<float>({4}, {1, 2, 3, 4}), true);
  Node* mul = g.add_node("Mul", {x, w}, {"y"});
  Node* relu = g.add_node("Relu", {mul->output(0)}, {"z"});
  g.add_output(relu->output(0));

  EXPECT_EQ(mul->opset(), 17);  // from the graph's import of the default domain
  EXPECT_EQ(x->kind(), ValueKind::kInput);
  EXPECT_EQ(w->kind(), ValueKind::kInitializer);
  EXPECT_TRUE(w->trainable());
  EXPECT_EQ(w->dtype(), DataType::kFloat32);
  EXPECT_EQ(w->shape().to_string(), "[4]");
  Value* y = g.value("y");
  EXPECT_EQ(y->producer(), mul);
  EXPECT_EQ(y->producer_output(), 0);
  ASSERT_EQ(y->uses().size(), 1u);
  EXPECT_EQ(y->uses()[0].first, relu);
  EXPECT_EQ(y->uses()[0].second, 0);
  ASSERT_EQ(x->uses().size(), 1u);
  EXPECT_EQ(x->uses()[0], std::make_pair(mul, 0));
  EXPECT_EQ(w->uses()[0], std::make_pair(mul, 1));
  EXPECT_TRUE(g.value("z")->is_graph_output());
  EXPECT_FALSE(y->is_graph_output());
  EXPECT_EQ(g.inputs().size(), 1u);
  EXPECT_EQ(g.initializers(), std::vector<Value*>{w});
  EXPECT_EQ(g.values().size(), 4u);
  EXPECT_THROW(g.value("nope"), Error);
  EXPECT_EQ(g.find_value("nope"), nullptr);
  // A second definition of a name is refused.
  EXPECT_THROW(g.add_input("y", DataType::kFloat32, Shape()), Error);
}

TEST(IrTest, OmittedInputsAndOutputsAreNull) {
  Graph g;
  Value* x = g.add_input("x", DataType::kFloat32, Shape::of({2}));
  Node* n = g.add_node("Clip", {x, nullptr, nullptr}, {"y", ""});
  EXPECT_EQ(n->num_inputs(), 3);
  EXPECT_FALSE(n->has_input(1));
  EXPECT_EQ(n->num_outputs(), 2);
  EXPECT_EQ(n->output(1), nullptr);
  EXPECT_EQ(n->input(7), nullptr);  // beyond the end: omitted too
}

TEST(IrTest, ReplaceAllUsesMovesUsesOutputsAndStateUpdates) {
  Graph g;
  Value* a = g.add_input("a", DataType::kFloat32, Shape::of({2}));
  Value* b = g.add_input("b", DataType::kFloat32, Shape::of({2}));
  Value* s = g.add_state("s", Tensor::from_vector<float>({2}, {0, 0}));
  Node* n1 = g.add_node("Relu", {a}, {"r"});
  Node* n2 = g.add_node("Add", {a, n1->output(0)}, {"t"});
  g.add_output(a);
  g.state_updates[s] = a;

  g.replace_all_uses(a, b);
  EXPECT_EQ(n1->input(0), b);
  EXPECT_EQ(n2->input(0), b);
  EXPECT_EQ(n2->input(1), n1->output(0));
  EXPECT_TRUE(a->uses().empty());
  EXPECT_EQ(b->uses().size(), 2u);
  EXPECT_EQ(g.outputs(), std::vector<Value*>{b});
  EXPECT_EQ(g.state_updates.at(s), b);
}

TEST(IrTest, RemoveNodeRefusesUsedOutputsAndDropsValues) {
  Graph g;
  Value* x = g.add_input("x", DataType::kFloat32, Shape::of({2}));
  Node* n1 = g.add_node("Relu", {x}, {"r"});
  Node* n2 = g.add_node("Neg", {n1->output(0)}, {"n"});
  g.add_output(n2->output(0));

  EXPECT_THROW(g.remove_node(n1), Error);  // 'r' is used by n2
  EXPECT_THROW(g.remove_node(n2), Error);  // 'n' is a graph output
  g.set_outputs({x});
  g.remove_node(n2);
  EXPECT_EQ(g.find_value("n"), nullptr);
  EXPECT_TRUE(g.value("r")->uses().empty());
  g.remove_node(n1);
  EXPECT_EQ(g.nodes().size(), 0u);
  EXPECT_TRUE(x->uses().empty());
  EXPECT_EQ(g.values().size(), 1u);
}

TEST(IrTest, RemoveDeadNodesKeepsOutputsAndStateUpdates) {
  Graph g;
  Value* x = g.add_input("x", DataType::kFloat32, Shape::of({2}));
  Value* s = g.add_state("s", Tensor::from_vector<float>({2}, {0, 0}));
  Node* live = g.add_node("Relu", {x}, {"y"});
  live->set_name("live");
  Node* dead1 = g.add_node("Neg", {x}, {"d1"});
  dead1->set_name("dead1");
  Node* dead2 = g.add_node("Abs", {dead1->output(0)}, {"d2"});
  dead2->set_name("dead2");
  Node* upd = g.add_node("Add", {s, x}, {"s.new"});
  upd->set_name("upd");
  g.add_output(live->output(0));
  g.state_updates[s] = upd->output(0);

  EXPECT_EQ(g.remove_dead_nodes(), 2);
  EXPECT_EQ(op_order(g), (std::vector<std::string>{"live", "upd"}));
  EXPECT_EQ(g.find_value("d1"), nullptr);
  EXPECT_EQ(g.find_value("d2"), nullptr);
  EXPECT_EQ(g.remove_dead_nodes(), 0);
}

TEST(IrTest, TopoSortKeepsExistingOrderWhereValid) {
  Graph g;
  Value* x = g.add_input("x", DataType::kFloat32, Shape::of({2}));
  // Built out of order: b consumes c's output, but b comes first.
  Node* a = g.add_node("Relu", {x}, {"a"});
  a->set_name("a");
  Node* c = g.add_node("Neg", {x}, {"c"});
  c->set_name("c");
  Node* d = g.add_node("Abs", {x}, {"d"});
  d->set_name("d");
  Node* b = g.add_node("Add", {a->output(0), c->output(0)}, {"b"}, "", c);
  b->set_name("b");
  Node* e = g.add_node("Exp", {x}, {"e"});
  e->set_name("e");
  ASSERT_EQ(op_order(g), (std::vector<std::string>{"a", "b", "c", "d", "e"}));
  g.topo_sort();
  // Earliest ready node first: b waits only until c is placed.
  EXPECT_EQ(op_order(g), (std::vector<std::string>{"a", "c", "b", "d", "e"}));
  // Already topological: unchanged, however often it runs.
  g.topo_sort();
  EXPECT_EQ(op_order(g), (std::vector<std::string>{"a", "c", "b", "d", "e"}));
}

TEST(IrTest, TopoSortDetectsCycles) {
  Graph g;
  Value* x = g.add_input("x", DataType::kFloat32, Shape::of({2}));
  Node* p = g.add_node("Add", {x, nullptr}, {"p"});
  Node* q = g.add_node("Relu", {p->output(0)}, {"q"});
  p->set_input(1, q->output(0));
  EXPECT_THROW(g.topo_sort(), Error);
}

TEST(IrTest, UniqueNameAppendsCounters) {
  Graph g;
  g.add_input("x", DataType::kFloat32, Shape::of({1}));
  EXPECT_EQ(g.unique_name("y"), "y");
  EXPECT_EQ(g.unique_name("x"), "x.1");
  g.add_input("x.1", DataType::kFloat32, Shape::of({1}));
  EXPECT_EQ(g.unique_name("x"), "x.2");
}

TEST(IrTest, SetKindAndRename) {
  Graph g;
  Value* w = g.add_initializer("w", Tensor::from_vector<float>({1}, {1}), true);
  g.set_kind(w, ValueKind::kState);
  EXPECT_EQ(g.state(), std::vector<Value*>{w});
  EXPECT_TRUE(g.initializers().empty());
  g.rename_value(w, "w2");
  EXPECT_EQ(g.find_value("w"), nullptr);
  EXPECT_EQ(g.value("w2"), w);
  g.add_input("x", DataType::kFloat32, Shape());
  EXPECT_THROW(g.rename_value(w, "x"), Error);
}

TEST(IrTest, DimAndShapePrinting) {
  EXPECT_EQ(Dim(3).to_string(), "3");
  EXPECT_EQ(Dim("N").to_string(), "N");
  EXPECT_EQ(Dim().to_string(), "?");
  EXPECT_TRUE(Dim(int64_t{0}).is_static());
  EXPECT_TRUE(Dim("N").is_symbolic());
  EXPECT_FALSE(Dim().is_symbolic());
  EXPECT_FALSE(Dim().is_static());
  EXPECT_EQ(Shape({Dim("N"), Dim(128)}).to_string(), "[N,128]");
  EXPECT_EQ(Shape({Dim(), Dim(2)}).to_string(), "[?,2]");
  EXPECT_EQ(Shape().to_string(), "[]");
  EXPECT_EQ(Shape::unknown().to_string(), "[...]");
  EXPECT_EQ(Shape::of({2, 3}).numel(), 6);
  EXPECT_EQ(Shape({Dim("N"), Dim(3)}).numel(), -1);
  EXPECT_FALSE(Shape::unknown() == Shape());
  EXPECT_EQ(Shape::of({2, 3}).static_dims(), (std::vector<int64_t>{2, 3}));
  EXPECT_THROW(Shape({Dim("N")}).static_dims(), Error);
  Graph g;
  Value* v = g.add_input("x", DataType::kBFloat16, Shape({Dim("B"), Dim(), Dim(8)}));
  EXPECT_EQ(v->type_string(), "bf16[B,?,8]");
}

TEST(IrTest, TensorReshapedSharesStorage) {
  Tensor t = Tensor::from_vector<float>({2, 3}, {1, 2, 3, 4, 5, 6});
  Tensor r = t.reshaped({3, 2});
  EXPECT_EQ(r.dims(), (std::vector<int64_t>{3, 2}));
  EXPECT_EQ(r.storage(), t.storage());
  r.data<float>()[5] = 60;
  EXPECT_EQ(t.data<float>()[5], 60.0f);
  EXPECT_THROW(t.reshaped({4}), Error);
}

TEST(IrTest, TensorCloneIsDeep) {
  Tensor t = Tensor::from_vector<int64_t>({3}, {7, 8, 9});
  Tensor c = t.clone();
  EXPECT_NE(c.storage(), t.storage());
  EXPECT_TRUE(c.bitwise_equal(t));
  c.data<int64_t>()[0] = 70;
  EXPECT_EQ(t.data<int64_t>()[0], 7);
  EXPECT_FALSE(c.bitwise_equal(t));
}

TEST(IrTest, TensorBitwiseEqual) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  Tensor a = Tensor::from_vector<float>({2}, {nan, 1.0f});
  Tensor b = Tensor::from_vector<float>({2}, {nan, 1.0f});
  EXPECT_TRUE(a.bitwise_equal(b));  // same bits, although NaN != NaN numerically
  Tensor z = Tensor::from_vector<float>({1}, {0.0f});
  Tensor nz = Tensor::from_vector<float>({1}, {-0.0f});
  EXPECT_FALSE(z.bitwise_equal(nz));  // equal numerically, different bits
  EXPECT_FALSE(a.bitwise_equal(a.reshaped({2, 1})));  // dims differ
  Tensor i = Tensor::from_vector<int32_t>({1}, {0});
  EXPECT_FALSE(z.bitwise_equal(i));  // dtype differs, bytes equal
  EXPECT_TRUE(Tensor(DataType::kFloat32, {0, 3}).bitwise_equal(Tensor(DataType::kFloat32, {0, 3})));
}

TEST(IrTest, TensorAccessors) {
  Tensor t(DataType::kInt32, {2, 2});
  EXPECT_EQ(t.numel(), 4);
  EXPECT_EQ(t.nbytes(), 16u);
  EXPECT_EQ(t.dim(-1), 2);
  EXPECT_EQ(t.describe(), "i32[2,2]");
  EXPECT_EQ(t.get_as_double(3), 0.0);  // zero-filled
  EXPECT_THROW(t.data<float>(), Error);
  EXPECT_THROW(Tensor::from_vector<float>({3}, {1, 2}), Error);
}

TEST(IrTest, AttributesAreTyped) {
  Graph g;
  Node* n = g.add_node("Foo", {}, {"y"});
  n->set_attr("i", 3);
  n->set_attr("f", 0.5f);
  n->set_attr("s", "abc");
  n->set_attr("ints", std::vector<int64_t>{1, 2});
  EXPECT_EQ(n->attr_i("i", 0), 3);
  EXPECT_EQ(n->attr_i("missing", 9), 9);
  EXPECT_EQ(n->attr_f("f", 0), 0.5f);
  EXPECT_EQ(n->attr_f("i", 0), 3.0f);  // ints read as floats
  EXPECT_EQ(n->attr_s("s", ""), "abc");
  EXPECT_EQ(n->attr_ints("ints"), (std::vector<int64_t>{1, 2}));
  EXPECT_THROW(n->attr_i("s", 0), Error);
  EXPECT_EQ(Attribute(1.0f).to_string(), "1.0");
  EXPECT_EQ(Attribute(std::vector<int64_t>{1, -2}).to_string(), "[1,-2]");
  EXPECT_TRUE(Attribute(2) == Attribute(int64_t{2}));
  EXPECT_FALSE(Attribute(2) == Attribute(2.0f));
}

}  // namespace
}  // namespace otter
