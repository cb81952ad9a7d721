// cuDNN convolution: Conv forward (1-3 spatial axes, groups, strides, dilations, symmetric pads,
// bias) and ConvGrad (backward data, backward filter, bias as a reduction). Descriptors and the
// algorithms are cached per input shape in each node's kernel; the workspace comes from the
// device's allocator. fp32 convolutions use FMA math (no TF32), so they
// match the CPU to fp32 rounding; fp16/bf16 use tensor cores with fp32 accumulation.
//
// This uses cuDNN's descriptor API (deprecated in cuDNN 9 in favour of the graph API, and still
// shipped and supported there); it is the smaller, well-known surface for plain convolutions.
#include <map>

#include "kernels/common/window.h"
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/cuda_kernels.h"

namespace otter::cuda {
namespace {

cudnnDataType_t cudnn_type(DataType t) {
  switch (t) {
    case DataType::kFloat32: return CUDNN_DATA_FLOAT;
    case DataType::kFloat16: return CUDNN_DATA_HALF;
    case DataType::kBFloat16: return CUDNN_DATA_BFLOAT16;
    default: fail(where(), "cuDNN convolution on ", dtype_name(t), " is not supported (f32, f16, bf16)");
  }
}

int to_int(int64_t v, const char* what) {
  if (v < 0 || v > std::numeric_limits<int>::max()) fail(where(), what, " ", v, " exceeds cuDNN's 32-bit sizes");
  return static_cast<int>(v);
}

// cuDNN wants at least 4-D tensors: 1-D convolutions get a leading spatial axis of size 1.
std::vector<int> padded_dims(const std::vector<int64_t>& d) {
  std::vector<int> out;
  for (size_t i = 0; i < d.size(); ++i) {
    if (d.size() == 3 && i == 2) out.push_back(1);
    out.push_back(to_int(d[i], "tensor dimension"));
  }
  return out;
}

// The tensor, filter and convolution descriptors of one (X, W, Y) shape.
class ConvDescriptors {
 public:
  ConvDescriptors(DataType t, const std::vector<int64_t>& x, const std::vector<int64_t>& w,
                  const std::vector<int64_t>& y, const window::Geometry& g, int64_t group) {
    const cudnnDataType_t dt = cudnn_type(t);
    OTTER_CUDNN_CHECK(cudnnCreateTensorDescriptor(&x_));
    OTTER_CUDNN_CHECK(cudnnCreateTensorDescriptor(&y_));
    OTTER_CUDNN_CHECK(cudnnCreateTensorDescriptor(&bias_));
    OTTER_CUDNN_CHECK(cudnnCreateFilterDescriptor(&w_));
    OTTER_CUDNN_CHECK(cudnnCreateConvolutionDescriptor(&conv_));
    set_tensor(x_, dt, padded_dims(x));
    set_tensor(y_, dt, padded_dims(y));
    std::vector<int> b(padded_dims(y).size(), 1);
    b[1] = to_int(y[1], "channels");
    set_tensor(bias_, dt, b);
    const std::vector<int> wd = padded_dims(w);
    OTTER_CUDNN_CHECK(cudnnSetFilterNdDescriptor(w_, dt, CUDNN_TENSOR_NCHW, static_cast<int>(wd.size()), wd.data()));
    std::vector<int> pad, stride, dil;
    if (g.nsp == 1) {  // the added leading spatial axis
      pad.push_back(0);
      stride.push_back(1);
      dil.push_back(1);
    }
    for (int j = 0; j < g.nsp; ++j) {
      pad.push_back(to_int(g.pb[j], "padding"));
      stride.push_back(to_int(g.s[j], "stride"));
      dil.push_back(to_int(g.d[j], "dilation"));
    }
    OTTER_CUDNN_CHECK(cudnnSetConvolutionNdDescriptor(conv_, static_cast<int>(pad.size()), pad.data(), stride.data(),
                                                      dil.data(), CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
    OTTER_CUDNN_CHECK(cudnnSetConvolutionGroupCount(conv_, to_int(group, "group")));
    OTTER_CUDNN_CHECK(cudnnSetConvolutionMathType(conv_, t == DataType::kFloat32 ? CUDNN_FMA_MATH : CUDNN_TENSOR_OP_MATH));
    // cuDNN's own output shape must be the one ONNX's arithmetic gave.
    std::vector<int> got(padded_dims(y).size());
    OTTER_CUDNN_CHECK(cudnnGetConvolutionNdForwardOutputDim(conv_, x_, w_, static_cast<int>(got.size()), got.data()));
    if (got != padded_dims(y))
      fail(where(), "cuDNN computes output shape ", dims_to_string(std::vector<int64_t>(got.begin(), got.end())),
           " for Y ", dims_to_string(y));
  }
  ~ConvDescriptors() {
    if (conv_) cudnnDestroyConvolutionDescriptor(conv_);
    if (w_) cudnnDestroyFilterDescriptor(w_);
    if (bias_) cudnnDestroyTensorDescriptor(bias_);
    if (y_) cudnnDestroyTensorDescriptor(y_);
    if (x_) cudnnDestroyTensorDescriptor(x_);
  }
  ConvDescriptors(const ConvDescriptors&) = delete;
  ConvDescriptors& operator=(const ConvDescriptors&) = delete;

  cudnnTensorDescriptor_t x_ = nullptr, y_ = nullptr, bias_ = nullptr;
  cudnnFilterDescriptor_t w_ = nullptr;
  cudnnConvolutionDescriptor_t conv_ = nullptr;

 private:
  static void set_tensor(cudnnTensorDescriptor_t d, cudnnDataType_t t, const std::vector<int>& dims) {
    std::vector<int> strides(dims.size(), 1);
    for (size_t i = dims.size() - 1; i-- > 0;) strides[i] = strides[i + 1] * dims[i + 1];
    OTTER_CUDNN_CHECK(cudnnSetTensorNdDescriptor(d, t, static_cast<int>(dims.size()), dims.data(), strides.data()));
  }
};

constexpr size_t kMaxWorkspace = size_t{1} << 30;

// The first algorithm of cuDNN's heuristic ranking that succeeds within the workspace limit,
// deterministic ones first (reproducible training).
template <typename Perf>
Perf pick_algorithm(const Perf* perf, int count, const char* what) {
  for (int pass = 0; pass < 2; ++pass)
    for (int i = 0; i < count; ++i)
      if (perf[i].status == CUDNN_STATUS_SUCCESS && perf[i].memory <= kMaxWorkspace &&
          (pass == 1 || perf[i].determinism == CUDNN_DETERMINISTIC))
        return perf[i];
  fail(where(), "cuDNN offers no ", what, " algorithm for this convolution");
}

// The key of a cached plan: X's and W's dims and the dtype (the node's attributes are fixed).
std::vector<int64_t> plan_key(const Tensor& x, const Tensor& w) {
  std::vector<int64_t> key = x.dims();
  key.insert(key.end(), w.dims().begin(), w.dims().end());
  key.push_back(static_cast<int64_t>(x.dtype()));
  return key;
}

struct ForwardPlan {
  std::unique_ptr<ConvDescriptors> desc;
  cudnnConvolutionFwdAlgo_t algo;
  size_t workspace;
};

// Conv: Y = conv(X, W) + B. cuDNN pads symmetrically: other padding is refused at plan time.
class ConvKernel : public Kernel {
 public:
  explicit ConvKernel(const Node& n) : w_(n, false), group_(n.attr_i("group", 1)) {
    if (group_ <= 0) fail(n.describe(), ": group must be positive");
  }

  void run(KernelContext& ctx) override {
    const Tensor& x = ctx.input(0);
    const Tensor& w = ctx.input(1);
    if (x.rank() < 3 || x.rank() > 5)
      ctx.error(str_cat("X must have 1 to 3 spatial axes (N, C, spatial...), got ", x.describe()));
    if (w.rank() != x.rank()) ctx.error(str_cat("W ", w.describe(), " must have the rank of X ", x.describe()));
    if (w.dtype() != x.dtype()) ctx.error(str_cat("W has type ", w.describe(), ", X ", x.describe()));
    const int64_t cin = x.dim(1), cout = w.dim(0), cg = w.dim(1);
    if (cin != cg * group_)
      ctx.error(str_cat("channel mismatch: X ", x.describe(), " has ", cin, " channels, W ", w.describe(), " expects ", cg,
                        " per group x ", group_, " groups"));
    if (cout % group_ != 0)
      ctx.error(str_cat("W ", w.describe(), ": ", cout, " output channels not divisible by group ", group_));
    const std::vector<int64_t> in(x.dims().begin() + 2, x.dims().end()), kernel(w.dims().begin() + 2, w.dims().end());
    if (!w_.kernel.empty() && w_.kernel != kernel)
      ctx.error(str_cat("kernel_shape ", dims_to_string(w_.kernel), " differs from W ", w.describe()));
    if (ctx.has_input(2)) {
      const Tensor& b = ctx.input(2);
      if (b.rank() != 1 || b.dim(0) != cout || b.dtype() != x.dtype())
        ctx.error(str_cat("bias ", b.describe(), " must be [", cout, "] of the type of X"));
    }
    const window::Geometry g = window::resolve_geometry(ctx, w_, in, kernel);
    for (int j = 0; j < g.nsp; ++j)
      if (g.pb[j] != g.pe[j])
        ctx.error(str_cat("padding ", g.pb[j], " before and ", g.pe[j], " after spatial axis ", j,
                          ": the CUDA Conv (cuDNN) pads symmetrically"));
    std::vector<int64_t> odims = {x.dim(0), cout};
    odims.insert(odims.end(), g.out.begin(), g.out.end());
    Tensor& y = ctx.allocate_output(0, x.dtype(), odims);
    if (y.numel() == 0) return;
    CudaDevice& dev = device_of(ctx);
    if (x.numel() == 0 || w.numel() == 0) {  // nothing to convolve: bias (or zeros) only
      OTTER_CUDA_CHECK(cudaMemsetAsync(y.raw(), 0, y.nbytes(), dev.cuda_stream()));
    } else {
      const ForwardPlan& p = plan(dev, x, w, odims, g);
      Tensor ws = ctx.scratch(DataType::kUInt8, {static_cast<int64_t>(p.workspace)});
      const float one = 1.f, zero = 0.f;
      OTTER_CUDNN_CHECK(cudnnConvolutionForward(dev.cudnn(), &one, p.desc->x_, x.raw(), p.desc->w_, w.raw(), p.desc->conv_,
                                                p.algo, ws.raw(), p.workspace, &zero, p.desc->y_, y.raw()));
      if (!ctx.has_input(2)) return;
      OTTER_CUDNN_CHECK(cudnnAddTensor(dev.cudnn(), &one, p.desc->bias_, ctx.input(2).raw(), &one, p.desc->y_, y.raw()));
      return;
    }
    if (ctx.has_input(2)) add_bias(ctx, y);
  }

 private:
  const ForwardPlan& plan(CudaDevice& dev, const Tensor& x, const Tensor& w, const std::vector<int64_t>& y,
                          const window::Geometry& g) {
    const std::vector<int64_t> key = plan_key(x, w);
    auto it = plans_.find(key);
    if (it != plans_.end()) return it->second;
    ForwardPlan p;
    p.desc = std::make_unique<ConvDescriptors>(x.dtype(), x.dims(), w.dims(), y, g, group_);
    cudnnConvolutionFwdAlgoPerf_t perf[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
    int count = 0;
    OTTER_CUDNN_CHECK(cudnnGetConvolutionForwardAlgorithm_v7(dev.cudnn(), p.desc->x_, p.desc->w_, p.desc->conv_,
                                                             p.desc->y_, CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &count, perf));
    const cudnnConvolutionFwdAlgoPerf_t best = pick_algorithm(perf, count, "forward");
    OTTER_CUDNN_CHECK(cudnnSetConvolutionMathType(p.desc->conv_, best.mathType));
    p.algo = best.algo;
    p.workspace = best.memory;
    return plans_.emplace(key, std::move(p)).first->second;
  }

  // y[n, c, ...] = bias[c] for an empty reduction (no input channels or an empty kernel).
  static void add_bias(KernelContext& ctx, Tensor& y) {
    const Tensor& b = ctx.input(2);
    std::vector<int64_t> bstrides(static_cast<size_t>(y.rank()), 0);
    bstrides[1] = 1;
    copy_strided(ctx, y.dtype(), y.raw(), contiguous_strides(y.dims()), b.raw(), bstrides, y.dims());
  }

  window::WindowAttrs w_;
  int64_t group_;
  std::map<std::vector<int64_t>, ForwardPlan> plans_;
};

// ---- ConvGrad ----------------------------------------------------------------------------------

struct BackwardPlan {
  std::unique_ptr<ConvDescriptors> desc;
  cudnnConvolutionBwdDataAlgo_t data_algo;
  cudnnConvolutionBwdFilterAlgo_t filter_algo;
  cudnnMathType_t data_math, filter_math;  // set on the shared descriptor before each pass
  size_t workspace;                        // enough for both
};

// ConvGrad(dY, X, W, dW_acc?) {Conv's attributes} -> dX?, dW?, dB?: cuDNN's backward data and
// backward filter passes; dB is dY summed over the batch and positions (a deterministic
// reduction). With dW_acc, dW is that accumulator: backward filter blends with beta 0 on the
// first micro-step and beta 1 after.
class ConvGradKernel : public Kernel {
 public:
  explicit ConvGradKernel(const Node& n) : w_(n, false), group_(n.attr_i("group", 1)) {
    if (group_ <= 0) fail(n.describe(), ": group must be positive");
  }

  void run(KernelContext& ctx) override {
    const Tensor& dy = ctx.input(0);
    const Tensor& x = ctx.input(1);
    const Tensor& w = ctx.input(2);
    if (x.rank() < 3 || x.rank() > 5 || w.rank() != x.rank() || x.dtype() != dy.dtype() || w.dtype() != dy.dtype())
      ctx.error(str_cat("X ", x.describe(), " and W ", w.describe(), " must be 3-D to 5-D tensors of dY's type ",
                        dy.describe()));
    const int64_t batch = x.dim(0), cin = x.dim(1), cout = w.dim(0), cg = w.dim(1);
    if (cin != cg * group_ || cout % group_ != 0)
      ctx.error(str_cat("channel mismatch: X ", x.describe(), ", W ", w.describe(), ", group ", group_));
    const std::vector<int64_t> in(x.dims().begin() + 2, x.dims().end()), kernel(w.dims().begin() + 2, w.dims().end());
    const window::Geometry g = window::resolve_geometry(ctx, w_, in, kernel);
    for (int j = 0; j < g.nsp; ++j)
      if (g.pb[j] != g.pe[j])
        ctx.error(str_cat("padding ", g.pb[j], " before and ", g.pe[j], " after spatial axis ", j,
                          ": the CUDA ConvGrad (cuDNN) pads symmetrically"));
    std::vector<int64_t> ydims = {batch, cout};
    ydims.insert(ydims.end(), g.out.begin(), g.out.end());
    if (dy.dims() != ydims)
      ctx.error(str_cat("dY ", dy.describe(), " does not match the Conv output shape ", dims_to_string(ydims)));
    CudaDevice& dev = device_of(ctx);
    Tensor* dx = ctx.has_output(0) ? &ctx.allocate_output(0, x.dtype(), x.dims()) : nullptr;
    Tensor* dw = nullptr;
    Tensor acc_view;
    bool dw_add = false;  // with dW_acc (grad-accumulation's fusion): beta 1 after the first micro-step
    if (ctx.has_output(1) && ctx.has_input(3)) {
      const Tensor& acc = ctx.input(3);
      if (acc.dtype() != w.dtype() || acc.dims() != w.dims())
        ctx.error(str_cat("the dW accumulator ", acc.describe(), " does not match W ", w.describe()));
      ctx.alias_output(1, acc, acc.dims());
      acc_view = acc;
      dw = &acc_view;
      dw_add = !ctx.first_micro_step;
    } else if (ctx.has_output(1)) {
      dw = &ctx.allocate_output(1, w.dtype(), w.dims());
    }
    if (ctx.has_output(2)) {
      std::vector<bool> reduced(static_cast<size_t>(dy.rank()), true);
      reduced[1] = false;
      reduce_axes(ctx, Reduction::kSum, dy, ctx.allocate_output(2, w.dtype(), {cout}), reduced);
    }
    if (!dx && !dw) return;
    if (dy.numel() == 0 || x.numel() == 0 || w.numel() == 0) {  // empty sums: zeros
      for (Tensor* t : {dx, dw_add ? nullptr : dw})
        if (t && t->nbytes()) OTTER_CUDA_CHECK(cudaMemsetAsync(t->raw(), 0, t->nbytes(), dev.cuda_stream()));
      return;
    }
    const BackwardPlan& p = plan(dev, x, w, ydims, g);
    Tensor ws = ctx.scratch(DataType::kUInt8, {static_cast<int64_t>(p.workspace)});
    const float one = 1.f, zero = 0.f;
    if (dx) {
      OTTER_CUDNN_CHECK(cudnnSetConvolutionMathType(p.desc->conv_, p.data_math));
      OTTER_CUDNN_CHECK(cudnnConvolutionBackwardData(dev.cudnn(), &one, p.desc->w_, w.raw(), p.desc->y_, dy.raw(),
                                                     p.desc->conv_, p.data_algo, ws.raw(), p.workspace, &zero,
                                                     p.desc->x_, dx->raw()));
    }
    if (dw) {
      OTTER_CUDNN_CHECK(cudnnSetConvolutionMathType(p.desc->conv_, p.filter_math));
      OTTER_CUDNN_CHECK(cudnnConvolutionBackwardFilter(dev.cudnn(), &one, p.desc->x_, x.raw(), p.desc->y_, dy.raw(),
                                                       p.desc->conv_, p.filter_algo, ws.raw(), p.workspace,
                                                       dw_add ? &one : &zero, p.desc->w_, dw->raw()));
    }
  }

 private:
  const BackwardPlan& plan(CudaDevice& dev, const Tensor& x, const Tensor& w, const std::vector<int64_t>& y,
                           const window::Geometry& g) {
    const std::vector<int64_t> key = plan_key(x, w);
    auto it = plans_.find(key);
    if (it != plans_.end()) return it->second;
    BackwardPlan p;
    p.desc = std::make_unique<ConvDescriptors>(x.dtype(), x.dims(), w.dims(), y, g, group_);
    const ConvDescriptors& d = *p.desc;
    cudnnConvolutionBwdDataAlgoPerf_t data[CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT];
    cudnnConvolutionBwdFilterAlgoPerf_t filter[CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT];
    int nd = 0, nf = 0;
    OTTER_CUDNN_CHECK(cudnnGetConvolutionBackwardDataAlgorithm_v7(dev.cudnn(), d.w_, d.y_, d.conv_, d.x_,
                                                                  CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, &nd, data));
    OTTER_CUDNN_CHECK(cudnnGetConvolutionBackwardFilterAlgorithm_v7(dev.cudnn(), d.x_, d.y_, d.conv_, d.w_,
                                                                    CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT, &nf, filter));
    const cudnnConvolutionBwdDataAlgoPerf_t bd = pick_algorithm(data, nd, "backward-data");
    const cudnnConvolutionBwdFilterAlgoPerf_t bf = pick_algorithm(filter, nf, "backward-filter");
    p.data_math = bd.mathType;
    p.filter_math = bf.mathType;
    p.data_algo = bd.algo;
    p.filter_algo = bf.algo;
    p.workspace = std::max(bd.memory, bf.memory);
    return plans_.emplace(key, std::move(p)).first->second;
  }

  window::WindowAttrs w_;
  int64_t group_;
  std::map<std::vector<int64_t>, BackwardPlan> plans_;
};

}  // namespace

KernelFactory conv_kernel(const std::string& op) {
  if (op == "Conv") return [](const Node& n) -> std::unique_ptr<Kernel> { return std::make_unique<ConvKernel>(n); };
  if (op == "ConvGrad")
    return [](const Node& n) -> std::unique_ptr<Kernel> { return std::make_unique<ConvGradKernel>(n); };
  fail("conv_kernel: no CUDA kernel for ", op);
}

// Plan-time check of the attributes cuDNN cannot serve: explicitly asymmetric pads, SAME padding
// (asymmetric for even kernel extents) and more than 3 spatial axes.
std::string conv_supports(const Node& n) {
  const std::string auto_pad = n.attr_s("auto_pad", "NOTSET");
  if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER")
    return "the CUDA Conv does not take auto_pad=" + auto_pad + " (cuDNN pads symmetrically)";
  const std::vector<int64_t> pads = n.attr_ints("pads");
  const size_t half = pads.size() / 2;
  for (size_t i = 0; i < half; ++i)
    if (pads[i] != pads[i + half])
      return str_cat("the CUDA Conv pads symmetrically (cuDNN), pads ", dims_to_string(pads), " are not");
  if (half > 3) return "the CUDA Conv takes at most 3 spatial axes";
  return "";
}

}  // namespace otter::cuda
