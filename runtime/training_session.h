// TrainingSession: the C++ API for training an ONNX model. It turns the model into a training graph
// (passes/pipelines.h), compiles the micro-step and apply programs once, keeps every persistent
// tensor on its device for the whole run, and runs optimizer steps as docs/architecture.md ("Optimizer
// steps") defines them.
//
//   TrainingOptions o;
//   o.batch_size = 32;                 // micro-batch b
//   o.pipeline.accum = 4;              // K: one step takes a global batch of K*b samples
//   o.pipeline.optimizer.type = OptimizerType::kAdamW;
//   auto s = TrainingSession::create("mlp.onnx", o);
//   Dataset train = Dataset::from_npz("train.npz", s->batch_inputs());
//   DataLoader loader(train, s->global_batch(), /*shuffle=*/true, o.seed);
//   for (int i = 0; i < 100; ++i) StepResult r = s->train_step(loader.next());
//   EvalResult e = s->evaluate(Dataset::from_npz("test.npz", s->batch_inputs()));
//   s->save("ckpt", loader.state());
//   s->export_inference("trained.onnx");
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "graph/ir.h"
#include "kernels/device.h"
#include "passes/pipelines.h"
#include "runtime/checkpoint.h"
#include "runtime/dataset.h"
#include "runtime/executor.h"

namespace otter {

struct TrainingOptions {
  TrainingPipelineOptions pipeline;  // loss, precision, loss scaling, K, optimizer, freeze
  std::string device = "cpu";       // auto | cpu | cuda
  int64_t seed = 0;                 // the Dropout generator (and, by convention, the loader's shuffle)
  int64_t batch_size = 32;          // the micro-batch b
  int64_t eval_batch_size = 256;    // samples per evaluation batch (the last one may be smaller)
  // Initial values of initializers by name (base weights, or LoRA adapters <W>.lora_A|B), set
  // before the pipeline runs (runtime/initial_values.h); `init_source` names them in errors.
  std::map<std::string, Tensor> init;
  std::string init_source = "initial values";
};

// What one optimizer step reports.
struct StepResult {
  double loss = 0;        // mean of the K micro-batch losses (unscaled)
  double lr = 0;          // learning rate this step used
  double loss_scale = 1;  // S after the step (1 when scaling is off)
  bool skipped = false;   // non-finite gradients: nothing was updated
  int64_t step = 0;       // optimizer steps taken by the session so far, this one included
};

struct EvalResult {
  double loss = 0;      // mean loss over all samples
  double accuracy = 0;  // fraction of correct argmax predictions (cross-entropy losses only)
  bool has_accuracy = false;
  int64_t samples = 0;
};

// --device auto|cpu|cuda: auto picks CUDA where a device is present. A CUDA device is created in
// `holder`, which must outlive its use.
Device& pick_device(const std::string& name, std::unique_ptr<Device>& holder);

// Loss and accuracy of a model in eval mode (BatchNorm on running statistics, no Dropout): the
// graph is built once from the original model (canonicalize, eval-mode, add-loss) and run with
// weights fed by name, so a training session evaluates its current weights without copying them.
class Evaluator {
 public:
  // `lora` (or null): evaluate with the adapters of a LoRA training session.
  Evaluator(const std::string& model_path, const LossSpec& loss, Device& device, const LoraOptions* lora = nullptr);
  ~Evaluator();
  // Every sample of `data`, `batch` at a time; `weights` override the model's initializers by name.
  EvalResult run(const Dataset& data, int64_t batch, const std::map<std::string, Tensor>& weights = {});
  // The graph inputs a data set must provide (model inputs and labels).
  std::vector<const Value*> data_inputs() const;

 private:
  std::unique_ptr<Graph> graph_;
  std::unique_ptr<Executor> executor_;
  Device& device_;
  std::string loss_, scores_;  // names of the loss and of the class scores ("" without accuracy)
  std::string labels_;
};

// The training graph a session runs: the model imported, the batch pinned to b, BatchNorm's mode and
// the parameter selection applied, the training pipeline run (memory plan included). `fingerprint`
// (or null) receives the model's fingerprint, as checkpoints record it. The budget planner
// (runtime/memory_budget.h) plans on exactly this graph.
std::unique_ptr<Graph> build_training_graph(const std::string& model_path, const TrainingOptions& opts,
                                            std::string* fingerprint = nullptr);

class TrainingSession {
 public:
  // Imports the model, pins the batch dimension of its inputs to b, runs the training pipeline and
  // compiles both programs. Fails with the pass's or the executor's message.
  static std::unique_ptr<TrainingSession> create(const std::string& model_path, const TrainingOptions& opts);
  ~TrainingSession();

  // One optimizer step on a global batch of K*b samples (arrays named after batch_inputs()),
  // taken as K micro-batches in order: the micro-step program K times (the first one writes the
  // accumulators, the others add), then the apply program once. The metrics are copied to the
  // host once, after the apply program.
  StepResult train_step(const std::map<std::string, Tensor>& batch);
  // The same step driven by the caller: micro_step() K times, each on a micro-batch of b samples
  // (the first of a step writes the accumulators, the others add), then apply() once, which runs
  // the optimizer and reports the mean of the K losses. train_step is exactly these calls.
  void micro_step(const std::map<std::string, Tensor>& micro_batch);
  StepResult apply();
  int64_t pending_micro_steps() const { return static_cast<int64_t>(losses_.size()); }
  // Loss and accuracy with the current weights and BatchNorm running statistics, in eval mode. In a
  // data-parallel job every rank evaluates its contiguous share of `data` and the sums are reduced,
  // so every rank returns the metrics of the whole set (runtime/data_parallel.cc); the masters
  // ZeRO-1 shards are gathered whole for it first.
  EvalResult evaluate(const Dataset& data);

  // Checkpoints (runtime/checkpoint.h). `loader` is the data position to resume from. In a
  // data-parallel job every rank calls save (with zero=1 the optimizer-state and master shards are
  // gathered whole: a collective) and rank 0 alone writes; a checkpoint resumes in a job of the
  // same N. bf16 half copies of the weights are not stored: resume rounds them from the masters.
  void save(const std::string& dir, const LoaderState& loader = {}) const;
  // Restores a checkpoint written by a session of the same model and options; returns the data
  // position it was saved at. Fails, changing nothing, on another model, missing or extra
  // tensors, shape or dtype mismatches, or another batch size, K or seed.
  LoaderState load(const std::string& dir);
  Checkpoint checkpoint(const LoaderState& loader = {}) const;
  void restore(const Checkpoint& c);

  // Writes the original model with the trained weights (and BatchNorm running statistics); with
  // LoRA, each adapted weight W becomes W + (alpha/r) B A in its own layout (passes/lora.h). In a
  // data-parallel job every rank calls it (with zero=1 the sharded fp32 masters are gathered whole:
  // a collective) and rank 0 alone writes.
  void export_inference(const std::string& path) const;
  // The LoRA adapters (<W>.lora_A, <W>.lora_B; fp32 masters) as they are now; empty without LoRA.
  // A collective where zero=1 shards their masters.
  std::vector<std::pair<std::string, Tensor>> adapters() const;

  const std::string& pipeline() const { return pipeline_; }
  const Graph& graph() const { return *graph_; }
  const TrainingOptions& options() const { return opts_; }
  Device& device() const { return *device_; }
  // Graph inputs a batch provides (model inputs and labels), with their (pinned) types.
  std::vector<const Value*> batch_inputs() const;
  int64_t global_batch() const { return opts_.batch_size * accum_; }
  int64_t accumulation_steps() const { return accum_; }  // K, as the training graph records it
  // N: ranks of the data-parallel job whose gradients the apply program averages (all-reduce pass;
  // 1 without). Each rank's train_step then takes its own K*b samples of a global batch of N*K*b.
  int64_t data_parallel_ranks() const { return ranks_; }
  int64_t steps_taken() const { return step_; }
  // Host copies of the persistent tensors (parameters, moments, counters, running statistics). With
  // all-reduce{zero=1} the optimizer moments and the sharded masters (<W>.master) are this rank's
  // shard (checkpoints hold them whole); a trained parameter whose master is sharded is gathered
  // whole from every rank: a collective, which every rank must call.
  Tensor tensor(const std::string& name) const;
  std::vector<std::string> state_names() const;
  // The trainable parameters (those the optimizer updates), in graph order.
  std::vector<std::string> parameter_names() const;
  // Replaces parameters by name (host tensors of the same dtype and shape; copied), and the
  // half-precision copies mixed precision keeps of them (a sharded master takes this rank's shard).
  // Fails, changing nothing, on an unknown name or a dtype or shape mismatch.
  void set_parameters(const std::map<std::string, Tensor>& values);

 private:
  TrainingSession() = default;
  void run_program(Executor& ex, const std::map<std::string, Tensor>& inputs,
                   std::map<std::string, Tensor>* results);
  // Data parallelism (runtime/data_parallel.cc): checks the job against the graph's N and that every
  // rank trains the same model with the same flags; the mean of a per-rank value; sharded evaluation.
  void join_data_parallel_job();
  double mean_over_ranks(double v) const;
  // zero=1 (passes/all_reduce.h): a sharded optimizer state whole (gathered from every rank, the
  // parameter's shape), and this rank's shard of a whole one.
  Tensor gather_shards(const std::string& name) const;
  Tensor own_shard(const std::string& name, const Tensor& whole) const;
  // Every rank's sharded masters gathered whole, by parameter name (a collective; empty without).
  std::map<std::string, Tensor> whole_masters() const;
  // This rank's evaluation of `data` with the session's weights, `whole` overriding them by name.
  EvalResult evaluate_here(const Dataset& data, const std::map<std::string, Tensor>& whole);
  EvalResult evaluate_shard(const Dataset& data);

  TrainingOptions opts_;
  std::string model_path_, fingerprint_, pipeline_;
  std::unique_ptr<Device> device_holder_;
  Device* device_ = nullptr;
  std::unique_ptr<Graph> graph_;
  std::unique_ptr<Executor> micro_, apply_;
  std::unique_ptr<Evaluator> evaluator_;
  // Every persistent tensor (parameters and state), on the device, by graph name.
  std::map<std::string, Tensor> state_;
  std::vector<std::string> state_order_;  // graph order, for checkpoints
  std::set<std::string> accumulators_;    // not checkpointed: each step rewrites them first
  std::map<std::string, Tensor> fixed_;   // initial values of weights that are not trained
  int64_t accum_ = 1;  // K (TrainingFacts)
  int64_t ranks_ = 1;  // N (passes/all_reduce.h data_parallel_ranks)
  std::map<std::string, std::string> shards_;  // zero=1: sharded optimizer state -> its parameter
  std::map<std::string, std::string> master_of_;  // zero=1: parameter -> its sharded master (<W>.master)
  // Mixed precision: each half copy hoist-weight-casts keeps -> its parameter. A bf16 copy (numpy,
  // hence npz, has no bf16) is left out of checkpoints and rounded from its master on resume.
  std::map<std::string, std::string> half_copies_;
  void find_half_copies();
  bool rounded_on_resume(const std::string& name) const;
  std::string loss_name_, lr_name_, finite_name_, scale_name_;
  std::vector<Tensor> losses_;  // of the micro-steps taken since the last apply()
  int64_t step_ = 0;
};

}  // namespace otter
