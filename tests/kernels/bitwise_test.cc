// BitwiseAnd / Or / Xor / Not (graph/ops/integer.cc, kernels/cpu/elementwise.cc) on every integer
// type ONNX allows: each expected element is rebuilt bit by bit from the operands' two's-complement
// bits (a loop over bit positions, no &, |, ^ or ~ on whole values), over numpy broadcasting and the
// types' extremes; a float input is refused naming the node.
#include <gtest/gtest.h>

#include <limits>
#include <random>
#include <string>
#include <type_traits>

#include "graph/op_table.h"
#include "tests/kernels/kernel_test_util.h"

namespace otter {
namespace {

using testing::run_op;
using testing::values;

// The value whose bit k is f(bit k of a, bit k of b), built from single-bit arithmetic.
template <typename T, typename F>
T by_bits(T a, T b, F f) {
  using U = std::make_unsigned_t<T>;
  const U ua = static_cast<U>(a), ub = static_cast<U>(b);
  U out = 0, place = 1;
  for (int k = 0; k < static_cast<int>(8 * sizeof(T)); ++k) {
    const int x = static_cast<int>((ua / place) % 2), y = static_cast<int>((ub / place) % 2);
    if (f(x, y)) out = static_cast<U>(out + place);
    place = static_cast<U>(place * 2);
  }
  return static_cast<T>(out);
}

// Test values: 0, 1, -1 (all bits), the extremes, alternating bit patterns and random draws.
template <typename T>
std::vector<T> sample(size_t n, uint64_t seed) {
  using U = std::make_unsigned_t<T>;
  std::vector<T> v = {T(0),
                      T(1),
                      static_cast<T>(U(~U(0))),
                      std::numeric_limits<T>::min(),
                      std::numeric_limits<T>::max(),
                      static_cast<T>(static_cast<U>(0xAAAAAAAAAAAAAAAAull)),
                      static_cast<T>(static_cast<U>(0x5555555555555555ull))};
  std::mt19937_64 rng(seed);
  while (v.size() < n) v.push_back(static_cast<T>(static_cast<U>(rng())));
  v.resize(n);
  return v;
}

int bit_and(int x, int y) { return x == 1 && y == 1; }
int bit_or(int x, int y) { return x == 1 || y == 1; }
int bit_xor(int x, int y) { return x != y; }

template <typename T>
class Bitwise : public ::testing::Test {};
using IntegerTypes = ::testing::Types<int8_t, int16_t, int32_t, int64_t, uint8_t, uint16_t, uint32_t, uint64_t>;
TYPED_TEST_SUITE(Bitwise, IntegerTypes);

// A [4, 7] with B [7] (B repeated over rows) and A [4, 1] with B [1, 7] (an outer table): every
// pair of the sample values meets, the extremes included.
TYPED_TEST(Bitwise, BinaryOpsMatchTheBitDefinitionWithBroadcasting) {
  using T = TypeParam;
  const std::vector<T> a = sample<T>(28, 1), b = sample<T>(7, 2), col = sample<T>(4, 3);
  const struct {
    const char* op;
    int (*f)(int, int);
  } ops[] = {{"BitwiseAnd", bit_and}, {"BitwiseOr", bit_or}, {"BitwiseXor", bit_xor}};
  for (const auto& o : ops) {
    auto y = run_op({o.op, {Tensor::from_vector<T>({4, 7}, a), Tensor::from_vector<T>({7}, b)}, {}, 1, 18});
    ASSERT_EQ(y[0].dtype(), DataTypeOf<T>::value);
    ASSERT_EQ(y[0].dims(), (std::vector<int64_t>{4, 7}));
    const std::vector<T> got = values<T>(y[0]);
    for (int i = 0; i < 4; ++i)
      for (int j = 0; j < 7; ++j)
        EXPECT_EQ(got[i * 7 + j], by_bits(a[i * 7 + j], b[j], o.f)) << o.op << " at " << i << "," << j;
    auto t = run_op({o.op, {Tensor::from_vector<T>({4, 1}, col), Tensor::from_vector<T>({1, 7}, b)}, {}, 1, 18});
    ASSERT_EQ(t[0].dims(), (std::vector<int64_t>{4, 7}));
    const std::vector<T> table = values<T>(t[0]);
    for (int i = 0; i < 4; ++i)
      for (int j = 0; j < 7; ++j) EXPECT_EQ(table[i * 7 + j], by_bits(col[i], b[j], o.f)) << o.op << " outer";
  }
}

TYPED_TEST(Bitwise, NotFlipsEveryBit) {
  using T = TypeParam;
  const std::vector<T> a = sample<T>(12, 4);
  auto y = run_op({"BitwiseNot", {Tensor::from_vector<T>({3, 4}, a)}, {}, 1, 18});
  ASSERT_EQ(y[0].dtype(), DataTypeOf<T>::value);
  ASSERT_EQ(y[0].dims(), (std::vector<int64_t>{3, 4}));
  const std::vector<T> got = values<T>(y[0]);
  for (size_t i = 0; i < a.size(); ++i) EXPECT_EQ(got[i], by_bits(a[i], T(0), [](int x, int) { return x == 0; }));
}

// The bit definition on a few hand-checked values, so the helper itself is tested too.
TEST(BitwiseExtremes, Int64AndUint64ByHand) {
  const int64_t lo = std::numeric_limits<int64_t>::min(), hi = std::numeric_limits<int64_t>::max();
  auto y = run_op({"BitwiseXor",
                   {Tensor::from_vector<int64_t>({3}, {lo, hi, -1}), Tensor::from_vector<int64_t>({1}, {-1})},
                   {},
                   1,
                   18});
  EXPECT_EQ(values<int64_t>(y[0]), (std::vector<int64_t>{hi, lo, 0}));
  auto n = run_op({"BitwiseNot", {Tensor::from_vector<int64_t>({4}, {lo, hi, 0, -1})}, {}, 1, 18});
  EXPECT_EQ(values<int64_t>(n[0]), (std::vector<int64_t>{hi, lo, -1, 0}));
  const uint64_t top = uint64_t{1} << 63, all = std::numeric_limits<uint64_t>::max();
  auto a = run_op({"BitwiseAnd",
                   {Tensor::from_vector<uint64_t>({3}, {all, top, top + 5}),
                    Tensor::from_vector<uint64_t>({3}, {top, all - top, 12})},
                   {},
                   1,
                   18});
  EXPECT_EQ(values<uint64_t>(a[0]), (std::vector<uint64_t>{top, 0, 4}));
  auto o = run_op(
      {"BitwiseOr", {Tensor::from_vector<uint64_t>({2}, {top, 0}), Tensor::scalar<uint64_t>(all - top)}, {}, 1, 18});
  EXPECT_EQ(values<uint64_t>(o[0]), (std::vector<uint64_t>{all, all - top}));
  EXPECT_EQ(by_bits<int8_t>(int8_t{-128}, int8_t{127}, bit_or), int8_t{-1});
  EXPECT_EQ(by_bits<uint8_t>(uint8_t{0xF0}, uint8_t{0x3C}, bit_xor), uint8_t{0xCC});
}

// Inference: the output takes A's type and the broadcast shape; a float A is refused naming the
// node; the ops carry no gradient and no float math.
TEST(BitwiseOpTable, InferenceRejectsFloatsNamingTheNode) {
  for (const char* op : {"BitwiseAnd", "BitwiseOr", "BitwiseXor", "BitwiseNot"}) {
    const bool unary = std::string(op) == "BitwiseNot";
    Graph g;
    g.opset_imports[""] = 18;
    Value* a = g.add_input("a", DataType::kUInt16, Shape::of({2, 1, 3}));
    Value* b = g.add_input("b", DataType::kUInt16, Shape::of({4, 1}));
    Node* n = g.add_node(op, unary ? std::vector<Value*>{a} : std::vector<Value*>{a, b}, {"y"});
    infer_node(*n);
    EXPECT_EQ(n->output(0)->dtype(), DataType::kUInt16) << op;
    EXPECT_EQ(n->output(0)->shape(), unary ? Shape::of({2, 1, 3}) : Shape::of({2, 4, 3})) << op;
    const OpDef* d = OpTable::instance().find("", op, 18);
    ASSERT_NE(d, nullptr) << op;
    EXPECT_EQ(d->grad_kind, GradKind::kNoGradient) << op;
    EXPECT_EQ(d->precision, PrecisionClass::kNone) << op;
    EXPECT_EQ(OpTable::instance().find("", op, 17), nullptr) << op << " is new in opset 18";

    Value* f = g.add_input(str_cat("f_", op), DataType::kFloat32, Shape::of({3}));
    Node* bad = g.add_node(op, unary ? std::vector<Value*>{f} : std::vector<Value*>{f, f}, {str_cat("z_", op)});
    bad->set_name(str_cat("my_", op));
    std::string msg = "no error";
    try {
      infer_node(*bad);
    } catch (const Error& e) {
      msg = e.what();
    }
    EXPECT_NE(msg.find(str_cat(op, " 'my_", op, "'")), std::string::npos) << msg;
    EXPECT_NE(msg.find("integer"), std::string::npos) << msg;
    // The CPU kernel registry refuses a float input too.
    std::string why;
    EXPECT_EQ(KernelRegistry::instance().find(*bad, DeviceType::kCpu, &why), nullptr) << op;
    EXPECT_NE(why.find(str_cat("no cpu kernel for ", op, " in f32")), std::string::npos) << why;
  }
}

}  // namespace
}  // namespace otter
