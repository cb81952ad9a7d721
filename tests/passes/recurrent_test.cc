// Tests of the unrolling of RNN, GRU and LSTM by canonicalize (passes/recurrent.h): gradients of the
// unrolled graph against central finite differences in float64 (every input: X, W, R, B, the initial
// states, the peepholes), across directions, layouts, GRU's linear_before_reset, clip, the
// alternative activations and sequence_lens masking; and the errors for what cannot be unrolled.
// Forward values are checked against PyTorch here (models/rnn/make_rnn_refs.py: bidirectional GRU,
// which is ONNX's linear_before_reset=1, 2-layer bidirectional LSTM, ReLU RNN), against ONNX's own
// test data (tests/conformance) and, with training, in the lstm_lm zoo model (tests/zoo).
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "graph/onnx_io.h"
#include "graph/op_table.h"
#include "graph/printer.h"
#include "graph/verifier.h"
#include "passes/autodiff.h"
#include "passes/canonicalize.h"
#include "passes/recurrent.h"
#include "runtime/constant_eval.h"
#include "runtime/executor.h"
#include "runtime/npz.h"

namespace otter {
namespace {

struct RecurrentCase {
  std::string op;
  std::map<std::string, Attribute> attrs;
  std::vector<std::vector<int64_t>> shapes;  // per input; empty: the input is absent
  std::map<int, Tensor> fixed = {};          // inputs given as constants (sequence_lens)
  int num_outputs = 2;
  double tol = 1e-6;
};

Tensor random_f64(const std::vector<int64_t>& dims, std::mt19937_64& rng, double scale) {
  Tensor t(DataType::kFloat64, dims);
  std::uniform_real_distribution<double> u(-scale, scale);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<double>()[i] = u(rng);
  return t;
}

// The recurrent node over graph inputs, a loss sum_k <C_k, y_k> with fixed random C_k, canonicalize
// (which unrolls it), autodiff with respect to every float input.
struct Built {
  Graph g;
  std::map<std::string, Tensor> feeds;
  AutodiffResult ar;
};

void build(const RecurrentCase& c, Built& b, std::mt19937_64& rng) {
  Graph& g = b.g;
  g.opset_imports[""] = 17;
  std::vector<Value*> ins;
  std::vector<std::string> wrt;
  for (size_t i = 0; i < c.shapes.size(); ++i) {
    if (auto f = c.fixed.find(static_cast<int>(i)); f != c.fixed.end()) {
      ins.push_back(g.add_initializer(str_cat("c", i), f->second, false));
    } else if (c.shapes[i].empty()) {
      ins.push_back(nullptr);
    } else {
      std::string name = str_cat("x", i);
      ins.push_back(g.add_input(name, DataType::kFloat64, Shape::of(c.shapes[i])));
      b.feeds[name] = random_f64(c.shapes[i], rng, 0.8);
      wrt.push_back(name);
    }
  }
  std::vector<std::string> outs;
  for (int i = 0; i < c.num_outputs; ++i) outs.push_back(str_cat("y", i));
  Node* n = g.add_node(c.op, ins, outs);
  n->set_name("rec");
  for (const auto& [k, a] : c.attrs) n->set_attr(k, a);
  infer_node(*n);
  Value* loss = nullptr;
  for (Value* y : n->outputs()) {
    Value* w = g.add_initializer(y->name() + ".w", random_f64(y->shape().static_dims(), rng, 1.0), false);
    Node* m = g.add_node("Mul", {y, w}, {y->name() + ".m"});
    infer_node(*m);
    Node* s = g.add_node("ReduceSum", {m->output(0)}, {y->name() + ".s"});
    s->set_attr("keepdims", Attribute(int64_t{0}));
    infer_node(*s);
    Value* term = s->output(0);
    if (loss) {
      Node* a = g.add_node("Add", {loss, term}, {y->name() + ".acc"});
      infer_node(*a);
      term = a->output(0);
    }
    loss = term;
  }
  Node* id = g.add_node("Identity", {loss}, {"loss"});
  infer_node(*id);
  g.set_outputs({id->output(0)});
  CanonicalizeStats st = canonicalize(g, nullptr);
  EXPECT_EQ(st.recurrent_unrolled, 1);
  for (Node* m : g.node_list()) EXPECT_FALSE(is_recurrent(*m)) << "still rolled: " << m->describe();
  AutodiffOptions ao;
  ao.wrt = wrt;
  b.ar = autodiff(g, ao);
  std::vector<std::string> problems = verify_graph(g);
  EXPECT_TRUE(problems.empty()) << (problems.empty() ? "" : problems[0]);
}

// Largest |analytic - numeric| / max(1, |numeric|) over every element of every input.
double check(const RecurrentCase& c) {
  std::mt19937_64 rng(7);
  Built b;
  build(c, b, rng);
  EXPECT_EQ(b.ar.params.size(), b.feeds.size());
  Executor ex(b.g);
  auto base = ex.run(b.feeds);
  const double eps = 1e-6;
  double worst = 0;
  for (size_t k = 0; k < b.ar.params.size(); ++k) {
    const std::string& name = b.ar.params[k];
    const Tensor& analytic = base.at(b.ar.grads[k]);
    const Tensor x = b.feeds.at(name);
    for (int64_t e = 0; e < x.numel(); ++e) {
      auto f = b.feeds;
      Tensor xp = x.clone(), xm = x.clone();
      xp.data<double>()[e] += eps;
      xm.data<double>()[e] -= eps;
      f[name] = xp;
      const double lp = ex.run(f).at("loss").data<double>()[0];
      f[name] = xm;
      const double lm = ex.run(f).at("loss").data<double>()[0];
      const double numeric = (lp - lm) / (2 * eps), a = analytic.data<double>()[e];
      const double err = std::abs(a - numeric) / std::max(1.0, std::abs(numeric));
      worst = std::max(worst, err);
      EXPECT_LE(err, c.tol) << c.op << " d loss / d " << name << "[" << e << "]: " << a << " vs " << numeric;
    }
  }
  std::cout << "[gradcheck] " << c.op << " unrolled: " << b.ar.params.size() << " inputs, worst relative error "
            << worst << "\n";
  return worst;
}

using Attrs = std::map<std::string, Attribute>;
const std::vector<int64_t> kNone = {};

// Shapes for T=3, N=2, I=4, H=3, D directions, G gates; layout 0 unless `batch_first`.
std::vector<std::vector<int64_t>> shapes(int64_t g, int64_t d, bool batch_first, bool lstm_extras) {
  const int64_t t = 3, n = 2, i = 4, h = 3;
  std::vector<int64_t> x = batch_first ? std::vector<int64_t>{n, t, i} : std::vector<int64_t>{t, n, i};
  std::vector<int64_t> state = batch_first ? std::vector<int64_t>{n, d, h} : std::vector<int64_t>{d, n, h};
  std::vector<std::vector<int64_t>> s = {x, {d, g * h, i}, {d, g * h, h}, {d, 2 * g * h}, kNone, state};
  if (lstm_extras) {
    s.push_back(state);
    s.push_back({d, 3 * h});
  }
  return s;
}

TEST(Recurrent, LstmBidirectionalWithPeepholesGradients) {
  check({"LSTM",
         Attrs{{"hidden_size", Attribute(int64_t{3})}, {"direction", Attribute("bidirectional")}},
         shapes(4, 2, false, true),
         {},
         3});
}

TEST(Recurrent, LstmBatchFirstReverseClipGradients) {
  check({"LSTM",
         Attrs{{"hidden_size", Attribute(int64_t{3})},
               {"direction", Attribute("reverse")},
               {"layout", Attribute(int64_t{1})},
               {"clip", Attribute(0.7f)}},
         shapes(4, 1, true, true),
         {},
         3});
}

TEST(Recurrent, LstmWithoutOptionalInputsGradients) {
  auto s = shapes(4, 1, false, false);
  s.resize(3);
  check({"LSTM", Attrs{{"hidden_size", Attribute(int64_t{3})}}, s, {}, 3});
}

TEST(Recurrent, GruGradientsBothResetForms) {
  for (int64_t lbr : {0, 1}) {
    check({"GRU",
           Attrs{{"hidden_size", Attribute(int64_t{3})},
                 {"direction", Attribute("bidirectional")},
                 {"linear_before_reset", Attribute(lbr)}},
           shapes(3, 2, false, false)});
    auto s = shapes(3, 1, true, false);
    s[5] = kNone;  // no initial state
    check({"GRU",
           Attrs{{"hidden_size", Attribute(int64_t{3})},
                 {"layout", Attribute(int64_t{1})},
                 {"linear_before_reset", Attribute(lbr)}},
           s});
  }
}

TEST(Recurrent, RnnAlternativeActivationsGradients) {
  const char* pairs[][2] = {{"Relu", "Tanh"},
                            {"Sigmoid", "LeakyRelu"},
                            {"Affine", "ScaledTanh"},
                            {"HardSigmoid", "Elu"},
                            {"Softsign", "Softplus"}};
  for (auto& p : pairs) {
    check({"RNN",
           Attrs{{"hidden_size", Attribute(int64_t{3})},
                 {"direction", Attribute("bidirectional")},
                 {"activations", Attribute(std::vector<std::string>{p[0], p[1]})},
                 {"activation_alpha", Attribute(std::vector<float>{0.5f, 0.3f})},
                 {"activation_beta", Attribute(std::vector<float>{0.2f, 0.9f})}},
           shapes(1, 2, false, false)});
  }
}

// Sequences shorter than T: the state stops at each one's length (both directions), Y is 0 beyond.
TEST(Recurrent, SequenceLensMaskGradients) {
  Tensor lens = Tensor::from_vector<int32_t>({2}, {3, 1});
  check({"LSTM",
         Attrs{{"hidden_size", Attribute(int64_t{3})}, {"direction", Attribute("bidirectional")}},
         shapes(4, 2, false, true),
         {{4, lens}},
         3});
  check({"GRU",
         Attrs{{"hidden_size", Attribute(int64_t{3})}, {"direction", Attribute("reverse")}},
         shapes(3, 1, false, false),
         {{4, lens}}});
}

// The masked unrolling gives, for a sequence of length L, what the unmasked one gives on its first
// L steps (forward and reverse), zeros in Y beyond L.
TEST(Recurrent, SequenceLensMatchesShorterSequence) {
  for (const char* dir : {"forward", "reverse"}) {
    std::mt19937_64 rng(3);
    const int64_t h = 3;
    Tensor x = random_f64({3, 1, 2}, rng, 1), w = random_f64({1, 3 * h, 2}, rng, 1),
           r = random_f64({1, 3 * h, h}, rng, 1);
    auto run = [&](int64_t t, bool masked) {
      Graph g;
      g.opset_imports[""] = 17;
      Tensor xt(DataType::kFloat64, {t, 1, 2});
      std::copy(x.data<double>(), x.data<double>() + xt.numel(), xt.data<double>());
      std::vector<Value*> ins = {g.add_input("x", DataType::kFloat64, Shape::of({t, 1, 2})),
                                 g.add_initializer("w", w, false), g.add_initializer("r", r, false), nullptr};
      if (masked) ins.push_back(g.add_initializer("lens", Tensor::from_vector<int64_t>({1}, {2}), false));
      Node* n = g.add_node("GRU", ins, {"y", "yh"});
      n->set_attr("hidden_size", Attribute(h));
      n->set_attr("direction", Attribute(dir));
      infer_node(*n);
      g.add_output(n->output(0));
      g.add_output(n->output(1));
      canonicalize(g, nullptr);
      return Executor(g).run({{"x", xt}});
    };
    auto full = run(3, true), shorter = run(2, false);
    const Tensor &y = full.at("y"), &ys = shorter.at("y");
    for (int64_t i = 0; i < 2 * h; ++i) EXPECT_NEAR(y.get_as_double(i), ys.get_as_double(i), 1e-12) << dir;
    for (int64_t i = 2 * h; i < 3 * h; ++i) EXPECT_EQ(y.get_as_double(i), 0.0) << dir;
    for (int64_t i = 0; i < h; ++i)
      EXPECT_NEAR(full.at("yh").get_as_double(i), shorter.at("yh").get_as_double(i), 1e-12);
  }
}

// A symbolic batch dimension unrolls too (the shapes of Y and Y_h keep it: Reshape with -1 or 0),
// giving what the static batch gives, in both layouts.
TEST(Recurrent, SymbolicBatchMatchesStatic) {
  for (int64_t layout : {0, 1}) {
    std::mt19937_64 rng(5);
    auto s = shapes(3, 2, layout == 1, false);
    std::map<std::string, Tensor> feeds;
    for (int i : {0, 1, 2, 3, 5}) feeds[str_cat("x", i)] = random_f64(s[i], rng, 1);
    auto run = [&](bool symbolic) {
      Graph g;
      g.opset_imports[""] = 17;
      std::vector<Value*> ins;
      for (int i = 0; i < 6; ++i) {
        if (i == 4) {
          ins.push_back(nullptr);
          continue;
        }
        Shape sh = Shape::of(s[i]);
        if (symbolic && (i == 0 || i == 5)) sh.dims[layout == 0 ? 1 : 0] = Dim("N");
        ins.push_back(g.add_input(str_cat("x", i), DataType::kFloat64, sh));
      }
      Node* n = g.add_node("GRU", ins, {"y", "yh"});
      n->set_attr("hidden_size", Attribute(int64_t{3}));
      n->set_attr("direction", Attribute("bidirectional"));
      n->set_attr("layout", Attribute(layout));
      infer_node(*n);
      g.add_output(n->output(0));
      g.add_output(n->output(1));
      canonicalize(g, nullptr);
      if (symbolic) EXPECT_EQ(g.value("y")->shape().to_string(), layout == 0 ? "[3,2,N,3]" : "[N,3,2,3]");
      return Executor(g).run(feeds);
    };
    auto a = run(true), b = run(false);
    for (const char* o : {"y", "yh"}) {
      ASSERT_EQ(a.at(o).dims(), b.at(o).dims()) << o;
      for (int64_t i = 0; i < a.at(o).numel(); ++i) EXPECT_EQ(a.at(o).get_as_double(i), b.at(o).get_as_double(i)) << o;
    }
  }
}

// PyTorch's exports, canonicalized, run on the CPU executor: every output within 1e-5 of PyTorch's
// float64 run (max |difference| / max |reference|).
TEST(Recurrent, MatchesPyTorchExports) {
  const std::map<std::string, std::vector<std::string>> models = {{"gru_bidirectional", {"x"}},
                                                                  {"lstm_2layer_bidirectional", {"x", "h0", "c0"}},
                                                                  {"rnn_relu_bidirectional", {"x"}}};
  for (const auto& [name, inputs] : models) {
    const std::string dir = std::string(OTTER_SOURCE_DIR) + "/models/rnn/";
    auto g = import_onnx_file(dir + name + ".onnx");
    run_pipeline(*g, "canonicalize");
    for (Node* n : g->node_list()) EXPECT_FALSE(is_recurrent(*n)) << name << ": " << n->describe();
    NpzArchive ref = read_npz(dir + name + "_ref.npz");
    std::map<std::string, Tensor> feeds;
    for (const std::string& in : inputs) feeds[in] = ref.get(in);
    auto out = Executor(*g).run(feeds);
    for (Value* o : g->outputs()) {
      const Tensor &got = out.at(o->name()), &want = ref.get(o->name());
      ASSERT_EQ(got.dims(), want.dims()) << name << " " << o->name();
      double diff = 0, scale = 0;
      for (int64_t i = 0; i < want.numel(); ++i) {
        diff = std::max(diff, std::abs(got.get_as_double(i) - want.get_as_double(i)));
        scale = std::max(scale, std::abs(want.get_as_double(i)));
      }
      std::cout << name << " " << o->name() << ": relative error " << diff / scale << "\n";
      EXPECT_LE(diff / scale, 1e-5) << name << " " << o->name();
    }
  }
}

// The op-table rows' inference (graph/ops/recurrent.cc): Y, Y_h, Y_c in both layouts, and
// inconsistent weights named.
TEST(Recurrent, InferenceGivesOnnxShapes) {
  for (int64_t layout : {0, 1}) {
    Graph g;
    g.opset_imports[""] = 17;
    Shape xs = layout == 0 ? Shape({Dim(5), Dim("N"), Dim(4)}) : Shape({Dim("N"), Dim(5), Dim(4)});
    Value* x = g.add_input("x", DataType::kFloat32, xs);
    Value* w = g.add_input("w", DataType::kFloat32, Shape::of({2, 12, 4}));
    Value* r = g.add_input("r", DataType::kFloat32, Shape::of({2, 12, 3}));
    Node* n = g.add_node("LSTM", {x, w, r}, {"y", "yh", "yc"});
    n->set_attr("direction", Attribute("bidirectional"));
    n->set_attr("layout", Attribute(layout));
    infer_node(*n);
    EXPECT_EQ(n->output(0)->type_string(), layout == 0 ? "f32[5,2,N,3]" : "f32[N,5,2,3]");
    EXPECT_EQ(n->output(1)->type_string(), layout == 0 ? "f32[2,N,3]" : "f32[N,2,3]");
    EXPECT_EQ(n->output(2)->type_string(), n->output(1)->type_string());
    n->set_attr("hidden_size", Attribute(int64_t{4}));
    try {
      infer_node(*n);
      ADD_FAILURE() << "hidden_size 4 with R [2,12,3] was accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("R's last dimension and hidden_size"), std::string::npos) << e.what();
    }
  }
}

void expect_error(Graph& g, const std::string& part) {
  try {
    canonicalize(g, nullptr);
    ADD_FAILURE() << "no error, expected one containing: " << part;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
  }
}

TEST(Recurrent, DynamicSequenceLengthIsOneClearError) {
  Graph g;
  g.opset_imports[""] = 17;
  Value* x = g.add_input("x", DataType::kFloat32, Shape({Dim("seq"), Dim(2), Dim(4)}));
  Value* w = g.add_input("w", DataType::kFloat32, Shape::of({1, 12, 4}));
  Value* r = g.add_input("r", DataType::kFloat32, Shape::of({1, 12, 3}));
  Node* n = g.add_node("LSTM", {x, w, r}, {"y"});
  n->set_name("enc/lstm");
  n->set_attr("hidden_size", Attribute(int64_t{3}));
  g.add_output(n->output(0));
  expect_error(g, "LSTM 'enc/lstm': the sequence length (dimension 0 of X 'x', seq) must be static");
}

TEST(Recurrent, UnsupportedAttributesAreNamed) {
  auto make = [](const std::string& attr, Attribute a) {
    auto g = std::make_unique<Graph>();
    g->opset_imports[""] = 17;
    Value* x = g->add_input("x", DataType::kFloat32, Shape::of({2, 2, 4}));
    Value* w = g->add_input("w", DataType::kFloat32, Shape::of({1, 12, 4}));
    Value* r = g->add_input("r", DataType::kFloat32, Shape::of({1, 12, 3}));
    Node* n = g->add_node("LSTM", {x, w, r}, {"y"});
    n->set_name("l");
    n->set_attr(attr, a);
    g->add_output(n->output(0));
    return g;
  };
  expect_error(*make("input_forget", Attribute(int64_t{1})), "LSTM 'l': input_forget=1");
  expect_error(*make("activations", Attribute(std::vector<std::string>{"Sigmoid", "Tanh", "Gelu"})),
               "LSTM 'l': activation 'Gelu' is not one of");
  expect_error(*make("activations", Attribute(std::vector<std::string>{"Sigmoid"})),
               "LSTM 'l': attribute 'activations' must name 3 function(s) per direction");
  expect_error(*make("direction", Attribute("sideways")), "attribute 'direction' must be forward, reverse or");
}

}  // namespace
}  // namespace otter
