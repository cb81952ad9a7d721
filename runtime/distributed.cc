// Joining the job, independent of the engine (see distributed.h): the launcher's environment, the
// per-rank share of a batch, and the check that every rank runs the same thing.
#include "runtime/distributed.h"

#include <cstdlib>
#include <cstring>
#include <vector>

#include "graph/error.h"
#include "kernels/collective.h"

namespace otter {

DistributedMode parse_distributed_mode(const std::string& text) {
  if (text == "auto") return DistributedMode::kAuto;
  if (text == "mpi") return DistributedMode::kMpi;
  if (text == "off") return DistributedMode::kOff;
  fail("--distributed must be auto, mpi or off, got '", text, "'");
}

bool launched_by_mpi() {
  for (const char* v : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE", "MPI_LOCALNRANKS"}) {
    const char* s = std::getenv(v);
    if (s && std::atoi(s) > 1) return true;
  }
  return false;
}

DistributedInfo distributed_info() {
  DistributedInfo d;
  const World& w = world();
  if (w.host) {
    d.rank = w.rank();
    d.size = w.size();
    d.engine = w.host->engine();
  }
  return d;
}

std::map<std::string, Tensor> rank_shard(const std::map<std::string, Tensor>& batch, int rank, int size) {
  std::map<std::string, Tensor> out;
  for (const auto& [name, t] : batch) {
    OTTER_CHECK(t.rank() >= 1 && t.dim(0) % size == 0, "rank_shard: array '", name, "' is ", t.describe(),
                ", not divisible among ", size, " ranks");
    std::vector<int64_t> dims = t.dims();
    const int64_t n = dims[0] / size;
    const size_t row = dims[0] ? t.nbytes() / static_cast<size_t>(dims[0]) : 0;
    dims[0] = n;
    out[name] = Tensor(t.dtype(), dims, t.storage(), t.offset() + static_cast<size_t>(rank * n) * row);
  }
  return out;
}

void check_same_on_all_ranks(const std::string& fingerprint, const std::string& what) {
  const World& w = world();
  if (!w.host || w.size() == 1) return;
  // FNV-1a of the text: ranks compare 8 bytes, not the text.
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : fingerprint) h = (h ^ c) * 1099511628211ull;
  Tensor mine = Tensor::scalar<int64_t>(static_cast<int64_t>(h));
  Tensor all(DataType::kInt64, {w.size()});
  w.host->all_gather(mine, all);
  const int64_t* v = all.data<int64_t>();
  for (int r = 1; r < w.size(); ++r)
    OTTER_CHECK(v[r] == v[0], what, " differ across ranks: rank ", r, " runs something other than rank 0 (",
                "fingerprint ", std::hex, static_cast<uint64_t>(v[r]), " vs ", static_cast<uint64_t>(v[0]), std::dec,
                "); every rank must get the same model, data and flags");
}

}  // namespace otter
