// The optional passes the tools turn on or off with --NAME on|off (fuse-attention, fuse-bias-gelu,
// fuse-softmax-ce, fuse-add-layernorm, fold-transpose, cast-elimination): declared and read once for
// otter-train and otter-bench.
#pragma once

#include <vector>

#include "passes/pipelines.h"
#include "tools/cli.h"

namespace otter::train_cli {

// The --NAME on|off flags, each default on.
std::vector<cli::FlagSpec> pass_switch_flags();
// Sets the `enabled` option of each pass whose flag is given; fails on a value other than on|off.
void read_pass_switch_flags(const cli::Args& args, TrainingPipelineOptions& p);

}  // namespace otter::train_cli
