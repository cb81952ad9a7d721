// Behaviour of the autodiff pass as a whole (the rules themselves are checked numerically in
// gradcheck_test.cc): the missing-rule report, what gets a gradient and what does not, fan-out
// sums, broadcast reduction for static and symbolic shapes, naming, and the pass options.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <sstream>

#include "graph/onnx_io.h"
#include "graph/op_table.h"
#include "graph/printer.h"
#include "graph/verifier.h"
#include "passes/autodiff.h"
#include "passes/pass_manager.h"
#include "runtime/executor.h"

namespace otter {
namespace {

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

// Ops only these tests know: one without a gradient rule, one declared not differentiable.
void register_test_ops() {
  static bool done = [] {
    auto same = [](InferContext& ctx) { ctx.set_output(0, ctx.in_dtype(0), ctx.in_shape(0)); };
    OpTable::instance().add({.domain = "test", .op_type = "NoRule", .since_version = 1, .infer = same});
    OpTable::instance().add({.domain = "test", .op_type = "Opaque", .since_version = 1, .infer = same,
                             .grad_kind = GradKind::kNotDifferentiable});
    return true;
  }();
  (void)done;
}

// The node producing value `name`, or nullptr.
const Node* producer(const Graph& g, const std::string& name) {
  const Value* v = g.find_value(name);
  return v ? v->producer() : nullptr;
}

bool has_output(const Graph& g, const std::string& name) {
  for (const Value* o : g.outputs())
    if (o->name() == name) return true;
  return false;
}

int count_ops(const Graph& g, const std::string& op) {
  int n = 0;
  for (const auto& node : g.nodes()) n += node->op_type() == op;
  return n;
}

// x -> Mul(w) -> ops... -> ReduceSum = loss, built in code (the importer knows no "test" domain).
std::unique_ptr<Graph> chain(const std::vector<std::pair<std::string, std::string>>& ops, bool from_input) {
  auto g = std::make_unique<Graph>();
  g->opset_imports = {{"", 17}, {"test", 1}};
  Value* x = g->add_input("x", DataType::kFloat32, Shape::of({2, 3}));
  Value* w = g->add_initializer("w", Tensor::from_vector<float>({3}, {1, 2, 3}), true);
  auto add = [&](const std::string& domain, const std::string& op, std::vector<Value*> ins, const std::string& out) {
    Node* n = g->add_node(op, ins, {out}, domain);
    infer_node(*n);
    return n->output(0);
  };
  Value* v = from_input ? x : add("", "Mul", {x, w}, "a");
  char name = 'b';
  for (const auto& [domain, op] : ops) v = add(domain, op, {v}, std::string(1, name++));
  if (from_input) v = add("", "Mul", {v, w}, "m");
  Node* loss = g->add_node("ReduceSum", {v}, {"loss"});
  loss->set_attr("keepdims", Attribute(int64_t{0}));
  infer_node(*loss);
  g->add_output(loss->output(0));
  return g;
}

TEST(Autodiff, ListsEveryOpWithoutARuleInOneError) {
  register_test_ops();
  auto g = chain({{"test", "NoRule"}, {"test", "Opaque"}, {"test", "NoRule"}, {"", "Relu"}}, false);
  std::string err = error_of([&] { autodiff(*g, {}); });
  EXPECT_NE(err.find("3 ops on the path from the parameters to the loss have no gradient rule"), std::string::npos) << err;
  EXPECT_NE(err.find("test.NoRule (output 'b')"), std::string::npos) << err;
  EXPECT_NE(err.find("test.Opaque (output 'c') (not differentiable)"), std::string::npos) << err;
  EXPECT_NE(err.find("test.NoRule (output 'd')"), std::string::npos) << err;
  EXPECT_EQ(err.find("Relu"), std::string::npos) << "Relu has a rule: " << err;
}

TEST(Autodiff, OpsOffThePathNeedNoRule) {
  register_test_ops();
  // test.NoRule reads only the input x: nothing there depends on a parameter.
  auto g = chain({{"test", "NoRule"}}, true);
  AutodiffResult r = autodiff(*g, {});
  EXPECT_EQ(r.params, std::vector<std::string>{"w"});
}

// Integer inputs (indices, labels) get no gradient; neither do graph inputs that are not asked for.
TEST(Autodiff, NoGradientForIntegerInputsAndLabels) {
  auto g = import_onnx_text(R"(<ir_version: 8, opset_import: ["" : 17]>
    agraph (int64[N,4] tokens, int64[N] labels, float[N,3] x) => (float loss)
        <float[8,3] emb = {1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,23,24}, int64[1] ax = {1}> {
      e = Gather(emb, tokens)
      s = ReduceSum<keepdims = 0>(e, ax)
      y = Add(s, x)
      loss = SoftmaxCrossEntropyLoss(y, labels)
    })");
  AutodiffResult r = autodiff(*g, {});
  EXPECT_EQ(r.params, std::vector<std::string>{"emb"});
  EXPECT_EQ(r.grads, std::vector<std::string>{"emb.grad"});
  EXPECT_TRUE(verify_graph(*g).empty());
  for (const auto& n : g->nodes())
    for (const Value* o : n->outputs())
      if (o) {
        EXPECT_NE(o->name(), "tokens.grad");
        EXPECT_NE(o->name(), "labels.grad");
        EXPECT_NE(o->name(), "x.grad");
        EXPECT_NE(o->name(), "ax.grad");
      }
  const Node* gg = producer(*g, "emb.grad");
  ASSERT_NE(gg, nullptr);
  EXPECT_EQ(gg->op_type(), "GatherGrad");
  EXPECT_EQ(gg->input(2)->name(), "tokens");  // the indices are read, not differentiated
}

// TfIdfVectorizer's features of integer tokens feed a trainable layer: the op is declared without a
// gradient (graph/ops/tfidf.cc), so only the layer's weight gets one: no gradient of f, none of the tokens.
TEST(Autodiff, TfIdfFeaturesTrainTheLayerAbove) {
  EXPECT_EQ(OpTable::instance().find("", "TfIdfVectorizer", 17)->grad_kind, GradKind::kNoGradient);
  auto g = import_onnx_text(R"(<ir_version: 8, opset_import: ["" : 17]>
    agraph (int64[N,5] tokens) => (float loss) <float[3,2] w = {1,2,3,4,5,6}> {
      f = TfIdfVectorizer<mode = "TF", min_gram_length = 1, max_gram_length = 2, max_skip_count = 1,
                          ngram_counts = [0, 2], ngram_indexes = [0, 1, 2], pool_int64s = [4, 7, 4, 7]>(tokens)
      y = MatMul(f, w)
      loss = ReduceSum<keepdims = 0>(y)
    })");
  AutodiffResult r = autodiff(*g, {});
  EXPECT_EQ(r.params, std::vector<std::string>{"w"});
  EXPECT_TRUE(verify_graph(*g).empty());
  EXPECT_EQ(g->find_value("f.grad"), nullptr);
  EXPECT_EQ(g->find_value("tokens.grad"), nullptr);
  EXPECT_NE(g->find_value("w.grad"), nullptr);
}

// Frozen parameters (freeze globs) get no gradient and no backward work of their own.
TEST(Autodiff, FrozenParametersGetNoGradient) {
  const char* text = R"(<ir_version: 8, opset_import: ["" : 17]>
    agraph (float[N,2] x) => (float loss)
        <float[2,2] fc1_weight = {1,0,0,1}, float[2] fc1_bias = {0.1, 0.2},
         float[2,2] fc2_weight = {0.5,1,-1,2}, float[2] fc2_bias = {0, 1}> {
      h = Gemm<transB = 1>(x, fc1_weight, fc1_bias)
      r = Relu(h)
      y = Gemm<transB = 1>(r, fc2_weight, fc2_bias)
      loss = ReduceSum<keepdims = 0>(y)
    })";
  auto g = import_onnx_text(text);
  AutodiffOptions o;
  o.freeze = {"fc1_*"};
  AutodiffResult r = autodiff(*g, o);
  EXPECT_EQ(r.params, (std::vector<std::string>{"fc2_weight", "fc2_bias"}));
  EXPECT_FALSE(has_output(*g, "fc1_weight.grad"));
  EXPECT_FALSE(has_output(*g, "fc1_bias.grad"));
  EXPECT_TRUE(has_output(*g, "fc2_weight.grad"));
  // Nothing flows below the frozen layer: two Gemms forward, one for fc2's weight gradient.
  EXPECT_EQ(count_ops(*g, "Gemm"), 3) << graph_to_string(*g);
  EXPECT_EQ(count_ops(*g, "ReluGrad"), 0) << graph_to_string(*g);

  // The same through the pass and its option syntax ('?' and ';'-separated globs).
  auto g2 = import_onnx_text(text);
  PassManager pm;
  pm.add_pipeline("autodiff{freeze=fc1_weigh?;fc2_bias}");
  pm.run(*g2);
  EXPECT_TRUE(has_output(*g2, "fc1_bias.grad"));
  EXPECT_TRUE(has_output(*g2, "fc2_weight.grad"));
  EXPECT_FALSE(has_output(*g2, "fc1_weight.grad"));
  EXPECT_FALSE(has_output(*g2, "fc2_bias.grad"));
}

// A value used twice gets the sum of both contributions, named <x>.grad; the numbers match the
// closed form: loss = sum(w * w * x + w) -> dloss/dw = 2 w sum_rows(x) + rows.
TEST(Autodiff, SumsFanOut) {
  auto g = import_onnx_text(R"(<ir_version: 8, opset_import: ["" : 17]>
    agraph (float[2,3] x) => (float loss) <float[3] w = {1, -2, 0.5}> {
      a = Mul(w, w)
      b = Mul(a, x)
      c = Add(b, w)
      loss = ReduceSum<keepdims = 0>(c)
    })");
  autodiff(*g, {});
  ASSERT_TRUE(verify_graph(*g).empty());
  const Node* sum = producer(*g, "w.grad");
  ASSERT_NE(sum, nullptr);
  EXPECT_EQ(sum->op_type(), "Add") << graph_to_string(*g);
  Executor ex(*g);
  Tensor x = Tensor::from_vector<float>({2, 3}, {1, 2, 3, 4, 5, 6});
  auto out = ex.run({{"x", x}});
  const Tensor& gw = out.at("w.grad");
  std::vector<float> w = {1, -2, 0.5f}, colsum = {5, 7, 9};
  for (int k = 0; k < 3; ++k) EXPECT_FLOAT_EQ(gw.data<float>()[k], 2 * w[k] * colsum[k] + 2) << k;
}

// Broadcast operands are reduced back: with static shapes by ReduceSum, with a symbolic batch by
// ReduceSum too where the shapes decide the axes, by ai.otter.SumToShape where they cannot.
TEST(Autodiff, ReducesBroadcastStaticAndSymbolic) {
  for (const char* dim : {"4", "N"}) {
    auto g = import_onnx_text(str_cat(R"(<ir_version: 8, opset_import: ["" : 17]>
      agraph (float[)", dim, R"(,3] x) => (float loss) <float[3] b = {1, 2, 3}, float[1,3] c = {1, 1, 1}> {
        y = Add(x, b)
        z = Mul(y, c)
        loss = ReduceSum<keepdims = 0>(z)
      })"));
    autodiff(*g, {});
    ASSERT_TRUE(verify_graph(*g).empty()) << graph_to_string(*g);
    const Node* gb = producer(*g, "b.grad");
    const Node* gc = producer(*g, "c.grad");
    ASSERT_TRUE(gb && gc);
    EXPECT_EQ(gb->op_type(), "ReduceSum") << dim;
    EXPECT_EQ(g->value("b.grad")->shape(), Shape::of({3}));
    EXPECT_EQ(g->value("c.grad")->shape(), Shape::of({1, 3}));
    Executor ex(*g);
    auto out = ex.run({{"x", Tensor::from_vector<float>({4, 3}, std::vector<float>(12, 2.0f))}});
    for (int k = 0; k < 3; ++k) {
      EXPECT_FLOAT_EQ(out.at("b.grad").data<float>()[k], 4.0f);       // sum over 4 rows of c = 1
      EXPECT_FLOAT_EQ(out.at("c.grad").data<float>()[k], 4 * (2.0f + (k + 1)));
    }
  }
  // [N,3] + [M,3]: M may be 1 or N, so only the runtime shapes tell which axes to sum.
  auto g = import_onnx_text(R"(<ir_version: 8, opset_import: ["" : 17]>
    agraph (float[N,3] x, float[M,3] u) => (float loss) {
      y = Add(x, u)
      loss = ReduceSum<keepdims = 0>(y)
    })");
  AutodiffOptions o;
  o.wrt = {"u"};
  autodiff(*g, o);
  const Node* gu = producer(*g, "u.grad");
  ASSERT_NE(gu, nullptr);
  EXPECT_EQ(gu->op_type(), "SumToShape");
  EXPECT_EQ(gu->domain(), kOtterDomain);
  Executor ex(*g);
  auto out = ex.run({{"x", Tensor(DataType::kFloat32, {5, 3})}, {"u", Tensor(DataType::kFloat32, {1, 3})}});
  EXPECT_EQ(out.at("u.grad").dims(), (std::vector<int64_t>{1, 3}));
  EXPECT_FLOAT_EQ(out.at("u.grad").data<float>()[0], 5.0f);
}

// Gradients are named <x>.grad after the value they belong to; intermediate backward values
// derive from the forward node's output (<y>.bwd<k>), so names do not depend on unrelated nodes.
TEST(Autodiff, NamesGradientsAfterTheirValues) {
  auto g = import_onnx_text(R"(<ir_version: 8, opset_import: ["" : 17]>
    agraph (float[N,2] x, int64[N] labels) => (float loss) <float[2,2] w = {1,2,3,4}, float[2] b = {0, 0}> {
      h = Gemm<transB = 1>(x, w, b)
      t = Tanh(h)
      loss = SoftmaxCrossEntropyLoss(t, labels)
    })");
  AutodiffResult r = autodiff(*g, {});
  EXPECT_EQ(r.grads, (std::vector<std::string>{"w.grad", "b.grad"}));
  EXPECT_EQ(producer(*g, "t.grad")->op_type(), "SoftmaxCrossEntropyLossGrad");
  EXPECT_EQ(producer(*g, "h.grad")->op_type(), "TanhGrad");
  EXPECT_EQ(producer(*g, "w.grad")->op_type(), "Gemm");
  ASSERT_TRUE(g->loss_seed);
  EXPECT_EQ(g->loss_seed->name(), "loss.grad");
  ASSERT_EQ(g->gradients.size(), 2u);
  EXPECT_EQ(g->gradients[0].first->name(), "w");
  EXPECT_EQ(g->gradients[0].second->name(), "w.grad");
}

// A parameter the loss does not depend on gets a zero gradient (counted), not an error.
TEST(Autodiff, UnusedParameterGetsZeroGradient) {
  auto g = import_onnx_text(R"(<ir_version: 8, opset_import: ["" : 17]>
    agraph (float[2] x) => (float loss, float[2] side) <float[2] w = {1, 2}, float[2] v = {3, 4}> {
      m = Mul(x, w)
      loss = ReduceSum<keepdims = 0>(m)
      side = Mul(x, v)
    })");
  AutodiffResult r = autodiff(*g, {});
  EXPECT_EQ(r.zero_grads, 1);
  Executor ex(*g);
  auto out = ex.run({{"x", Tensor::from_vector<float>({2}, {5, 6})}});
  EXPECT_FLOAT_EQ(out.at("v.grad").data<float>()[1], 0.0f);
  EXPECT_FLOAT_EQ(out.at("w.grad").data<float>()[1], 6.0f);
}

TEST(Autodiff, BadLossIsAClearError) {
  auto g = import_onnx_text(R"(<ir_version: 8, opset_import: ["" : 17]>
    agraph (float[2] x) => (float[2] y) <float[2] w = {1, 2}> {
      y = Mul(x, w)
    })");
  EXPECT_NE(error_of([&] { autodiff(*g, {}); }).find("no loss value 'loss' (graph outputs: y)"), std::string::npos);
  AutodiffOptions o;
  o.loss = "y";
  EXPECT_NE(error_of([&] { autodiff(*g, o); }).find("must be a scalar"), std::string::npos);
}

// Rules that cannot differentiate a form say why, naming the node.
TEST(Autodiff, UnsupportedFormsNameTheNode) {
  auto g = import_onnx_text(R"(<ir_version: 8, opset_import: ["" : 17]>
    agraph (float[4,3] x) => (float loss) <float[1] ratio = {0.5}, bool[1] train = {1}, float[3] w = {1, 2, 3}> {
      m = Mul(x, w)
      d = Dropout(m, ratio, train)
      loss = ReduceSum<keepdims = 0>(d)
    })");
  std::string err = error_of([&] { autodiff(*g, {}); });
  EXPECT_NE(err.find("Dropout (output 'd'): cannot differentiate: training-mode Dropout without its mask output"),
            std::string::npos) << err;
}

// ConvTranspose forms whose adjoint Conv the rule cannot build: output_shape with symbolic spatial
// sizes (the pads depend on them) and an output extended by a stride or more past the last window.
TEST(Autodiff, ConvTransposeFormsWithoutARuleNameTheNode) {
  auto g = import_onnx_text(R"(<ir_version: 8, opset_import: ["" : 17]>
    agraph (float[1,1,H,W] x) => (float loss) <float[1,2,3,3] w = {1,2,3,4,5,6,7,8,9,1,2,3,4,5,6,7,8,9}> {
      y = ConvTranspose<strides = [3, 2], output_shape = [10, 8]>(x, w)
      loss = ReduceSum<keepdims = 0>(y)
    })");
  std::string err = error_of([&] { autodiff(*g, {}); });
  EXPECT_NE(err.find("ConvTranspose (output 'y'): cannot differentiate: the gradient of ConvTranspose with "
                     "output_shape needs X's spatial sizes to be static"),
            std::string::npos)
      << err;
  auto g2 = import_onnx_text(R"(<ir_version: 8, opset_import: ["" : 17]>
    agraph (float[1,1,3,3] x) => (float loss) <float[1,2,3,3] w = {1,2,3,4,5,6,7,8,9,1,2,3,4,5,6,7,8,9}> {
      y = ConvTranspose<strides = [3, 2], output_shape = [12, 8]>(x, w)
      loss = ReduceSum<keepdims = 0>(y)
    })");
  err = error_of([&] { autodiff(*g2, {}); });
  EXPECT_NE(err.find("output extends 3 positions past its last window on spatial axis 0 (stride 3)"), std::string::npos)
      << err;
}

// Through BatchNormalization in training mode: the running statistics stay state updates and get
// no gradient; scale and bias do.
TEST(Autodiff, BatchNormRunningStatisticsAreState) {
  auto g = import_onnx_text(R"(<ir_version: 8, opset_import: ["" : 17]>
    agraph (float[N,2,3,3] x) => (float loss)
        <float[2] s = {1, 1}, float[2] b = {0, 0}, float[2] rm = {0, 0}, float[2] rv = {1, 1}> {
      y, m, v = BatchNormalization<training_mode = 1>(x, s, b, rm, rv)
      loss = ReduceSum<keepdims = 0>(y)
    })");
  ASSERT_EQ(g->value("rm")->kind(), ValueKind::kState);
  AutodiffResult r = autodiff(*g, {});
  EXPECT_EQ(r.params, (std::vector<std::string>{"s", "b"}));
  const Node* bn = producer(*g, "s.grad");
  ASSERT_NE(bn, nullptr);
  EXPECT_EQ(bn->op_type(), "BatchNormalizationGrad");
  EXPECT_EQ(bn->attr_i("training_mode", 0), 1);
  EXPECT_EQ(g->state_updates.at(g->value("rm"))->name(), "m");
}

// Every op of the default domain says what autodiff does with it; a rule comes with its function.
TEST(Autodiff, EveryOnnxOpDeclaresItsGradient) {
  int rules = 0;
  for (const OpDef* d : OpTable::instance().all()) {
    if (d->domain != "") continue;
    EXPECT_NE(d->grad_kind, GradKind::kMissing) << d->op_type << " has no gradient declaration";
    if (d->grad_kind == GradKind::kRule) {
      EXPECT_TRUE(static_cast<bool>(d->grad)) << d->op_type;
      ++rules;
    }
  }
  EXPECT_GE(rules, 50);
}

// Every internal op the table knows is documented in docs/ops.md.
TEST(Autodiff, EveryInternalOpIsDocumented) {
  std::ifstream f(std::string(OTTER_SOURCE_DIR) + "/docs/ops.md");
  ASSERT_TRUE(f) << "docs/ops.md is missing";
  std::stringstream ss;
  ss << f.rdbuf();
  const std::string doc = ss.str();
  for (const OpDef* d : OpTable::instance().all())
    if (d->domain == kOtterDomain) {
      EXPECT_NE(doc.find("`" + d->op_type + "("), std::string::npos) << d->op_type << " is not in docs/ops.md";
    }
}

}  // namespace
}  // namespace otter
