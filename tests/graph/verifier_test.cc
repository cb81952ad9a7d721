// Tests of the graph verifier: a valid graph passes; each kind of breakage is reported by name.
#include <gtest/gtest.h>

#include "graph/error.h"
#include "graph/ir.h"
#include "graph/op_table.h"
#include "graph/verifier.h"

namespace otter {
namespace {

std::string joined(const std::vector<std::string>& problems) {
  std::string s;
  for (const auto& p : problems) s += p + "\n";
  return s;
}

bool any_mentions(const std::vector<std::string>& problems, const std::string& a, const std::string& b = "") {
  for (const auto& p : problems)
    if (p.find(a) != std::string::npos && p.find(b) != std::string::npos) return true;
  return false;
}

// Skips the calling test while the op table lacks the ops these graphs use.
#define REQUIRE_OPS()                                                                   \
  do {                                                                                  \
    for (const char* op : {"Relu", "Add"})                                              \
      if (!OpTable::instance().find("", op, 17)) GTEST_SKIP() << "op table has no " << op; \
  } while (0)

// x -> Relu -> r; Add(r, b) -> y; a state counter with a well-typed update.
std::unique_ptr<Graph> valid_graph() {
  auto g = std::make_unique<Graph>();
  g->opset_imports[""] = 17;
  Value* x = g->add_input("x", DataType::kFloat32, Shape({Dim("N"), Dim(3)}));
  Value* b = g->add_initializer("b", Tensor::from_vector<float>({3}, {1, 2, 3}), true);
  Value* s = g->add_state("s", Tensor::from_vector<float>({3}, {0, 0, 0}));
  Node* relu = g->add_node("Relu", {x}, {"r"});
  relu->set_name("relu");
  Node* add = g->add_node("Add", {relu->output(0), b}, {"y"});
  add->set_name("add");
  Node* upd = g->add_node("Add", {s, b}, {"s.new"});
  upd->set_name("upd");
  infer_graph(*g);
  g->state_updates[s] = upd->output(0);
  g->add_output(add->output(0));
  return g;
}

TEST(VerifierTest, ValidGraphVerifies) {
  REQUIRE_OPS();
  auto g = valid_graph();
  EXPECT_EQ(g->value("y")->type_string(), "f32[N,3]");
  auto problems = verify_graph(*g);
  EXPECT_TRUE(problems.empty()) << joined(problems);
  EXPECT_NO_THROW(verify_or_throw(*g, "test"));
}

TEST(VerifierTest, UseBeforeDefinition) {
  REQUIRE_OPS();
  auto g = valid_graph();
  // Move the Add in front of the Relu whose output it reads.
  Node* relu = g->value("r")->producer();
  Node* add = g->value("y")->producer();
  g->move_before(add, relu);
  auto problems = verify_graph(*g);
  EXPECT_TRUE(any_mentions(problems, "'r'", "before it is defined")) << joined(problems);
  EXPECT_TRUE(any_mentions(problems, "Add 'add'")) << joined(problems);
  try {
    verify_or_throw(*g, "my-pass");
    ADD_FAILURE() << "verify_or_throw accepted a broken graph";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("my-pass"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("'r'"), std::string::npos) << e.what();
  }
}

TEST(VerifierTest, DeclaredShapeDisagreesWithInference) {
  REQUIRE_OPS();
  auto g = valid_graph();
  g->value("r")->set_shape(Shape({Dim("N"), Dim(5)}));
  auto problems = verify_graph(*g);
  EXPECT_TRUE(any_mentions(problems, "Relu 'relu'", "'r'")) << joined(problems);
  EXPECT_TRUE(any_mentions(problems, "f32[N,5]", "f32[N,3]")) << joined(problems);
  // The verifier leaves the stored (wrong) type as it was.
  EXPECT_EQ(g->value("r")->shape().to_string(), "[N,5]");
}

TEST(VerifierTest, DeclaredDtypeDisagreesWithInference) {
  REQUIRE_OPS();
  auto g = valid_graph();
  g->value("y")->set_dtype(DataType::kFloat16);
  auto problems = verify_graph(*g);
  EXPECT_TRUE(any_mentions(problems, "Add 'add'", "'y'")) << joined(problems);
}

TEST(VerifierTest, DanglingStateUpdate) {
  REQUIRE_OPS();
  auto g = valid_graph();
  // The update points at a value the graph does not own.
  Graph other;
  Value* stranger = other.add_input("stranger", DataType::kFloat32, Shape::of({3}));
  g->state_updates[g->value("s")] = stranger;
  auto problems = verify_graph(*g);
  EXPECT_TRUE(any_mentions(problems, "state update of 's'", "removed")) << joined(problems);
}

TEST(VerifierTest, StateUpdateOfNonStateAndWrongType) {
  REQUIRE_OPS();
  auto g = valid_graph();
  g->state_updates[g->value("x")] = g->value("y");  // a graph input cannot be updated
  auto problems = verify_graph(*g);
  EXPECT_TRUE(any_mentions(problems, "state update of 'x'", "neither state")) << joined(problems);

  auto h = valid_graph();
  Value* bad = h->add_initializer("count", Tensor::scalar<int64_t>(0), false);
  h->set_kind(bad, ValueKind::kState);
  h->state_updates[bad] = h->value("s.new");
  problems = verify_graph(*h);
  EXPECT_TRUE(any_mentions(problems, "state update of 'count'", "type")) << joined(problems);
}

TEST(VerifierTest, UnknownOpAndMissingType) {
  Graph g;
  g.opset_imports[""] = 17;
  Value* x = g.add_input("x", DataType::kFloat32, Shape::of({2}));
  Node* n = g.add_node("NoSuchOpAnywhere", {x}, {"y"});
  n->set_name("mystery");
  g.add_output(n->output(0));
  auto problems = verify_graph(g);
  EXPECT_TRUE(any_mentions(problems, "NoSuchOpAnywhere 'mystery'", "unknown op")) << joined(problems);
  EXPECT_TRUE(any_mentions(problems, "'y'", "no data type")) << joined(problems);
}

TEST(VerifierTest, InitializerWhoseTypeDisagreesWithItsData) {
  Graph g;
  Value* w = g.add_initializer("w", Tensor::from_vector<float>({2}, {1, 2}), true);
  w->set_shape(Shape::of({3}));
  auto problems = verify_graph(g);
  EXPECT_TRUE(any_mentions(problems, "initializer 'w'", "f32[2]")) << joined(problems);
}

}  // namespace
}  // namespace otter
