// The tools' pass switches (pass_switches.h).
#include "tools/pass_switches.h"

#include <string>

#include "graph/error.h"

namespace otter::train_cli {

namespace {

// A pass switch: its flag, help, and the option it sets.
struct PassSwitch {
  const char* name;
  const char* help;
  bool& (*enabled)(TrainingPipelineOptions&);
};

const std::vector<PassSwitch>& pass_switches() {
  static const std::vector<PassSwitch> s = {
      {"fuse-attention",
       "on|off (default on): fuse scaled-dot-product attention into ai.otter.Attention (fuse-attention pass)",
       [](TrainingPipelineOptions& p) -> bool& { return p.fuse_attention.enabled; }},
      {"fuse-bias-gelu",
       "on|off (default on): fuse the bias Add and the erf GELU chain into ai.otter.BiasGelu (fuse-bias-gelu pass; "
       "less activation memory, a faster step)",
       [](TrainingPipelineOptions& p) -> bool& { return p.fuse_bias_gelu.enabled; }},
      {"fuse-softmax-ce",
       "on|off (default on): fuse a model's NegativeLogLikelihoodLoss of LogSoftmax (or of Log(Softmax)) into "
       "SoftmaxCrossEntropyLoss (fuse-softmax-ce pass; the log-probabilities are not kept for the backward)",
       [](TrainingPipelineOptions& p) -> bool& { return p.fuse_softmax_ce.enabled; }},
      {"fuse-add-layernorm",
       "on|off (default on): fuse the residual Add and the LayerNormalization reading it into "
       "ai.otter.AddLayerNorm (fuse-add-layernorm pass; one pass over the residual stream)",
       [](TrainingPipelineOptions& p) -> bool& { return p.fuse_add_layernorm.enabled; }},
      {"fold-transpose",
       "on|off (default on): multiply by Linear weights through Gemm {transB=1} instead of transposing them "
       "(fold-transpose pass)",
       [](TrainingPipelineOptions& p) -> bool& { return p.fold_transpose.enabled; }},
      {"cast-elimination",
       "on|off (default on): with fp16/bf16, merge Casts, move them so Reshape/Transpose run on the half type, "
       "and take them into BiasGelu, bias Adds and bias sums (cast-elimination pass; exact)",
       [](TrainingPipelineOptions& p) -> bool& { return p.cast_elimination.enabled; }},
  };
  return s;
}

}  // namespace

std::vector<cli::FlagSpec> pass_switch_flags() {
  std::vector<cli::FlagSpec> flags;
  for (const PassSwitch& s : pass_switches()) flags.push_back({s.name, true, s.help, "on|off"});
  return flags;
}

void read_pass_switch_flags(const cli::Args& args, TrainingPipelineOptions& p) {
  for (const PassSwitch& s : pass_switches()) {
    if (!args.has(s.name)) continue;
    const std::string f = args.get(s.name);
    if (f != "on" && f != "off") fail("--", s.name, " must be on or off, got '", f, "'");
    s.enabled(p) = f == "on";
  }
}
}  // namespace otter::train_cli
