// Executor: a plan of (kernel, input slots, output slots) per node, run many times.
#include "runtime/executor.h"

#include <chrono>

#include <algorithm>
#include <unordered_map>

#include "graph/error.h"
#include "graph/liveness.h"

namespace otter {

struct Executor::Step {
  const Node* node = nullptr;
  std::unique_ptr<Kernel> kernel;
  std::vector<int> in_slots;   // -1 for an omitted input
  std::vector<int> out_slots;  // -1 for an omitted output
  std::vector<int> release;    // slots whose last use is this step
  // The kernel context's pointer vectors, kept between runs so a call allocates none.
  std::vector<const Tensor*> ins;
  std::vector<Tensor*> outs;
  // What the graph says of each output, copied here at plan time: checking an output then reads
  // only the step (the Value objects are scattered in memory; reading them per run was a tenth
  // of a small transformer's step, in cache misses).
  struct OutSpec {
    static constexpr int kMaxRank = 8;
    DataType dtype = DataType::kFloat32;
    int rank = -1;                // -1: rank unknown
    int64_t dims[kMaxRank] = {};  // -1: not static
    bool full_check = false;      // rank above kMaxRank: check against the Value itself
  };
  std::vector<OutSpec> out_specs;
};

namespace {
bool in_program(const Node& n, const std::optional<Program>& p) { return !p || n.program() == *p; }
bool value_in_program(const Value* v, const std::optional<Program>& p) {
  return !v->producer() || in_program(*v->producer(), p);
}
}  // namespace

std::vector<std::string> check_kernels(const Graph& g, DeviceType device) {
  std::vector<std::string> problems;
  for (const auto& n : g.nodes()) {
    std::string why;
    if (!KernelRegistry::instance().find(*n, device, &why)) problems.push_back(str_cat(n->describe(), ": ", why));
  }
  return problems;
}

Executor::Executor(const Graph& g, ExecutorOptions opts)
    : graph_(g), opts_(opts), device_(opts.device ? opts.device : &cpu_device()), rng_(opts.seed) {
  const DeviceType dev = device_->type();
  auto problems = check_kernels(g, dev);
  if (!problems.empty()) {
    std::string msg = str_cat(problems.size(), " node", problems.size() == 1 ? "" : "s", " of graph '", g.name,
                              "' have no ", device_name(dev), " kernel:");
    for (const auto& p : problems) msg += "\n  " + p;
    fail(msg);
  }
  auto slot = [&](const Value* v) {
    auto it = slot_of_.find(v);
    if (it != slot_of_.end()) return it->second;
    slot_of_[v] = num_slots_;
    return num_slots_++;
  };
  for (const Value* v : g.values())
    if (v->kind() != ValueKind::kNode) bindings_.emplace_back(v, slot(v));
  std::unordered_map<int, int> last_use;
  for (const auto& np : g.nodes()) {
    if (!in_program(*np, opts.program)) continue;
    Step s;
    s.node = np.get();
    const KernelDef* def = KernelRegistry::instance().find(*np, dev);
    s.kernel = def->create(*np);
    for (const Value* in : np->inputs()) {
      s.in_slots.push_back(in ? slot(in) : -1);
      if (in) last_use[slot(in)] = static_cast<int>(steps_.size());
    }
    for (const Value* out : np->outputs()) {
      s.out_slots.push_back(out ? slot(out) : -1);
      if (out) last_use.emplace(slot(out), static_cast<int>(steps_.size()));
      Step::OutSpec spec;
      if (out) {
        spec.dtype = out->dtype();
        const Shape& sh = out->shape();
        if (sh.rank_known && sh.rank() > Step::OutSpec::kMaxRank) spec.full_check = true;
        else if (sh.rank_known) {
          spec.rank = static_cast<int>(sh.rank());
          for (int k = 0; k < spec.rank; ++k) spec.dims[k] = sh.dims[k].is_static() ? sh.dims[k].value : -1;
        }
      }
      s.out_specs.push_back(spec);
    }
    steps_.push_back(std::move(s));
  }
  // Values that must survive the run: graph outputs, state updates, and every non-node value
  // (they belong to the graph or to the caller).
  std::vector<bool> keep(num_slots_, false);
  for (const Value* v : g.outputs())
    if (value_in_program(v, opts.program)) outputs_.push_back(v);
  for (const auto& [s, u] : g.state_updates)
    if (value_in_program(u, opts.program) && (u->producer() || !opts.program)) updates_.emplace_back(s, u);
  for (const auto& n : g.nodes())
    if (!in_program(*n, opts.program))
      for (const Value* in : n->inputs())
        if (in && in->producer() && in_program(*in->producer(), opts.program))
          fail("node ", n->describe(), " of another program reads '", in->name(),
               "' directly; values cross programs only through state");
  for (const Value* v : outputs_) keep[slot(v)] = true;
  for (const auto& [s, u] : updates_) keep[slot(u)] = true;
  for (const Value* v : g.values())
    if (v->kind() != ValueKind::kNode) keep[slot(v)] = true;
  for (const auto& [sl, step] : last_use)
    if (!keep[sl]) steps_[step].release.push_back(sl);
  read_.assign(num_slots_, false);
  for (const Step& st : steps_)
    for (int sl : st.in_slots)
      if (sl >= 0) read_[sl] = true;
  for (const Value* v : outputs_) read_[slot(v)] = true;
  index_bindings();
  bind_memory_plan();
  // Graph-held tensors go to the device the first time a run needs them (callers that feed the
  // parameters and state themselves, like the training session, never make a second copy).
  resident_.resize(num_slots_);
}

Executor::~Executor() = default;

void Executor::index_bindings() {
  for (size_t i = 0; i < bindings_.size(); ++i) binding_of_.emplace(bindings_[i].first->name(), static_cast<int>(i));
  for (const Value* v : outputs_) output_slots_.push_back(slot_of_.at(v));
  for (const auto& [s, u] : updates_) {
    update_slots_.push_back(slot_of_.at(u));
    auto b = binding_of_.find(s->name());
    update_binding_.push_back(b != binding_of_.end() && bindings_[b->second].first == s ? b->second : -1);
  }
}

OpProfile& OpProfile::global() {
  static OpProfile p;
  return p;
}

void Executor::bind_memory_plan() {
  bool has_apply = false;
  for (const auto& n : graph_.nodes()) has_apply |= n->program() == Program::kApply;
  if (!opts_.program && has_apply) return;  // a whole training graph: plans are per program
  auto it = graph_.memory_plans.find(opts_.program.value_or(Program::kMicroStep));
  if (it == graph_.memory_plans.end() || it->second.buffers.empty()) return;
  const MemoryPlan& plan = it->second;
  auto problems = check_memory_plans(graph_);
  if (!problems.empty()) fail("graph '", graph_.name, "': stale memory plan (run memory-plan last): ", problems[0]);
  arena_ = device_->allocator().allocate(DataType::kUInt8, {plan.arena_bytes});
  planned_.resize(num_slots_);
  for (const auto& [name, b] : plan.buffers) {
    const Value* v = graph_.value(name);
    planned_[slot_of_.at(v)] = Tensor(v->dtype(), v->shape().static_dims(), arena_.storage(), static_cast<size_t>(b.offset));
  }
}

std::map<std::string, Tensor> Executor::run(const std::map<std::string, Tensor>& feeds) {
  return run_impl(feeds, nullptr, {});
}

namespace {

void check_feed(const Value* v, const Tensor& t, std::map<std::string, int64_t>& symbols) {
  OTTER_CHECK(t.dtype() == v->dtype(), "input '", v->name(), "' expects ", dtype_name(v->dtype()), ", got ",
              dtype_name(t.dtype()));
  const Shape& s = v->shape();
  if (!s.rank_known) return;
  OTTER_CHECK(t.rank() == s.rank(), "input '", v->name(), "' expects shape ", s.to_string(), ", got ",
              dims_to_string(t.dims()));
  for (int64_t i = 0; i < s.rank(); ++i) {
    const Dim& d = s.dims[i];
    if (d.is_static()) {
      OTTER_CHECK(t.dim(i) == d.value, "input '", v->name(), "' expects shape ", s.to_string(), ", got ",
                  dims_to_string(t.dims()));
    } else if (d.is_symbolic()) {
      auto [it, fresh] = symbols.emplace(d.symbol, t.dim(i));
      OTTER_CHECK(fresh || it->second == t.dim(i), "input '", v->name(), "': dimension ", d.symbol, " is ",
                  t.dim(i), " here but ", it->second, " in another input");
    }
  }
}

}  // namespace

namespace {

// Fails when a kernel's output disagrees with the graph: missing, another dtype, other static dims.
void check_output(const Node& n, const Value* v, const Tensor& t) {
  OTTER_CHECK(t.defined(), n.describe(), ": kernel did not produce output '", v->name(), "'");
  OTTER_CHECK(t.dtype() == v->dtype(), n.describe(), ": output '", v->name(), "' is ", dtype_name(t.dtype()),
              " but the graph says ", dtype_name(v->dtype()));
  const Shape& sh = v->shape();
  bool ok = !sh.rank_known || t.rank() == sh.rank();
  for (int64_t k = 0; ok && sh.rank_known && k < sh.rank(); ++k)
    ok = !sh.dims[k].is_static() || sh.dims[k].value == t.dim(k);
  OTTER_CHECK(ok, n.describe(), ": output '", v->name(), "' has shape ", dims_to_string(t.dims()),
              " but the graph says ", sh.to_string());
}

// Runs one kernel; with the profile on, times it (synchronising the device) per op type.
void run_kernel(Kernel& kernel, KernelContext& ctx, const Node& n, Device& device, bool on_device) {
  OpProfile& prof = OpProfile::global();
  if (!prof.enabled) {
    kernel.run(ctx);
    return;
  }
  auto t0 = std::chrono::steady_clock::now();
  kernel.run(ctx);
  if (on_device) device.synchronize();
  auto t1 = std::chrono::steady_clock::now();
  const std::string& dom = n.domain();
  OpProfile::Entry& e = prof.by_op[dom.empty() ? n.op_type() : dom + "." + n.op_type()];
  e.ms += std::chrono::duration<double, std::milli>(t1 - t0).count();
  ++e.calls;
}

}  // namespace

void Executor::bind_feeds(const std::map<std::string, Tensor>& feeds, std::map<std::string, Tensor>* more,
                          std::vector<Tensor>& slots, std::vector<const Tensor*>& host_slots) {
  const bool on_device = device_->type() != DeviceType::kCpu;
  // The fed tensor of each binding: one hash lookup per feed and state entry, instead of two
  // ordered-map lookups per binding (constants included) on every run. Feeds win over state.
  fed_.assign(bindings_.size(), nullptr);
  state_entry_.assign(bindings_.size(), nullptr);
  for (const auto& [name, t] : feeds) {
    auto b = binding_of_.find(name);
    if (b != binding_of_.end()) fed_[b->second] = &t;
  }
  if (more)
    for (auto& [name, t] : *more) {
      auto b = binding_of_.find(name);
      if (b == binding_of_.end() || fed_[b->second]) continue;
      fed_[b->second] = &t;
      state_entry_[b->second] = &t;
    }
  std::map<std::string, int64_t> symbols;
  for (size_t i = 0; i < bindings_.size(); ++i) {
    const auto& [v, sl] = bindings_[i];
    if (const Tensor* t = fed_[i]) {
      check_feed(v, *t, symbols);
      slots[sl] = device_->to_device(*t);
      if (on_device && t->on_host()) host_slots[sl] = t;
    } else if (v->kind() == ValueKind::kInput) {
      if (read_[sl]) fail("missing input '", v->name(), "' (", v->type_string(), ")");
    } else if (read_[sl] && v->has_data()) {
      if (!resident_[sl].defined()) resident_[sl] = device_->to_device(v->data());
      slots[sl] = resident_[sl];
      if (on_device && v->kind() == ValueKind::kInitializer && !v->trainable()) host_slots[sl] = &v->data();
    }
  }
}

namespace {

// The executor's SubgraphRunner (kernels/kernel.h): a nested Executor over the subgraph on the
// same device, planned once per control-flow kernel and run per iteration.
class NestedRunner : public SubgraphRunner {
 public:
  NestedRunner(const Graph& g, Device* device) : graph_(g), exec_(g, ExecutorOptions{.device = device}) {}
  std::vector<Tensor> run(const std::map<std::string, Tensor>& feeds) override {
    std::map<std::string, Tensor> out = exec_.run(feeds);
    std::vector<Tensor> result;
    for (const Value* v : graph_.outputs()) result.push_back(out.at(v->name()));
    return result;
  }

 private:
  const Graph& graph_;
  Executor exec_;
};

const SubgraphRunnerFactory& nested_runner_factory() {
  static const SubgraphRunnerFactory f = [](const Graph& g, Device* device) -> std::unique_ptr<SubgraphRunner> {
    return std::make_unique<NestedRunner>(g, device);
  };
  return f;
}

}  // namespace

void Executor::run_step(Step& s, std::vector<Tensor>& slots, const std::vector<const Tensor*>& host_slots) {
  const bool on_device = device_->type() != DeviceType::kCpu;
  std::vector<const Tensor*> ins = std::move(s.ins), host_ins;
  std::vector<Tensor*> outs = std::move(s.outs);
  ins.clear();
  outs.clear();
  for (int sl : s.in_slots) ins.push_back(sl >= 0 ? &slots[sl] : nullptr);
  uint64_t preset = 0;
  for (size_t i = 0; i < s.out_slots.size(); ++i) {
    int sl = s.out_slots[i];
    outs.push_back(sl >= 0 ? &slots[sl] : nullptr);
    if (sl >= 0 && !planned_.empty() && planned_[sl].defined()) {
      slots[sl] = planned_[sl];
      preset |= uint64_t{1} << i;
    }
  }
  if (on_device)
    for (int sl : s.in_slots) host_ins.push_back(sl >= 0 ? host_slots[sl] : nullptr);
  KernelContext ctx(*s.node, std::move(ins), std::move(outs), device_->allocator());
  ctx.preset_outputs = preset;
  ctx.set_host_inputs(host_ins);
  ctx.device = device_;
  ctx.rng = &rng_;
  ctx.first_micro_step = first_micro_step_;
  ctx.subgraph_runner = &nested_runner_factory();
  run_kernel(*s.kernel, ctx, *s.node, *device_, on_device);
  ctx.release_pointers(s.ins, s.outs);
  for (size_t i = 0; i < s.out_slots.size(); ++i) {
    if (s.out_slots[i] < 0) continue;
    const Tensor& t = slots[s.out_slots[i]];
    const Step::OutSpec& spec = s.out_specs[i];
    bool ok = !spec.full_check && t.defined() && t.dtype() == spec.dtype && (spec.rank < 0 || t.rank() == spec.rank);
    for (int k = 0; ok && k < spec.rank; ++k) ok = spec.dims[k] < 0 || spec.dims[k] == t.dim(k);
    if (!ok) check_output(*s.node, s.node->output(static_cast<int>(i)), t);  // says what is wrong
  }
}

std::map<std::string, Tensor> Executor::run(const std::map<std::string, Tensor>& feeds,
                                            const std::vector<std::string>& extra_outputs) {
  return run_impl(feeds, nullptr, extra_outputs);
}

std::map<std::string, Tensor> Executor::run_with_state(const std::map<std::string, Tensor>& feeds,
                                                       std::map<std::string, Tensor>& state) {
  return run_impl(feeds, &state, {});
}

std::map<std::string, Tensor> Executor::run_impl(const std::map<std::string, Tensor>& feeds,
                                                 std::map<std::string, Tensor>* state,
                                                 const std::vector<std::string>& extra_outputs) {
  std::vector<Tensor> slots(num_slots_);
  // Host copies of what lives on another device: feeds given on the host and constant
  // initializers, for kernels that need shape-like inputs on the host (see KernelContext).
  std::vector<const Tensor*> host_slots(device_->type() != DeviceType::kCpu ? num_slots_ : 0, nullptr);
  bind_feeds(feeds, state, slots, host_slots);
  std::vector<int> extra_slots;
  std::vector<bool> pinned(num_slots_, false);
  for (const std::string& name : extra_outputs) {
    extra_slots.push_back(slot_of_.at(graph_.value(name)));
    pinned[extra_slots.back()] = true;
    OTTER_CHECK(planned_.empty() || !planned_[extra_slots.back()].defined(), "value '", name,
                "' lives in the memory plan's arena and is overwritten later in the run; request it from a graph "
                "planned without it (make it a graph output before memory-plan)");
  }
  for (Step& s : steps_) {
    run_step(s, slots, host_slots);
    for (int sl : s.release)
      if (!pinned[sl]) slots[sl] = Tensor();
  }
  std::map<std::string, Tensor> result;
  for (size_t i = 0; i < outputs_.size(); ++i) result[outputs_[i]->name()] = slots[output_slots_[i]];
  for (size_t i = 0; i < extra_outputs.size(); ++i) result[extra_outputs[i]] = slots[extra_slots[i]];
  for (size_t k = 0; k < updates_.size(); ++k) {
    const auto& [s, u] = updates_[k];
    Tensor& updated = slots[update_slots_[k]];
    if (!state) result[u->name()] = updated;
    else if (Tensor* entry = update_binding_[k] >= 0 ? state_entry_[update_binding_[k]] : nullptr) *entry = updated;
    else (*state)[s->name()] = updated;  // fed by `feeds`, or not read: by name
  }
  return result;
}

}  // namespace otter
