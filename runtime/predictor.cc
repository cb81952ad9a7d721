// Predictor (see predictor.h).
#include "runtime/predictor.h"

#include <algorithm>
#include <cstring>

#include "graph/error.h"
#include "graph/onnx_io.h"
#include "runtime/constant_eval.h"

namespace otter {

Tensor slice_rows(const Tensor& t, int64_t begin, int64_t end) {
  std::vector<int64_t> dims = t.dims();
  int64_t row = dims[0] ? static_cast<int64_t>(t.nbytes()) / dims[0] : 0;
  dims[0] = end - begin;
  Tensor out(t.dtype(), dims);
  if (out.nbytes()) std::memcpy(out.raw(), static_cast<const char*>(t.raw()) + begin * row, out.nbytes());
  return out;
}

Tensor concat_rows(const std::vector<Tensor>& parts) {
  std::vector<int64_t> dims = parts[0].dims();
  dims[0] = 0;
  for (const Tensor& p : parts) dims[0] += p.dim(0);
  Tensor out(parts[0].dtype(), dims);
  size_t off = 0;
  for (const Tensor& p : parts) {
    if (p.nbytes()) std::memcpy(static_cast<char*>(out.raw()) + off, p.raw(), p.nbytes());
    off += p.nbytes();
  }
  return out;
}

Predictor::Predictor(const std::string& model_path, Device& device) : device_(device) {
  graph_ = import_onnx_file(model_path);
  run_pipeline(*graph_, "canonicalize");
  ExecutorOptions eo;
  eo.device = &device;
  executor_ = std::make_unique<Executor>(*graph_, eo);
}

Predictor::~Predictor() = default;

std::map<std::string, Tensor> Predictor::inputs_from(const NpzArchive& data) const {
  std::map<std::string, Tensor> feeds;
  for (const Value* in : graph_->inputs()) {
    const Tensor* t = data.find(in->name());
    if (!t) {
      std::string have;
      for (const auto& [n, a] : data.arrays) have += (have.empty() ? "" : ", ") + n;
      fail(data.path, ": no array '", in->name(), "' for model input '", in->name(), "' (", in->type_string(),
           "); the file has: ", have.empty() ? "(none)" : have);
    }
    feeds[in->name()] = *t;
  }
  return feeds;
}

std::vector<std::pair<std::string, Tensor>> Predictor::run(const std::map<std::string, Tensor>& inputs,
                                                           int64_t batch) {
  OTTER_CHECK(batch >= 0, "predict: the batch size must be positive, got ", batch);
  std::map<std::string, Tensor> outputs;
  if (batch == 0 || inputs.empty()) {
    for (auto& [name, t] : executor_->run(inputs)) outputs[name] = device_.to_host(t);
  } else {
    int64_t n = -1;
    for (const auto& [name, t] : inputs) {
      OTTER_CHECK(t.rank() >= 1, "--batch-size: input '", name, "' has no sample axis");
      if (n < 0) n = t.dim(0);
      OTTER_CHECK(t.dim(0) == n, "--batch-size: input '", name, "' has ", t.dim(0), " samples, others ", n);
    }
    std::map<std::string, std::vector<Tensor>> parts;
    for (int64_t b = 0; b < n; b += batch) {
      const int64_t e = std::min(n, b + batch);
      std::map<std::string, Tensor> f;
      for (const auto& [name, t] : inputs) f[name] = slice_rows(t, b, e);
      for (auto& [name, dt] : executor_->run(f)) {
        Tensor t = device_.to_host(dt);
        // Outputs with a sample axis are concatenated; others (statistics) keep the last batch's.
        if (t.rank() >= 1 && t.dim(0) == e - b) parts[name].push_back(t);
        else outputs[name] = t;
      }
    }
    for (auto& [name, p] : parts) outputs[name] = concat_rows(p);
  }
  std::vector<std::pair<std::string, Tensor>> out;
  for (const Value* o : graph_->outputs()) out.emplace_back(o->name(), outputs.at(o->name()));
  return out;
}

}  // namespace otter
