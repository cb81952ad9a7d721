// The one registration table of the CUDA kernels: op, dtypes and the family that builds the
// kernel; the opset ranges come from the op table (graph/op_table.h). Every kernel runs inside a
// wrapper that names its node in CUDA errors and checks it was given device tensors.
#include <vector>

#include "graph/error.h"
#include "graph/op_table.h"
#include "kernels/common/nn_params.h"
#include "kernels/common/math_attrs.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/cuda_device.h"
#include "kernels/cuda/cuda_kernels.h"

namespace otter {
namespace cuda {
KernelFactory attention_kernel(const std::string& op);  // attention.cu: Attention, AttentionGrad
}  // namespace cuda
#ifdef OTTER_HAVE_NCCL
void register_cuda_collective_kernels(KernelRegistry& r);  // nccl.cc
#endif
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

// One kernel: its opsets are the op table's (KernelRegistry::add with kOpTableOpsets).
struct Row {
  const char* domain;
  const char* op;
  std::vector<DataType> dtypes;  // empty: any
  Family family;
  SupportsFn supports = nullptr;
  int since = kOpTableOpsets;  // else [since, kMaxOnnxOpset]: only the softmaxes (nn_params.h)
};

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

using namespace cuda;
const char* const onnx = "";
const char* const otter = kOtterDomain;
// A null family: the host-logic kernel over the op's CPU kernel (host_ops.cc).
constexpr Family host_logic = nullptr;

const Row kRows[] = {
      // Element-wise (elementwise.cu).
      {onnx, "Add", kNumeric, elementwise_kernel},
      {onnx, "Sub", kNumeric, elementwise_kernel},
      {onnx, "Mul", kNumeric, elementwise_kernel},
      {onnx, "Div", kNumeric, elementwise_kernel},
      {onnx, "Pow", kNumeric, elementwise_kernel},
      {onnx, "Min", kNumeric, elementwise_kernel},
      {onnx, "Max", kNumeric, elementwise_kernel},
      {onnx, "Mod", kNumeric, elementwise_kernel},
      {onnx, "BitShift", {DataType::kUInt8, DataType::kUInt16, DataType::kUInt32, DataType::kUInt64},
       elementwise_kernel},
      {onnx, "CastLike", kAny, elementwise_kernel},
      {onnx, "Neg", kSigned, elementwise_kernel},
      {onnx, "Abs", kNumeric, elementwise_kernel},
      {onnx, "Relu", kSigned, elementwise_kernel},
      {onnx, "Sqrt", kFloat, elementwise_kernel},
      {onnx, "Reciprocal", kFloat, elementwise_kernel},
      {onnx, "Exp", kFloat, elementwise_kernel},
      {onnx, "Log", kFloat, elementwise_kernel},
      {onnx, "Erf", kFloat, elementwise_kernel},
      {onnx, "Tanh", kFloat, elementwise_kernel},
      {onnx, "Sigmoid", kFloat, elementwise_kernel},
      {onnx, "Softplus", kFloat, elementwise_kernel},
      {onnx, "Softsign", kFloat, elementwise_kernel},
      {onnx, "LeakyRelu", kFloat, elementwise_kernel},
      {onnx, "Gelu", kFloat, elementwise_kernel},
      {onnx, "Clip", kNumeric, elementwise_kernel},
      {onnx, "Equal", kAny, elementwise_kernel},
      {onnx, "Less", kNumeric, elementwise_kernel},
      {onnx, "Greater", kNumeric, elementwise_kernel},
      {onnx, "LessOrEqual", kNumeric, elementwise_kernel},
      {onnx, "GreaterOrEqual", kNumeric, elementwise_kernel},
      {onnx, "And", kBool, elementwise_kernel},
      {onnx, "Or", kBool, elementwise_kernel},
      {onnx, "Xor", kBool, elementwise_kernel},
      {onnx, "Sum", kNumeric, elementwise_kernel},
      {onnx, "Mean", kFloat, elementwise_kernel},
      {onnx, "Not", kBool, elementwise_kernel},
      {onnx, "Where", kAny, elementwise_kernel},
      {onnx, "Cast", kAny, elementwise_kernel},
      // Math families (math.cu): the op table bounds their opsets.
#define OTTER_ROW(Name, types) {onnx, #Name, types, math_kernel},
#define OTTER_FLOAT_ROW(Name) OTTER_ROW(Name, kFloat)
#define OTTER_NUMERIC_ROW(Name) OTTER_ROW(Name, kNumeric)
#define OTTER_DERIVATIVE_ROW(Name) {otter, #Name "Grad", kFloat, math_kernel},
      OTTER_MATH_FLOAT_OPS(OTTER_FLOAT_ROW) OTTER_MATH_CLASSIFY_OPS(OTTER_FLOAT_ROW)
      OTTER_MATH_NUMERIC_OPS(OTTER_NUMERIC_ROW) OTTER_NUMERIC_ROW(PRelu)
      OTTER_MATH_DERIVATIVE_OPS(OTTER_DERIVATIVE_ROW)
#undef OTTER_ROW
#undef OTTER_FLOAT_ROW
#undef OTTER_NUMERIC_ROW
#undef OTTER_DERIVATIVE_ROW
      // Views and host-computed shape data (host_ops.cc).
      {onnx, "Reshape", kAny, host_logic},
      {onnx, "Flatten", kAny, host_logic},
      {onnx, "Squeeze", kAny, host_logic},
      {onnx, "Unsqueeze", kAny, host_logic},
      {onnx, "Identity", kAny, host_logic},
      {onnx, "Shape", kAny, host_logic},
      {onnx, "Size", kAny, host_logic},
      {onnx, "Constant", kAny, host_logic},
      {onnx, "Range", kAny, host_logic},
      {onnx, "TopK", kAny, host_logic},
      {onnx, "NonZero", kAny, host_logic},
      {onnx, "Compress", kAny, host_logic},
      {onnx, "OneHot", kAny, host_logic},
      {onnx, "EyeLike", kAny, host_logic},
      // Quantization ops: no CUDA kernels yet; the CPU kernels (kernels/cpu/quantization.cc) run on
      // host copies of the inputs and the results are uploaded.
      {onnx, "QuantizeLinear", kAny, host_logic},
      {onnx, "DequantizeLinear", kAny, host_logic},
      {onnx, "DynamicQuantizeLinear", kAny, host_logic},
      {onnx, "MatMulInteger", kAny, host_logic},
      {onnx, "ConvInteger", kAny, host_logic},
      {onnx, "QLinearMatMul", kAny, host_logic},
      {onnx, "QLinearConv", kAny, host_logic},
      {onnx, "Einsum", kAny, host_logic},
      {onnx, "Det", kAny, host_logic},
      {onnx, "LRN", kAny, host_logic},
      {otter, "LRNGrad", kAny, host_logic},
      {kTrainingDomain, "Adagrad", kAny, host_logic},
      {kTrainingDomain, "Adam", kAny, host_logic},
      {kTrainingDomain, "Momentum", kAny, host_logic},
      {onnx, "NonMaxSuppression", kAny, host_logic},  // detection ops (kernels/cpu/detect.cc, unique.cc)
      {onnx, "Unique", kAny, host_logic},
      {onnx, "ReverseSequence", kAny, host_logic},
      {onnx, "MaxUnpool", kAny, host_logic},
      {onnx, "RoiAlign", kAny, host_logic},
      {onnx, "TfIdfVectorizer", kAny, host_logic},  // CPU kernel kernels/cpu/tfidf.cc
      {onnx, "GroupNormalization", kAny, host_logic},  // CPU kernel kernels/cpu/normalize.cc
      {onnx, "BitwiseAnd", kAny, host_logic},  // Bitwise*: CPU kernels kernels/cpu/elementwise.cc
      {onnx, "BitwiseOr", kAny, host_logic},
      {onnx, "BitwiseXor", kAny, host_logic},
      {onnx, "BitwiseNot", kAny, host_logic},
      {onnx, "GridSample", kAny, host_logic},  // CPU kernels kernels/cpu/grid_sample.cc
      {otter, "GridSampleGrad", kAny, host_logic},
      // Data movement (shape.cu).
      {onnx, "Transpose", kAny, shape_kernel},
      {onnx, "Concat", kAny, shape_kernel},
      {onnx, "Split", kAny, shape_kernel},
      {onnx, "Slice", kAny, shape_kernel},
      {onnx, "Gather", kAny, shape_kernel},
      {onnx, "Expand", kAny, shape_kernel},
      {onnx, "Tile", kAny, shape_kernel},
      {onnx, "Pad", kAny, shape_kernel},
      {onnx, "Trilu", kAny, shape_kernel},
      {onnx, "ConstantOfShape", kAny, shape_kernel},
      // Reductions (reduce.cu).
      {onnx, "ReduceSum", kFloatInt, reduce_kernel},
      {onnx, "ReduceMean", kFloat, reduce_kernel},
      {onnx, "ReduceMax", kFloatInt, reduce_kernel},
      {onnx, "ReduceMin", kFloatInt, reduce_kernel},
      {onnx, "ReduceSumSquare", kFloat, reduce_kernel},
      {onnx, "ReduceL2", kFloat, reduce_kernel},
      {onnx, "ReduceProd", kFloatInt, reduce_kernel},
      {onnx, "ReduceL1", kFloatInt, reduce_kernel},
      {onnx, "ReduceLogSum", kFloat, reduce_kernel},
      {onnx, "ReduceLogSumExp", kFloat, reduce_kernel},
      {onnx, "CumSum", kNumeric, scan_kernel},
      {onnx, "ArgMax", kNumeric, scan_kernel},
      {onnx, "ArgMin", kNumeric, scan_kernel},
      {onnx, "Hardmax", kFloat, scan_kernel},
      // Gathers and scatters (gather_scatter.cu).
      {onnx, "GatherElements", kAny, gather_scatter_kernel},
      {onnx, "ScatterElements", kAny, gather_scatter_kernel},
      {onnx, "GatherND", kAny, gather_scatter_kernel},
      {onnx, "ScatterND", kAny, gather_scatter_kernel},
      {onnx, "DepthToSpace", kAny, gather_scatter_kernel},
      {onnx, "SpaceToDepth", kAny, gather_scatter_kernel},
      // Group normalisations (normalize.cu).
      {onnx, "InstanceNormalization", kFloat, normalize_kernel},
      {onnx, "MeanVarianceNormalization", kFloat, normalize_kernel},
      {onnx, "LpNormalization", kFloat, normalize_kernel},
      {onnx, "Resize", kFloat, resize_kernel},  // integer Resize: CPU only (no CUDA differential case yet)
      {otter, "ResizeGrad", kFloat, resize_kernel},
      // GEMMs (matmul.cu, cuBLASLt) and convolution (conv.cu, cuDNN).
      {onnx, "MatMul", kFloat, matmul_kernel},
      {onnx, "Gemm", kFloat, matmul_kernel},
      {onnx, "Conv", kFloat, conv_kernel, conv_supports},
      {onnx, "ConvTranspose", kFloat, conv_kernel, conv_supports},
      // Pooling (pool.cu).
      {onnx, "MaxPool", kFloat, pool_kernel},
      {onnx, "AveragePool", kFloat, pool_kernel},
      {onnx, "GlobalAveragePool", kFloat, pool_kernel},
      {onnx, "GlobalMaxPool", kFloat, pool_kernel},
      // Normalisation and dropout (nn.cu); softmax and losses (softmax_loss.cu).
      {onnx, "BatchNormalization", kFloat, nn_kernel},
      {onnx, "LayerNormalization", kFloat, nn_kernel},
      {onnx, "Softmax", kFloat, softmax_loss_kernel, nullptr, params::kSoftmaxKernelSince},
      {onnx, "LogSoftmax", kFloat, softmax_loss_kernel, nullptr, params::kSoftmaxKernelSince},
      {onnx, "Dropout", kFloat, nn_kernel},
      {onnx, "SoftmaxCrossEntropyLoss", kFloat, softmax_loss_kernel},
      {onnx, "NegativeLogLikelihoodLoss", kFloat, softmax_loss_kernel},
      // Gradient ops (emitted by autodiff), next to their forward ops.
      {otter, "ReluGrad", kFloat, elementwise_kernel},
      {otter, "LeakyReluGrad", kFloat, elementwise_kernel},
      {otter, "SigmoidGrad", kFloat, elementwise_kernel},
      {otter, "TanhGrad", kFloat, elementwise_kernel},
      {otter, "GeluGrad", kFloat, elementwise_kernel},
      {otter, "BiasGelu", kFloat, bias_gelu_kernel},
      {otter, "BiasGeluGrad", kFloat, bias_gelu_kernel},
      {otter, "BiasAdd", kFloat, bias_gelu_kernel},
      {otter, "AddLayerNorm", kFloat, add_layer_norm_kernel},
      {otter, "ReduceSumF32", kFloat, reduce_kernel},
      {otter, "ErfGrad", kFloat, elementwise_kernel},
      {otter, "SoftplusGrad", kFloat, elementwise_kernel},
      {otter, "SoftsignGrad", kFloat, elementwise_kernel},
      {otter, "AbsGrad", kFloat, elementwise_kernel},
      {otter, "ClipGrad", kFloat, elementwise_kernel},
      {otter, "DropoutGrad", kFloat, elementwise_kernel},
      {otter, "SoftmaxGrad", kFloat, softmax_loss_kernel},
      {otter, "Attention", kFloat, attention_kernel},
      {otter, "AttentionGrad", kFloat, attention_kernel},
      {otter, "LogSoftmaxGrad", kFloat, softmax_loss_kernel},
      {otter, "SoftmaxCrossEntropyLossGrad", kFloat, softmax_loss_kernel},
      {otter, "NegativeLogLikelihoodLossGrad", kFloat, softmax_loss_kernel},
      {otter, "BatchNormalizationGrad", kFloat, nn_kernel},
      {otter, "LayerNormalizationGrad", kFloat, nn_kernel},
      {otter, "ConvGrad", kFloat, conv_kernel, conv_supports},
      {otter, "MaxPoolGrad", kFloat, pool_kernel},
      {otter, "AveragePoolGrad", kFloat, pool_kernel},
      {otter, "SliceGrad", kFloat, shape_grad_kernel},
      {otter, "GatherGrad", kFloat, shape_grad_kernel},
      {otter, "PadGrad", kFloat, shape_grad_kernel},
      // Training ops (train.cu; GemmAccumulate in matmul.cu).
      {otter, "SumToShape", kFloat, train_kernel},
      {otter, "AccumulateGrad", kFloat, train_kernel},
      {otter, "GemmAccumulate", kFloat, matmul_kernel},
      {otter, "AllFinite", kAny, train_kernel},
      {otter, "GlobalNormSq", kAny, train_kernel},
      {otter, "GradScale", kAny, train_kernel},
      {otter, "LearningRate", kAny, train_kernel},
      {otter, "SGDUpdate", kAny, train_kernel},
      {otter, "AdamUpdate", kAny, train_kernel},
      {otter, "StepCount", kAny, train_kernel},
      {otter, "LossScaleUpdate", kAny, train_kernel},
      {otter, "LossScaleInverse", kAny, train_kernel},
      {otter, "ScaleSeed", kAny, train_kernel},
};

}  // namespace

void register_cuda_kernels(KernelRegistry& r) {
  for (const Row& row : kRows) {
    KernelDef d;
    d.domain = row.domain;
    d.op_type = row.op;
    d.device = DeviceType::kCuda;
    d.since_version = row.since;
    if (row.since != kOpTableOpsets) d.until_version = kMaxOnnxOpset;
    d.dtypes = row.dtypes;
    d.supports = row.supports;
    // The registry holds the CPU kernels by now (kernels/backends.cc): the host-logic kernels
    // reuse them.
    KernelFactory inner = row.family ? row.family(row.op) : cuda::host_kernel(row.op, r);
    d.create = [inner = std::move(inner)](const Node& n) -> std::unique_ptr<Kernel> {
      NodeScope scope(&n);
      return std::make_unique<CudaKernel>(inner(n));
    };
    r.add(std::move(d));
  }
#ifdef OTTER_HAVE_NCCL
  register_cuda_collective_kernels(r);  // nccl.cc: AllReduce through the NCCL communicator
#endif
}

}  // namespace otter
