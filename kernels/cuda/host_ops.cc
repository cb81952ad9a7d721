// CUDA kernels that reuse the CPU kernel's host logic: views (Reshape, Flatten, Squeeze, Unsqueeze,
// Identity), whose output shares the input's device buffer with other dims, and ops whose small
// outputs follow from shapes or host-known scalars (Shape, Size, Range, Constant), computed on the
// host and uploaded. The shape logic thus exists once, in kernels/cpu/shape.cc.
#include <algorithm>

#include "graph/error.h"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/kernel_util.h"

namespace otter::cuda {
namespace {

std::unique_ptr<Kernel> cpu_kernel_for(const Node& n, const KernelRegistry& cpu) {
  std::string why;
  const KernelDef* def = cpu.find(n, DeviceType::kCpu, &why);
  if (!def) fail(n.describe(), ": ", why);
  return def->create(n);
}

// Runs the node's CPU kernel with inputs `host_inputs` read on the host and the others passed as
// the device tensors they are (the CPU kernel reads only their dims). With `upload`, the CPU
// kernel computes its outputs in host memory and they are copied to the device; without, it may
// only alias its device input (a view).
constexpr int kAllInputs = -1;  // in host_inputs: every input is read on the host

class HostLogicKernel : public Kernel {
 public:
  HostLogicKernel(const Node& n, const KernelRegistry& cpu, std::vector<int> host_inputs, bool upload)
      : cpu_(cpu_kernel_for(n, cpu)), host_inputs_(std::move(host_inputs)), upload_(upload) {}

  void run(KernelContext& ctx) override {
    const int ni = ctx.num_inputs(), no = ctx.num_outputs();
    std::vector<Tensor> host(ni);
    std::vector<const Tensor*> ins(ni, nullptr);
    for (int i = 0; i < ni; ++i) {
      if (!ctx.has_input(i)) continue;
      const bool on_host = std::find(host_inputs_.begin(), host_inputs_.end(), i) != host_inputs_.end() ||
                           std::find(host_inputs_.begin(), host_inputs_.end(), kAllInputs) != host_inputs_.end();
      if (on_host) host[i] = host_tensor(ctx, i);
      ins[i] = on_host ? &host[i] : &ctx.input(i);
    }
    std::vector<Tensor> results(no);
    std::vector<Tensor*> outs(no, nullptr);
    for (int i = 0; i < no; ++i)
      if (ctx.has_output(i)) outs[i] = &results[i];
    KernelContext inner(ctx.node(), ins, outs, HostAllocator::instance());
    cpu_->run(inner);
    CudaDevice& dev = device_of(ctx);
    for (int i = 0; i < no; ++i) {
      if (!outs[i] || !results[i].defined()) continue;
      const Tensor& r = results[i];
      if (upload_) {
        const Tensor d = dev.to_device(r);
        ctx.alias_output(i, d, d.dims());
      } else {
        if (r.numel() > 0 && r.on_host())
          ctx.error("internal: a view kernel produced a host tensor on the CUDA device");
        ctx.alias_output(i, r, r.dims());
      }
    }
  }

 private:
  std::unique_ptr<Kernel> cpu_;
  std::vector<int> host_inputs_;
  bool upload_;
};

KernelFactory host_logic(const KernelRegistry& cpu, std::vector<int> host_inputs, bool upload) {
  return [&cpu, host_inputs, upload](const Node& n) -> std::unique_ptr<Kernel> {
    return std::make_unique<HostLogicKernel>(n, cpu, host_inputs, upload);
  };
}

}  // namespace

KernelFactory host_kernel(const std::string& op, const KernelRegistry& cpu) {
  // Views: the shape-like input (index 1) is read on the host.
  if (op == "Reshape" || op == "Squeeze" || op == "Unsqueeze") return host_logic(cpu, {1}, false);
  if (op == "Flatten" || op == "Identity") return host_logic(cpu, {}, false);
  // Outputs computed on the host: Shape and Size read only the input's dims.
  if (op == "Shape" || op == "Size" || op == "Constant") return host_logic(cpu, {}, true);
  if (op == "Range") return host_logic(cpu, {0, 1, 2}, true);
  // Selecting and generating ops (graph/ops/select.cc): small or data-dependent outputs, computed
  // on host copies of the inputs.
  if (op == "TopK" || op == "NonZero" || op == "Compress" || op == "OneHot") return host_logic(cpu, {0, 1, 2}, true);
  if (op == "EyeLike") return host_logic(cpu, {}, true);
  // Quantization ops (graph/ops/quantization.cc): every input read on the host.
  if (op == "QuantizeLinear" || op == "DequantizeLinear" || op == "DynamicQuantizeLinear" || op == "MatMulInteger" ||
      op == "ConvInteger" || op == "QLinearMatMul" || op == "QLinearConv")
    return host_logic(cpu, {0, 1, 2, 3, 4, 5, 6, 7, 8}, true);
  // Numeric ops without a CUDA kernel yet (docs/ops.md, "ONNX ops with notes"): the CPU kernel on
  // host copies of every input, its outputs uploaded.
  if (op == "Einsum" || op == "Det" || op == "LRN" || op == "LRNGrad" || op == "Adagrad" || op == "Adam" ||
      op == "Momentum")
    return host_logic(cpu, {kAllInputs}, true);
  // Detection and sequence ops (graph/ops/detect.cc) and TfIdfVectorizer (graph/ops/tfidf.cc):
  // data-dependent or small, every input on the host.
  if (op == "NonMaxSuppression" || op == "Unique" || op == "ReverseSequence" || op == "MaxUnpool" || op == "RoiAlign" ||
      op == "TfIdfVectorizer")
    return host_logic(cpu, {0, 1, 2, 3, 4}, true);
  // GroupNormalization, the Bitwise ops and GridSample (with its gradient): no CUDA kernel yet,
  // every input on the host.
  if (op == "GroupNormalization" || op == "BitwiseAnd" || op == "BitwiseOr" || op == "BitwiseXor" ||
      op == "BitwiseNot" || op == "GridSample" || op == "GridSampleGrad")
    return host_logic(cpu, {kAllInputs}, true);
  fail("host_kernel: no CUDA kernel for ", op);
}

}  // namespace otter::cuda
