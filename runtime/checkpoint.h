// Training checkpoints: a directory with every persistent tensor of a training session and a small
// metadata file, replaced atomically so that a save that dies midway leaves the previous one whole.
//
//   DIR/state.npz        parameters, optimizer moments, step counter, loss scale and good-step
//                        count, BatchNorm running statistics: every state tensor, by graph name
//                        (not the gradient accumulators: each step's first micro-batch overwrites them)
//   DIR/checkpoint.json  format and version, the model and its fingerprint, the pipeline, batch
//                        size, K, the ranks N and seed, the step counter, the data loader's epoch and position,
//                        and the Dropout generator's state
//
// A save writes DIR.tmp completely (files and directory synced), then exchanges it with DIR in one
// step (Linux renameat2 RENAME_EXCHANGE) and removes the old one. Where the file system cannot
// exchange, DIR moves aside to DIR.old before DIR.tmp takes its name; a load that finds no DIR
// but a complete DIR.old (a crash between those two renames) reads DIR.old.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "graph/tensor.h"
#include "runtime/dataset.h"

namespace otter {

constexpr int64_t kCheckpointVersion = 1;

struct CheckpointMeta {
  int64_t version = kCheckpointVersion;
  std::string model;        // the model file the session was created from, as given
  std::string fingerprint;  // the model's structure (inputs, ops, parameter names and shapes)
  std::string pipeline;     // the training pipeline text
  int64_t batch_size = 0;   // micro-batch b
  int64_t accum = 1;        // K
  int64_t ranks = 1;        // N: ranks of the data-parallel job that wrote it (absent in older files: 1)
  int64_t seed = 0;
  int64_t step = 0;         // optimizer steps taken, skipped ones included
  LoaderState loader;       // epoch and batches already taken in it
  std::string rng;          // the micro-step program's generator (Dropout), as std::mt19937_64 text
};

struct Checkpoint {
  CheckpointMeta meta;
  std::vector<std::pair<std::string, Tensor>> tensors;  // host tensors
};

// Called after each file of a save is complete in the temporary directory, with its name. For
// tests that interrupt a save (a hook that throws or kills the process).
using CheckpointHook = std::function<void(const std::string& file)>;

void write_checkpoint(const std::string& dir, const Checkpoint& c, const CheckpointHook& hook = {});
// Reads and checks the format; the caller checks that the contents fit its session.
Checkpoint read_checkpoint(const std::string& dir);
// The same from the bytes of checkpoint.json and state.npz; `what` names them in messages.
Checkpoint parse_checkpoint(const std::string& meta_json, const std::string& state_npz, const std::string& what);
// checkpoint.json and state.npz of `c` as bytes (what write_checkpoint writes).
std::pair<std::string, std::string> serialize_checkpoint(const Checkpoint& c);

}  // namespace otter
