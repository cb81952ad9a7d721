// TrainingSession in a data-parallel job (see training_session.h, passes/all_reduce.h,
// runtime/distributed.h): the check that the job matches the graph and that every rank runs the
// same thing, the mean of per-rank metrics, evaluation sharded across the ranks, and the ZeRO-1
// shards (optimizer moments, fp32 masters) made whole for checkpoints, evaluation and export (and
// cut again on resume).
#include <algorithm>
#include <cmath>
#include <cstring>

#include "graph/error.h"
#include "kernels/collective.h"
#include "passes/all_reduce.h"
#include "runtime/distributed.h"
#include "runtime/npz.h"
#include "runtime/training_session.h"

namespace otter {

void TrainingSession::join_data_parallel_job() {
  if (ranks_ == 1) return;
  const World& w = world();
  OTTER_CHECK(w.host && w.size() == ranks_, "the training graph averages gradients over ", ranks_,
              " ranks (all-reduce{world=", ranks_, "}), but this process is ",
              w.host ? str_cat("in a job of ", w.size(), " ranks") : std::string("not in an MPI job"),
              " (launch it with mpirun -np ", ranks_, ")");
  // CUDA tensors are reduced by the device engine (NCCL), bootstrapped over MPI once per process.
  if (device_->type() == DeviceType::kCuda && !w.device) world().device = make_device_communicator(*w.host, *device_);
  // The structure of the model, the whole pipeline (every pass option), b, K, the seed and the
  // initial values' source: a rank given another model or other flags stops every rank here.
  check_same_on_all_ranks(str_cat(fingerprint_, "|", pipeline_, "|b=", opts_.batch_size, "|seed=", opts_.seed,
                                  "|batchnorm=", enum_name(opts_.pipeline.batchnorm.mode), "|init=", opts_.init.size()),
                          "the models or training flags");
}

double TrainingSession::mean_over_ranks(double v) const {
  Tensor t = Tensor::scalar<double>(v);
  world().host->all_reduce({&t}, ReduceOp::kAvg);
  return t.data<double>()[0];
}

Tensor TrainingSession::gather_shards(const std::string& name) const {
  const Value* p = graph_->value(shards_.at(name));
  const Tensor mine = tensor(name);
  const World& w = world();
  OTTER_CHECK(w.host && w.size() == ranks_, "checkpoint: '", name, "' is sharded over ", ranks_,
              " ranks, and this process is not in such a job");
  Tensor all(mine.dtype(), {mine.numel() * ranks_});
  w.host->all_gather(mine, all);
  // The shards in rank order, less the last one's padding, in the parameter's shape.
  Tensor whole(mine.dtype(), p->shape().static_dims());
  std::memcpy(whole.raw(), all.raw(), whole.nbytes());
  return whole;
}

std::map<std::string, Tensor> TrainingSession::whole_masters() const {
  std::map<std::string, Tensor> out;
  for (const auto& [p, master] : master_of_) out[p] = gather_shards(master);  // the same order on every rank
  return out;
}

Tensor TrainingSession::own_shard(const std::string& name, const Tensor& whole) const {
  const int64_t c = zero_shard_size(whole.numel(), ranks_);
  const int64_t begin = std::min<int64_t>(whole.numel(), world().rank() * c);
  const int64_t count = std::min<int64_t>(whole.numel() - begin, c);
  OTTER_CHECK(whole.on_host(), "checkpoint: '", name, "' is not a host tensor");
  Tensor shard(whole.dtype(), {c});
  const size_t es = dtype_size(whole.dtype());
  std::memset(shard.raw(), 0, shard.nbytes());
  std::memcpy(shard.raw(), static_cast<const char*>(whole.raw()) + begin * es, static_cast<size_t>(count) * es);
  return shard;
}

EvalResult TrainingSession::evaluate_shard(const Dataset& data) {
  const World& w = world();
  const int64_t n = data.size(), size = w.size(), rank = w.rank();
  OTTER_CHECK(n >= size, data.path(), ": ", n, " evaluation samples cannot be shared among ", size, " ranks");
  // Rank r evaluates the contiguous rows [r*n/N, (r+1)*n/N): every sample once, whatever N.
  const int64_t begin = rank * n / size, end = (rank + 1) * n / size;
  NpzArchive shard;
  shard.path = str_cat(data.path(), " (rank ", rank, "'s rows ", begin, "..", end, ")");
  for (const auto& [name, t] : data.arrays()) {
    std::vector<int64_t> dims = t.dims();
    const size_t row = t.nbytes() / static_cast<size_t>(dims[0]);
    dims[0] = end - begin;
    shard.arrays.emplace_back(name, Tensor(t.dtype(), dims, t.storage(), t.offset() + static_cast<size_t>(begin) * row));
  }
  Dataset part = Dataset::from_arrays(shard, batch_inputs());
  // The eval graph reads the whole fp32 weights: the sharded masters are gathered first.
  EvalResult mine = evaluate_here(part, whole_masters());
  // Sums over the ranks: loss times samples, correct predictions (accuracy times this shard's
  // label count), samples and labels.
  const int64_t my_labels = mine.has_accuracy ? part.arrays().at(opts_.pipeline.loss.add.labels).numel() : 0;
  Tensor sums = Tensor::from_vector<double>({4}, {mine.loss * static_cast<double>(mine.samples),
                                                  mine.accuracy * static_cast<double>(my_labels),
                                                  static_cast<double>(mine.samples), static_cast<double>(my_labels)});
  w.host->all_reduce({&sums}, ReduceOp::kSum);
  const double* s = sums.data<double>();
  EvalResult r = mine;
  r.samples = static_cast<int64_t>(std::llround(s[2]));
  r.loss = s[0] / s[2];
  if (r.has_accuracy) r.accuracy = s[3] > 0 ? s[1] / s[3] : 0;
  return r;
}

}  // namespace otter
