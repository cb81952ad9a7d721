// Private helpers shared by the op families' type and shape inference (graph/ops/*.cc): arity and
// dtype checks, constant/symbolic input reading, and arithmetic on symbolic dimensions.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "graph/error.h"
#include "graph/gradient.h"
#include "graph/op_table.h"

namespace otter::infer {

// ---- symbolic dimension arithmetic -------------------------------------------------------------
// A symbolic dim may stand for a product of symbols and a coefficient, written canonically as
// "16*N*T" (coefficient first when not 1, symbols sorted), so that Reshape can cancel factors:
// [N,16,32] -> [N,-1] gives [N,512]; [B,T,64] -> [-1,64] gives [B*T,64].
struct DimProduct {
  bool known = true;  // false for an unknown dim
  int64_t coef = 1;
  std::vector<std::string> syms;  // sorted
};
DimProduct factor(const Dim& d);
Dim make_dim(const DimProduct& p);
Dim dim_mul(const Dim& a, const Dim& b);
// a / b where the quotient is exact or both are static (integer division truncates); else Dim().
Dim dim_div(const Dim& a, const Dim& b);
Dim dim_add(const Dim& a, const Dim& b);
Dim dim_sub(const Dim& a, const Dim& b);
// Product of dims[begin, end).
Dim dims_product(const std::vector<Dim>& dims, size_t begin, size_t end);
inline Dim dims_product(const std::vector<Dim>& dims) { return dims_product(dims, 0, dims.size()); }
// Whether a dim is known (static or symbolic).
inline bool dim_known(const Dim& d) { return d.is_static() || d.is_symbolic(); }

// ---- arity and dtype checks --------------------------------------------------------------------
// Checks the number of inputs/outputs and that inputs [0, min_in) are present.
void check_arity(InferContext& ctx, int min_in, int max_in, int min_out = 1, int max_out = 1);
// "input 1 ('w')".
std::string input_desc(InferContext& ctx, int i);
inline bool dtype_known(DataType t) { return t != DataType::kUndefined; }

enum class Types : uint8_t {
  kAny,
  kFloat,          // f32 f64 f16 bf16
  kSignedNumeric,  // floats and signed integers
  kNumeric,        // floats and all integers
  kInteger,        // integers
  kIndex,          // i32 i64
  kInt64,          // i64 only
  kBool,
};
// Fails unless input i's dtype (when known) is in the set.
void check_type(InferContext& ctx, int i, Types allowed);
// Fail unless input i (when present and its rank known) is 1-D / holds one element; `what` names it.
void check_1d(InferContext& ctx, int i, const char* what);
void check_scalar(InferContext& ctx, int i, const char* what);
// Inference of a unary op whose output has its input's dtype and shape; the input's dtype in `allowed`.
InferFn unary(Types allowed);
// A static dim pair that disagrees is an error; symbols are trusted to agree.
void check_dims_match(InferContext& ctx, const Dim& a, const Dim& b, const std::string& what);
// Dim i of s; an unknown dim where the rank is unknown or i is out of range.
Dim dim_at(const Shape& s, int64_t i);
// Fails unless inputs i and j (when both known) have one dtype.
void check_same_type(InferContext& ctx, int i, int j);
// The common head of Conv and ConvTranspose: X, W and optional B of one float dtype; returns it.
DataType check_conv_inputs(InferContext& ctx);
// op(dY, X) -> dX of X's shape, both float, one type: the element-wise gradient ops and LRNGrad.
void unary_grad(InferContext& ctx);

// ---- constant and symbolic inputs --------------------------------------------------------------
// Constant data of input i: an initializer that is not a parameter (ctx.in_const), or the
// attribute of a Constant node producing it (Constant nodes are lifted only by canonicalize).
std::optional<Tensor> const_tensor(InferContext& ctx, int i);
// Integer contents of input i when fully known: constant data, or symbolic data whose entries are
// all static.
std::optional<std::vector<int64_t>> const_ints(InferContext& ctx, int i);
// Float contents of a constant input.
std::optional<std::vector<double>> const_doubles(InferContext& ctx, int i);
// Known contents of an integer or bool input of at most kMaxSymData elements (constant or
// propagated symbolic data). Negative constants read as unknown dims (Dim cannot hold them);
// use const_tensor/const_ints where the exact values matter.
std::optional<std::vector<Dim>> sym_data(InferContext& ctx, int i);
// One element of an integer input's known contents: a dim (static or symbolic; unknown when
// neither), plus the exact value where it is a constant or static (constants may be negative).
struct SymElem {
  Dim d;
  std::optional<int64_t> exact;
};
// Elements of a constant or symbolically known integer/bool input of rank <= 1.
std::optional<std::vector<SymElem>> sym_elems(InferContext& ctx, int i);
// Length of a 1-D input whose dim 0 is static, else nullopt.
std::optional<int64_t> static_length(InferContext& ctx, int i);
// Sets output i's symbolic data when it is small enough to track.
void set_sym(InferContext& ctx, int i, std::vector<Dim> d);
constexpr size_t kMaxSymData = 64;

// ---- registration ---------------------------------------------------------------------------------
// In the op families' register functions, since-versions are those of the ONNX schema in force at
// opset 13; the later versions noted there only widen types or add attributes that inference reads
// where present.
// Registers an op of the default (ONNX) domain over opsets [since, until]: the one registration
// helper of the op families (graph/ops/*.cc, which bring it in with `using infer::add;`).
void add(OpTable& t, const char* op, int since, int until, InferFn f, PrecisionClass p, bool inplace, GradSpec g,
         const char* summary);
// The same up to the newest supported opset (kMaxOnnxOpset).
void add(OpTable& t, const char* op, int since, InferFn f, PrecisionClass p, bool inplace, GradSpec g,
         const char* summary);


// ---- internal gradient ops ------------------------------------------------------------------------
// Registers an op of the ai.otter domain (a gradient op: not itself differentiable).
void add_otter_op(OpTable& t, const std::string& op, InferFn f, PrecisionClass p, const std::string& summary);
// Fails unless input i (when present) has a float dtype.
void check_float(InferContext& ctx, int i);
// Outputs k take the dtype and shape of inputs `like[k]` (a fused op's gradients), after checking
// [min_in, max_in] inputs, a float dY (input 0) and input 1 of dY's type.
InferFn grads_like(int min_in, int max_in, std::vector<int> like);
// One fused backward op for several inputs: `op`(inputs) in the ai.otter domain with an output per
// wanted gradient of the inputs `grad_of` (-1: none), the forward attributes `attrs` plus `extra`.
void grad_fused(GradContext& c, const std::string& op, const std::vector<Value*>& inputs,
                const std::vector<int>& grad_of, const std::vector<std::string>& attrs,
                std::map<std::string, Attribute> extra = {});
// Output 0 takes input i's dtype and shape (element-wise gradient ops).
void same_as_input(InferContext& ctx, int i, int out = 0);

// Output shapes of a numpy matrix product of inputs a and b, and of a convolution of X (input x) and
// W (input w) with its window attributes and an optional bias (input b; -1: none): shared by MatMul,
// Conv and the quantized ops (graph/ops/quantization.cc); defined in graph/ops/matmul_conv.cc.
Shape matmul_shape(InferContext& ctx, int a, int b);
Shape conv_shape(InferContext& ctx, int x, int w, int b);

// Normalises and checks a list of axes against `rank` (no duplicates).
std::vector<int64_t> normalize_axes(InferContext& ctx, const std::vector<int64_t>& axes, int64_t rank,
                                    const char* what = "axes");

}  // namespace otter::infer

namespace otter {
// Op families registered by another family's registration function: the data-movement ops
// (graph/ops/movement.cc) by register_shape_ops, MatMul, Gemm, convolution and pooling
// (graph/ops/matmul_conv.cc) by register_nn_ops.
void register_data_movement_ops(OpTable& t);
void register_matmul_conv_ops(OpTable& t);
void register_quantization_ops(OpTable& t);  // graph/ops/quantization.cc, by register_integer_ops
void register_bias_gelu_ops(OpTable& t);  // graph/ops/bias.cc, by register_elementwise_ops
}  // namespace otter
