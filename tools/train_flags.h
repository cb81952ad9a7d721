// The command-line flags of otter-train's train, eval and grad commands, and how they fill the
// option structs of the library (TrainingOptions, TrainingPipelineOptions and the passes' own
// options): each flag is declared and read here once, and checked as the passes check pipeline
// text (passes/options.h).
#pragma once

#include <string>
#include <vector>

#include "runtime/training_session.h"
#include "tools/cli.h"
#include "tools/pass_switches.h"  // --fuse-attention, --fuse-bias-gelu, --fuse-add-layernorm, --fold-transpose

namespace otter::train_cli {

std::vector<cli::FlagSpec> loss_flags();
LossSpec read_loss_flags(const cli::Args& args);
// Parses the command's flags; prints its help and returns false on --help.
bool parse_command(cli::Args& args, int argc, char** argv, const std::string& usage);
const std::string& model_argument(const cli::Args& args, const std::string& cmd);
std::string required(const cli::Args& args, const std::string& cmd, const std::string& flag, const std::string& what);
// A number flag that must lie in [lo, hi] (hi_open: [lo, hi)).
double ranged(const cli::Args& args, const std::string& flag, double dflt, double lo, double hi, bool lo_open = false,
              bool hi_open = false);
int64_t positive(const cli::Args& args, const std::string& flag, int64_t dflt);
// Flags of mixed precision and loss scaling (train and grad share them; grad has no interval).
std::vector<cli::FlagSpec> precision_flags(bool interval = true);
void read_precision_flags(const cli::Args& args, TrainingPipelineOptions& p);
// Flags of LoRA fine-tuning and initial values (train and grad share them).
std::vector<cli::FlagSpec> lora_flags();
void read_lora_flags(const cli::Args& args, int64_t seed, TrainingPipelineOptions& p, TrainingOptions* o);
std::vector<cli::FlagSpec> train_flags();
OptimizerOptions read_optimizer_flags(const cli::Args& args);
std::vector<std::string> split_commas(const std::string& s);
TrainingOptions read_training_flags(const cli::Args& args);

}  // namespace otter::train_cli
