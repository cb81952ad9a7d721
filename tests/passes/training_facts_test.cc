// The training facts the passes record in the graph (graph/ir.h TrainingFacts): K, the loss, the
// learning rate and the finite flag; they survive an ONNX export made mid-pipeline, and the rest of
// the pipeline run on the re-imported graph gives the same graph as running it straight through.
#include <gtest/gtest.h>

#include <sstream>

#include "graph/error.h"
#include "graph/onnx_io.h"
#include "graph/printer.h"
#include "passes/pipelines.h"
#include "runtime/constant_eval.h"

namespace otter {
namespace {

std::string model(const std::string& rel) { return std::string(OTTER_SOURCE_DIR) + "/models/" + rel; }

std::string text_of(const Graph& g) {
  std::ostringstream os;
  print_graph(g, os);
  return os.str();
}

TEST(TrainingFacts, RecordedByThePassesThatEstablishThem) {
  auto g = import_onnx_file(model("digits/mlp.onnx"));
  EXPECT_EQ(g->training_facts(), TrainingFacts{});
  run_pipeline(*g, "canonicalize,add-loss{type=ce},autodiff");
  TrainingFacts f = g->training_facts();
  EXPECT_EQ(f.loss, "loss");
  EXPECT_EQ(f.accumulation_steps, 1);
  EXPECT_TRUE(f.learning_rate.empty());
  run_pipeline(*g, "grad-accumulation{steps=3},optimizer{type=sgd}");
  f = g->training_facts();
  EXPECT_EQ(f.accumulation_steps, 3);
  ASSERT_NE(g->find_value(f.learning_rate), nullptr);
  EXPECT_EQ(g->value(f.learning_rate)->producer()->op_type(), "LearningRate");
  ASSERT_NE(g->find_value(f.finite), nullptr);
  EXPECT_EQ(g->value(f.finite)->producer()->op_type(), "AllFinite");
  // The seed is 1/K (K = 3) in float32.
  EXPECT_EQ(g->loss_seed->data().get_as_double(0), static_cast<double>(1.f / 3.f));
}

TEST(TrainingFacts, SurviveAnOnnxExportMidPipeline) {
  const std::string first = "canonicalize,add-loss{type=ce},mixed-precision{dtype=fp16},autodiff,grad-accumulation{steps=4}";
  const std::string rest = "loss-scale,optimizer{type=adam},hoist-weight-casts";
  auto straight = import_onnx_file(model("digits/mlp.onnx"));
  run_pipeline(*straight, first + "," + rest);
  auto g = import_onnx_file(model("digits/mlp.onnx"));
  run_pipeline(*g, first);
  auto back = import_onnx_bytes(export_onnx_bytes(*g), "");
  EXPECT_EQ(back->training_facts(), g->training_facts());
  EXPECT_EQ(back->training_facts().accumulation_steps, 4);
  // loss-scale reads K from the facts of the imported graph: the seed is S/4 as without the export.
  run_pipeline(*back, rest);
  EXPECT_EQ(text_of(*back), text_of(*straight));
  EXPECT_EQ(back->training_facts(), straight->training_facts());
  EXPECT_EQ(back->loss_seed->producer()->attr_i("k", 0), 4);
}

TEST(TrainingFacts, BadMetadataFailsClearly) {
  Graph g;
  g.metadata["otter.training.accumulation_steps"] = "four";
  try {
    g.training_facts();
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("otter.training.accumulation_steps: 'four' is not a positive integer"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace otter
