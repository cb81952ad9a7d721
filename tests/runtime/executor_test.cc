// Tests of the executor: plan once and run many times, symbolic batch sizes, feeds checked against
// the graph, every node without a kernel listed at plan time, programs of a training graph.
#include <gtest/gtest.h>

#include <cmath>

#include "graph/error.h"
#include "graph/onnx_io.h"
#include "runtime/executor.h"

namespace otter {
namespace {

const char* kMlp = R"(
<ir_version: 8, opset_import: ["" : 17]>
mlp (float[N,3] x) => (float[N,2] y) <float[3,2] w = {1,2,3,4,5,6}, float[2] b = {0.5,-100}> {
  h = MatMul(x, w)
  z = Add(h, b)
  y = Relu(z)
}
)";

TEST(Executor, PlansOnceAndRunsWithAnyBatchSize) {
  auto g = import_onnx_text(kMlp);
  Executor ex(*g);
  for (int64_t n : {1, 4, 0}) {
    Tensor x(DataType::kFloat32, {n, 3});
    for (int64_t i = 0; i < x.numel(); ++i) x.data<float>()[i] = static_cast<float>(i % 3 + 1);
    auto out = ex.run({{"x", x}});
    const Tensor& y = out.at("y");
    ASSERT_EQ(y.dims(), (std::vector<int64_t>{n, 2}));
    for (int64_t r = 0; r < n; ++r) {
      // [1,2,3] @ [[1,2],[3,4],[5,6]] = [22, 28]; + [0.5, -100]; relu.
      EXPECT_FLOAT_EQ(y.data<float>()[r * 2], 22.5f);
      EXPECT_FLOAT_EQ(y.data<float>()[r * 2 + 1], 0.f);
    }
  }
}

TEST(Executor, ReturnsRequestedIntermediateValues) {
  auto g = import_onnx_text(kMlp);
  Executor ex(*g);
  Tensor x = Tensor::from_vector<float>({1, 3}, {1, 1, 1});
  auto out = ex.run({{"x", x}}, {"h"});
  ASSERT_TRUE(out.count("h"));
  EXPECT_FLOAT_EQ(out.at("h").data<float>()[0], 9.f);
  EXPECT_FLOAT_EQ(out.at("h").data<float>()[1], 12.f);
}

TEST(Executor, FeedsAreCheckedAgainstTheGraph) {
  auto g = import_onnx_text(kMlp);
  Executor ex(*g);
  try {
    ex.run({});
    FAIL() << "missing input accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("missing input 'x'"), std::string::npos) << e.what();
  }
  try {
    ex.run({{"x", Tensor(DataType::kFloat64, {2, 3})}});
    FAIL() << "wrong dtype accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("input 'x' expects f32"), std::string::npos) << e.what();
  }
  try {
    ex.run({{"x", Tensor(DataType::kFloat32, {2, 4})}});
    FAIL() << "wrong shape accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("expects shape [N,3], got [2,4]"), std::string::npos) << e.what();
  }
}

TEST(Executor, SymbolMustAgreeAcrossInputs) {
  auto g = import_onnx_text(R"(
<ir_version: 8, opset_import: ["" : 17]>
g (float[N,2] a, float[N,2] b) => (float[N,2] c) { c = Add(a, b) }
)");
  Executor ex(*g);
  try {
    ex.run({{"a", Tensor(DataType::kFloat32, {2, 2})}, {"b", Tensor(DataType::kFloat32, {3, 2})}});
    FAIL() << "disagreeing symbol accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("dimension N is 3 here but 2"), std::string::npos) << e.what();
  }
}

TEST(Executor, EveryNodeWithoutAKernelIsListedAtPlanTime) {
  Graph g;
  g.opset_imports[""] = 17;
  Value* x = g.add_input("x", DataType::kInt8, Shape::of({2}));
  Node* a = g.add_node("Exp", {x}, {"e"});   // Exp has no int8 kernel
  Node* b = g.add_node("Sqrt", {x}, {"s"});  // neither has Sqrt
  a->output(0)->set_dtype(DataType::kInt8);
  b->output(0)->set_dtype(DataType::kInt8);
  g.add_output(a->output(0));
  g.add_output(b->output(0));
  try {
    Executor ex(g);
    FAIL() << "plan without kernels accepted";
  } catch (const Error& e) {
    std::string m = e.what();
    EXPECT_NE(m.find("2 nodes"), std::string::npos) << m;
    EXPECT_NE(m.find("Exp"), std::string::npos) << m;
    EXPECT_NE(m.find("Sqrt"), std::string::npos) << m;
  }
}

TEST(Executor, StateIsReadFromTheGraphOrFedAndUpdatesAreReturned) {
  Graph g;
  g.opset_imports[""] = 17;
  Value* s = g.add_state("count", Tensor::from_vector<float>({1}, {5}));
  Value* one = g.add_initializer("one", Tensor::from_vector<float>({1}, {1}), false);
  Node* add = g.add_node("Add", {s, one}, {"count.new"});
  add->output(0)->set_dtype(DataType::kFloat32);
  add->output(0)->set_shape(Shape::of({1}));
  g.state_updates[s] = add->output(0);
  Executor ex(g);
  auto out = ex.run({});
  EXPECT_FLOAT_EQ(out.at("count.new").data<float>()[0], 6.f);
  out = ex.run({{"count", out.at("count.new")}});
  EXPECT_FLOAT_EQ(out.at("count.new").data<float>()[0], 7.f);
  // The graph's own copy is untouched by runs that feed the state.
  EXPECT_FLOAT_EQ(s->data().data<float>()[0], 5.f);
}

TEST(Executor, RunsOnlyTheRequestedProgram) {
  Graph g;
  g.opset_imports[""] = 17;
  Value* x = g.add_input("x", DataType::kFloat32, Shape::of({2}));
  Node* fwd = g.add_node("Neg", {x}, {"y"});
  Value* st = g.add_state("acc", Tensor(DataType::kFloat32, {2}));
  Node* apply = g.add_node("Exp", {st}, {"acc.new"});
  apply->set_program(Program::kApply);
  for (Node* n : {fwd, apply}) {
    n->output(0)->set_dtype(DataType::kFloat32);
    n->output(0)->set_shape(Shape::of({2}));
  }
  g.add_output(fwd->output(0));
  g.state_updates[st] = apply->output(0);
  ExecutorOptions micro;
  micro.program = Program::kMicroStep;
  Executor m(g, micro);
  auto out = m.run({{"x", Tensor::from_vector<float>({2}, {1, 2})}});
  EXPECT_TRUE(out.count("y"));
  EXPECT_FALSE(out.count("acc.new"));
  ExecutorOptions ap;
  ap.program = Program::kApply;
  Executor a(g, ap);
  out = a.run({});  // the apply program needs no batch
  ASSERT_TRUE(out.count("acc.new"));
  EXPECT_FLOAT_EQ(out.at("acc.new").data<float>()[0], 1.f);
  EXPECT_FALSE(out.count("y"));
}

}  // namespace
}  // namespace otter
