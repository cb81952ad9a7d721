// Fuzzing entry points (see entry_points.h).
#include "fuzz/entry_points.h"

#include <cstdlib>
#include <memory>
#include <mutex>

#include "graph/error.h"
#include "graph/onnx_io.h"
#include "graph/op_table.h"
#include "graph/verifier.h"
#include "passes/pass_manager.h"
#include "runtime/checkpoint.h"
#include "runtime/constant_eval.h"
#include "runtime/npz.h"
#include "runtime/training_session.h"

#ifndef OTTER_SOURCE_DIR
#error "OTTER_SOURCE_DIR must name the source tree (models/digits/mlp.onnx)"
#endif

namespace otter::fuzz {

namespace {

// External data is resolved here: a folder that does not exist, so no input reads local files.
constexpr const char* kNoFolder = "/nonexistent-otter-fuzz";

// A small MLP in ONNX text syntax for the pipeline target.
constexpr const char* kMlp = R"(<ir_version: 8, opset_import: ["" : 17]>
mlp (float[N, 4] x) => (float[N, 3] y) <float[8, 4] w1 = {0.1, -0.2, 0.3, 0.1, 0.2, 0.1, -0.1, 0.4, 0.3, 0.2, 0.1, 0.0,
  -0.3, 0.2, 0.1, 0.1, 0.2, -0.2, 0.1, 0.3, 0.1, 0.1, 0.2, -0.1, 0.2, 0.3, -0.1, 0.1, 0.0, 0.1, 0.2, 0.3},
  float[8] b1 = {0.1, 0.0, -0.1, 0.2, 0.0, 0.1, 0.0, -0.2}, float[3, 8] w2 = {0.1, 0.2, 0.3, -0.1, 0.2, 0.1, 0.0, 0.1,
  0.2, -0.2, 0.1, 0.3, 0.1, 0.0, 0.2, 0.1, -0.1, 0.1, 0.2, 0.0, 0.3, 0.1, -0.2, 0.1}, float[3] b2 = {0.0, 0.1, -0.1}> {
  h = Gemm <transB = 1> (x, w1, b1)
  r = Relu (h)
  y = Gemm <transB = 1> (r, w2, b2)
}
)";

std::string as_string(const uint8_t* data, size_t size) {
  return std::string(reinterpret_cast<const char*>(data), size);
}

// Verifier, canonicalize, verifier, shape inference: what every tool does after import.
void check_and_canonicalize(Graph& g) {
  verify_or_throw(g, "imported model");
  CpuConstantEvaluator evaluator;
  PassContext ctx;
  ctx.evaluator = &evaluator;
  PassManager pm(ctx);
  pm.add_pipeline("canonicalize");
  pm.run(g);
  verify_or_throw(g, "canonicalized model");
  for (Node* n : g.node_list()) infer_node(*n);
}

// Runs `fn`, accepting otter::Error as the one sanctioned way to refuse an input.
template <typename Fn>
void refusing_with_error(Fn fn) {
  try {
    fn();
  } catch (const Error&) {
  }
}

}  // namespace

void onnx_model(const uint8_t* data, size_t size) {
  refusing_with_error([&] {
    auto g = import_onnx_bytes(as_string(data, size), kNoFolder, {}, "fuzz model");
    check_and_canonicalize(*g);
  });
}

void onnx_text(const uint8_t* data, size_t size) {
  refusing_with_error([&] {
    auto g = import_onnx_text(as_string(data, size));
    check_and_canonicalize(*g);
  });
}

void pipeline(const uint8_t* data, size_t size) {
  const std::string text = as_string(data, size);
  refusing_with_error([&] { parse_pipeline(text); });
  refusing_with_error([&] {
    CpuConstantEvaluator evaluator;
    PassContext ctx;
    ctx.evaluator = &evaluator;
    PassManager pm(ctx);
    pm.add_pipeline(text);
    auto g = import_onnx_text(kMlp);
    pm.run(*g);
  });
}

namespace {

TrainingSession& checkpoint_session() {
  static std::unique_ptr<TrainingSession> session = [] {
    TrainingOptions o;
    o.batch_size = 4;
    return TrainingSession::create(std::string(OTTER_SOURCE_DIR) + "/models/digits/mlp.onnx", o);
  }();
  return *session;
}

}  // namespace

std::string checkpoint_seed() {
  auto [meta, state] = serialize_checkpoint(checkpoint_session().checkpoint());
  return meta + std::string(1, '\0') + state;
}

void checkpoint(const uint8_t* data, size_t size) {
  TrainingSession& session = checkpoint_session();
  const std::string bytes = as_string(data, size);
  const size_t nul = bytes.find('\0');
  const std::string meta = bytes.substr(0, nul);
  const std::string state = nul == std::string::npos ? std::string() : bytes.substr(nul + 1);
  refusing_with_error([&] { session.restore(parse_checkpoint(meta, state, "fuzz checkpoint")); });
}

const std::vector<Target>& targets() {
  static const std::vector<Target> all = {
      {"onnx_model", onnx_model}, {"onnx_text", onnx_text},   {"npz", npz},
      {"pipeline", pipeline},     {"checkpoint", checkpoint},
  };
  return all;
}

}  // namespace otter::fuzz
