// The executor: compiles a graph once into a plan (a kernel chosen per node at plan time, values
// freed after their last use) and runs it many times with fresh inputs.
#pragma once

#include <map>
#include <optional>
#include <memory>
#include <random>
#include <string>
#include <unordered_map>
#include <vector>

#include "graph/ir.h"
#include "kernels/device.h"
#include "kernels/kernel.h"

namespace otter {

// Time spent in kernels per op type, summed over every executor of the process while enabled
// (otter-bench --profile). Kernels on the CPU are timed as they run; CUDA kernels are asynchronous,
// so there each op is timed with a device synchronisation after it (slower, but attributed).
struct OpProfile {
  struct Entry {
    double ms = 0;
    int64_t calls = 0;
  };
  static OpProfile& global();
  bool enabled = false;
  std::map<std::string, Entry> by_op;  // "Conv", "ai.otter.ConvGrad", ...
  void reset() { by_op.clear(); }
};

struct ExecutorOptions {
  // The device kernels run on (null: the CPU). Must outlive the executor.
  Device* device = nullptr;
  uint64_t seed = 0;  // for stochastic kernels (Dropout)
  // Run only the nodes of one program of a training graph (all nodes when unset). Its outputs are
  // the graph outputs and state updates that program produces.
  std::optional<Program> program;
};

class Executor {
 public:
  // Plans `g` (which must outlive the executor). Fails listing every node without a kernel.
  explicit Executor(const Graph& g, ExecutorOptions opts = {});
  ~Executor();

  // Runs with `feeds` keyed by graph input name; returns graph outputs keyed by name, on the
  // executor's device (Device::to_host copies them back). Initializers and state are read from
  // the graph (copied to the device once, at plan time) unless overridden in `feeds`; fed tensors
  // that live elsewhere are copied to the device. Callers that keep state on the device (the
  // training session) feed it and take the updated tensors from the result, so nothing travels.
  std::map<std::string, Tensor> run(const std::map<std::string, Tensor>& feeds);
  // Also returns these intermediate values (by name) in addition to the graph outputs.
  std::map<std::string, Tensor> run(const std::map<std::string, Tensor>& feeds,
                                    const std::vector<std::string>& extra_outputs);
  // For the training session: `state` is consulted for the names `feeds` lacks (instead of merging
  // it into a copy of the feeds on every run) and receives the state updates, state[s] = the
  // updated tensor (the same storage for in-place updates); the result holds the graph outputs.
  std::map<std::string, Tensor> run_with_state(const std::map<std::string, Tensor>& feeds,
                                               std::map<std::string, Tensor>& state);
  std::mt19937_64& rng() { return rng_; }
  // Names of the graph outputs this executor returns.
  const std::vector<const Value*>& outputs() const { return outputs_; }
  const std::vector<std::pair<const Value*, const Value*>>& state_updates() const { return updates_; }
  // Tells accumulating kernels whether this run is the first micro-step of an optimizer step.
  void set_first_micro_step(bool first) { first_micro_step_ = first; }
  const Graph& graph() const { return graph_; }
  Device& device() const { return *device_; }
  // Bytes of the arena the memory plan gave this program (0 without a plan).
  int64_t arena_bytes() const { return arena_.defined() ? arena_.numel() : 0; }

 private:
  void bind_memory_plan();
  // Fills binding_of_, output_slots_, update_slots_ and update_binding_ (plan time).
  void index_bindings();
  struct Step;
  // Puts feeds, initializers and state into their slots (host copies too, off the CPU).
  void bind_feeds(const std::map<std::string, Tensor>& feeds, std::map<std::string, Tensor>* more,
                  std::vector<Tensor>& slots, std::vector<const Tensor*>& host_slots);
  std::map<std::string, Tensor> run_impl(const std::map<std::string, Tensor>& feeds,
                                         std::map<std::string, Tensor>* state,
                                         const std::vector<std::string>& extra_outputs);
  // Runs one node's kernel into its output slots and checks the outputs against the graph.
  void run_step(Step& s, std::vector<Tensor>& slots, const std::vector<const Tensor*>& host_slots);
  const Graph& graph_;
  ExecutorOptions opts_;
  Device* device_;
  std::vector<Step> steps_;
  std::vector<Tensor> resident_;  // per slot: graph-held data (initializers, state) on the device
  std::vector<bool> read_;        // per slot: read by a node of this program (inputs others need not be fed)
  // The memory plan of this program, when the graph has one: one arena for the whole run, and per
  // slot the view of it that the producing kernel writes into.
  Tensor arena_;
  std::vector<Tensor> planned_;
  std::map<const Value*, int> slot_of_;
  std::vector<std::pair<const Value*, int>> bindings_;  // the non-node values (inputs, initializers, state) and slots
  std::unordered_map<std::string, int> binding_of_;      // name -> index in bindings_
  // Per run, per binding: the fed tensor, and the state map's entry it came from (run_with_state
  // writes the update back there without a second lookup by name).
  std::vector<const Tensor*> fed_;
  std::vector<Tensor*> state_entry_;
  std::vector<int> output_slots_;    // per outputs_
  std::vector<int> update_slots_;    // per updates_: the updated value's slot
  std::vector<int> update_binding_;  // per updates_: the state value's index in bindings_, or -1
  int num_slots_ = 0;
  std::vector<const Value*> outputs_;
  std::vector<std::pair<const Value*, const Value*>> updates_;
  std::mt19937_64 rng_;
  bool first_micro_step_ = true;
};

// Checks every node has a kernel on `device`; returns the list of problems (empty when fine).
std::vector<std::string> check_kernels(const Graph& g, DeviceType device);

}  // namespace otter
