// TrainingSession and Evaluator (see training_session.h).
#include "runtime/training_session.h"

#include <cinttypes>
#include <cstdio>
#include <set>
#include <sstream>

#include "graph/error.h"
#include "graph/onnx_io.h"
#include "graph/op_table.h"
#include "kernels/collective.h"
#include "passes/all_reduce.h"
#include "passes/batchnorm_mode.h"
#include "passes/mixed_precision.h"
#include "runtime/constant_eval.h"
#include "runtime/initial_values.h"

namespace otter {

Device& pick_device(const std::string& name, std::unique_ptr<Device>& holder) {
  if (name == "cpu") return cpu_device();
  if (name == "cuda" || (name == "auto" && cuda_available())) {
    holder = make_cuda_device();
    return *holder;
  }
  if (name == "auto") return cpu_device();
  fail("device must be auto, cpu or cuda, got '", name, "'");
}

namespace {

// FNV-1a over the model's structure: inputs, outputs, ops and parameter names, types and shapes,
// not the values (training changes those).
std::string model_fingerprint(const Graph& g) {
  uint64_t h = 1469598103934665603ull;
  auto mix = [&](const std::string& s) {
    for (unsigned char c : s + '\n') h = (h ^ c) * 1099511628211ull;
  };
  for (const Value* v : g.inputs()) mix("in " + v->name() + " " + v->type_string());
  for (const Value* v : g.outputs()) mix("out " + v->name());
  for (const auto& n : g.nodes()) mix("node " + n->domain() + "." + n->op_type());
  for (const Value* v : g.values())
    if (v->kind() == ValueKind::kInitializer || v->kind() == ValueKind::kState) mix("init " + v->name() + " " + v->type_string());
  char buf[17];
  std::snprintf(buf, sizeof(buf), "%016" PRIx64, h);
  return buf;
}

// Rows [begin, begin + count) of t, sharing its storage.
Tensor rows(const Tensor& t, int64_t begin, int64_t count) {
  std::vector<int64_t> dims = t.dims();
  size_t row = dims[0] ? t.nbytes() / static_cast<size_t>(dims[0]) : 0;
  dims[0] = count;
  return Tensor(t.dtype(), dims, t.storage(), t.offset() + static_cast<size_t>(begin) * row);
}

// A value the training facts name; fails naming the pass that records it.
std::string fact_value(const Graph& g, const std::string& name, const char* what, const char* pass) {
  OTTER_CHECK(!name.empty() && g.find_value(name), "training graph: no ", what, " recorded (run the ", pass, " pass)");
  return name;
}

// Correct argmax predictions of `scores` (classes on the last axis) against `labels`.
int64_t count_correct(const Tensor& scores, const Tensor& labels) {
  const int64_t classes = scores.dim(-1);
  const int64_t rows_n = classes ? scores.numel() / classes : 0;
  OTTER_CHECK(labels.numel() == rows_n, "accuracy: ", labels.describe(), " labels for ", scores.describe(), " scores");
  int64_t correct = 0;
  for (int64_t r = 0; r < rows_n; ++r) {
    int64_t best = 0;
    double best_v = scores.get_as_double(r * classes);
    for (int64_t c = 1; c < classes; ++c) {
      double v = scores.get_as_double(r * classes + c);
      if (v > best_v) { best_v = v; best = c; }
    }
    correct += static_cast<int64_t>(labels.get_as_double(r)) == best;
  }
  return correct;
}

}  // namespace

// ---- Evaluator -----------------------------------------------------------------------------------

Evaluator::Evaluator(const std::string& model_path, const LossSpec& loss, Device& device, const LoraOptions* lora)
    : device_(device) {
  graph_ = import_onnx_file(model_path);
  OTTER_CHECK(!graph_->outputs().empty(), "model '", model_path, "' has no outputs");
  loss_ = loss.value_name();
  // Accuracy means argmax against class labels: cross-entropy only.
  if (!loss.from_model() && loss.add.type == LossType::kCe) {
    scores_ = loss.add.output.empty() ? graph_->outputs()[0]->name() : loss.add.output;
    labels_ = loss.add.labels;
  }
  TrainingPipelineOptions eval;
  eval.loss = loss;
  if (lora) eval.lora = *lora;  // the adapters' branches, fed the trained adapters by name
  run_pipeline(*graph_, eval_pipeline(eval));
  OTTER_CHECK(graph_->find_value(loss_), "model '", model_path, "' has no loss output '", loss_, "'");
  ExecutorOptions eo;
  eo.device = &device;
  executor_ = std::make_unique<Executor>(*graph_, eo);
}

Evaluator::~Evaluator() = default;

std::vector<const Value*> Evaluator::data_inputs() const {
  return std::vector<const Value*>(graph_->inputs().begin(), graph_->inputs().end());
}

EvalResult Evaluator::run(const Dataset& data, int64_t batch, const std::map<std::string, Tensor>& weights) {
  OTTER_CHECK(data.size() > 0, data.path(), ": no samples to evaluate");
  DataLoader loader(data, std::min(batch, data.size()), /*shuffle=*/false, 0, /*drop_last=*/false);
  std::vector<std::string> extra;
  if (!scores_.empty() && !graph_->value(scores_)->is_graph_output()) extra.push_back(scores_);
  EvalResult r;
  double loss_sum = 0;
  int64_t correct = 0;
  for (int64_t i = 0; i < loader.batches_per_epoch(); ++i) {
    std::map<std::string, Tensor> feeds = weights;
    int64_t n = 0;
    for (auto& [name, t] : loader.next()) {
      n = t.dim(0);
      feeds[name] = t;
    }
    auto out = executor_->run(feeds, extra);
    loss_sum += device_.to_host(out.at(loss_)).get_as_double(0) * static_cast<double>(n);
    if (!scores_.empty()) correct += count_correct(device_.to_host(out.at(scores_)), feeds.at(labels_));
    r.samples += n;
  }
  r.loss = loss_sum / static_cast<double>(r.samples);
  r.has_accuracy = !scores_.empty();
  if (r.has_accuracy) {
    const Tensor& labels = data.arrays().at(labels_);
    r.accuracy = static_cast<double>(correct) / static_cast<double>(labels.numel());
  }
  return r;
}

// ---- TrainingSession -----------------------------------------------------------------------------

std::unique_ptr<Graph> build_training_graph(const std::string& model_path, const TrainingOptions& opts,
                                            std::string* fingerprint) {
  std::unique_ptr<Graph> graph = import_onnx_file(model_path);
  Graph& g = *graph;
  if (fingerprint) *fingerprint = model_fingerprint(g);
  const LoraOptions* lora = opts.pipeline.lora.targets.empty() ? nullptr : &opts.pipeline.lora;
  apply_initial_values(g, opts.init, opts.init_source, lora);
  pin_batch(g, opts.batch_size);
  run_pipeline(g, training_pipeline(opts.pipeline));
  return graph;
}

std::unique_ptr<TrainingSession> TrainingSession::create(const std::string& model_path, const TrainingOptions& opts) {
  OTTER_CHECK(opts.batch_size > 0, "batch size must be positive, got ", opts.batch_size);
  OTTER_CHECK(opts.eval_batch_size > 0, "evaluation batch size must be positive, got ", opts.eval_batch_size);
  std::unique_ptr<TrainingSession> s(new TrainingSession());
  s->opts_ = opts;
  s->model_path_ = model_path;
  s->pipeline_ = training_pipeline(opts.pipeline);
  s->device_ = &pick_device(opts.device, s->device_holder_);
  s->graph_ = build_training_graph(model_path, opts, &s->fingerprint_);
  Graph& g = *s->graph_;

  // Persistent tensors move to the device once and stay there; the executors are fed them. On the
  // CPU they are the graph's own buffers (the session owns the graph; no second copy of the
  // weights, moments and accumulators), updated in place.
  for (auto& [p, acc] : g.gradients) s->accumulators_.insert(acc->name());
  for (const auto& [name, t] : opts.init)
    if (!is_lora_adapter_name(name)) s->fixed_[name] = s->device_->to_device(t);
  std::set<const void*> shared;
  for (const Value* v : g.values()) {
    bool persistent = v->kind() == ValueKind::kState ||
                      (v->kind() == ValueKind::kInitializer && g.state_updates.count(const_cast<Value*>(v)));
    if (!persistent) continue;
    Tensor t = v->data();
    // Two persistent values never share a buffer (each is updated in place on its own).
    if (t.defined() && !shared.insert(t.storage().get()).second) t = t.clone();
    s->state_[v->name()] = s->device_->to_device(t);
    s->state_order_.push_back(v->name());
  }
  // What the runtime needs of the graph, as the passes recorded it.
  const TrainingFacts facts = g.training_facts();
  s->accum_ = facts.accumulation_steps;
  s->ranks_ = otter::data_parallel_ranks(g);  // passes/all_reduce.h
  s->shards_ = zero_shards(g);
  for (const auto& [master, p] : zero_masters(g)) s->master_of_[p] = master;
  s->find_half_copies();
  s->loss_name_ = fact_value(g, facts.loss, "loss", "autodiff");
  s->lr_name_ = fact_value(g, facts.learning_rate, "learning rate", "optimizer");
  s->finite_name_ = fact_value(g, facts.finite, "finite flag", "optimizer");
  if (g.loss_scale) s->scale_name_ = g.loss_scale->name();

  ExecutorOptions eo;
  eo.device = s->device_;
  eo.seed = static_cast<uint64_t>(opts.seed);
  eo.program = Program::kMicroStep;
  s->micro_ = std::make_unique<Executor>(g, eo);
  eo.program = Program::kApply;
  s->apply_ = std::make_unique<Executor>(g, eo);
  s->join_data_parallel_job();
  // A sharded master starts as this rank's shard of its parameter's initial value.
  for (const auto& [p, master] : s->master_of_)
    s->state_[master] = s->device_->to_device(s->own_shard(master, g.value(p)->data()));
  return s;
}

TrainingSession::~TrainingSession() = default;

std::vector<const Value*> TrainingSession::batch_inputs() const {
  return std::vector<const Value*>(graph_->inputs().begin(), graph_->inputs().end());
}

void TrainingSession::run_program(Executor& ex, const std::map<std::string, Tensor>& inputs,
                                  std::map<std::string, Tensor>* results) {
  // The inputs, and the state for every other name; the updates land in state_ (in-place ones,
  // optimizer and accumulators, are the fed tensor itself; others are new).
  *results = ex.run_with_state(inputs, state_);
}

StepResult TrainingSession::train_step(const std::map<std::string, Tensor>& batch) {
  const int64_t k_steps = accum_, b = opts_.batch_size;
  OTTER_CHECK(losses_.empty(), "train_step: ", losses_.size(), " micro-step(s) taken without apply()");
  for (const Value* in : batch_inputs()) {
    auto it = batch.find(in->name());
    OTTER_CHECK(it != batch.end(), "train_step: the batch has no array '", in->name(), "' (", in->type_string(), ")");
    const Tensor& t = it->second;
    OTTER_CHECK(t.rank() >= 1 && t.dim(0) == k_steps * b, "train_step: array '", in->name(), "' is ", t.describe(),
                "; a step takes K*b = ", k_steps, "*", b, " = ", k_steps * b, " samples");
  }
  std::map<std::string, Tensor> micro;
  for (int64_t k = 0; k < k_steps; ++k) {
    for (const Value* in : batch_inputs()) micro[in->name()] = rows(batch.at(in->name()), k * b, b);
    micro_step(micro);
  }
  return apply();
}

void TrainingSession::micro_step(const std::map<std::string, Tensor>& micro_batch) {
  const int64_t k_steps = accum_, b = opts_.batch_size;
  OTTER_CHECK(pending_micro_steps() < k_steps, "micro_step: the ", k_steps,
              " micro-steps of this optimizer step are taken; call apply()");
  std::map<std::string, Tensor> feeds;
  for (const Value* in : batch_inputs()) {
    auto it = micro_batch.find(in->name());
    OTTER_CHECK(it != micro_batch.end(), "micro_step: the micro-batch has no array '", in->name(), "' (",
                in->type_string(), ")");
    const Tensor& t = it->second;
    OTTER_CHECK(t.rank() >= 1 && t.dim(0) == b, "micro_step: array '", in->name(), "' is ", t.describe(),
                "; a micro-step takes b = ", b, " samples");
    feeds[in->name()] = device_->to_device(t);
  }
  std::map<std::string, Tensor> out;
  micro_->set_first_micro_step(losses_.empty());
  run_program(*micro_, feeds, &out);
  losses_.push_back(out.at(loss_name_));
}

StepResult TrainingSession::apply() {
  const int64_t k_steps = accum_;
  OTTER_CHECK(pending_micro_steps() == k_steps, "apply: an optimizer step takes K = ", k_steps, " micro-steps, ",
              pending_micro_steps(), " were taken");
  std::map<std::string, Tensor> out;
  run_program(*apply_, {}, &out);  // reads state only

  // The one host synchronisation of the step: the K losses and the apply program's metrics.
  std::vector<Tensor> metrics = std::move(losses_);
  losses_.clear();
  metrics.push_back(out.at(lr_name_));
  metrics.push_back(out.at(finite_name_));
  if (!scale_name_.empty()) metrics.push_back(state_.at(scale_name_));
  metrics = device_->to_host_all(metrics);
  StepResult r;
  for (int64_t k = 0; k < k_steps; ++k) r.loss += metrics[k].get_as_double(0);
  r.loss /= static_cast<double>(k_steps);
  if (ranks_ > 1) r.loss = mean_over_ranks(r.loss);  // the global batch's mean, as one process reports it
  r.lr = metrics[k_steps].get_as_double(0);
  r.skipped = metrics[k_steps + 1].get_as_double(0) == 0;
  if (!scale_name_.empty()) r.loss_scale = metrics[k_steps + 2].get_as_double(0);
  r.step = ++step_;
  return r;
}

EvalResult TrainingSession::evaluate(const Dataset& data) {
  if (ranks_ > 1) return evaluate_shard(data);
  return evaluate_here(data, {});
}

EvalResult TrainingSession::evaluate_here(const Dataset& data, const std::map<std::string, Tensor>& whole) {
  if (!evaluator_) evaluator_ = std::make_unique<Evaluator>(model_path_, opts_.pipeline.loss, *device_, &opts_.pipeline.lora);
  std::map<std::string, Tensor> weights = state_;
  weights.insert(fixed_.begin(), fixed_.end());  // frozen weights given initial values
  for (const auto& [name, t] : whole) weights[name] = device_->to_device(t);
  return evaluator_->run(data, opts_.eval_batch_size, weights);
}

Tensor TrainingSession::tensor(const std::string& name) const {
  auto m = master_of_.find(name);
  if (m != master_of_.end()) return gather_shards(m->second);
  auto it = state_.find(name);
  OTTER_CHECK(it != state_.end(), "training session: no persistent tensor '", name, "'");
  return device_->to_host(it->second).clone();
}

std::vector<std::string> TrainingSession::state_names() const { return state_order_; }

bool TrainingSession::rounded_on_resume(const std::string& name) const {
  return half_copies_.count(name) && graph_->value(name)->dtype() == DataType::kBFloat16;
}

void TrainingSession::find_half_copies() {
  // The node that writes a persistent value: its update, or (zero=1) the update whose shard an
  // AllGather gathers into it.
  auto writer = [&](Value* v) -> const Node* {
    auto it = graph_->state_updates.find(v);
    const Node* n = it == graph_->state_updates.end() || !it->second ? nullptr : it->second->producer();
    if (n && n->domain() == kOtterDomain && n->op_type() == "AllGather") n = n->input(0)->producer();
    return n;
  };
  for (const auto& [p, acc] : graph_->gradients) {
    auto m = master_of_.find(p->name());
    const Node* update = writer(m != master_of_.end() ? graph_->value(m->second) : p);
    if (!update) continue;
    for (const auto& [s, u] : graph_->state_updates)
      if (s != p && (s->dtype() == DataType::kFloat16 || s->dtype() == DataType::kBFloat16) && writer(s) == update)
        half_copies_[s->name()] = p->name();
  }
}

std::vector<std::string> TrainingSession::parameter_names() const {
  std::vector<std::string> names;
  for (const auto& [p, acc] : graph_->gradients) names.push_back(p->name());
  return names;
}

void TrainingSession::set_parameters(const std::map<std::string, Tensor>& values) {
  std::set<std::string> trained;
  for (const std::string& n : parameter_names()) trained.insert(n);
  std::map<std::string, Tensor> updates;
  for (const auto& [name, t] : values) {
    Value* v = graph_->find_value(name);
    OTTER_CHECK(v && trained.count(name), "set_parameters: '", name, "' is not a trained parameter");
    OTTER_CHECK(t.on_host() && t.dtype() == v->dtype() && Shape::of(t.dims()) == v->shape(), "set_parameters: '", name,
                "' is ", t.describe(), ", the parameter is ", v->type_string());
    auto m = master_of_.find(name);
    if (m != master_of_.end()) updates[m->second] = own_shard(m->second, t);
    else updates[name] = t.clone();
    // Mixed precision keeps a rounded half copy of the weight as state, written by the same update.
    for (const auto& [half, p] : half_copies_)
      if (p == name) updates[half] = convert_float_tensor(t, graph_->value(half)->dtype());
  }
  for (auto& [name, t] : updates) state_[name] = device_->to_device(t);
}

// ---- checkpoints ---------------------------------------------------------------------------------

Checkpoint TrainingSession::checkpoint(const LoaderState& loader) const {
  Checkpoint c;
  CheckpointMeta& m = c.meta;
  m.model = model_path_;
  m.fingerprint = fingerprint_;
  m.pipeline = pipeline_;
  m.batch_size = opts_.batch_size;
  m.accum = accum_;
  m.ranks = ranks_;
  m.seed = opts_.seed;
  m.step = step_;
  m.loader = loader;
  std::ostringstream rng;
  rng << micro_->rng();
  m.rng = rng.str();
  for (const std::string& name : state_order_)
    if (!accumulators_.count(name) && !rounded_on_resume(name))
      c.tensors.emplace_back(name, shards_.count(name) ? gather_shards(name) : tensor(name));
  return c;
}

void TrainingSession::restore(const Checkpoint& c) {
  const CheckpointMeta& m = c.meta;
  OTTER_CHECK(m.fingerprint == fingerprint_, "it was written for another model ('", m.model,
              "', fingerprint ", m.fingerprint, "); this session trains '", model_path_, "' (fingerprint ",
              fingerprint_, ")");
  OTTER_CHECK(m.batch_size == opts_.batch_size && m.accum == accum_ && m.seed == opts_.seed,
              "it was written with batch size ", m.batch_size, ", K ", m.accum, " and seed ", m.seed,
              "; this session has ", opts_.batch_size, ", ", accum_, " and ", opts_.seed);
  OTTER_CHECK(m.ranks == ranks_, "it was written by a data-parallel job of ", m.ranks, " rank", m.ranks == 1 ? "" : "s",
              ", and this job has ", ranks_, ": resume it ",
              m.ranks == 1 ? std::string("in one process") : str_cat("under mpirun -np ", m.ranks));
  std::map<std::string, const Tensor*> given;
  for (const auto& [name, t] : c.tensors) given[name] = &t;
  const std::map<std::string, const Tensor*> all = given;
  std::vector<std::string> problems;
  for (const std::string& name : state_order_) {
    if (accumulators_.count(name) || rounded_on_resume(name)) continue;
    auto it = given.find(name);
    const Value* v = graph_->value(name);
    if (it == given.end()) {
      problems.push_back(str_cat("missing tensor '", name, "' (", v->type_string(), ")"));
      continue;
    }
    const Tensor& t = *it->second;
    // A sharded optimizer state is stored whole, in its parameter's shape.
    const Value* whole = shards_.count(name) ? graph_->value(shards_.at(name)) : v;
    if (t.dtype() != v->dtype() || !(Shape::of(t.dims()) == whole->shape()))
      problems.push_back(str_cat("tensor '", name, "' is ", t.describe(), ", the session has ", whole->type_string()));
    given.erase(it);
  }
  for (const auto& [name, t] : given) problems.push_back(str_cat("unexpected tensor '", name, "' (", t->describe(), ")"));
  if (!problems.empty()) {
    std::string msg = str_cat(problems.size(), " problem", problems.size() == 1 ? "" : "s",
                              " (another optimizer or pipeline?):");
    for (const auto& p : problems) msg += "\n  " + p;
    fail(msg);
  }
  std::mt19937_64 rng;
  std::istringstream in(m.rng);
  in >> rng;
  OTTER_CHECK(!in.fail(), "its generator state is not readable");
  for (const auto& [name, t] : c.tensors)
    state_[name] = device_->to_device(shards_.count(name) ? own_shard(name, t) : t.clone());
  // The bf16 half copies the checkpoint leaves out: each is its fp32 master rounded, as the update
  // that writes both keeps it (passes/hoist_weight_casts.h).
  for (const auto& [half, p] : half_copies_) {
    if (!rounded_on_resume(half)) continue;
    auto m = master_of_.find(p);
    const Tensor& master = *all.at(m != master_of_.end() ? m->second : p);
    state_[half] = device_->to_device(convert_float_tensor(master, DataType::kBFloat16));
  }
  micro_->rng() = rng;
  step_ = m.step;
}

void TrainingSession::save(const std::string& dir, const LoaderState& loader) const {
  Checkpoint c = checkpoint(loader);  // a collective with zero=1: every rank takes part
  if (ranks_ == 1 || world().rank() == 0) write_checkpoint(dir, c);
}

LoaderState TrainingSession::load(const std::string& dir) {
  Checkpoint c = read_checkpoint(dir);
  try {
    restore(c);
  } catch (const Error& e) {
    fail("checkpoint '", dir, "' does not fit this session: ", e.what());
  }
  return c.meta.loader;
}

void TrainingSession::export_inference(const std::string& path) const {
  auto g = import_onnx_file(model_path_);
  const std::map<std::string, Tensor> whole = whole_masters();  // a collective with sharded masters
  for (Value* v : g->values()) {
    if (v->kind() != ValueKind::kInitializer && v->kind() != ValueKind::kState) continue;
    if (whole.count(v->name())) {
      v->set_data(whole.at(v->name()));
      continue;
    }
    const std::map<std::string, Tensor>& from = state_.count(v->name()) ? state_ : fixed_;
    auto it = from.find(v->name());
    if (it != from.end()) v->set_data(device_->to_host(it->second));
  }
  std::map<std::string, Tensor> adapters;
  for (auto& [name, t] : this->adapters()) adapters[name] = t;
  if (!adapters.empty()) merge_lora(*g, adapters, lora_facts(*graph_).scale);
  if (ranks_ == 1 || world().rank() == 0) export_onnx_file(*g, path);
}

std::vector<std::pair<std::string, Tensor>> TrainingSession::adapters() const {
  std::vector<std::pair<std::string, Tensor>> out;
  for (const std::string& w : lora_facts(*graph_).weights)
    for (const char* suffix : {".lora_A", ".lora_B"}) {
      const std::string name = w + suffix;
      const Value* v = graph_->find_value(name);  // a frozen adapter (--freeze) is a constant
      if (state_.count(name) || master_of_.count(name)) out.emplace_back(name, tensor(name));
      else if (v && v->has_data() && v->dtype() == DataType::kFloat32) out.emplace_back(name, v->data().clone());
      else fail("training session: adapter '", name, "' is frozen and held only in half precision");
    }
  return out;
}

}  // namespace otter
