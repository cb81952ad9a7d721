// Einsum, Det, LRN and ONNX's training-preview optimizers (graph/ops/einsum.cc, lrn_det.cc,
// training.cc; kernels/cpu/linalg.cc, lrn.cc, onnx_optim.cc) beyond what ONNX's node tests cover
// (tests/conformance): Einsum broadcasting, diagonals, integer and chained cases against
// torch.einsum; Det against torch.det / numpy.linalg.det; the optimizers at T = 0 against ONNX's own
// reference functions (onnx/backend/test/case/node/{adam,adagrad,momentum}.py); and the errors of
// malformed equations, missing attributes and the training domain's import rules. Gradients of
// Einsum and LRN: tests/passes/gradcheck_test.cc.
#include <gtest/gtest.h>

#include <cmath>

#include "graph/onnx_io.h"
#include "graph/op_table.h"
#include "onnx/onnx_pb.h"
#include "tests/kernels/kernel_test_util.h"

namespace otter::testing {
namespace {

using Ints = std::vector<int64_t>;

Tensor f32(Ints dims, std::vector<float> v) { return Tensor::from_vector<float>(std::move(dims), v); }
Tensor f64(Ints dims, std::vector<double> v) { return Tensor::from_vector<double>(std::move(dims), v); }
Tensor i64(Ints dims, Ints v) { return Tensor::from_vector<int64_t>(std::move(dims), v); }
// Values start, start + 1, ... (numpy's arange reshaped), then `f` applied to each.
template <typename T, typename F>
Tensor arange(Ints dims, F f) {
  Tensor t(DataTypeOf<T>::value, std::move(dims));
  for (int64_t i = 0; i < t.numel(); ++i) t.data<T>()[i] = static_cast<T>(f(static_cast<double>(i)));
  return t;
}


#define EXPECT_HAS(msg, part) EXPECT_NE((msg).find(part), std::string::npos) << (msg)

void expect_values(const Tensor& got, const Ints& dims, const std::vector<double>& want, double tol = 1e-6) {
  ASSERT_EQ(got.dims(), dims);
  ASSERT_EQ(got.numel(), static_cast<int64_t>(want.size()));
  for (int64_t i = 0; i < got.numel(); ++i)
    EXPECT_NEAR(got.get_as_double(i), want[i], tol * std::max(1.0, std::abs(want[i]))) << "element " << i;
}

std::map<std::string, Attribute> equation(const char* e) { return {{"equation", Attribute(e)}}; }

// ---- Einsum ----------------------------------------------------------------------------------------

// "...ij,...jk->...ik" with ellipsis dims [2,1] and [3] broadcasting to [2,3] (torch.einsum).
TEST(Einsum, EllipsisBroadcasts) {
  Tensor a = arange<float>({2, 1, 2, 3}, [](double i) { return i - 5; });
  Tensor b = arange<float>({3, 3, 2}, [](double i) { return std::fmod(i, 7.0) - 3; });
  auto y = run_op({"Einsum", {a, b}, equation("...ij,...jk->...ik")});
  expect_values(y[0], {2, 3, 2, 2}, {16, 4, 7, 4, -7, 16, -4, 7, 5, -7, -1, -4,
                                     -2, 4, -11, 4, -1, -2, 2, -11, -7, -1, -13, 2});
}

// Repeated letters on one operand: the trace (implicit scalar output) and the diagonal.
TEST(Einsum, TraceAndDiagonal) {
  Tensor m = f32({3, 3}, {1, 2, 3, 4, 5, 6, 7, 8, 10});
  expect_values(run_op({"Einsum", {m}, equation("ii")})[0], {}, {16});
  expect_values(run_op({"Einsum", {m}, equation("ii->i")})[0], {3}, {1, 5, 10});
}

// int64 operands (exact), an implicit outer product, and three operands with a transposed output.
TEST(Einsum, IntegerOuterAndChain) {
  Tensor x = arange<int64_t>({2, 3}, [](double i) { return i; });
  Tensor v = i64({3}, {1, -2, 3});
  auto y = run_op({"Einsum", {x, v}, equation("ij,j->i")});
  EXPECT_EQ(y[0].dtype(), DataType::kInt64);
  EXPECT_EQ(values<int64_t>(y[0]), (Ints{4, 10}));
  y = run_op({"Einsum", {v, i64({2}, {2, 5})}, equation("i,j")});
  EXPECT_EQ(y[0].dims(), (Ints{3, 2}));
  EXPECT_EQ(values<int64_t>(y[0]), (Ints{2, 5, -4, -10, 6, 15}));
  Tensor p = arange<double>({2, 3}, [](double i) { return i / 4; });
  Tensor q = arange<double>({3, 4}, [](double i) { return i / 3 - 1; });
  Tensor r = arange<double>({4, 2}, [](double i) { return i - 2; });
  expect_values(run_op({"Einsum", {p, q, r}, equation("ij,jk,kl->li")})[0], {2, 2},
                {7.666666666666666, 22.666666666666664, 12.833333333333332, 35.33333333333333}, 1e-12);
}

TEST(Einsum, MalformedEquations) {
  constexpr DataType kF = DataType::kFloat32;
  std::string e = infer_error("Einsum", {{kF, {2, 3}}}, equation("ij->j->i"));
  EXPECT_HAS(e, "the_node");
  EXPECT_HAS(e, "equation 'ij->j->i': it has more than one '->'");
  e = infer_error("Einsum", {{kF, {2, 3}}, {kF, {3}}}, equation("ij->i"));
  EXPECT_HAS(e, "it has 1 input terms for 2 operands");
  e = infer_error("Einsum", {{kF, {2, 3}}}, equation("i1->i"));
  EXPECT_HAS(e, "input term 'i1' has '1'");
  e = infer_error("Einsum", {{kF, {2, 3}}}, equation("ij->k"));
  EXPECT_HAS(e, "output letter 'k' is in no input term");
  e = infer_error("Einsum", {{kF, {2, 3}}}, equation("ij->ii"));
  EXPECT_HAS(e, "output letter 'i' appears twice");
  e = infer_error("Einsum", {{kF, {2, 3, 4}}}, equation("ij->i"));
  EXPECT_HAS(e, "operand 0 has rank 3 but its term 'ij' names 2 axes");
  e = infer_error("Einsum", {{kF, {2, 3}}, {kF, {4, 5}}}, equation("ij,jk->ik"));
  EXPECT_HAS(e, "letter 'j' of equation 'ij,jk->ik' has two sizes: 3 vs 4");
  e = infer_error("Einsum", {{kF, {2, 3}}}, {});
  EXPECT_HAS(e, "the required attribute 'equation' is missing");
  // The kernel checks sizes too (shapes unknown at inference).
  e = error_of([] { run_op({"Einsum", {f32({2, 3}, {1, 2, 3, 4, 5, 6}), f32({2}, {1, 2})}, equation("ij,j->i")}); });
  EXPECT_HAS(e, "operand 1 f32[2] disagrees in axis 0 (size 3 elsewhere)");
}

// ---- Det ---------------------------------------------------------------------------------------------

// A matrix that needs a row swap (zero first pivot) and a singular one (torch.det: -5, 0); float64.
TEST(Det, PivotingSingularAndDouble) {
  Tensor d = f32({2, 3, 3}, {0, 2, 1, 1, 1, 0, 3, 0, 1, 1, 2, 3, 2, 4, 6, 1, 0, 1});
  expect_values(run_op({"Det", {d}})[0], {2}, {-5, 0});
  auto y = run_op({"Det", {f64({2, 2}, {0.5, 2.0, 4.0, -1.0})}});
  EXPECT_EQ(y[0].dtype(), DataType::kFloat64);
  expect_values(y[0], {}, {-8.5}, 1e-15);
  std::string e = infer_error("Det", {{DataType::kFloat32, {2, 3}}});
  EXPECT_HAS(e, "X of shape [2,3] is not square");
}

// ---- LRN -----------------------------------------------------------------------------------------------

TEST(Lrn, AttributesAndRank) {
  constexpr DataType kF = DataType::kFloat32;
  std::string e = infer_error("LRN", {{kF, {1, 4, 2}}});
  EXPECT_HAS(e, "the required attribute 'size' is missing");
  e = infer_error("LRN", {{kF, {1, 4, 2}}}, {{"size", Attribute(int64_t{0})}});
  EXPECT_HAS(e, "attribute 'size' must be positive, got 0");
  e = infer_error("LRN", {{kF, {4}}}, {{"size", Attribute(int64_t{3})}});
  EXPECT_HAS(e, "X of shape [4] has no channel axis [N, C, ...]");
}

// ---- ai.onnx.preview.training optimizers ---------------------------------------------------------------

// T = 0: no bias correction (Adam), gradient coefficient 1 (Momentum), the undecayed rate (Adagrad).
// Expected values: ONNX's apply_adam / apply_adagrad / apply_momentum / apply_nesterov with R = 0.1,
// X = [1, -2], G = [0.5, 0.25], V = [0.1, 0.2], H = [0.01, 0.04]. Attributes are float32, so the
// tolerance is float32's.
struct Optim : ::testing::Test {
  Tensor R = f64({}, {0.1}), T0 = i64({}, {0});
  Tensor X = f64({2}, {1.0, -2.0}), G = f64({2}, {0.5, 0.25}), V = f64({2}, {0.1, 0.2}), H = f64({2}, {0.01, 0.04});
  std::vector<Tensor> run(const char* op, std::vector<Tensor> states, std::map<std::string, Attribute> attrs) {
    std::vector<Tensor> ins = {R, T0, X, G};
    ins.insert(ins.end(), states.begin(), states.end());
    return run_op({.op = op, .inputs = ins, .attrs = attrs, .num_outputs = 1 + static_cast<int>(states.size()),
                   .domain = kTrainingDomain});
  }
};

TEST_F(Optim, AdamAtStepZero) {
  auto y = run("Adam", {V, H}, {{"norm_coefficient", Attribute(0.01f)}, {"norm_coefficient_post", Attribute(0.1f)}});
  expect_values(y[0], {2}, {0.7746589636338783, -1.8913348167739437}, 1e-6);
  expect_values(y[1], {2}, {0.141, 0.203}, 1e-6);
  expect_values(y[2], {2}, {0.0102501, 0.0400129}, 1e-6);
}

TEST_F(Optim, AdagradAtStepZero) {
  auto y = run("Adagrad", {H}, {{"norm_coefficient", Attribute(0.01f)}, {"decay_factor", Attribute(0.5f)}});
  expect_values(y[0], {2}, {0.9018688138508769, -2.075460304639122}, 1e-6);
  expect_values(y[1], {2}, {0.2701, 0.0929}, 1e-6);
}

TEST_F(Optim, MomentumAtStepZero) {
  std::map<std::string, Attribute> attrs = {{"mode", Attribute("standard")},
                                            {"alpha", Attribute(0.9f)},
                                            {"beta", Attribute(0.5f)},
                                            {"norm_coefficient", Attribute(0.01f)}};
  auto y = run("Momentum", {V}, attrs);
  expect_values(y[0], {2}, {0.94, -2.041}, 1e-6);
  expect_values(y[1], {2}, {0.6, 0.41}, 1e-6);
  attrs["mode"] = Attribute("nesterov");
  y = run("Momentum", {V}, attrs);
  expect_values(y[0], {2}, {0.895, -2.0599}, 1e-6);
  expect_values(y[1], {2}, {0.6, 0.41}, 1e-6);
}

// Inference: list lengths, the mode, and the training domain's import rules.
TEST(OnnxTrainingDomain, InferenceAndImport) {
  Graph g;
  g.opset_imports[""] = 17;
  g.opset_imports[kTrainingDomain] = 1;
  std::vector<Value*> ins = {g.add_input("R", DataType::kFloat32, Shape::of({})),
                             g.add_input("T", DataType::kInt64, Shape::of({})),
                             g.add_input("X", DataType::kFloat32, Shape::of({3})),
                             g.add_input("G", DataType::kFloat32, Shape::of({3}))};
  Node* n = g.add_node("Adagrad", ins, {"X_new"}, kTrainingDomain);
  n->set_name("the_node");
  std::string e = error_of([&] { infer_node(*n); });
  EXPECT_HAS(e, "the_node");
  EXPECT_HAS(e, "expects R, T and 3 lists of equally many tensors (X, G, state), got 4 inputs");
  ins.push_back(g.add_input("V", DataType::kFloat32, Shape::of({3})));
  Node* m = g.add_node("Momentum", ins, {"X2", "V2"}, kTrainingDomain);
  m->set_attr("mode", Attribute("heavy"));
  e = error_of([&] { infer_node(*m); });
  EXPECT_HAS(e, "attribute 'mode' must be \"standard\" or \"nesterov\", got \"heavy\"");

  // A model: Adam in domain ai.onnx.preview.training at `version`, or the domain's Gradient op.
  auto model = [](int version, const char* op) {
    onnx::ModelProto mp;
    mp.set_ir_version(8);
    auto* os = mp.add_opset_import();
    os->set_domain(kTrainingDomain);
    os->set_version(version);
    auto* gp = mp.mutable_graph();
    gp->set_name("g");
    auto* node = gp->add_node();
    node->set_op_type(op);
    node->set_domain(kTrainingDomain);
    for (const char* in : {"R", "T", "X", "G", "V", "H"}) {
      node->add_input(in);
      auto* vi = gp->add_input();
      vi->set_name(in);
      auto* tt = vi->mutable_type()->mutable_tensor_type();
      tt->set_elem_type(std::string(in) == "T" ? onnx::TensorProto::INT64 : onnx::TensorProto::FLOAT);
      auto* shape = tt->mutable_shape();
      if (std::string(in) != "R" && std::string(in) != "T") shape->add_dim()->set_dim_value(2);
    }
    for (const char* out : {"X_new", "V_new", "H_new"}) {
      node->add_output(out);
      gp->add_output()->set_name(out);
    }
    std::string bytes;
    mp.SerializeToString(&bytes);
    return bytes;
  };
  auto g1 = import_onnx_bytes(model(1, "Adam"), ".");
  EXPECT_EQ(g1->value("H_new")->shape(), Shape::of({2}));
  e = error_of([&] { import_onnx_bytes(model(2, "Adam"), "."); });
  EXPECT_HAS(e, "opset 2 of domain ai.onnx.preview.training is not supported (only 1)");
  e = error_of([&] { import_onnx_bytes(model(1, "Gradient"), "."); });
  EXPECT_HAS(e, "ai.onnx.preview.training.Gradient");
}

}  // namespace
}  // namespace otter::testing
