// Fuzzing entry points: one plain function per input parser, taking arbitrary bytes. Each returns
// normally when otter accepts the input or refuses it with otter::Error (one clear message);
// anything else (a crash, a sanitizer report, another exception, a hang) is a bug. The libFuzzer
// targets (fuzz/fuzz_target.cc, built by scripts/fuzz.sh) and the regression test that replays
// tests/data/fuzz/<target>/* with the normal build (tests/fuzz/replay_test.cc) call the same
// functions.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace otter::fuzz {

// Binary ONNX model: import, verifier, canonicalize (constant folding on the CPU), verifier again
// and shape inference of every node.
void onnx_model(const uint8_t* data, size_t size);
// ONNX text syntax (.onnxtxt): libonnx's parser, then the same as onnx_model.
void onnx_text(const uint8_t* data, size_t size);
// .npz archive (zip records, deflate, .npy headers), and the bytes as a single .npy array.
void npz(const uint8_t* data, size_t size);
// Pass pipeline text: parsing, option validation, and running the pipeline on a small MLP.
void pipeline(const uint8_t* data, size_t size);
// Checkpoint: the bytes hold checkpoint.json and state.npz (split at the first NUL byte); they are
// parsed and restored into a training session of models/digits/mlp.onnx.
void checkpoint(const uint8_t* data, size_t size);

// A valid checkpoint of that session, in the checkpoint target's format (a seed for fuzzing).
std::string checkpoint_seed();

struct Target {
  const char* name;
  void (*run)(const uint8_t*, size_t);
};
// Every target, by the name scripts/fuzz.sh and tests/data/fuzz/<name>/ use.
const std::vector<Target>& targets();

// Sets the resource limits a fuzzing process runs under (small tensors and archives, so that an
// input cannot make otter allocate more than libFuzzer's memory limit allows) unless already set.
void set_fuzzing_limits();

}  // namespace otter::fuzz
