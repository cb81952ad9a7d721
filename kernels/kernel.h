// The kernel interface and registry: a kernel is registered for (domain, op, opset range, device,
// dtypes), checks whether it supports a node at plan time, and is instantiated once per node.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "graph/ir.h"
#include "graph/tensor.h"

namespace otter {

class Device;  // kernels/device.h

// Allocates tensors for kernel outputs and scratch; the executor passes its own (planned) one.
class Allocator {
 public:
  virtual ~Allocator() = default;
  virtual Tensor allocate(DataType t, const std::vector<int64_t>& dims) = 0;
};

class HostAllocator : public Allocator {
 public:
  Tensor allocate(DataType t, const std::vector<int64_t>& dims) override { return Tensor(t, dims); }
  static HostAllocator& instance();
};

// Runs a subgraph (an If branch, a Loop or Scan body) for the control-flow kernels
// (kernels/cpu/control_flow.cc). The runtime implements it with a nested Executor
// (runtime/executor.cc): kernels may not include the runtime (docs/architecture.md).
class SubgraphRunner {
 public:
  virtual ~SubgraphRunner() = default;
  // Feeds keyed by the subgraph's input and capture names; returns its outputs in order.
  virtual std::vector<Tensor> run(const std::map<std::string, Tensor>& feeds) = 0;
};
using SubgraphRunnerFactory = std::function<std::unique_ptr<SubgraphRunner>(const Graph&, Device*)>;

// Everything a kernel sees while it runs: its node (attributes), input tensors, output slots.
class KernelContext {
 public:
  KernelContext(const Node& node, std::vector<const Tensor*> inputs, std::vector<Tensor*> outputs,
                Allocator& alloc)
      : node_(node), inputs_(std::move(inputs)), outputs_(std::move(outputs)), alloc_(alloc) {}
  const Node& node() const { return node_; }
  int num_inputs() const { return static_cast<int>(inputs_.size()); }
  int num_outputs() const { return static_cast<int>(outputs_.size()); }
  bool has_input(int i) const { return i < num_inputs() && inputs_[i] && inputs_[i]->defined(); }
  bool has_output(int i) const { return i < num_outputs() && outputs_[i] != nullptr; }
  const Tensor& input(int i) const;
  // Allocates output i (or reuses a tensor the executor preset with the same dtype and dims).
  Tensor& allocate_output(int i, DataType t, const std::vector<int64_t>& dims);
  // Makes output i share input storage (Reshape, Identity-like ops) with other dims.
  void alias_output(int i, const Tensor& src, const std::vector<int64_t>& dims);
  Tensor scratch(DataType t, const std::vector<int64_t>& dims) { return alloc_.allocate(t, dims); }
  [[noreturn]] void error(const std::string& msg) const;
  // Bit i set: output i was preset by the executor's memory plan (a view into its arena), and
  // allocate_output returns it when the dtype and dims agree.
  uint64_t preset_outputs = 0;
  // The device the kernel runs on (its stream, handles, allocator); null means the CPU.
  Device* device = nullptr;
  // Seeded generator for stochastic kernels (Dropout), owned by the executor.
  std::mt19937_64* rng = nullptr;
  // True on the first micro-step of an optimizer step: accumulating kernels then write their
  // accumulator instead of adding to it (no zeroing kernel).
  bool first_micro_step = true;
  // Builds runners of subgraphs (set by the executor; null where nothing can run them).
  const SubgraphRunnerFactory* subgraph_runner = nullptr;
  // A host copy of input i where the executor has one (constants of the graph, feeds given on the
  // host), else null: device kernels read shape-like inputs (Reshape's shape) from it, no copy back.
  const Tensor* host_input(int i) const {
    return i >= 0 && i < static_cast<int>(host_inputs_.size()) ? host_inputs_[i] : nullptr;
  }
  void set_host_inputs(std::vector<const Tensor*> h) { host_inputs_ = std::move(h); }
  // Hands the input and output pointer vectors back, so that a caller running the same node again
  // reuses their storage instead of allocating two vectors per kernel call.
  void release_pointers(std::vector<const Tensor*>& inputs, std::vector<Tensor*>& outputs) {
    inputs = std::move(inputs_);
    outputs = std::move(outputs_);
  }

 private:
  const Node& node_;
  std::vector<const Tensor*> inputs_;
  std::vector<const Tensor*> host_inputs_;
  std::vector<Tensor*> outputs_;
  Allocator& alloc_;
};

// A kernel instance bound to one node: constructed at plan time (parse attributes once), run often.
class Kernel {
 public:
  virtual ~Kernel() = default;
  virtual void run(KernelContext& ctx) = 0;
};

using KernelFactory = std::function<std::unique_ptr<Kernel>(const Node&)>;
// Returns an empty string when the node is supported, else the reason it is not.
using SupportsFn = std::function<std::string(const Node&)>;

// A KernelDef's since_version that asks the registry for the op table's range: add() sets
// [since_version, until_version] to the opsets graph/op_table.h defines the op over, so the
// backends never repeat (and drift from) the table. Kernels that serve only part of the table's
// range (an older attribute form) give their own numbers.
constexpr int kOpTableOpsets = 0;

struct KernelDef {
  std::string domain;  // "" for ai.onnx
  std::string op_type;
  int since_version = kOpTableOpsets;
  int until_version = 1 << 30;
  DeviceType device = DeviceType::kCpu;
  std::vector<DataType> dtypes;  // types of the "T" inputs/outputs this kernel handles
  SupportsFn supports;           // optional extra check
  KernelFactory create;
};

class KernelRegistry {
 public:
  // The process-wide registry: CPU kernels, plus CUDA kernels when built with CUDA. Defined in
  // kernels/backends.cc (target otter_kernels_all), the one place that names every backend.
  static KernelRegistry& instance();
  // Adds a kernel; a since_version of kOpTableOpsets takes the opset range from the op table
  // (fails where the table has no such op).
  void add(KernelDef def);
  // The first kernel for the node's (domain, op, opset, device) whose dtype list covers the node's
  // type (the dtype of its first float input, else of its first input or output) and whose
  // supports() agrees. On failure `why` says what is missing.
  const KernelDef* find(const Node& n, DeviceType device, std::string* why = nullptr) const;
  const std::vector<KernelDef>& all() const { return defs_; }

 private:
  std::vector<KernelDef> defs_;
};

// The dtype a node's kernel is selected by.
DataType kernel_dtype(const Node& n);

// Registration of CPU kernel families (kernels/cpu/*.cc) and, when built, CUDA ones.
void register_cpu_kernels(KernelRegistry& r);
void register_cuda_kernels(KernelRegistry& r);  // defined in otter_kernels_cuda or as a no-op

// A factory of kernels built from their node and fixed extra arguments: K(node, args...).
template <typename K, typename... Args>
KernelFactory node_kernel(Args... args) {
  return [=](const Node& n) -> std::unique_ptr<Kernel> { return std::make_unique<K>(n, args...); };
}

// A convenience for kernels written as a plain function of the context.
template <typename F>
KernelFactory simple_kernel(F f) {
  struct K : Kernel {
    explicit K(F fn) : fn_(fn) {}
    void run(KernelContext& ctx) override { fn_(ctx); }
    F fn_;
  };
  return [f](const Node&) { return std::make_unique<K>(f); };
}

}  // namespace otter
