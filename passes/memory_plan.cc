// memory-plan pass (see memory_plan.h).
#include "passes/memory_plan.h"

#include <algorithm>
#include <numeric>

#include "graph/error.h"
#include "graph/liveness.h"
#include "graph/op_table.h"

namespace otter {

namespace {

int64_t align_up(int64_t v, int64_t a) { return (v + a - 1) / a * a; }

// A block of the arena shared by a chain of in-place values.
struct Block {
  int64_t bytes = 0;
  int first = 0, last = 0;
  int64_t offset = -1;
  std::vector<size_t> members;  // indices into the lifetimes
};

// Peak of the summed bytes of live values when each is allocated at its first node and freed after
// its last (no reuse): the executor without a plan.
int64_t free_after_last_use_peak(const std::vector<Lifetime>& lts, int num_nodes) {
  std::vector<int64_t> delta(static_cast<size_t>(num_nodes) + 1, 0);
  for (const Lifetime& lt : lts) {
    if (!lt.plannable) continue;
    delta[lt.first] += value_bytes(lt.value);
    delta[lt.last + 1] -= value_bytes(lt.value);
  }
  int64_t live = 0, peak = 0;
  for (int64_t d : delta) peak = std::max(peak, live += d);
  return peak;
}

MemoryPlan plan_program(const Graph& g, Program p, int64_t alignment, int64_t* inplace) {
  std::vector<const Node*> nodes = program_nodes(g, p);
  std::vector<Lifetime> lts = program_lifetimes(g, p);
  std::map<const Value*, size_t> index;
  for (size_t i = 0; i < lts.size(); ++i) index[lts[i].value] = i;

  // 1. Blocks: each plannable value opens one, unless it takes over a dying input in place.
  std::vector<Block> blocks;
  std::vector<int> block_of(lts.size(), -1);
  std::vector<std::string> reuses(lts.size());
  const OpTable& table = OpTable::instance();
  for (size_t i = 0; i < lts.size(); ++i) {
    const Lifetime& lt = lts[i];
    if (!lt.plannable) continue;
    const Node* n = lt.value->producer();
    const OpDef* def = table.find(*n);
    const Value* in0 = n->input(0);
    int b = -1;
    if (def && def->inplace && n->output(0) == lt.value && in0 && index.count(in0)) {
      size_t j = index.at(in0);
      int jb = block_of[j];  // -1 when input 0 is not planned (a view, an output)
      bool dies_here = jb >= 0 && lts[j].last == lt.first && blocks[jb].last == lt.first;
      if (dies_here && value_bytes(in0) == value_bytes(lt.value) && in0->dtype() == lt.value->dtype()) {
        b = jb;
        reuses[i] = in0->name();
        ++*inplace;
      }
    }
    if (b < 0) {
      b = static_cast<int>(blocks.size());
      blocks.push_back({value_bytes(lt.value), lt.first, lt.last, -1, {}});
    }
    Block& blk = blocks[b];
    blk.bytes = std::max(blk.bytes, value_bytes(lt.value));
    blk.last = std::max(blk.last, lt.last);
    blk.members.push_back(i);
    block_of[i] = b;
  }

  // 2. Offsets: largest blocks first, each at the lowest aligned offset free of every placed block
  // whose interval overlaps its own.
  std::vector<size_t> order(blocks.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return blocks[a].bytes > blocks[b].bytes; });
  std::vector<size_t> placed;
  MemoryPlan plan;
  for (size_t bi : order) {
    Block& b = blocks[bi];
    std::vector<std::pair<int64_t, int64_t>> busy;
    for (size_t pi : placed) {
      const Block& o = blocks[pi];
      if (o.first <= b.last && b.first <= o.last) busy.emplace_back(o.offset, o.offset + o.bytes);
    }
    std::sort(busy.begin(), busy.end());
    int64_t off = 0;
    for (auto [lo, hi] : busy) {
      if (off + b.bytes <= lo) break;
      off = std::max(off, align_up(hi, alignment));
    }
    b.offset = off;
    placed.push_back(bi);
    plan.arena_bytes = std::max(plan.arena_bytes, align_up(off + b.bytes, alignment));
  }

  for (size_t i = 0; i < lts.size(); ++i) {
    if (block_of[i] < 0) continue;
    const Lifetime& lt = lts[i];
    plan.buffers[lt.value->name()] = {blocks[block_of[i]].offset, value_bytes(lt.value), lt.first, lt.last, reuses[i]};
  }
  plan.unplanned_peak_bytes = free_after_last_use_peak(lts, static_cast<int>(nodes.size()));
  return plan;
}

}  // namespace

MemoryPlanStats plan_memory(Graph& g, int64_t alignment) {
  OTTER_CHECK(alignment > 0 && (alignment & (alignment - 1)) == 0, "memory-plan: alignment must be a power of two, got ",
              alignment);
  MemoryPlanStats st;
  g.memory_plans.clear();
  for (Program p : {Program::kMicroStep, Program::kApply}) {
    if (program_nodes(g, p).empty()) continue;
    MemoryPlan plan = plan_program(g, p, alignment, &st.inplace);
    st.planned += static_cast<int64_t>(plan.buffers.size());
    st.arena_bytes += plan.arena_bytes;
    st.unplanned_peak_bytes += plan.unplanned_peak_bytes;
    if (!plan.buffers.empty()) g.memory_plans[p] = std::move(plan);
  }
  return st;
}

std::string MemoryPlanPass::summary() const {
  return "place each program's intermediate values in one arena (liveness, in-place reuse, best fit)";
}

const OptionTable<MemoryPlanOptions>& MemoryPlanOptions::table() {
  using S = MemoryPlanOptions;
  static const OptionTable<S> t{
      option("alignment", &S::alignment, "byte alignment of every buffer (a power of two)")
          .check_with([](int64_t a) { return a > 0 && (a & (a - 1)) == 0 ? "" : "must be a power of two"; }),
  };
  return t;
}

void MemoryPlanPass::run(Graph& g, PassContext&) {
  MemoryPlanStats st = plan_memory(g, opts_.alignment);
  set_counters({{"planned_values", st.planned},
                {"inplace_reuses", st.inplace},
                {"arena_bytes", st.arena_bytes},
                {"unplanned_peak_bytes", st.unplanned_peak_bytes}});
}

}  // namespace otter
