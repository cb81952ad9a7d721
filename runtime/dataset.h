// Datasets from .npz archives (arrays named after the model inputs, plus `labels`; the first axis
// is the sample axis) and a loader that yields batches in file order or in a seeded shuffle.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "graph/ir.h"
#include "graph/tensor.h"

namespace otter {

struct NpzArchive;

class Dataset {
 public:
  // Reads `path` and keeps the arrays named in `names` (all must exist, share the sample count,
  // and match the dtype and the non-sample dims of the graph values of those names, when given).
  static Dataset from_npz(const std::string& path, const std::vector<const Value*>& wanted);
  // The same checks over arrays already in memory (kept without copying); `a.path` names them in
  // messages (the Python API passes its feeds as "feeds").
  static Dataset from_arrays(const NpzArchive& a, const std::vector<const Value*>& wanted);
  int64_t size() const { return size_; }
  const std::map<std::string, Tensor>& arrays() const { return arrays_; }
  // Rows `indices` of every array, in that order.
  std::map<std::string, Tensor> gather(const std::vector<int64_t>& indices) const;
  const std::string& path() const { return path_; }

 private:
  std::map<std::string, Tensor> arrays_;
  int64_t size_ = 0;
  std::string path_;
};

// Position of a loader: restored from checkpoints so a resumed run sees the same batches.
struct LoaderState {
  int64_t epoch = 0;
  int64_t position = 0;  // batches already taken in this epoch
};

class DataLoader {
 public:
  DataLoader(const Dataset& data, int64_t batch, bool shuffle, uint64_t seed, bool drop_last = true);
  // The next batch; moves to the next epoch (a fresh permutation) when the current one is done.
  std::map<std::string, Tensor> next();
  int64_t batches_per_epoch() const;
  LoaderState state() const { return state_; }
  void set_state(const LoaderState& s);

 private:
  void make_order();
  const Dataset& data_;
  int64_t batch_;
  bool shuffle_;
  uint64_t seed_;
  bool drop_last_;
  LoaderState state_;
  std::vector<int64_t> order_;
  int64_t order_epoch_ = -1;
};

}  // namespace otter
