// The one finite-difference harness for gradient rules: builds a one-op graph in float64, a loss
// sum_k <R_k, y_k> with fixed random R_k, runs the autodiff pass with respect to the op's float
// inputs, and compares every gradient element with central differences of the loss.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <functional>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "graph/op_table.h"
#include "graph/printer.h"
#include "graph/verifier.h"
#include "passes/autodiff.h"
#include "runtime/executor.h"

namespace otter::testing {

struct GradCheck {
  std::string op;
  std::string domain = {};
  std::vector<std::vector<int64_t>> shapes = {};  // one per input (ignored where `fixed` gives a tensor)
  std::map<int, Tensor> fixed = {};               // inputs given as constants (indices, shapes, axes, ...)
  std::map<std::string, Attribute> attrs = {};
  int num_outputs = 1;
  std::vector<int> checked_outputs = {};  // outputs the loss reads (default: every float output)
  int opset = 17;
  // Symbolic shapes: dimension `sym_axes` of every differentiated input becomes a symbol; sizes that
  // agree share one symbol ("N" for the first size seen, then "M", "P", "Q", ...).
  bool symbolic = false;
  std::vector<int> sym_axes = {0};
  std::vector<int> no_grad = {};  // float inputs passed as graph inputs but not differentiated
  // Value generator for differentiated input i (default: uniform [-1, 1]); use it to keep away from
  // kinks (Relu at 0, Abs at 0) and domain edges (Log, Sqrt).
  std::function<double(int input, std::mt19937_64&)> init = {};
  double eps = 1e-6;
  double tol = 1e-6;  // max |analytic - numeric| / max(1, |numeric|)
  uint64_t seed = 1;
};

inline double uniform(std::mt19937_64& rng, double lo, double hi) {
  return std::uniform_real_distribution<double>(lo, hi)(rng);
}

// Runs the check; returns the worst relative error (also reported through EXPECT).
inline double check_gradients(const GradCheck& c) {
  std::mt19937_64 rng(c.seed);
  std::map<int64_t, std::string> symbols;
  auto symbol_for = [&](int64_t size) {
    static const char* kNames[] = {"N", "M", "P", "Q", "R", "S"};
    auto it = symbols.find(size);
    if (it != symbols.end()) return it->second;
    std::string name = symbols.size() < 6 ? kNames[symbols.size()] : str_cat("S", symbols.size());
    return symbols[size] = name;
  };
  Graph g;
  g.opset_imports[""] = c.opset;
  if (!c.domain.empty()) g.opset_imports[c.domain] = 1;
  std::vector<Value*> ins;
  std::map<std::string, Tensor> feeds;
  std::vector<std::string> wrt;
  std::vector<std::string> diff_names;
  for (size_t i = 0; i < c.shapes.size(); ++i) {
    auto f = c.fixed.find(static_cast<int>(i));
    if (f != c.fixed.end()) {
      if (!f->second.defined()) { ins.push_back(nullptr); continue; }
      ins.push_back(g.add_initializer(str_cat("c", i), f->second, false));
      continue;
    }
    std::string name = str_cat("x", i);
    Tensor t(DataType::kFloat64, c.shapes[i]);
    double* p = t.data<double>();
    for (int64_t k = 0; k < t.numel(); ++k) p[k] = c.init ? c.init(static_cast<int>(i), rng) : uniform(rng, -1, 1);
    Shape s = Shape::of(c.shapes[i]);
    for (int a : c.symbolic ? c.sym_axes : std::vector<int>{})
      if (a < s.rank()) s.dims[a] = Dim(symbol_for(c.shapes[i][a]));
    ins.push_back(g.add_input(name, DataType::kFloat64, s));
    feeds[name] = t;
    bool skip = std::find(c.no_grad.begin(), c.no_grad.end(), static_cast<int>(i)) != c.no_grad.end();
    if (!skip) {
      wrt.push_back(name);
      diff_names.push_back(name);
    }
  }
  std::vector<std::string> outs;
  for (int i = 0; i < c.num_outputs; ++i) outs.push_back(str_cat("y", i));
  Node* n = g.add_node(c.op, ins, outs, c.domain);
  for (const auto& [k, a] : c.attrs) n->set_attr(k, a);
  infer_node(*n);

  // Forward once (without the loss) to learn the runtime shapes of the outputs.
  for (Value* o : n->outputs()) g.add_output(o);
  std::map<std::string, Tensor> y;
  {
    Executor ex(g);
    y = ex.run(feeds);
  }
  std::vector<int> read = c.checked_outputs;
  if (read.empty())
    for (int i = 0; i < c.num_outputs; ++i)
      if (is_float(n->output(i)->dtype())) read.push_back(i);
  Value* loss = nullptr;
  for (int i : read) {
    Value* yi = n->output(i);
    std::string rname = str_cat("r", i);
    Tensor r64(DataType::kFloat64, y.at(yi->name()).dims());
    for (int64_t k = 0; k < r64.numel(); ++k) r64.data<double>()[k] = uniform(rng, -1, 1);
    Tensor r = r64;
    if (yi->dtype() == DataType::kFloat32) {  // an output of another float type (Cast) reads f32 weights
      r = Tensor(DataType::kFloat32, r64.dims());
      for (int64_t k = 0; k < r.numel(); ++k) r.data<float>()[k] = static_cast<float>(r64.data<double>()[k]);
    }
    feeds[rname] = r;
    Value* rv = g.add_input(rname, yi->dtype(), yi->shape());
    Node* m = g.add_node("Mul", {yi, rv}, {str_cat("m", i)});
    infer_node(*m);
    Node* s = g.add_node("ReduceSum", {m->output(0)}, {str_cat("s", i)});
    s->set_attr("keepdims", Attribute(int64_t{0}));
    infer_node(*s);
    Value* term = s->output(0);
    if (term->dtype() != DataType::kFloat64) {
      Node* cast = g.add_node("Cast", {term}, {str_cat("s", i, ".f64")});
      cast->set_attr("to", Attribute(int64_t{dtype_to_onnx(DataType::kFloat64)}));
      infer_node(*cast);
      term = cast->output(0);
    }
    if (!loss) {
      loss = term;
    } else {
      Node* a = g.add_node("Add", {loss, term}, {str_cat("acc", i)});
      infer_node(*a);
      loss = a->output(0);
    }
  }
  Node* id = g.add_node("Identity", {loss}, {"loss"});
  infer_node(*id);
  g.set_outputs({id->output(0)});

  AutodiffOptions ao;
  ao.wrt = wrt;
  AutodiffResult ar = autodiff(g, ao);
  if (std::getenv("OTTER_GRADCHECK_PRINT")) std::cout << graph_to_string(g);
  std::vector<std::string> problems = verify_graph(g);
  EXPECT_TRUE(problems.empty()) << (problems.empty() ? "" : problems[0]) << "\n" << graph_to_string(g);

  Executor ex(g);
  auto run = [&](const std::map<std::string, Tensor>& f) {
    ex.rng().seed(c.seed);  // stochastic ops draw the same numbers every run
    return ex.run(f);
  };
  auto base = run(feeds);
  double worst = 0;
  for (size_t k = 0; k < ar.params.size(); ++k) {
    const std::string& name = ar.params[k];
    const Tensor& analytic = base.at(ar.grads[k]);
    Tensor x = feeds.at(name).clone();
    EXPECT_EQ(analytic.dims(), x.dims()) << "gradient of " << name;
    if (analytic.dims() != x.dims()) continue;
    for (int64_t e = 0; e < x.numel(); ++e) {
      auto f = feeds;
      double orig = x.data<double>()[e];
      Tensor xp = x.clone();
      xp.data<double>()[e] = orig + c.eps;
      f[name] = xp;
      double lp = run(f).at("loss").data<double>()[0];
      Tensor xm = x.clone();
      xm.data<double>()[e] = orig - c.eps;
      f[name] = xm;
      double lm = run(f).at("loss").data<double>()[0];
      double numeric = (lp - lm) / (2 * c.eps);
      double a = analytic.data<double>()[e];
      double err = std::abs(a - numeric) / std::max(1.0, std::abs(numeric));
      worst = std::max(worst, err);
      EXPECT_LE(err, c.tol) << c.op << ": d loss / d " << name << "[" << e << "]: analytic " << a << ", numeric "
                            << numeric;
    }
  }
  std::cout << "[gradcheck] " << c.op << (c.symbolic ? " (symbolic)" : " (static)") << ": " << ar.params.size()
            << " input(s), worst relative error " << worst << "\n";
  return worst;
}

// Runs the check with static shapes and again with a symbolic first dimension.
inline void check_gradients_both(GradCheck c) {
  c.symbolic = false;
  check_gradients(c);
  c.symbolic = true;
  check_gradients(c);
}

}  // namespace otter::testing
