// The training pipeline built from options (passes/pipelines.h) and the default-train alias.
#include <gtest/gtest.h>

#include "graph/error.h"
#include "passes/pipelines.h"

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

TEST(TrainingPipeline, DefaultOptions) {
  EXPECT_EQ(training_pipeline({}),
            "batchnorm-mode,canonicalize,freeze-unreachable,fuse-attention,fuse-bias-gelu,fuse-softmax-ce,"
            "fuse-add-layernorm,fold-transpose,add-loss{type=ce},autodiff,"
            "grad-accumulation{steps=1},optimizer{type=adamw,lr=0.001},memory-plan");
  TrainingPipelineOptions unfused;
  unfused.fuse_attention.enabled = false;  // otter-train --fuse-attention off
  EXPECT_EQ(training_pipeline(unfused),
            "batchnorm-mode,canonicalize,freeze-unreachable,fuse-bias-gelu,fuse-softmax-ce,fuse-add-layernorm,fold-transpose,"
            "add-loss{type=ce},autodiff,grad-accumulation{steps=1},"
            "optimizer{type=adamw,lr=0.001},"
            "memory-plan");
  EXPECT_EQ(gradient_pipeline({}),
            "batchnorm-mode,canonicalize,freeze-unreachable,fuse-attention,fuse-bias-gelu,fuse-softmax-ce,"
            "fuse-add-layernorm,fold-transpose,add-loss{type=ce},autodiff");
  EXPECT_EQ(gradient_pipeline(unfused),
            "batchnorm-mode,canonicalize,freeze-unreachable,fuse-bias-gelu,fuse-softmax-ce,fuse-add-layernorm,fold-transpose,"
            "add-loss{type=ce},autodiff");
  TrainingPipelineOptions no_gqa;
  no_gqa.fuse_attention.gqa = false;
  EXPECT_EQ(gradient_pipeline(no_gqa),
            "batchnorm-mode,canonicalize,freeze-unreachable,fuse-attention{gqa=false},fuse-bias-gelu,fuse-softmax-ce,"
            "fuse-add-layernorm,fold-transpose,add-loss{type=ce},autodiff");
}

// fuse-bias-gelu runs by default, after fuse-attention (alone when attention is unfused);
// otter-train --fuse-bias-gelu off leaves it out.
TEST(TrainingPipeline, FuseBiasGeluByDefault) {
  TrainingPipelineOptions gelu;
  EXPECT_EQ(gradient_pipeline(gelu),
            "batchnorm-mode,canonicalize,freeze-unreachable,fuse-attention,fuse-bias-gelu,fuse-softmax-ce,"
            "fuse-add-layernorm,fold-transpose,add-loss{type=ce},autodiff");
  gelu.fuse_attention.enabled = false;
  EXPECT_EQ(gradient_pipeline(gelu),
            "batchnorm-mode,canonicalize,freeze-unreachable,fuse-bias-gelu,fuse-softmax-ce,fuse-add-layernorm,fold-transpose,"
            "add-loss{type=ce},autodiff");
  gelu.fuse_bias_gelu.bias = false;
  EXPECT_NE(training_pipeline(gelu).find(",fuse-bias-gelu{bias=false},"), std::string::npos);
  gelu.fuse_bias_gelu.enabled = false;  // otter-train --fuse-bias-gelu off
  EXPECT_EQ(gradient_pipeline(gelu),
            "batchnorm-mode,canonicalize,freeze-unreachable,fuse-softmax-ce,fuse-add-layernorm,fold-transpose,add-loss{type=ce},autodiff");
}

// fuse-softmax-ce runs by default, after fuse-bias-gelu and before the loss (with the model's own
// loss too: that is the loss it fuses); otter-train --fuse-softmax-ce off leaves it out.
TEST(TrainingPipeline, FuseSoftmaxCeByDefault) {
  TrainingPipelineOptions o;
  o.loss = LossSpec::parse("model:nll");
  EXPECT_EQ(
      gradient_pipeline(o),
      "batchnorm-mode,canonicalize,freeze-unreachable,fuse-attention,fuse-bias-gelu,fuse-softmax-ce,fuse-add-layernorm,fold-transpose,"
      "autodiff{loss=nll}");
  o.fuse_softmax_ce.enabled = false;  // otter-train --fuse-softmax-ce off
  EXPECT_EQ(training_pipeline(o).find("fuse-softmax-ce"), std::string::npos);
  EXPECT_EQ(gradient_pipeline(o).find("fuse-softmax-ce"), std::string::npos);
}

// fuse-add-layernorm runs by default, after fuse-softmax-ce (alone when the other fusions are off);
// otter-train --fuse-add-layernorm off leaves it out.
TEST(TrainingPipeline, FuseAddLayerNormByDefault) {
  TrainingPipelineOptions o;
  o.fuse_attention.enabled = false;
  o.fuse_bias_gelu.enabled = false;
  o.fuse_softmax_ce.enabled = false;
  EXPECT_EQ(gradient_pipeline(o),
            "batchnorm-mode,canonicalize,freeze-unreachable,fuse-add-layernorm,fold-transpose,add-loss{type=ce},autodiff");
  o.fuse_add_layernorm.enabled = false;  // otter-train --fuse-add-layernorm off
  EXPECT_EQ(training_pipeline(o).find("fuse-add-layernorm"), std::string::npos);
  EXPECT_EQ(gradient_pipeline(o), "batchnorm-mode,canonicalize,freeze-unreachable,fold-transpose,add-loss{type=ce},autodiff");
}

TEST(TrainingPipeline, EveryOptionReachesItsPass) {
  TrainingPipelineOptions o;
  o.loss = LossSpec::parse("mse");
  o.loss.add.output = "y";
  o.loss.add.labels = "target";
  o.accum = 4;
  o.freeze = {"fc1.*", "emb?"};
  OptimizerOptions& c = o.optimizer;
  c.type = OptimizerType::kSgd;
  c.lr = 0.1;
  c.momentum = 0.9;
  c.weight_decay = 1e-4;
  c.nesterov = true;
  c.clip_norm = 1.5;
  c.schedule = LrSchedule::kCosine;
  c.warmup = 10;
  c.total = 1000;
  EXPECT_EQ(training_pipeline(o),
            "batchnorm-mode,canonicalize,freeze-unreachable,fuse-attention,fuse-bias-gelu,fuse-softmax-ce,"
            "fuse-add-layernorm,fold-transpose,add-loss{type=mse,output=y,labels=target},"
            "autodiff{freeze=fc1.*;emb?},"
            "grad-accumulation{steps=4},optimizer{type=sgd,lr=0.1,weight_decay=1e-04,momentum=0.9,"
            "nesterov=true,clip_norm=1.5,schedule=cosine,warmup=10,total=1000},memory-plan");
}

TEST(TrainingPipeline, ModelLossSkipsAddLoss) {
  TrainingPipelineOptions o;
  o.loss = LossSpec::parse("model:total_loss");
  EXPECT_EQ(training_pipeline(o),
            "batchnorm-mode,canonicalize,freeze-unreachable,fuse-attention,fuse-bias-gelu,fuse-softmax-ce,"
            "fuse-add-layernorm,fold-transpose,autodiff{loss=total_loss},"
            "grad-accumulation{steps=1},optimizer{type=adamw,lr=0.001},memory-plan");
  EXPECT_EQ(eval_pipeline(o), "canonicalize,eval-mode");
  EXPECT_EQ(eval_pipeline({}), "canonicalize,eval-mode,add-loss{type=ce}");
}

TEST(TrainingPipeline, ThePipelineParsesAndEveryPassValidates) {
  TrainingPipelineOptions o;
  o.accum = 2;
  o.optimizer.clip_norm = 0.5;
  PassManager pm;
  pm.add_pipeline(training_pipeline(o));
  std::vector<std::string> names;
  for (const auto& p : pm.passes()) names.push_back(p->name());
  std::vector<std::string> want{"batchnorm-mode", "canonicalize",      "freeze-unreachable", "fuse-attention",
                                "fuse-bias-gelu", "fuse-softmax-ce",   "fuse-add-layernorm", "fold-transpose", "add-loss",
                                "autodiff",       "grad-accumulation", "optimizer",          "memory-plan"};
  EXPECT_EQ(names, want);
}

TEST(TrainingPipeline, MixedPrecisionPassesOnlyWhenAskedAndRegistered) {
  PassRegistry bare;  // a registry without mixed-precision and loss-scale
  TrainingPipelineOptions o;
  EXPECT_EQ(training_pipeline(o, bare).find("mixed-precision"), std::string::npos);
  EXPECT_EQ(training_pipeline(o, bare).find("loss-scale"), std::string::npos);
  o.precision = Precision::kFp16;
  EXPECT_NE(error_of([&] { training_pipeline(o, bare); }).find("pass 'mixed-precision' is not registered"),
            std::string::npos);
  bare.add("mixed-precision", [] { return std::unique_ptr<Pass>(); });
  EXPECT_NE(error_of([&] { training_pipeline(o, bare); }).find("pass 'loss-scale' is not registered"),
            std::string::npos);
  bare.add("loss-scale", [] { return std::unique_ptr<Pass>(); });
  EXPECT_NE(error_of([&] { training_pipeline(o, bare); }).find("pass 'hoist-weight-casts' is not registered"),
            std::string::npos);
  bare.add("hoist-weight-casts", [] { return std::unique_ptr<Pass>(); });
  o.accum = 4;
  EXPECT_EQ(training_pipeline(o, bare),
            "batchnorm-mode,canonicalize,freeze-unreachable,add-loss{type=ce},mixed-precision{dtype=fp16},autodiff,"
            "loss-scale{mode=dynamic,init=65536},grad-accumulation{steps=4},"
            "optimizer{type=adamw,lr=0.001},hoist-weight-casts");
  o.precision = Precision::kBf16;  // bf16 has fp32's range: no scaling unless asked
  EXPECT_EQ(training_pipeline(o, bare).find("loss-scale"), std::string::npos);
  o.loss_scale = LossScaleOptions{};
  o.loss_scale->mode = LossScaleMode::kStatic;
  o.loss_scale->init = 1024;
  EXPECT_NE(training_pipeline(o, bare).find("loss-scale{mode=static,init=1024}"), std::string::npos);
}

TEST(TrainingPipeline, BadOptionsFailClearly) {
  TrainingPipelineOptions o;
  EXPECT_NE(error_of([&] { LossSpec::parse("hinge"); }).find("loss must be ce, mse or model:NAME"), std::string::npos);
  o.accum = 0;
  EXPECT_NE(error_of([&] { training_pipeline(o); }).find("option 'steps' must be >= 1, got '0'"), std::string::npos);
  o = {};
  o.freeze = {"a,b"};
  EXPECT_NE(error_of([&] { training_pipeline(o); }).find("option 'freeze' has a pattern that cannot be written"),
            std::string::npos);
  o = {};
  o.optimizer.lr = -1;
  EXPECT_NE(error_of([&] { training_pipeline(o); }).find("option 'lr' must be > 0, got '-1'"), std::string::npos);
  EXPECT_NE(error_of([&] { parse_enum<Precision>("fp8", "precision"); }).find("precision must be fp32, fp16 or bf16"),
            std::string::npos);
}

TEST(TrainingPipeline, DefaultTrainIsRegistered) {
  const auto& aliases = PassRegistry::instance().aliases();
  ASSERT_TRUE(aliases.count("default-train"));
  EXPECT_EQ(aliases.at("default-train").first, training_pipeline({}));
  PassManager pm;
  pm.add_pipeline("default-train");
  EXPECT_GE(pm.passes().size(), 5u);
}

}  // namespace
}  // namespace otter
