// Tests of If, Loop and Scan (graph/control_flow.h): canonicalize's inlining and unrolling
// (passes/control_flow.h) against the CPU kernels that run the subgraphs (kernels/cpu/
// control_flow.cc) and against the ops' definitions written out here as plain loops; gradients of
// the inlined graphs against central finite differences of the graph as imported (its loss
// evaluated by the control-flow kernels); export and import keep the subgraphs and captures; and
// autodiff's error for control flow known only at run time.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "graph/onnx_io.h"
#include "graph/op_table.h"
#include "graph/printer.h"
#include "graph/verifier.h"
#include "passes/autodiff.h"
#include "passes/canonicalize.h"
#include "runtime/executor.h"

namespace otter {
namespace {

// Loop over a constant trip count 3 whose body reads x and w from the outer graph; loss =
// sum(y_final) + sum(r * scan), r = [[1,2],[3,4],[5,6]].
constexpr const char* kLoop = R"(<ir_version: 8, opset_import: ["" : 17]>
agraph (double[2] x, double[2] w) => (double loss) <double[3,2] r = {1.0, 2.0, 3.0, 4.0, 5.0, 6.0}> {
  m = Constant<value = int64 {3}>()
  y, s = Loop(m, , x) <body = body (int64 i, bool c, double[2] a) => (bool co, double[2] an, double[2] sq) {
    co = Identity(c)
    p = Mul(a, w)
    q = Add(p, x)
    an = Tanh(q)
    sq = Mul(a, a)
  }>
  ly = ReduceSum<keepdims = 0>(y)
  rs = Mul(s, r)
  ls = ReduceSum<keepdims = 0>(rs)
  loss = Add(ly, ls)
}
)";

// If with a constant false condition: the else branch, sin(x * w), is taken.
constexpr const char* kIf = R"(<ir_version: 8, opset_import: ["" : 17]>
agraph (double[2] x, double[2] w) => (double loss) {
  c = Constant<value = bool {0}>()
  y = If(c) <then_branch = then_g () => (double[2] ty) { ty = Add(x, w) }, else_branch = else_g () => (double[2] ey) {
    e0 = Mul(x, w)
    ey = Sin(e0)
  }>
  yy = Mul(y, y)
  loss = ReduceSum<keepdims = 0>(yy)
}
)";

// Scan reading x [3,2] backwards, stacking its outputs along axis 1: z [2,3].
constexpr const char* kScan = R"(<ir_version: 8, opset_import: ["" : 17]>
agraph (double[2] x0, double[3,2] x) => (double loss) <double[2,3] r = {1.0, -2.0, 3.0, 0.5, 1.5, -1.0}> {
  y, z = Scan(x0, x) <num_scan_inputs = 1, scan_input_directions = [1], scan_output_axes = [1], body = body (double[2] s, double[2] xt) => (double[2] sn, double[2] out) {
    sm = Mul(s, xt)
    sn = Tanh(sm)
    out = Add(sn, xt)
  }>
  zr = Mul(z, r)
  lz = ReduceSum<keepdims = 0>(zr)
  ly = ReduceSum<keepdims = 0>(y)
  loss = Add(ly, lz)
}
)";

Tensor f64(const std::vector<int64_t>& dims, std::vector<double> v) {
  return Tensor::from_vector<double>(dims, std::move(v));
}

// The models' initializers are fixed weights of the loss, not parameters.
std::unique_ptr<Graph> load(const std::string& text) {
  ImportOptions o;
  o.float_initializers_trainable = false;
  return import_onnx_text(text, o);
}

double scalar(const Tensor& t) { return t.data<double>()[0]; }

int count_control_flow(const Graph& g) {
  int n = 0;
  for (const auto& node : g.nodes()) n += node->op_type() == "If" || node->op_type() == "Loop" || node->op_type() == "Scan";
  return n;
}

// The loss of `text` run as imported (control-flow kernels) and after canonicalize (inlined).
std::pair<double, double> both_losses(const char* text, const std::map<std::string, Tensor>& feeds) {
  std::unique_ptr<Graph> rolled = load(text);
  EXPECT_EQ(count_control_flow(*rolled), 1);
  std::unique_ptr<Graph> flat = load(text);
  CanonicalizeStats st = canonicalize(*flat, nullptr);
  EXPECT_EQ(st.control_flow_inlined, 1);
  EXPECT_EQ(count_control_flow(*flat), 0) << graph_to_string(*flat);
  EXPECT_TRUE(verify_graph(*flat).empty());
  return {scalar(Executor(*rolled).run(feeds).at("loss")), scalar(Executor(*flat).run(feeds).at("loss"))};
}

// Autodiff of the canonicalized graph against central differences of the imported one's loss
// (evaluated through the control-flow kernels); returns the worst relative error.
double gradient_error(const char* text, const std::map<std::string, Tensor>& feeds) {
  std::unique_ptr<Graph> rolled = load(text);
  std::unique_ptr<Graph> flat = load(text);
  canonicalize(*flat, nullptr);
  AutodiffOptions ao;
  for (const auto& [name, t] : feeds) ao.wrt.push_back(name);
  AutodiffResult ar = autodiff(*flat, ao);
  EXPECT_EQ(ar.params.size(), feeds.size());
  std::vector<std::string> problems = verify_graph(*flat);
  EXPECT_TRUE(problems.empty()) << (problems.empty() ? "" : problems[0]);
  auto analytic = Executor(*flat).run(feeds);
  Executor ex(*rolled);
  const double eps = 1e-6;
  double worst = 0;
  for (size_t k = 0; k < ar.params.size(); ++k) {
    const Tensor& g = analytic.at(ar.grads[k]);
    const Tensor x = feeds.at(ar.params[k]);
    for (int64_t e = 0; e < x.numel(); ++e) {
      auto f = feeds;
      Tensor xp = x.clone(), xm = x.clone();
      xp.data<double>()[e] += eps;
      xm.data<double>()[e] -= eps;
      f[ar.params[k]] = xp;
      const double lp = scalar(ex.run(f).at("loss"));
      f[ar.params[k]] = xm;
      const double numeric = (lp - scalar(ex.run(f).at("loss"))) / (2 * eps);
      worst = std::max(worst, std::abs(g.data<double>()[e] - numeric) / std::max(1.0, std::abs(numeric)));
    }
  }
  return worst;
}

const std::map<std::string, Tensor> kLoopFeeds = {{"x", f64({2}, {0.3, -0.7})}, {"w", f64({2}, {1.1, 0.4})}};
const std::map<std::string, Tensor> kScanFeeds = {{"x0", f64({2}, {0.5, -0.2})},
                                                  {"x", f64({3, 2}, {0.1, 0.9, -0.6, 0.3, 0.8, -0.4})}};

TEST(ControlFlow, LoopUnrolledAndRunAgreeWithItsDefinition) {
  // Loop's definition, written out: a <- tanh(a * w + x) three times, scan output a * a before each.
  const double x[2] = {0.3, -0.7}, w[2] = {1.1, 0.4}, r[3][2] = {{1, 2}, {3, 4}, {5, 6}};
  double a[2] = {x[0], x[1]}, expect = 0;
  for (int it = 0; it < 3; ++it)
    for (int j = 0; j < 2; ++j) {
      expect += r[it][j] * a[j] * a[j];
      a[j] = std::tanh(a[j] * w[j] + x[j]);
    }
  expect += a[0] + a[1];
  auto [rolled, flat] = both_losses(kLoop, kLoopFeeds);
  EXPECT_NEAR(rolled, expect, 1e-12);
  EXPECT_NEAR(flat, expect, 1e-12);
}

TEST(ControlFlow, IfOfConstantConditionInlinesTheTakenBranch) {
  const std::map<std::string, Tensor> feeds = {{"x", f64({2}, {0.3, -0.7})}, {"w", f64({2}, {1.1, 0.4})}};
  const double expect = std::pow(std::sin(0.3 * 1.1), 2) + std::pow(std::sin(-0.7 * 0.4), 2);
  auto [rolled, flat] = both_losses(kIf, feeds);
  EXPECT_NEAR(rolled, expect, 1e-12);
  EXPECT_NEAR(flat, expect, 1e-12);
}

TEST(ControlFlow, ScanUnrolledAndRunAgreeWithItsDefinition) {
  // Scan's definition: t = 0, 1, 2 reads row 2 - t (reverse); z[:, t] = out of iteration t.
  const double xs[3][2] = {{0.1, 0.9}, {-0.6, 0.3}, {0.8, -0.4}}, r[2][3] = {{1, -2, 3}, {0.5, 1.5, -1}};
  double s[2] = {0.5, -0.2}, expect = 0;
  for (int t = 0; t < 3; ++t)
    for (int j = 0; j < 2; ++j) {
      s[j] = std::tanh(s[j] * xs[2 - t][j]);
      expect += r[j][t] * (s[j] + xs[2 - t][j]);
    }
  expect += s[0] + s[1];
  auto [rolled, flat] = both_losses(kScan, kScanFeeds);
  EXPECT_NEAR(rolled, expect, 1e-12);
  EXPECT_NEAR(flat, expect, 1e-12);
}

TEST(ControlFlow, GradientThroughUnrolledLoopMatchesFiniteDifferences) {
  EXPECT_LT(gradient_error(kLoop, kLoopFeeds), 1e-6);
}

TEST(ControlFlow, GradientThroughConstantIfMatchesFiniteDifferences) {
  EXPECT_LT(gradient_error(kIf, kLoopFeeds), 1e-6);
}

TEST(ControlFlow, GradientThroughUnrolledScanMatchesFiniteDifferences) {
  EXPECT_LT(gradient_error(kScan, kScanFeeds), 1e-6);
}

TEST(ControlFlow, RuntimeConditionRunsEitherBranch) {
  std::string text = kIf;
  text.replace(text.find("agraph (double[2] x"), 19, "agraph (bool c, double[2] x");
  text.erase(text.find("  c = Constant"), text.find("  y = If") - text.find("  c = Constant"));
  std::unique_ptr<Graph> g = load(text);
  canonicalize(*g, nullptr);
  ASSERT_EQ(count_control_flow(*g), 1);  // nothing to inline: the condition is fed
  Tensor yes(DataType::kBool, {}), no(DataType::kBool, {});
  yes.data<bool>()[0] = true;
  no.data<bool>()[0] = false;
  auto feeds = kLoopFeeds;
  Executor ex(*g);
  feeds["c"] = yes;
  EXPECT_NEAR(scalar(ex.run(feeds).at("loss")), std::pow(0.3 + 1.1, 2) + std::pow(-0.7 + 0.4, 2), 1e-12);
  feeds["c"] = no;
  EXPECT_NEAR(scalar(ex.run(feeds).at("loss")), std::pow(std::sin(0.3 * 1.1), 2) + std::pow(std::sin(-0.7 * 0.4), 2),
              1e-12);
  // Autodiff names the If and says what would let it through.
  AutodiffOptions ao;
  ao.wrt = {"x"};
  try {
    autodiff(*g, ao);
    FAIL() << "autodiff accepted an If of runtime condition";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("If (output 'y') (its condition is known only at run time; make it a constant"),
              std::string::npos)
        << e.what();
  }
}

TEST(ControlFlow, ExportKeepsSubgraphsAndCaptures) {
  std::unique_ptr<Graph> g = load(kLoop);
  // A rename in the outer graph must reach the body's reads on export.
  g->rename_value(g->value("w"), "w_renamed");
  ImportOptions o;
  o.float_initializers_trainable = false;
  std::unique_ptr<Graph> back = import_onnx_bytes(export_onnx_bytes(*g), "", o);
  const std::string printed = graph_to_string(*back);
  EXPECT_NE(printed.find("Loop(%m, _, %x; captures %w_renamed, %x) {body=graph body}"), std::string::npos) << printed;
  EXPECT_NE(printed.find("      capture %w_renamed: f64[2]\n"), std::string::npos) << printed;
  EXPECT_NE(printed.find("%p: f64[2] = Mul(%a, %w_renamed)"), std::string::npos) << printed;
  auto feeds = kLoopFeeds;
  feeds["w_renamed"] = feeds.at("w");
  feeds.erase("w");
  EXPECT_NEAR(scalar(Executor(*back).run(feeds).at("loss")), both_losses(kLoop, kLoopFeeds).first, 1e-12);
}

TEST(ControlFlow, HostileSubgraphsFailWithClearErrors) {
  auto error_of = [](const std::string& text) -> std::string {
    try {
      import_onnx_text(text);
    } catch (const Error& e) {
      return e.what();
    }
    return "(no error)";
  };
  // A Loop whose body takes an input more than the node carries.
  std::string text = kLoop;
  text.replace(text.find("bool c, double[2] a"), 19, "bool c, double[2] a, double[2] extra");
  EXPECT_NE(error_of(text).find("Loop (output 'y'): body takes 4 inputs and returns 3 values; with 1 loop-carried "
                                "values and 2 outputs it must take 3 and return 3"),
            std::string::npos)
      << error_of(text);
  // A body reading a name defined nowhere.
  text = kLoop;
  text.replace(text.find("Add(p, x)"), 9, "Add(p, nowhere)");
  EXPECT_NE(error_of(text).find("undefined values: 'nowhere' (read by a subgraph of Loop"), std::string::npos)
      << error_of(text);
  // Ifs nested deeper than kMaxSubgraphDepth.
  std::string nested = "y0 = Identity(x)";
  for (int d = 0; d < 40; ++d)
    nested = str_cat("y", d + 1, " = If(c) <then_branch = t", d, " () => (double[2] y", d, ") { ", nested,
                     " }, else_branch = e", d, " () => (double[2] z", d, ") { z", d, " = Identity(x) }>");
  text = str_cat("<ir_version: 8, opset_import: [\"\" : 17]>\nagraph (bool c, double[2] x) => (double[2] y40) {\n  ",
                 nested, "\n}\n");
  EXPECT_NE(error_of(text).find("subgraphs nest deeper than 32 levels"), std::string::npos) << error_of(text);
}

}  // namespace
}  // namespace otter
