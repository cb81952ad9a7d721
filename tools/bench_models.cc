// otter-bench's models and batches (tools/bench_models.h).
#include "tools/bench_models.h"

#include <algorithm>
#include <filesystem>
#include <random>
#include <set>

#include "graph/error.h"
#include "graph/onnx_io.h"

namespace otter {
namespace fs = std::filesystem;

namespace {

// The benchmark models of models/bench/README.md with their default micro-batch.
const std::vector<BenchModel> kModels = {
    {"mlp", "digits/mlp.onnx", 64},         {"cnn", "digits/cnn.onnx", 64},
    {"gpt", "gpt/gpt.onnx", 32},            {"resnet18", "resnet18/resnet18.onnx", 16},
    {"gpt_large", "bench/gpt_large.onnx", 8},
};

// The zoo transformers (models/zoo/zoo_models.py: vocabulary 64, 8 tokens), run as zoo:NAME from
// their opset-17 export. Their exports' inputs are [2, 8], so their batch is 2 (fixed_batch).
const std::vector<std::string> kZooTransformers = {"bert", "distilbert", "roberta", "gpt2", "llama"};

// A cross-entropy loss: add-loss's SoftmaxCrossEntropyLoss, or a model's own (NLL when unfused).
bool is_ce_loss(const Node& n) {
  return n.op_type() == "SoftmaxCrossEntropyLoss" || n.op_type() == "NegativeLogLikelihoodLoss";
}

// The class count: axis 1 of the scores the cross-entropy loss reads.
int64_t class_count(const Graph& g) {
  for (const auto& n : g.nodes())
    if (is_ce_loss(*n) && n->input(0)->shape().is_static() && n->input(0)->shape().rank() >= 2)
      return n->input(0)->shape().dims[1].value;
  fail("otter-bench: cannot tell the class count (no cross-entropy loss over static scores)");
}

// Calls fn(node, input index) for every use of `in`, directly or through ops that only move or
// convert its values (Reshape, Unsqueeze, ...: the loss flattens the labels, GPT-2's and BART's
// exports flatten the token ids before their embedding Gather).
template <typename Fn>
void for_each_use(const Value* in, Fn fn) {
  static const std::set<std::string> kPassThrough = {"Reshape", "Unsqueeze", "Squeeze", "Flatten", "Identity", "Cast"};
  std::vector<const Value*> pending = {in};
  std::set<const Value*> seen;
  while (!pending.empty()) {
    const Value* v = pending.back();
    pending.pop_back();
    if (!seen.insert(v).second) continue;
    for (const auto& [n, i] : v->uses()) {
      if (kPassThrough.count(n->op_type()) && i == 0) pending.push_back(n->output(0));
      else fn(*n, i);
    }
  }
}

// Whether `in` is the labels of the cross-entropy loss.
bool is_labels(const Value* in) {
  bool labels = false;
  for_each_use(in, [&](const Node& n, int i) { labels |= is_ce_loss(n) && i == 1; });
  return labels;
}

// The rows of the embedding table an integer input indexes: the smallest first dim of the tables
// that a Gather along axis 0 reads with it as indices; 0 where no such Gather reads it.
int64_t embedding_rows(const Value* in) {
  int64_t rows = 0;
  for_each_use(in, [&](const Node& n, int i) {
    if (n.op_type() != "Gather" || i != 1 || n.attr_i("axis", 0) != 0) return;
    const Shape& table = n.input(0)->shape();
    if (table.rank_known && table.rank() >= 1 && table.dims[0].is_static())
      rows = rows ? std::min(rows, table.dims[0].value) : table.dims[0].value;
  });
  return rows;
}

// The batch a model file fixes (the static first dim of its inputs, as the zoo's exports have), or
// `dflt` where every input's batch is free.
int64_t fixed_batch(const std::string& path, int64_t dflt) {
  auto g = import_onnx_file(path);
  for (const Value* in : g->inputs())
    if (in->shape().rank_known && in->shape().rank() > 0 && in->shape().dims[0].is_static())
      return in->shape().dims[0].value;
  return dflt;
}

}  // namespace

std::vector<BenchModel> models_to_run(const std::string& want, const std::string& root, bool vs_torch) {
  std::vector<BenchModel> models;
  for (const BenchModel& m : kModels)
    if (want == "all" || want == m.name) models.push_back({m.name, root + "/models/" + m.path, m.batch});
  std::string zoo_names;
  for (const std::string& z : kZooTransformers) {
    if (!zoo_names.empty()) zoo_names += ", ";
    zoo_names += z;
    if (want == "zoo" || want == "zoo:" + z) {
      const std::string path = root + "/models/zoo/" + z + "/" + z + "_op17.onnx";
      OTTER_CHECK(fs::exists(path), "otter-bench: ", path, " is missing: it is committed (models/zoo/make_zoo.py)");
      models.push_back({"zoo:" + z, path, fixed_batch(path, 32), false});
    }
  }
  if (models.empty()) {
    OTTER_CHECK(want.rfind("zoo:", 0) != 0, "otter-bench: '", want, "' is not a zoo transformer (", zoo_names, ")");
    OTTER_CHECK(fs::exists(want), "otter-bench: '", want, "' is neither a file nor a benchmark model (mlp, cnn, gpt, ",
                "resnet18, gpt_large, all, zoo, zoo:NAME)");
    models.push_back({fs::path(want).stem().string(), want, fixed_batch(want, 32), false});
  }
  for (const BenchModel& m : models) {
    OTTER_CHECK(fs::exists(m.path), "otter-bench: ", m.path, " is missing: make it with /usr/bin/python3 ",
                "models/export_models.py --only ", m.name);
    OTTER_CHECK(m.torch || !vs_torch, "otter-bench: --vs-torch needs a benchmark model by name (mlp, cnn, ",
                "gpt, resnet18, gpt_large), not ", m.name, " (--vs-ort times ONNX Runtime Training on any of them)");
  }
  return models;
}

std::map<std::string, Tensor> random_samples(const TrainingSession& s, int64_t count, uint64_t seed) {
  std::mt19937_64 rng(seed);
  const int64_t classes = class_count(s.graph());
  std::map<std::string, Tensor> out;
  for (const Value* in : s.batch_inputs()) {
    std::vector<int64_t> dims = in->shape().static_dims();
    dims[0] = count;
    Tensor t(in->dtype(), dims);
    if (in->dtype() == DataType::kFloat32) {
      for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = std::uniform_real_distribution<float>(0, 1)(rng);
    } else if (in->dtype() == DataType::kInt64) {
      const bool mask = in->name().find("mask") != std::string::npos;
      const int64_t range = is_labels(in) ? classes : mask ? 0 : embedding_rows(in);
      OTTER_CHECK(mask || range > 0, "otter-bench: cannot generate input '", in->name(), "': an int64 input that is ",
                  "neither the labels, nor token ids an embedding Gather reads, nor a mask (a name with 'mask'); ",
                  "time this model with otter-train --data instead");
      for (int64_t i = 0; i < t.numel(); ++i)
        t.data<int64_t>()[i] = mask ? 1 : static_cast<int64_t>(rng() % static_cast<uint64_t>(range));
    } else {
      fail("otter-bench: input '", in->name(), "' has type ", dtype_name(in->dtype()), " (float32 or int64 expected)");
    }
    out[in->name()] = t;
  }
  return out;
}

std::map<std::string, Tensor> rows(const std::map<std::string, Tensor>& data, int64_t begin, int64_t count) {
  std::map<std::string, Tensor> out;
  for (const auto& [name, t] : data) {
    std::vector<int64_t> dims = t.dims();
    const size_t row = t.nbytes() / static_cast<size_t>(dims[0]);
    dims[0] = count;
    out[name] = Tensor(t.dtype(), dims, t.storage(), t.offset() + static_cast<size_t>(begin) * row);
  }
  return out;
}

}  // namespace otter
