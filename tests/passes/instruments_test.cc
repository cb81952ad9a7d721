// Pass-manager instruments (dumps, diffs, statistics), --disable and pass preconditions, on small
// graphs with test passes.
#include "passes/instruments.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "graph/error.h"
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

// Appends Neg to the first output, counting what it did.
class NegPass : public Pass {
 public:
  std::string name() const override { return "neg"; }
  std::string summary() const override { return "test pass"; }
  void run(Graph& g, PassContext&) override {
    reset_counters();
    Value* in = g.outputs()[0];
    Node* n = g.add_node("Neg", {in}, {g.unique_name(in->name())});
    n->output(0)->set_dtype(in->dtype());
    n->output(0)->set_shape(in->shape());
    g.set_outputs({n->output(0)});
    count("negs_added");
  }
};

// Changes nothing.
class NopPass : public Pass {
 public:
  std::string name() const override { return "nop"; }
  std::string summary() const override { return "test pass"; }
  void run(Graph&, PassContext&) override {}
};

// Needs a node in the graph.
class NeedsNodePass : public NopPass {
 public:
  std::string name() const override { return "needs-node"; }
  std::string unmet_precondition(const Graph& g) const override {
    return g.nodes().empty() ? "the graph has no node: run neg first" : "";
  }
};

std::unique_ptr<Graph> tiny() {
  auto g = std::make_unique<Graph>();
  g->opset_imports[""] = 17;
  g->add_output(g->add_input("x", DataType::kFloat32, Shape::of({2})));
  return g;
}

void run(Graph& g, std::vector<std::unique_ptr<Pass>> passes, PassInstrument& in) {
  PassManager pm;
  for (auto& p : passes) pm.add(std::move(p));
  pm.add_instrument(&in);
  pm.run(g);
}

std::vector<std::unique_ptr<Pass>> nop_neg() {
  std::vector<std::unique_ptr<Pass>> v;
  v.push_back(std::make_unique<NopPass>());
  v.push_back(std::make_unique<NegPass>());
  return v;
}

TEST(PrintInstrument, AfterChangeSkipsPassesThatChangedNothing) {
  auto g = tiny();
  std::ostringstream os;
  PrintSelection sel;
  sel.after_change = true;
  PrintInstrument pi(os, sel);
  run(*g, nop_neg(), pi);
  EXPECT_EQ(os.str(),
            "// ----- IR dump after neg ----- //\n"
            "graph main (ai.onnx 17) {\n  input %x: f32[2]\n  %x.1: f32[2] = Neg(%x)\n  output %x.1\n}\n");
}

TEST(PrintInstrument, DiffPerPass) {
  auto g = tiny();
  std::ostringstream os;
  PrintSelection sel;
  sel.after_all = true;
  sel.diff = true;
  PrintInstrument pi(os, sel);
  run(*g, nop_neg(), pi);
  EXPECT_EQ(os.str(),
            "// ----- IR diff of nop ----- //\n(no change)\n"
            "// ----- IR diff of neg ----- //\n--- before neg\n+++ after neg\n@@ -1,4 +1,5 @@\n"
            " graph main (ai.onnx 17) {\n   input %x: f32[2]\n-  output %x\n+  %x.1: f32[2] = Neg(%x)\n"
            "+  output %x.1\n }\n");
}

TEST(PrintInstrument, DumpFolderHasOneNumberedFilePerDump) {
  auto g = tiny();
  std::string dir = ::testing::TempDir() + "/otter-dumps";
  std::filesystem::remove_all(dir);
  std::ostringstream os;
  PrintSelection sel;
  sel.after_all = true;
  sel.before = {"neg"};
  PrintInstrument pi(os, sel, GraphFormat::kDot, dir);
  run(*g, nop_neg(), pi);
  EXPECT_EQ(os.str(), "");
  std::vector<std::string> files;
  for (const auto& e : std::filesystem::directory_iterator(dir)) files.push_back(e.path().filename().string());
  std::sort(files.begin(), files.end());
  EXPECT_EQ(files, (std::vector<std::string>{"00-input.dot", "01-nop.dot", "02-neg.before.dot", "02-neg.dot"}));
  std::ifstream f(dir + "/02-neg.dot");
  std::string first;
  std::getline(f, first);
  EXPECT_EQ(first, "// ----- IR dump after neg ----- //");
}

TEST(StatsInstrument, RecordsCountersAndNodeCounts) {
  auto g = tiny();
  StatsInstrument st;
  run(*g, nop_neg(), st);
  ASSERT_EQ(st.records().size(), 2u);
  EXPECT_EQ(st.records()[1].pass, "neg");
  EXPECT_EQ(st.records()[1].index, 2);
  EXPECT_EQ(st.records()[1].nodes_before, 0);
  EXPECT_EQ(st.records()[1].nodes_after, 1);
  EXPECT_EQ(st.records()[1].counters.at("negs_added"), 1);
  std::ostringstream os;
  st.report(os);
  EXPECT_EQ(os.str(), "pass statistics:\n  01-nop: nodes 0 -> 0\n  02-neg: nodes 0 -> 1\n      negs_added = 1\n");
}

TEST(PassManager, PreconditionNamesThePassToRunFirst) {
  auto g = tiny();
  PassManager pm;
  pm.add(std::make_unique<NopPass>());
  pm.add(std::make_unique<NeedsNodePass>());
  EXPECT_EQ(error_of([&] { pm.run(*g); }),
            "pass 'needs-node' cannot run: the graph has no node: run neg first (passes before it: nop)");
}

TEST(PassManager, DisableLeavesPassesOutOfNamedPipelines) {
  PassManager pm;
  pm.set_disabled({"batchnorm-mode", "canonicalize", "freeze-unreachable", "eval-mode"});
  pm.add_pipeline("default-train");
  std::string text = pm.pipeline_text();
  EXPECT_EQ(text.rfind("fuse-attention,fuse-bias-gelu,fuse-softmax-ce,fuse-add-layernorm,fold-transpose,add-loss{type=ce},autodiff,"
                       "grad-accumulation{steps=1},optimizer{type=adamw,lr=0.001}",
                       0),
            0u)
      << text;
  EXPECT_EQ(text.find("canonicalize"), std::string::npos) << text;
  EXPECT_EQ(pm.unused_disabled(), std::vector<std::string>{"eval-mode"});
  EXPECT_NE(error_of([&] { pm.set_disabled({"frobnicate"}); }).find("unknown pass 'frobnicate'"), std::string::npos);
  EXPECT_NE(error_of([&] { pm.set_disabled({"default-train"}); }).find("it is a named pipeline"), std::string::npos);
}

}  // namespace
}  // namespace otter
