// Dataset and DataLoader.
#include "runtime/dataset.h"

#include <algorithm>
#include <cstring>
#include <numeric>
#include <random>

#include "graph/error.h"
#include "runtime/npz.h"

namespace otter {

Dataset Dataset::from_npz(const std::string& path, const std::vector<const Value*>& wanted) {
  return from_arrays(read_npz(path), wanted);
}

Dataset Dataset::from_arrays(const NpzArchive& a, const std::vector<const Value*>& wanted) {
  const std::string& path = a.path;
  Dataset d;
  d.path_ = path;
  d.size_ = -1;
  std::string first;
  for (const Value* v : wanted) {
    const Tensor& t = a.get(v->name());
    OTTER_CHECK(t.rank() >= 1, path, ": array '", v->name(), "' has no sample axis (shape ", dims_to_string(t.dims()), ")");
    OTTER_CHECK(t.dtype() == v->dtype(), path, ": array '", v->name(), "' is ", dtype_name(t.dtype()), ", the model expects ",
                dtype_name(v->dtype()));
    const Shape& s = v->shape();
    if (s.rank_known) {
      OTTER_CHECK(s.rank() == t.rank(), path, ": array '", v->name(), "' has shape ", dims_to_string(t.dims()),
                  ", the model expects ", s.to_string());
      for (int64_t k = 1; k < s.rank(); ++k)
        OTTER_CHECK(!s.dims[k].is_static() || s.dims[k].value == t.dim(k), path, ": array '", v->name(), "' has shape ",
                    dims_to_string(t.dims()), ", the model expects ", s.to_string());
    }
    if (d.size_ < 0) {
      d.size_ = t.dim(0);
      first = v->name();
    }
    OTTER_CHECK(t.dim(0) == d.size_, path, ": array '", v->name(), "' has ", t.dim(0), " samples but '", first, "' has ",
                d.size_);
    d.arrays_[v->name()] = t;
  }
  if (d.size_ < 0) d.size_ = 0;
  return d;
}

std::map<std::string, Tensor> Dataset::gather(const std::vector<int64_t>& indices) const {
  std::map<std::string, Tensor> out;
  for (const auto& [name, t] : arrays_) {
    std::vector<int64_t> dims = t.dims();
    size_t row = dims[0] ? t.nbytes() / static_cast<size_t>(dims[0]) : 0;
    dims[0] = static_cast<int64_t>(indices.size());
    Tensor b(t.dtype(), dims);
    const char* src = static_cast<const char*>(t.raw());
    char* dst = static_cast<char*>(b.raw());
    for (size_t i = 0; i < indices.size(); ++i) std::memcpy(dst + i * row, src + indices[i] * row, row);
    out[name] = b;
  }
  return out;
}

DataLoader::DataLoader(const Dataset& data, int64_t batch, bool shuffle, uint64_t seed, bool drop_last)
    : data_(data), batch_(batch), shuffle_(shuffle), seed_(seed), drop_last_(drop_last) {
  OTTER_CHECK(batch > 0, "batch size must be positive, got ", batch);
  OTTER_CHECK(batches_per_epoch() > 0, data.path(), ": ", data.size(), " samples are fewer than one batch of ", batch);
}

int64_t DataLoader::batches_per_epoch() const {
  return drop_last_ ? data_.size() / batch_ : (data_.size() + batch_ - 1) / batch_;
}

void DataLoader::make_order() {
  order_.resize(static_cast<size_t>(data_.size()));
  std::iota(order_.begin(), order_.end(), 0);
  if (shuffle_) {
    // A fresh, reproducible permutation per epoch (Fisher-Yates over a seeded generator).
    std::mt19937_64 rng(seed_ * 0x9E3779B97F4A7C15ull + static_cast<uint64_t>(state_.epoch) + 1);
    for (size_t i = order_.size(); i > 1; --i) {
      size_t j = static_cast<size_t>(rng() % i);
      std::swap(order_[i - 1], order_[j]);
    }
  }
  order_epoch_ = state_.epoch;
}

void DataLoader::set_state(const LoaderState& s) {
  OTTER_CHECK(s.position >= 0 && s.position <= batches_per_epoch(), "loader position ", s.position, " out of range");
  state_ = s;
  order_epoch_ = -1;
}

std::map<std::string, Tensor> DataLoader::next() {
  if (state_.position >= batches_per_epoch()) {
    ++state_.epoch;
    state_.position = 0;
  }
  if (order_epoch_ != state_.epoch) make_order();
  int64_t begin = state_.position * batch_;
  int64_t end = std::min(begin + batch_, data_.size());
  std::vector<int64_t> idx(order_.begin() + begin, order_.begin() + end);
  ++state_.position;
  return data_.gather(idx);
}

}  // namespace otter
