// Pipeline parser, pass registry, option validation and pass-manager instruments.
#include <gtest/gtest.h>

#include <sstream>

#include "graph/error.h"
#include "passes/instruments.h"
#include "passes/pass_manager.h"

namespace otter {
namespace {

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(Pipeline, ParsesNamesAndOptions) {
  auto p = parse_pipeline(" canonicalize , add-loss{type=ce, output=logits},autodiff{} ");
  ASSERT_EQ(p.size(), 3u);
  EXPECT_EQ(p[0].name, "canonicalize");
  EXPECT_TRUE(p[0].options.values().empty());
  EXPECT_EQ(p[1].name, "add-loss");
  EXPECT_EQ(p[1].options.get_string("type", ""), "ce");
  EXPECT_EQ(p[1].options.get_string("output", ""), "logits");
  EXPECT_EQ(p[1].text, "add-loss{type=ce, output=logits}");
  EXPECT_EQ(p[2].name, "autodiff");
}

TEST(Pipeline, EmptyIsEmpty) { EXPECT_TRUE(parse_pipeline("  ").empty()); }

TEST(Pipeline, TypedOptionGetters) {
  auto p = parse_pipeline("x{a=3,b=2.5,c=true,d=off}");
  EXPECT_EQ(p[0].options.get_int("a", 0), 3);
  EXPECT_DOUBLE_EQ(p[0].options.get_float("b", 0), 2.5);
  EXPECT_TRUE(p[0].options.get_bool("c", false));
  EXPECT_FALSE(p[0].options.get_bool("d", true));
  EXPECT_EQ(p[0].options.get_int("missing", 7), 7);
  EXPECT_NE(error_of([&] { p[0].options.get_int("b", 0); }).find("expects an int"), std::string::npos);
}

TEST(Pipeline, SyntaxErrorsNamePosition) {
  EXPECT_NE(error_of([] { parse_pipeline("a,,b"); }).find("expected a pass name"), std::string::npos);
  EXPECT_NE(error_of([] { parse_pipeline("a{k}"); }).find("expected '='"), std::string::npos);
  EXPECT_NE(error_of([] { parse_pipeline("a{k=1"); }).find("missing '}'"), std::string::npos);
  EXPECT_NE(error_of([] { parse_pipeline("a{k=}"); }).find("has no value"), std::string::npos);
  EXPECT_NE(error_of([] { parse_pipeline("a{k=1,k=2}"); }).find("given twice"), std::string::npos);
  EXPECT_NE(error_of([] { parse_pipeline("a b"); }).find("expected ','"), std::string::npos);
}

TEST(PassManager, UnknownPassListsValidOnes) {
  PassManager pm;
  std::string e = error_of([&] { pm.add_pipeline("canonicalize,frobnicate"); });
  EXPECT_NE(e.find("unknown pass 'frobnicate'"), std::string::npos) << e;
  EXPECT_NE(e.find("canonicalize"), std::string::npos) << e;
  EXPECT_NE(e.find("autodiff"), std::string::npos) << e;
}

TEST(PassManager, UnknownOptionAndBadValues) {
  PassManager pm;
  std::string e = error_of([&] { pm.add_pipeline("add-loss{kind=ce}"); });
  EXPECT_NE(e.find("no option 'kind'"), std::string::npos) << e;
  EXPECT_NE(e.find("type"), std::string::npos) << e;  // lists the valid options
  e = error_of([&] { pm.add_pipeline("add-loss{type=hinge}"); });
  EXPECT_NE(e.find("must be one of ce|mse"), std::string::npos) << e;
  e = error_of([&] { pm.add_pipeline("canonicalize{x=1}"); });
  EXPECT_NE(e.find("takes no options"), std::string::npos) << e;
}

// A pass that appends an Identity so instruments have something to show.
class TouchPass : public Pass {
 public:
  std::string name() const override { return "touch"; }
  std::string summary() const override { return "test pass"; }
  void run(Graph& g, PassContext&) override {
    Node* n = g.add_node("Identity", {g.outputs()[0]}, {g.unique_name("t")});
    n->output(0)->set_dtype(DataType::kFloat32);
    n->output(0)->set_shape(Shape::of({2}));
    g.set_outputs({n->output(0)});
    count("touched");
  }
};

TEST(PassManager, PrintAfterAllHasBannersAndVerifies) {
  Graph g;
  g.opset_imports[""] = 17;
  Value* x = g.add_input("x", DataType::kFloat32, Shape::of({2}));
  g.add_output(x);
  PassManager pm;
  pm.add(std::make_unique<TouchPass>());
  pm.add(std::make_unique<TouchPass>());
  std::ostringstream os;
  PrintSelection sel;
  sel.after_all = true;
  PrintInstrument pi(os, sel);
  pm.add_instrument(&pi);
  pm.run(g);
  std::string s = os.str();
  size_t first = s.find("// ----- IR dump after touch ----- //");
  ASSERT_NE(first, std::string::npos) << s;
  EXPECT_NE(s.find("// ----- IR dump after touch ----- //", first + 1), std::string::npos) << s;
  EXPECT_NE(s.find("%t.1: f32[2] = Identity(%t)"), std::string::npos) << s;
  EXPECT_EQ(pm.passes()[0]->counters().at("touched"), 1);
}

// A pass that breaks the graph: the manager's verification must catch it and name the pass.
class BreakPass : public Pass {
 public:
  std::string name() const override { return "break"; }
  std::string summary() const override { return "test pass"; }
  void run(Graph& g, PassContext&) override {
    Node* n = g.add_node("Relu", {g.outputs()[0]}, {"r"});
    n->output(0)->set_dtype(DataType::kFloat32);
    n->output(0)->set_shape(Shape::of({3}));  // wrong: input is [2]
    g.set_outputs({n->output(0)});
  }
};

TEST(PassManager, VerificationNamesThePass) {
  Graph g;
  g.opset_imports[""] = 17;
  g.add_output(g.add_input("x", DataType::kFloat32, Shape::of({2})));
  PassManager pm;
  pm.add(std::make_unique<BreakPass>());
  std::string e = error_of([&] { pm.run(g); });
  EXPECT_NE(e.find("after pass 'break'"), std::string::npos) << e;
  EXPECT_NE(e.find("'r'"), std::string::npos) << e;
}

TEST(PassRegistry, EveryPassHasSummary) {
  for (const std::string& n : PassRegistry::instance().names()) {
    auto p = PassRegistry::instance().create(n);
    EXPECT_EQ(p->name(), n);
    EXPECT_FALSE(p->summary().empty()) << n;
  }
}

}  // namespace
}  // namespace otter
