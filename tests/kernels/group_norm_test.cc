// GroupNormalization's CPU kernel (kernels/cpu/normalize.cc) against PyTorch's
// torch.nn.functional.group_norm, recorded by models/group_norm/make_group_norm_refs.py: opset 21
// (scale and bias per channel) and opset 18 (per group; PyTorch got each group's value repeated
// over its channels), float32 and float64, ranks 2 to 5, one group and one channel per group.
// Also half inputs against the float32 reference, and the shape and attribute errors.
#include <gtest/gtest.h>

#include <string>

#include "graph/op_table.h"
#include "kernels/common/half.h"
#include "runtime/npz.h"
#include "tests/kernels/kernel_test_util.h"

namespace otter {
namespace {

using testing::max_rel_diff;
using testing::OpCall;
using testing::run_error;
using testing::run_op;

const NpzArchive& refs() {
  static const NpzArchive a = read_npz(std::string(OTTER_SOURCE_DIR) + "/models/group_norm/group_norm_refs.npz");
  return a;
}

struct Ref {
  Tensor x, scale, bias, y;
  int64_t groups = 0;
  int opset = 0;
  float eps = 0;
};

Ref load(const std::string& name) {
  const NpzArchive& a = refs();
  Ref r{a.get(name + "/x"), a.get(name + "/scale"), a.get(name + "/bias"), a.get(name + "/y")};
  const Tensor& attrs = a.get(name + "/attrs");
  r.groups = attrs.data<int64_t>()[0];
  r.opset = static_cast<int>(attrs.data<int64_t>()[1]);
  r.eps = static_cast<float>(a.get(name + "/epsilon").data<double>()[0]);
  return r;
}

OpCall call(const Ref& r, Tensor x, Tensor scale, Tensor bias) {
  return {"GroupNormalization",
          {std::move(x), std::move(scale), std::move(bias)},
          {{"num_groups", Attribute(r.groups)}, {"epsilon", Attribute(r.eps)}},
          1,
          r.opset};
}

// A copy of t in dtype `to` (values rounded to nearest).
Tensor convert(const Tensor& t, DataType to) {
  Tensor out(to, t.dims());
  for (int64_t i = 0; i < t.numel(); ++i) {
    const float v = static_cast<float>(t.get_as_double(i));
    if (to == DataType::kFloat16)
      out.data<Half>()[i] = Half{float_to_half(v)};
    else
      out.data<BFloat16>()[i] = BFloat16{float_to_bf16(v)};
  }
  return out;
}

class GroupNormRef : public ::testing::TestWithParam<std::string> {};

TEST_P(GroupNormRef, MatchesPyTorch) {
  const Ref r = load(GetParam());
  ASSERT_EQ(r.scale.dims(), (std::vector<int64_t>{r.opset >= 21 ? r.x.dims()[1] : r.groups}));
  auto y = run_op(call(r, r.x, r.scale, r.bias));
  ASSERT_EQ(y[0].dtype(), r.x.dtype());
  const double err = max_rel_diff(y[0], r.y);
  std::printf("%s: max rel error vs PyTorch %.3g\n", GetParam().c_str(), err);
  EXPECT_LT(err, r.x.dtype() == DataType::kFloat64 ? 1e-12 : 2e-6);
}

INSTANTIATE_TEST_SUITE_P(Cases, GroupNormRef,
                         ::testing::Values("opset21_f32_4d", "opset21_f64_3d", "opset21_f32_rank2",
                                           "opset21_f32_groups_eq_channels", "opset21_f32_one_group", "opset18_f32_5d",
                                           "opset18_f64_4d"));

// Half inputs widen, the statistics are computed wide, and each output is rounded once: within a
// few half ulps of PyTorch's float32 result (on the rounded inputs the difference is the inputs'
// rounding, about 2^-11 relative for f16, 2^-8 for bf16, amplified by scale / std).
TEST(GroupNorm, HalfInputsNearTheFloatReference) {
  const Ref r = load("opset21_f32_4d");
  for (DataType t : {DataType::kFloat16, DataType::kBFloat16}) {
    auto y = run_op(call(r, convert(r.x, t), convert(r.scale, t), convert(r.bias, t)));
    ASSERT_EQ(y[0].dtype(), t);
    EXPECT_LT(max_rel_diff(y[0], r.y), t == DataType::kFloat16 ? 5e-3 : 4e-2) << dtype_name(t);
  }
}


std::string infer_error(int opset, std::vector<int64_t> x, int64_t n_affine, int64_t groups) {
  Graph g;
  g.opset_imports[""] = opset;
  Value* xv = g.add_input("x", DataType::kFloat32, Shape::of(x));
  Value* s = g.add_input("s", DataType::kFloat32, Shape::of({n_affine}));
  Value* b = g.add_input("b", DataType::kFloat32, Shape::of({n_affine}));
  Node* n = g.add_node("GroupNormalization", {xv, s, b}, {"y"});
  n->set_name("gn");
  if (groups) n->set_attr("num_groups", Attribute(groups));
  try {
    infer_node(*n);
  } catch (const Error& e) {
    return e.what();
  }
  EXPECT_EQ(n->output(0)->shape(), Shape::of(x));
  return "no error";
}

TEST(GroupNorm, InferenceChecksTheAffineLengthPerOpset) {
  EXPECT_EQ(infer_error(21, {2, 6, 4}, 6, 3), "no error");
  EXPECT_EQ(infer_error(18, {2, 6, 4}, 3, 3), "no error");
  std::string m = infer_error(21, {2, 6, 4}, 3, 3);  // opset 21 wants [C]
  EXPECT_NE(m.find("GroupNormalization 'gn'"), std::string::npos) << m;
  EXPECT_NE(m.find("channels"), std::string::npos) << m;
  m = infer_error(18, {2, 6, 4}, 6, 3);  // opset 18 wants [num_groups]
  EXPECT_NE(m.find("num_groups"), std::string::npos) << m;
  m = infer_error(21, {2, 6, 4}, 6, 4);
  EXPECT_NE(m.find("not divisible"), std::string::npos) << m;
  m = infer_error(21, {2, 6, 4}, 6, 0);
  EXPECT_NE(m.find("'num_groups' is required"), std::string::npos) << m;
  EXPECT_EQ(OpTable::instance().find("", "GroupNormalization", 17), nullptr);
  EXPECT_NE(OpTable::instance().find("", "GroupNormalization", 18),
            OpTable::instance().find("", "GroupNormalization", 21));
}

TEST(GroupNorm, KernelRefusesWrongAffineShapes) {
  const Ref r = load("opset18_f32_5d");
  Ref r21 = r;
  r21.opset = 21;  // per-group vectors where per-channel ones are due
  const std::string m = run_error(call(r21, r.x, r.scale, r.bias));
  EXPECT_NE(m.find("scale"), std::string::npos) << m;
  EXPECT_NE(m.find("[6]"), std::string::npos) << m;
}

}  // namespace
}  // namespace otter
