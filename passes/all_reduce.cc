// all-reduce pass (see all_reduce.h).
#include "passes/all_reduce.h"

#include <cstdlib>
#include <set>

#include "graph/error.h"
#include "graph/op_table.h"
#include "passes/backward_seed.h"

namespace otter {

namespace {

constexpr const char* kRanksKey = "otter.training.data_parallel_ranks";
constexpr size_t kMaxBucketTensors = 256;  // the op table's AllReduce views cover this many

bool has_all_reduce(const Graph& g) {
  for (const auto& n : g.nodes())
    if (n->domain() == kOtterDomain && (n->op_type() == "AllReduce" || n->op_type() == "ReduceScatter")) return true;
  return false;
}

// The accumulators in buckets of at least `bytes` (the last may be smaller).
std::vector<std::vector<Value*>> make_buckets(const Graph& g, int64_t bytes) {
  std::vector<std::vector<Value*>> buckets(1);
  int64_t filled = 0;
  for (const auto& [p, acc] : g.gradients) {
    if (!buckets.back().empty() && (filled >= bytes || buckets.back().size() >= kMaxBucketTensors)) {
      buckets.emplace_back();
      filled = 0;
    }
    buckets.back().push_back(acc);
    filled += acc->data().defined() ? static_cast<int64_t>(acc->data().nbytes()) : 0;
  }
  return buckets;
}

}  // namespace

const OptionTable<AllReduceOptions>& AllReduceOptions::table() {
  using S = AllReduceOptions;
  static const OptionTable<S> t{
      option("world", &S::world, "ranks of the data-parallel job (N)").at_least(1).always(),
      option("bucket", &S::bucket, "bytes of gradients per all-reduce (a bucket holds at least one tensor)"),
      option("zero", &S::zero, "ZeRO stage: 0 all-reduce, 1 reduce-scatter and shard the optimizer state")
          .at_least(0)
          .at_most(1),
  };
  return t;
}

Node* first_apply_node(const Graph& g, const std::string& what) {
  for (const auto& n : g.nodes())
    if (n->program() == Program::kApply) return n.get();
  fail(what, ": the apply program is empty");
}

int64_t data_parallel_ranks(const Graph& g) {
  auto it = g.metadata.find(kRanksKey);
  if (it == g.metadata.end()) return 1;
  char* end = nullptr;
  const long long n = std::strtoll(it->second.c_str(), &end, 10);
  OTTER_CHECK(*end == 0 && n >= 1, "graph metadata ", kRanksKey, ": '", it->second, "' is not a positive integer");
  return n;
}

std::string all_reduce_precondition(const Graph& g) {
  if (g.gradients.empty()) return "the graph has no gradients: run autodiff, grad-accumulation and optimizer first";
  if (g.training_facts().finite.empty()) return "the graph has no apply program: run the optimizer pass first";
  if (has_all_reduce(g)) return "the gradients are already all-reduced";
  return "";
}

AllReduceStats all_reduce_gradients(Graph& g, const AllReduceOptions& o) {
  AllReduceOptions::table().check(o, "all-reduce");
  std::string unmet = all_reduce_precondition(g);
  OTTER_CHECK(unmet.empty(), "all-reduce: ", unmet);
  OTTER_CHECK(o.zero == 0, "all-reduce: zero=", o.zero, " shards the optimizer state (shard_optimizer_state)");
  Node* first_apply = first_apply_node(g, "all-reduce");
  AllReduceStats st;
  std::set<const Node*> reducers;
  for (const std::vector<Value*>& bucket : make_buckets(g, o.bucket.bytes)) {
    std::vector<std::string> names;
    for (Value* acc : bucket) names.push_back(g.unique_name(acc->name() + ".reduced"));
    Node* n = g.add_node("AllReduce", bucket, names, kOtterDomain, first_apply);
    n->set_program(Program::kApply);
    n->set_attr("op", Attribute(std::string("sum")));  // of gradients each seeded with S/(N*K)
    n->set_attr("world", Attribute(o.world));
    infer_node(*n);
    reducers.insert(n);
    ++st.buckets;
    for (int i = 0; i < static_cast<int>(bucket.size()); ++i) {
      Value* acc = bucket[i];
      ++st.tensors;
      st.bytes_per_step += static_cast<int64_t>(acc->data().nbytes());
      // Every apply-program reader takes the reduced value; the micro-step program keeps the accumulator.
      std::vector<std::pair<Node*, int>> uses = acc->uses();
      for (auto [user, slot] : uses)
        if (user->program() == Program::kApply && !reducers.count(user)) user->set_input(slot, n->output(i));
    }
  }
  finish_all_reduce(g, o.world);
  return st;
}

void finish_all_reduce(Graph& g, int64_t world) {
  g.opset_imports.emplace(kOtterDomain, 1);
  g.memory_plans.clear();
  g.metadata[kRanksKey] = std::to_string(world);
  // Each rank's gradients are 1/N of its share of the global mean: the sum over ranks is the mean
  // over all N*K micro-batches, with the scale (and the overflow) of one process with N*K.
  update_backward_seed(g, "all-reduce");
}

std::string AllReducePass::summary() const {
  return "average the accumulated gradients across N ranks in buckets at the start of the apply program (zero=1: "
         "reduce-scatter them, shard the optimizer state, all-gather the new weights)";
}

std::string AllReducePass::unmet_precondition(const Graph& g) const { return all_reduce_precondition(g); }

void AllReducePass::run(Graph& g, PassContext&) {
  reset_counters();
  if (opts_.zero == 1) {
    AllReduceOptions::table().check(opts_, "all-reduce");
    std::string unmet = all_reduce_precondition(g);
    OTTER_CHECK(unmet.empty(), "all-reduce: ", unmet);
    ZeroStats z = shard_optimizer_state(g, opts_.world);
    finish_all_reduce(g, opts_.world);
    count("tensors", z.tensors);
    count("bytes_per_step", z.scatter_bytes + z.gather_bytes);
    count("optimizer_state_bytes", z.state_bytes);
    count("optimizer_state_bytes_unsharded", z.full_state_bytes);
    count("master_weight_bytes", z.master_bytes);
    count("master_weight_bytes_unsharded", z.full_master_bytes);
    return;
  }
  AllReduceStats st = all_reduce_gradients(g, opts_);
  count("buckets", st.buckets);
  count("tensors", st.tensors);
  count("bytes_per_step", st.bytes_per_step);
}

}  // namespace otter
