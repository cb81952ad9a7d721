// LoRA fine-tuning of the GPT against PyTorch (models/make_lora_refs.py, gpt/gpt_lora_refs.npz):
// the adapter gradients, 10 AdamW steps, the base weights left bitwise unchanged, the merged
// export's logits; and bf16 with K=4 (frozen base held only as constant bf16 copies) learning.
#include <gtest/gtest.h>

#include <unistd.h>

#include "graph/onnx_io.h"
#include "passes/lora.h"
#include "passes/pass_manager.h"
#include "runtime/constant_eval.h"
#include "runtime/executor.h"
#include "runtime/initial_values.h"
#include "runtime/npz.h"
#include "runtime/training_session.h"
#include "tests/runtime/training_test_util.h"

namespace otter {
namespace {

const char* kTargets[] = {"blocks.0.attn.q.weight", "blocks.0.attn.v.weight", "blocks.0.fc.weight",
                          "blocks.1.attn.q.weight", "blocks.1.attn.v.weight", "blocks.1.fc.weight"};

LoraOptions gpt_lora() {
  LoraOptions l;
  l.rank = 4;
  l.alpha = 8;
  l.targets = {"*attn.q.weight", "*attn.v.weight", "*.fc.weight"};
  return l;
}

const NpzArchive& refs() {
  static const NpzArchive a = read_npz(model_file("gpt/gpt_lora_refs.npz"));
  return a;
}

const Tensor& lora_ref(const std::string& name) {
  const Tensor* t = refs().find(name);
  OTTER_CHECK(t, "gpt_lora_refs.npz has no '", name, "'");
  return *t;
}

std::map<std::string, Tensor> first_samples(int64_t n, int64_t begin = 0) {
  NpzArchive d = read_npz(model_file("gpt/lora_train.npz"));
  return {{"tokens", rows_copy(*d.find("tokens"), begin, n)}, {"labels", rows_copy(*d.find("labels"), begin, n)}};
}

TrainingOptions gpt_training(DataType precision = DataType::kFloat32) {
  TrainingOptions o;
  o.device = "cpu";
  o.batch_size = 4;
  o.pipeline.lora = gpt_lora();
  o.pipeline.optimizer.type = OptimizerType::kAdamW;
  o.pipeline.optimizer.lr = 0.01;
  o.pipeline.optimizer.weight_decay = 0.01;
  o.init = read_initial_values(model_file("gpt/lora_init.npz"));
  o.init_source = "lora_init.npz";
  if (precision == DataType::kBFloat16) o.pipeline.precision = Precision::kBf16;
  return o;
}

// One forward and backward pass (as otter-train grad runs it): only the 12 adapters get
// gradients, equal to PyTorch's within 1e-4 relative.
TEST(LoraGpt, AdapterGradientsMatchPyTorch) {
  auto g = import_onnx_file(model_file("gpt/gpt.onnx"));
  TrainingPipelineOptions p;
  p.lora = gpt_lora();
  apply_initial_values(*g, read_initial_values(model_file("gpt/lora_init.npz")), "lora_init.npz", &p.lora);
  run_pipeline(*g, gradient_pipeline(p));
  ASSERT_EQ(g->gradients.size(), 12u);
  ExecutorOptions eo;
  Executor ex(*g, eo);
  auto out = ex.run(first_samples(4));
  EXPECT_NEAR(out.at("loss").get_as_double(0), lora_ref("loss").get_as_double(0), 1e-5);
  for (const auto& [param, grad] : g->gradients) {
    std::string w;
    ASSERT_TRUE(is_lora_adapter_name(param->name(), &w)) << param->name();
    const Tensor& r = lora_ref("grad/" + param->name());
    EXPECT_GT(max_abs(r), 1e-4) << param->name() << ": the reference gradient is trivial";
    EXPECT_LT(rel_err(out.at(grad->name()), r), 1e-4) << param->name();
  }
}

// 10 AdamW steps of global batch 4 in file order: the losses and the adapters match PyTorch's;
// the base weights are constants, bitwise the model's, with no optimizer state; the merged
// export gives PyTorch's merged logits.
TEST(LoraGpt, TenAdamWStepsMergedExportAndFrozenBase) {
  auto s = TrainingSession::create(model_file("gpt/gpt.onnx"), gpt_training());
  const Tensor& losses = lora_ref("train/loss");
  for (int64_t step = 0; step < 10; ++step) {
    StepResult r = s->train_step(first_samples(4, 4 * step));
    EXPECT_NEAR(r.loss, losses.get_as_double(step), 1e-5 * std::fabs(losses.get_as_double(step))) << step;
  }
  int adapters = 0;
  for (const auto& [name, t] : s->adapters()) {
    EXPECT_LT(rel_err(t, lora_ref("train/" + name)), 1e-5) << name;
    ++adapters;
  }
  EXPECT_EQ(adapters, 12);
  // The adapted q and v projections feed fused attention (fuse-attention runs after lora).
  int fused = 0;
  for (const auto& n : s->graph().nodes()) fused += n->domain() == "ai.otter" && n->op_type() == "Attention";
  EXPECT_EQ(fused, 2);
  for (const std::string& n : s->state_names())
    EXPECT_TRUE(n.find(".lora_") != std::string::npos || n.rfind("optimizer.", 0) == 0) << "state " << n;

  auto original = import_onnx_file(model_file("gpt/gpt.onnx"));
  for (const Value* v : original->initializers()) {
    if (!v->trainable()) continue;  // the mask and positions: constants canonicalize may fold
    const Value* now = s->graph().find_value(v->name());
    ASSERT_TRUE(now) << v->name();
    EXPECT_FALSE(now->trainable()) << v->name();
    EXPECT_TRUE(now->data().bitwise_equal(v->data())) << v->name() << " changed";
  }

  const std::string path = testing::TempDir() + "lora_merged_" + std::to_string(getpid()) + ".onnx";
  s->export_inference(path);
  auto merged = import_onnx_file(path);
  std::remove(path.c_str());
  for (const Value* v : original->initializers()) {
    const Tensor& got = merged->value(v->name())->data();
    bool target = false;
    for (const char* t : kTargets) target |= v->name() == t;
    if (target)
      EXPECT_LT(rel_err(got, lora_ref("merged/" + v->name())), 1e-6) << v->name();
    else
      EXPECT_TRUE(got.bitwise_equal(v->data())) << v->name();
  }
  run_pipeline(*merged, "canonicalize");
  ExecutorOptions eo;
  Executor ex(*merged, eo);
  auto out = ex.run({{"tokens", first_samples(4).at("tokens")}});
  const Tensor& want = lora_ref("merged/logits");
  double err = 0;
  for (int64_t i = 0; i < want.numel(); ++i)
    err = std::max(err, std::fabs(out.at("logits").get_as_double(i) - want.get_as_double(i)));
  EXPECT_LT(err, 1e-5);
}

// bf16 with K=4 micro-batches of 2: the frozen weights exist only as bf16 constants (no fp32
// copy, no Cast per step), the adapters train, and the loss on a repeated batch goes down.
TEST(LoraGpt, Bf16WithAccumulationLearns) {
  TrainingOptions o = gpt_training(DataType::kBFloat16);
  o.batch_size = 2;
  o.pipeline.accum = 4;
  o.pipeline.optimizer.lr = 0.03;
  auto s = TrainingSession::create(model_file("gpt/gpt.onnx"), o);
  const Graph& g = s->graph();
  for (const char* w : {"blocks.0.attn.k.weight", "blocks.1.fc_out.weight", "head.weight", "blocks.0.attn.q.weight"}) {
    EXPECT_FALSE(g.find_value(w)) << w << " kept an fp32 copy";
    const Value* half = g.find_value(std::string(w) + ".bf16");
    ASSERT_TRUE(half) << w;
    EXPECT_EQ(half->kind(), ValueKind::kInitializer) << w;
    EXPECT_FALSE(half->trainable()) << w;
  }
  for (const auto& n : g.nodes())
    if (n->op_type() == "Cast")
      for (const Value* in : n->inputs())
        EXPECT_TRUE(in->name().find(".weight") == std::string::npos) << n->describe() << " casts a weight per step";
  auto batch = first_samples(8);
  double first = 0, last = 0;
  for (int step = 0; step < 15; ++step) {
    StepResult r = s->train_step(batch);
    EXPECT_FALSE(r.skipped);
    if (step == 0) first = r.loss;
    last = r.loss;
  }
  EXPECT_LT(last, 0.8 * first) << "loss " << first << " -> " << last;
}

}  // namespace
}  // namespace otter
