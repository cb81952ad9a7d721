// Helpers shared by the training-session and checkpoint tests.
#pragma once

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <functional>
#include <string>

#include "graph/error.h"
#include "graph/ir.h"
#include "graph/op_table.h"
#include "passes/grad_accumulation.h"
#include "passes/pass_manager.h"
#include "runtime/constant_eval.h"

namespace otter {

// A file under models/ (absolute paths pass through).
inline std::string model_file(const std::string& rel) {
  return rel.rfind('/', 0) == 0 ? rel : std::string(OTTER_SOURCE_DIR) + "/models/" + rel;
}

inline std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

inline double max_abs(const Tensor& t) {
  double m = 0;
  for (int64_t i = 0; i < t.numel(); ++i) m = std::max(m, std::fabs(t.get_as_double(i)));
  return m;
}

// max |a - b| / max |b|: the error relative to the tensor's scale (elements near zero, such as
// biases, would make an element-wise relative error meaningless).
inline double rel_err(const Tensor& a, const Tensor& b) {
  OTTER_CHECK(a.numel() == b.numel(), "rel_err: ", a.describe(), " vs ", b.describe());
  double d = 0;
  for (int64_t i = 0; i < a.numel(); ++i) d = std::max(d, std::fabs(a.get_as_double(i) - b.get_as_double(i)));
  double scale = max_abs(b);
  return scale > 0 ? d / scale : d;
}

// Rows [begin, begin + n) of t, copied.
inline Tensor rows_copy(const Tensor& t, int64_t begin, int64_t n) {
  std::vector<int64_t> dims = t.dims();
  size_t row = t.nbytes() / static_cast<size_t>(dims[0]);
  dims[0] = n;
  Tensor out(t.dtype(), dims);
  std::memcpy(out.raw(), static_cast<const char*>(t.raw()) + begin * row, out.nbytes());
  return out;
}

inline void run_passes(Graph& g, const std::string& pipeline) { run_pipeline(g, pipeline); }

// The inverse of grad-accumulation's fusion: each GemmAccumulate(a, b, acc) becomes a plain Gemm
// and an AccumulateGrad, the unfused path the fusion must reproduce.
inline void unfuse_gemm_accumulate(Graph& g) {
  for (Node* n : g.node_list()) {
    if (n->op_type() != "GemmAccumulate") continue;
    Value* acc = n->input(2);
    Node* mm = g.add_node("Gemm", {n->input(0), n->input(1)}, {g.unique_name(acc->name() + ".part")}, "", n);
    for (const char* a : {"transA", "transB", "alpha"})
      if (const Attribute* v = n->find_attr(a)) mm->set_attr(a, *v);
    infer_node(*mm);
    Node* add = g.add_node("AccumulateGrad", {acc, mm->output(0)}, {g.unique_name(acc->name() + ".sum")}, kOtterDomain, n);
    infer_node(*add);
    g.state_updates[acc] = add->output(0);
    g.replace_all_uses(n->output(0), add->output(0));
    g.remove_node(n);
  }
}

// Undoes grad-accumulation's ConvGrad fusion: ConvGrad(dY, X, W) then AccumulateGrad(acc, dW).
inline void unfuse_conv_grad(Graph& g) {
  for (Node* n : g.node_list()) {
    if (n->op_type() != "ConvGrad" || n->num_inputs() != 4) continue;
    Value* acc = n->input(3);
    std::vector<std::string> names;
    for (int i = 0; i < n->num_outputs(); ++i)
      names.push_back(n->output(i) ? g.unique_name(n->output(i)->name() + ".part") : "");
    Node* cg = g.add_node("ConvGrad", {n->input(0), n->input(1), n->input(2)}, names, kOtterDomain, n);
    for (const auto& [k, v] : n->attrs()) cg->set_attr(k, v);
    infer_node(*cg);
    Node* add = g.add_node("AccumulateGrad", {acc, cg->output(1)}, {g.unique_name(acc->name() + ".sum")}, kOtterDomain, n);
    infer_node(*add);
    g.state_updates[acc] = add->output(0);
    g.replace_all_uses(n->output(1), add->output(0));
    for (int i : {0, 2})
      if (i < n->num_outputs() && n->output(i)) g.replace_all_uses(n->output(i), cg->output(i));
    g.remove_node(n);
  }
}

// A fresh directory under the system's temporary directory, removed with its contents.
struct TempDir {
  std::string path;
  TempDir() {
    static int counter = 0;
    path = (std::filesystem::temp_directory_path() /
            ("otter_test_" + std::to_string(::getpid()) + "_" + std::to_string(counter++)))
               .string();
    std::filesystem::remove_all(path);
    std::filesystem::create_directories(path);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
};

}  // namespace otter
