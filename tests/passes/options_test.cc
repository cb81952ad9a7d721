// Typed pass options (passes/options.h): every registered pass's options struct round-trips
// struct -> pipeline text -> struct, with default and non-default values; bad values fail with one
// error naming the pass, the option and what it accepts; the value types the coming passes need
// (byte sizes, glob lists, enums) parse and print.
#include <gtest/gtest.h>

#include "graph/error.h"
#include "passes/add_loss.h"
#include "passes/all_reduce.h"
#include "passes/autodiff.h"
#include "passes/batchnorm_mode.h"
#include "passes/fuse_attention.h"
#include "passes/fold_transpose.h"
#include "passes/fuse_add_layernorm.h"
#include "passes/fuse_bias_gelu.h"
#include "passes/fuse_softmax_ce.h"
#include "passes/grad_accumulation.h"
#include "passes/lora.h"
#include "passes/loss_scale.h"
#include "passes/memory_plan.h"
#include "passes/mixed_precision.h"
#include "passes/optimizer.h"
#include "passes/pass_manager.h"
#include "passes/pipelines.h"
#include "passes/recompute.h"

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

// A pass configured from pipeline text "name{...}".
std::unique_ptr<Pass> configured(const std::string& text) {
  auto entries = parse_pipeline(text);
  EXPECT_EQ(entries.size(), 1u) << text;
  auto p = PassRegistry::instance().create(entries[0].name);
  p->configure(entries[0].options);
  return p;
}

std::string text_of(const Pass& p) {
  std::string o = p.options_text();
  return o.empty() ? p.name() : p.name() + "{" + o + "}";
}

// Every registered pass: each option set alone to a non-default value, then all together, prints
// to text that configures an equal pass; the defaults print only the always-written options.
TEST(PassOptions, EveryRegisteredPassRoundTrips) {
  for (const std::string& name : PassRegistry::instance().names()) {
    SCOPED_TRACE(name);
    auto fresh = PassRegistry::instance().create(name);
    auto again = configured(text_of(*fresh));
    EXPECT_TRUE(again->same_options(*fresh));
    std::string all;
    for (const OptionInfo& o : fresh->options()) {
      SCOPED_TRACE(o.name);
      ASSERT_FALSE(o.sample.empty()) << "no valid non-default value found for the option";
      auto one = configured(name + "{" + o.name + "=" + o.sample + "}");
      EXPECT_FALSE(one->same_options(*fresh)) << "the sample equals the default";
      const std::string text = text_of(*one);
      EXPECT_NE(text.find(o.name + "=" + o.sample), std::string::npos) << text;
      auto back = configured(text);
      EXPECT_TRUE(back->same_options(*one)) << text;
      EXPECT_EQ(text_of(*back), text);
      all += (all.empty() ? "" : ",") + o.name + "=" + o.sample;
    }
    if (all.empty()) continue;
    auto every = configured(name + "{" + all + "}");
    auto back = configured(text_of(*every));
    EXPECT_TRUE(back->same_options(*every)) << text_of(*every);
  }
}

TEST(PassOptions, EveryRegisteredPassRejectsBadValuesClearly) {
  for (const std::string& name : PassRegistry::instance().names()) {
    SCOPED_TRACE(name);
    auto p = PassRegistry::instance().create(name);
    std::string e = error_of([&] { configured(name + "{no_such_option=1}"); });
    EXPECT_NE(e.find("pass '" + name + "' has no option 'no_such_option'"), std::string::npos) << e;
    for (const OptionInfo& o : p->options()) {
      if (o.type == "string") continue;  // any text is a name
      const std::string bad = o.type == "globs" ? "a;;b" : "@bad";
      e = error_of([&] { configured(name + "{" + o.name + "=" + bad + "}"); });
      EXPECT_EQ(e.rfind("pass '" + name + "': option '" + o.name + "' ", 0), 0u) << e;
      EXPECT_NE(e.find("got '" + bad + "'"), std::string::npos) << e;
    }
  }
}

// Each options struct by type: every field non-default in C++, printed, parsed back equal. A new
// registered pass must be added here (the last check), so its struct is covered by type too.
template <class S>
void expect_round_trip(const std::string& pass, const S& s) {
  SCOPED_TRACE(pass);
  const std::string text = pass_text(pass, s);
  auto entries = parse_pipeline(text);
  ASSERT_EQ(entries.size(), 1u) << text;
  EXPECT_EQ(entries[0].name, pass);
  S back = S::table().parse(entries[0].options.values(), pass);
  EXPECT_TRUE(back == s) << text;
  EXPECT_FALSE(back == S{}) << text;
  // And through the registered pass.
  auto p = configured(text);
  auto* typed = dynamic_cast<PassWithOptions<S>*>(p.get());
  ASSERT_NE(typed, nullptr) << pass << " does not take " << typeid(S).name();
  EXPECT_TRUE(typed->typed_options() == s) << text;
}

TEST(PassOptions, EachStructRoundTripsWithEveryFieldSet) {
  std::set<std::string> covered{"canonicalize", "eval-mode", "cast-elimination", "hoist-weight-casts",
                                "freeze-unreachable"};
  AddLossOptions add;
  add.type = LossType::kMse;
  add.output = "y";
  add.labels = "target";
  expect_round_trip("add-loss", add);
  AutodiffOptions ad;
  ad.loss = "total";
  ad.freeze = {"fc1.*", "emb?"};
  ad.wrt = {"x"};
  expect_round_trip("autodiff", ad);
  MixedPrecisionOptions mp;
  mp.dtype = Precision::kBf16;
  mp.loss = "l";
  expect_round_trip("mixed-precision", mp);
  LossScaleOptions ls;
  ls.mode = LossScaleMode::kStatic;
  ls.init = 1024;
  ls.growth = 4;
  ls.backoff = 0.25;
  ls.interval = 10;
  expect_round_trip("loss-scale", ls);
  expect_round_trip("grad-accumulation", GradAccumulationOptions{4});
  OptimizerOptions opt;
  opt.type = OptimizerType::kSgd;
  opt.lr = 0.1;
  opt.beta1 = 0.8;
  opt.beta2 = 0.99;
  opt.eps = 1e-6;
  opt.weight_decay = 0.0;  // set to the value the default would give: still written
  opt.momentum = 0.9;
  opt.nesterov = true;
  opt.clip_norm = 1.5;
  opt.schedule = LrSchedule::kCosine;
  opt.warmup = 10;
  opt.total = 1000;
  opt.min_lr = 1e-5;
  expect_round_trip("optimizer", opt);
  expect_round_trip("memory-plan", MemoryPlanOptions{128});
  LoraOptions lora;
  lora.rank = 4;
  lora.alpha = 8;
  lora.targets = {"*q_proj*", "*v_proj*"};
  lora.dropout = 0.1;
  lora.seed = 7;
  expect_round_trip("lora", lora);
  expect_round_trip("batchnorm-mode", BatchNormModeOptions{BatchNormMode::kFrozen});
  RecomputeOptions rc;
  rc.policy = RecomputePolicy::kAuto;
  rc.budget.bytes = 3 << 20;
  expect_round_trip("recompute", rc);
  expect_round_trip("all-reduce", AllReduceOptions{4, ByteSize{1 << 20}});
  expect_round_trip("all-reduce", AllReduceOptions{2, ByteSize{int64_t{25} << 20}, 1});
  expect_round_trip("fuse-attention", FuseAttentionOptions{false, false});
  expect_round_trip("fuse-bias-gelu", FuseBiasGeluOptions{true, false});
  expect_round_trip("fuse-bias-gelu", FuseBiasGeluOptions{false, true});
  expect_round_trip("fuse-softmax-ce", FuseSoftmaxCeOptions{false});
  expect_round_trip("fuse-add-layernorm", FuseAddLayerNormOptions{false});
  expect_round_trip("fold-transpose", FoldTransposeOptions{false});
  for (const char* n : {"add-loss", "autodiff", "mixed-precision", "loss-scale", "grad-accumulation", "optimizer",
                        "memory-plan", "lora", "batchnorm-mode", "recompute", "all-reduce", "fuse-attention",
                        "fuse-bias-gelu", "fuse-softmax-ce", "fuse-add-layernorm", "fold-transpose"})
    covered.insert(n);
  for (const std::string& name : PassRegistry::instance().names())
    EXPECT_TRUE(covered.count(name)) << "pass '" << name << "' has no typed round-trip case here";
}

TEST(PassOptions, PrintsOnlyNonDefaultsAndTheAlwaysWrittenOnes) {
  EXPECT_EQ(pass_text("optimizer", OptimizerOptions{}), "optimizer{type=adamw,lr=0.001}");
  EXPECT_EQ(pass_text("memory-plan", MemoryPlanOptions{}), "memory-plan");
  EXPECT_EQ(pass_text("autodiff", AutodiffOptions{}), "autodiff");
  OptimizerOptions o;
  o.min_lr = 1e-5;
  o.weight_decay = 0.05;
  // Declaration order, not the order fields were set in.
  EXPECT_EQ(pass_text("optimizer", o), "optimizer{type=adamw,lr=0.001,weight_decay=0.05,min_lr=1e-05}");
}

TEST(PassOptions, RangesChoicesAndChecksFailClearly) {
  EXPECT_EQ(error_of([] { configured("grad-accumulation{steps=0}"); }),
            "pass 'grad-accumulation': option 'steps' must be >= 1, got '0'");
  EXPECT_EQ(error_of([] { configured("loss-scale{backoff=2}"); }),
            "pass 'loss-scale': option 'backoff' must be in (0, 1), got '2'");
  EXPECT_EQ(error_of([] { configured("memory-plan{alignment=48}"); }),
            "pass 'memory-plan': option 'alignment' must be a power of two, got '48'");
  EXPECT_EQ(error_of([] { configured("mixed-precision{dtype=fp32}"); }),
            "pass 'mixed-precision': option 'dtype' must be one of fp16|bf16, got 'fp32'");
  EXPECT_EQ(error_of([] { configured("optimizer{type=lion}"); }),
            "pass 'optimizer': option 'type' must be one of sgd|momentum|adam|adamw, got 'lion'");
  EXPECT_EQ(error_of([] { configured("optimizer{lr=inf}"); }),
            "pass 'optimizer': option 'lr' expects a finite float, got 'inf'");
  EXPECT_EQ(error_of([] { configured("autodiff{freeze=a;;b}"); }),
            "pass 'autodiff': option 'freeze' expects patterns separated by ';' (a*;b?), none of them empty, "
            "got 'a;;b'");
  EXPECT_EQ(error_of([] { configured("canonicalize{x=1}"); }), "pass 'canonicalize' has no option 'x' (it takes no options)");
  // Values filled in C++ are checked when printed.
  EXPECT_EQ(error_of([] { pass_text("grad-accumulation", GradAccumulationOptions{-2}); }),
            "pass 'grad-accumulation': option 'steps' must be >= 1, got '-2'");
  AutodiffOptions ad;
  ad.freeze = {"a,b"};
  EXPECT_NE(error_of([&] { pass_text("autodiff", ad); }).find("option 'freeze' has a pattern that cannot be written"),
            std::string::npos);
  AddLossOptions add;
  add.output = "has space";
  EXPECT_NE(error_of([&] { pass_text("add-loss", add); }).find("option 'output' cannot be written into a pipeline"),
            std::string::npos);
}

// The value types for the coming passes (lora targets, recompute budgets and policies), on a
// struct of this test's own.
enum class Policy : uint8_t { kNone, kCheap, kLayers, kAuto };
const EnumNames<Policy>& enum_names(Policy) {
  static const EnumNames<Policy> n{
      {Policy::kNone, "none"}, {Policy::kCheap, "cheap"}, {Policy::kLayers, "layers"}, {Policy::kAuto, "auto"}};
  return n;
}
struct DemoOptions {
  Policy policy = Policy::kNone;
  ByteSize budget;
  GlobList targets = {"*.weight"};
  std::optional<double> dropout;
  bool operator==(const DemoOptions&) const = default;
  static const OptionTable<DemoOptions>& table() {
    using S = DemoOptions;
    static const OptionTable<S> t{
        option("policy", &S::policy, "what to recompute"),
        option("budget", &S::budget, "activation memory budget"),
        option("targets", &S::targets, "weights to adapt"),
        option("dropout", &S::dropout, "dropout").at_least(0).below(1),
    };
    return t;
  }
};

TEST(PassOptions, ByteSizesGlobListsEnumsAndOptionals) {
  DemoOptions d = DemoOptions::table().parse(
      {{"policy", "layers"}, {"budget", "1.5GiB"}, {"targets", "q_proj*;v_proj*"}, {"dropout", "0.1"}}, "demo");
  EXPECT_EQ(d.policy, Policy::kLayers);
  EXPECT_EQ(d.budget.bytes, int64_t{3} << 29);
  EXPECT_EQ(d.targets, (GlobList{"q_proj*", "v_proj*"}));
  EXPECT_EQ(d.dropout, 0.1);
  EXPECT_EQ(pass_text("demo", d), "demo{policy=layers,budget=1536MiB,targets=q_proj*;v_proj*,dropout=0.1}");
  EXPECT_EQ(DemoOptions::table().parse({{"budget", "64K"}}, "demo").budget.bytes, 65536);
  EXPECT_EQ(DemoOptions::table().parse({{"budget", "4096"}}, "demo").budget.bytes, 4096);
  EXPECT_EQ(DemoOptions::table().parse({{"budget", "3G"}}, "demo").budget.bytes, int64_t{3} << 30);
  EXPECT_EQ(pass_text("demo", DemoOptions::table().parse({{"budget", "1000"}}, "demo")), "demo{budget=1000}");
  EXPECT_EQ(error_of([] { DemoOptions::table().parse({{"budget", "12XB"}}, "demo"); }),
            "pass 'demo': option 'budget' expects a byte size (4096, 64KiB, 1.5GiB), got '12XB'");
  EXPECT_EQ(error_of([] { DemoOptions::table().parse({{"budget", "0.5"}}, "demo"); }),
            "pass 'demo': option 'budget' expects a byte size (4096, 64KiB, 1.5GiB), got '0.5'");
  EXPECT_EQ(error_of([] { DemoOptions::table().parse({{"policy", "all"}}, "demo"); }),
            "pass 'demo': option 'policy' must be one of none|cheap|layers|auto, got 'all'");
  EXPECT_EQ(error_of([] { DemoOptions::table().parse({{"dropout", "1"}}, "demo"); }),
            "pass 'demo': option 'dropout' must be in [0, 1), got '1'");
  auto info = DemoOptions::table().info();
  ASSERT_EQ(info.size(), 4u);
  EXPECT_EQ(info[0].describe(), "policy: none|cheap|layers|auto (default none)");
  EXPECT_EQ(info[1].describe(), "budget: bytes (default 0)");
  EXPECT_EQ(info[2].describe(), "targets: globs (default *.weight)");
  EXPECT_EQ(info[3].describe(), "dropout: float (default none)");
  EXPECT_EQ(parse_enum<Policy>("cheap", "--policy"), Policy::kCheap);
  EXPECT_EQ(error_of([] { parse_enum<Policy>("x", "--policy"); }),
            "--policy must be none, cheap, layers or auto, got 'x'");
}

// TrainingPipelineOptions -> text -> the passes' own option structs.
TEST(PassOptions, TrainingPipelineOptionsReachThePassStructs) {
  TrainingPipelineOptions o;
  o.loss = LossSpec::parse("mse");
  o.loss.add.output = "y";
  o.precision = Precision::kFp16;
  LossScaleOptions s = default_loss_scale(Precision::kFp16);
  s.interval = 100;
  o.loss_scale = s;
  o.accum = 3;
  o.optimizer.type = OptimizerType::kAdam;
  o.optimizer.clip_norm = 2;
  o.freeze = {"fc1.*"};
  o.all_reduce.world = 2;
  o.all_reduce.bucket = ByteSize{4096};
  PassManager pm;
  pm.add_pipeline(training_pipeline(o));
  std::map<std::string, const Pass*> by_name;
  for (const auto& p : pm.passes()) by_name[p->name()] = p.get();
  auto typed = [&](const std::string& n, auto tag) {
    using S = decltype(tag);
    auto* p = dynamic_cast<const PassWithOptions<S>*>(by_name.at(n));
    EXPECT_NE(p, nullptr) << n;
    return p ? p->typed_options() : S{};
  };
  EXPECT_TRUE(typed("add-loss", AddLossOptions{}) == o.loss.add);
  EXPECT_EQ(typed("mixed-precision", MixedPrecisionOptions{}).dtype, Precision::kFp16);
  EXPECT_TRUE(typed("loss-scale", LossScaleOptions{}) == s);
  EXPECT_EQ(typed("grad-accumulation", GradAccumulationOptions{}).steps, 3);
  EXPECT_TRUE(typed("optimizer", OptimizerOptions{}) == o.optimizer);
  EXPECT_EQ(typed("autodiff", AutodiffOptions{}).freeze, o.freeze);
  EXPECT_TRUE(typed("all-reduce", AllReduceOptions{}) == o.all_reduce);
  EXPECT_EQ(LossSpec::parse("model:total").value_name(), "total");
  EXPECT_EQ(LossSpec::parse("model:total").text(), "model:total");
  EXPECT_EQ(LossSpec::parse("ce").text(), "ce");
  EXPECT_EQ(error_of([] { LossSpec::parse("model:", "--loss"); }), "--loss must be ce, mse or model:NAME, got 'model:'");
}

}  // namespace
}  // namespace otter
