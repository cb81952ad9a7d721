// The one registration table of the CUDA kernels: op, opset range, dtypes and the family that
// builds the kernel. Every kernel runs inside a wrapper that names its node in CUDA errors and
// checks it was given device tensors.
#include <vector>

#include "graph/error.h"
#include "graph/op_table.h"
#include "kernels/common/math_attrs.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/cuda_device.h"
#include "kernels/cuda/cuda_kernels.h"

namespace otter {
namespace {

using cuda::NodeScope;

class CudaKernel : public Kernel {
 public:
  explicit CudaKernel(std::unique_ptr<Kernel> k) : k_(std::move(k)) {}
  void run(KernelContext& ctx) override {
    NodeScope scope(&ctx.node());
    cuda::device_of(ctx);
    for (int i = 0; i < ctx.num_inputs(); ++i) {
      if (ctx.has_input(i) && ctx.input(i).numel() > 0 && ctx.input(i).on_host())
        ctx.error(str_cat("input ", i, " (", ctx.input(i).describe(),
                          ") lives on the host; CUDA kernels read device tensors (copy it with Device::to_device)"));
    }
    k_->run(ctx);
  }

 private:
  std::unique_ptr<Kernel> k_;
};

using Family = KernelFactory (*)(const std::string&);

struct Row {
  const char* domain;
  const char* op;
  int since, until;
  std::vector<DataType> dtypes;  // empty: any
  Family family;
  SupportsFn supports = nullptr;
};

constexpr int kMax = 1 << 30;
const std::vector<DataType> kFloat = {DataType::kFloat32, DataType::kFloat16, DataType::kBFloat16};
const std::vector<DataType> kNumeric = {DataType::kFloat32, DataType::kFloat16, DataType::kBFloat16,
                                        DataType::kInt64,   DataType::kInt32,   DataType::kInt8,
                                        DataType::kUInt8};
const std::vector<DataType> kSigned = {DataType::kFloat32, DataType::kFloat16, DataType::kBFloat16,
                                       DataType::kInt64,   DataType::kInt32,   DataType::kInt8};
const std::vector<DataType> kFloatInt = {DataType::kFloat32, DataType::kFloat16, DataType::kBFloat16,
                                         DataType::kInt64, DataType::kInt32};
const std::vector<DataType> kBool = {DataType::kBool};
const std::vector<DataType> kAny = {};

std::vector<Row> table() {
  using namespace cuda;
  const char* onnx = "";
  const char* otter = kOtterDomain;
  return {
      // Element-wise (elementwise.cu).
      {onnx, "Add", 13, 21, kNumeric, elementwise_kernel},
      {onnx, "Sub", 13, 21, kNumeric, elementwise_kernel},
      {onnx, "Mul", 13, 21, kNumeric, elementwise_kernel},
      {onnx, "Div", 13, 21, kNumeric, elementwise_kernel},
      {onnx, "Pow", 13, 21, kNumeric, elementwise_kernel},
      {onnx, "Min", 13, 21, kNumeric, elementwise_kernel},
      {onnx, "Max", 13, 21, kNumeric, elementwise_kernel},
      {onnx, "Neg", 13, 21, kSigned, elementwise_kernel},
      {onnx, "Abs", 13, 21, kNumeric, elementwise_kernel},
      {onnx, "Relu", 13, 21, kSigned, elementwise_kernel},
      {onnx, "Sqrt", 13, 21, kFloat, elementwise_kernel},
      {onnx, "Reciprocal", 13, 21, kFloat, elementwise_kernel},
      {onnx, "Exp", 13, 21, kFloat, elementwise_kernel},
      {onnx, "Log", 13, 21, kFloat, elementwise_kernel},
      {onnx, "Erf", 13, 21, kFloat, elementwise_kernel},
      {onnx, "Tanh", 13, 21, kFloat, elementwise_kernel},
      {onnx, "Sigmoid", 13, 21, kFloat, elementwise_kernel},
      {onnx, "Softplus", 13, 21, kFloat, elementwise_kernel},
      {onnx, "LeakyRelu", 13, 21, kFloat, elementwise_kernel},
      {onnx, "Gelu", 20, 21, kFloat, elementwise_kernel},
      {onnx, "Clip", 13, 21, kNumeric, elementwise_kernel},
      {onnx, "Equal", 13, 21, kAny, elementwise_kernel},
      {onnx, "Less", 13, 21, kNumeric, elementwise_kernel},
      {onnx, "Greater", 13, 21, kNumeric, elementwise_kernel},
      {onnx, "LessOrEqual", 13, 21, kNumeric, elementwise_kernel},
      {onnx, "GreaterOrEqual", 13, 21, kNumeric, elementwise_kernel},
      {onnx, "And", 13, 21, kBool, elementwise_kernel},
      {onnx, "Or", 13, 21, kBool, elementwise_kernel},
      {onnx, "Xor", 13, 21, kBool, elementwise_kernel},
      {onnx, "Sum", 13, 21, kNumeric, elementwise_kernel},
      {onnx, "Mean", 13, 21, kFloat, elementwise_kernel},
      {onnx, "Not", 13, 21, kBool, elementwise_kernel},
      {onnx, "Where", 13, 21, kAny, elementwise_kernel},
      {onnx, "Cast", 13, 21, kAny, elementwise_kernel},
      // Math families (math.cu): the op table bounds their opsets.
#define OTTER_ROW(Name, types) {onnx, #Name, 1, kMax, types, math_kernel},
#define OTTER_FLOAT_ROW(Name) OTTER_ROW(Name, kFloat)
#define OTTER_NUMERIC_ROW(Name) OTTER_ROW(Name, kNumeric)
#define OTTER_DERIVATIVE_ROW(Name) {otter, #Name "Grad", 1, kMax, kFloat, math_kernel},
      OTTER_MATH_FLOAT_OPS(OTTER_FLOAT_ROW) OTTER_MATH_CLASSIFY_OPS(OTTER_FLOAT_ROW)
      OTTER_MATH_NUMERIC_OPS(OTTER_NUMERIC_ROW) OTTER_NUMERIC_ROW(PRelu)
      OTTER_MATH_DERIVATIVE_OPS(OTTER_DERIVATIVE_ROW)
#undef OTTER_ROW
#undef OTTER_FLOAT_ROW
#undef OTTER_NUMERIC_ROW
#undef OTTER_DERIVATIVE_ROW
      // Views and host-computed shape data (host_ops.cc).
      {onnx, "Reshape", 13, 21, kAny, host_kernel},
      {onnx, "Flatten", 13, 21, kAny, host_kernel},
      {onnx, "Squeeze", 13, 21, kAny, host_kernel},
      {onnx, "Unsqueeze", 13, 21, kAny, host_kernel},
      {onnx, "Identity", 13, 21, kAny, host_kernel},
      {onnx, "Shape", 13, 21, kAny, host_kernel},
      {onnx, "Size", 13, 21, kAny, host_kernel},
      {onnx, "Constant", 13, 21, kAny, host_kernel},
      {onnx, "Range", 13, 21, kAny, host_kernel},
      // Data movement (shape.cu).
      {onnx, "Transpose", 13, 21, kAny, shape_kernel},
      {onnx, "Concat", 13, 21, kAny, shape_kernel},
      {onnx, "Split", 13, 21, kAny, shape_kernel},
      {onnx, "Slice", 13, 21, kAny, shape_kernel},
      {onnx, "Gather", 13, 21, kAny, shape_kernel},
      {onnx, "Expand", 13, 21, kAny, shape_kernel},
      {onnx, "Tile", 13, 21, kAny, shape_kernel},
      {onnx, "Pad", 13, 21, kAny, shape_kernel},
      {onnx, "Trilu", 14, 21, kAny, shape_kernel},
      {onnx, "ConstantOfShape", 13, 21, kAny, shape_kernel},
      // Reductions (reduce.cu).
      {onnx, "ReduceSum", 13, 21, kFloatInt, reduce_kernel},
      {onnx, "ReduceMean", 13, 21, kFloat, reduce_kernel},
      {onnx, "ReduceMax", 13, 21, kFloatInt, reduce_kernel},
      {onnx, "ReduceMin", 13, 21, kFloatInt, reduce_kernel},
      {onnx, "ReduceSumSquare", 13, 21, kFloat, reduce_kernel},
      {onnx, "ReduceL2", 13, 21, kFloat, reduce_kernel},
      {onnx, "ReduceProd", 13, 21, kFloatInt, reduce_kernel},
      {onnx, "ReduceL1", 13, 21, kFloatInt, reduce_kernel},
      {onnx, "ReduceLogSum", 13, 21, kFloat, reduce_kernel},
      {onnx, "ReduceLogSumExp", 13, 21, kFloat, reduce_kernel},
      {onnx, "CumSum", 14, 21, kNumeric, scan_kernel},
      {onnx, "ArgMax", 13, 21, kNumeric, scan_kernel},
      {onnx, "ArgMin", 13, 21, kNumeric, scan_kernel},
      // GEMMs (matmul.cu, cuBLASLt) and convolution (conv.cu, cuDNN).
      {onnx, "MatMul", 9, kMax, kFloat, matmul_kernel},
      {onnx, "Gemm", 11, kMax, kFloat, matmul_kernel},
      {onnx, "Conv", 11, kMax, kFloat, conv_kernel, conv_supports},
      // Pooling (pool.cu).
      {onnx, "MaxPool", 12, kMax, kFloat, pool_kernel},
      {onnx, "AveragePool", 11, kMax, kFloat, pool_kernel},
      {onnx, "GlobalAveragePool", 1, kMax, kFloat, pool_kernel},
      {onnx, "GlobalMaxPool", 1, kMax, kFloat, pool_kernel},
      // Normalisation, softmax, dropout, losses (nn.cu).
      {onnx, "BatchNormalization", 9, kMax, kFloat, nn_kernel},
      {onnx, "LayerNormalization", 17, kMax, kFloat, nn_kernel},
      {onnx, "Softmax", 11, kMax, kFloat, nn_kernel},
      {onnx, "LogSoftmax", 11, kMax, kFloat, nn_kernel},
      {onnx, "Dropout", 12, kMax, kFloat, nn_kernel},
      {onnx, "SoftmaxCrossEntropyLoss", 12, kMax, kFloat, nn_kernel},
      {onnx, "NegativeLogLikelihoodLoss", 12, kMax, kFloat, nn_kernel},
      // Gradient ops (emitted by autodiff), next to their forward ops.
      {otter, "ReluGrad", 1, kMax, kFloat, elementwise_kernel},
      {otter, "LeakyReluGrad", 1, kMax, kFloat, elementwise_kernel},
      {otter, "SigmoidGrad", 1, kMax, kFloat, elementwise_kernel},
      {otter, "TanhGrad", 1, kMax, kFloat, elementwise_kernel},
      {otter, "GeluGrad", 1, kMax, kFloat, elementwise_kernel},
      {otter, "ErfGrad", 1, kMax, kFloat, elementwise_kernel},
      {otter, "SoftplusGrad", 1, kMax, kFloat, elementwise_kernel},
      {otter, "AbsGrad", 1, kMax, kFloat, elementwise_kernel},
      {otter, "ClipGrad", 1, kMax, kFloat, elementwise_kernel},
      {otter, "DropoutGrad", 1, kMax, kFloat, elementwise_kernel},
      {otter, "SoftmaxGrad", 1, kMax, kFloat, nn_kernel},
      {otter, "LogSoftmaxGrad", 1, kMax, kFloat, nn_kernel},
      {otter, "SoftmaxCrossEntropyLossGrad", 1, kMax, kFloat, nn_kernel},
      {otter, "NegativeLogLikelihoodLossGrad", 1, kMax, kFloat, nn_kernel},
      {otter, "BatchNormalizationGrad", 1, kMax, kFloat, nn_kernel},
      {otter, "LayerNormalizationGrad", 1, kMax, kFloat, nn_kernel},
      {otter, "ConvGrad", 1, kMax, kFloat, conv_kernel, conv_supports},
      {otter, "MaxPoolGrad", 1, kMax, kFloat, pool_kernel},
      {otter, "AveragePoolGrad", 1, kMax, kFloat, pool_kernel},
      {otter, "SliceGrad", 1, kMax, kFloat, shape_kernel},
      {otter, "GatherGrad", 1, kMax, kFloat, shape_kernel},
      {otter, "PadGrad", 1, kMax, kFloat, shape_kernel},
      // Training ops (train.cu; GemmAccumulate in matmul.cu).
      {otter, "SumToShape", 1, kMax, kFloat, train_kernel},
      {otter, "AccumulateGrad", 1, kMax, kFloat, train_kernel},
      {otter, "GemmAccumulate", 1, kMax, kFloat, matmul_kernel},
      {otter, "AllFinite", 1, kMax, kAny, train_kernel},
      {otter, "GlobalNormSq", 1, kMax, kAny, train_kernel},
      {otter, "GradScale", 1, kMax, kAny, train_kernel},
      {otter, "LearningRate", 1, kMax, kAny, train_kernel},
      {otter, "SGDUpdate", 1, kMax, kAny, train_kernel},
      {otter, "AdamUpdate", 1, kMax, kAny, train_kernel},
      {otter, "StepCount", 1, kMax, kAny, train_kernel},
      {otter, "LossScaleUpdate", 1, kMax, kAny, train_kernel},
      {otter, "LossScaleInverse", 1, kMax, kAny, train_kernel},
      {otter, "ScaleSeed", 1, kMax, kAny, train_kernel},
  };
}

}  // namespace

void register_cuda_kernels(KernelRegistry& r) {
  for (Row& row : table()) {
    KernelDef d;
    d.domain = row.domain;
    d.op_type = row.op;
    d.since_version = row.since;
    d.until_version = row.until;
    d.device = DeviceType::kCuda;
    d.dtypes = std::move(row.dtypes);
    d.supports = row.supports;
    d.create = [inner = row.family(row.op)](const Node& n) -> std::unique_ptr<Kernel> {
      NodeScope scope(&n);
      return std::make_unique<CudaKernel>(inner(n));
    };
    r.add(std::move(d));
  }
}

}  // namespace otter
