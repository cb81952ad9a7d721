// Dataset and DataLoader. Loading refuses data that would train silently wrong: no samples,
// NaN or Inf in a float array, class labels outside the range of the loss that reads them.
#include "runtime/dataset.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <random>

#include "graph/error.h"
#include "runtime/npz.h"

namespace otter {

namespace {

template <typename T>
int64_t first_non_finite(const T* p, int64_t n) {
  for (int64_t i = 0; i < n; ++i)
    if (!std::isfinite(static_cast<double>(p[i]))) return i;
  return -1;
}

// Non-finite 16-bit floats: every exponent bit set (fp16: 5 bits, bf16: 8 bits).
int64_t first_non_finite_16(const uint16_t* p, int64_t n, uint16_t exponent_mask) {
  for (int64_t i = 0; i < n; ++i)
    if ((p[i] & exponent_mask) == exponent_mask) return i;
  return -1;
}

// "NaN", "inf" or "-inf": what a non-finite element holds.
std::string describe_non_finite(const Tensor& t, int64_t i) {
  double v = 0;
  switch (t.dtype()) {
    case DataType::kFloat32: v = static_cast<const float*>(t.raw())[i]; break;
    case DataType::kFloat64: v = static_cast<const double*>(t.raw())[i]; break;
    default: {
      uint16_t b = static_cast<const uint16_t*>(t.raw())[i];
      uint16_t mantissa = t.dtype() == DataType::kFloat16 ? 0x03FF : 0x007F;
      return (b & mantissa) ? "NaN" : (b & 0x8000) ? "-inf" : "inf";
    }
  }
  return std::isnan(v) ? "NaN" : v < 0 ? "-inf" : "inf";
}

// "sample 5 (element [5,17])" for flat index i of t.
std::string locate(const Tensor& t, int64_t i) {
  std::vector<int64_t> idx(t.dims().size());
  for (size_t k = idx.size(); k-- > 0;) {
    idx[k] = i % t.dims()[k];
    i /= t.dims()[k];
  }
  return str_cat("sample ", idx[0], " (element ", dims_to_string(idx), ")");
}

// Fails naming the file, the array and the sample of the first NaN or Inf of a float array.
void check_finite(const Tensor& t, const std::string& path, const std::string& name) {
  int64_t bad = -1;
  switch (t.dtype()) {
    case DataType::kFloat32: bad = first_non_finite(static_cast<const float*>(t.raw()), t.numel()); break;
    case DataType::kFloat64: bad = first_non_finite(static_cast<const double*>(t.raw()), t.numel()); break;
    case DataType::kFloat16:
      bad = first_non_finite_16(static_cast<const uint16_t*>(t.raw()), t.numel(), 0x7C00);
      break;
    case DataType::kBFloat16:
      bad = first_non_finite_16(static_cast<const uint16_t*>(t.raw()), t.numel(), 0x7F80);
      break;
    default: return;
  }
  if (bad >= 0)
    fail(path, ": array '", name, "' ", locate(t, bad), " holds ", describe_non_finite(t, bad),
         "; training data must be finite");
}

// The class count of a cross-entropy loss reading `labels` (its scores' axis 1), or 0 where no
// such loss reads it or the count is not static. `ignore` receives the loss's ignore_index.
int64_t label_classes(const Value* labels, int64_t* ignore, bool* has_ignore) {
  for (auto [node, slot] : labels->uses()) {
    if (slot != 1 || node->domain() != "") continue;
    if (node->op_type() != "SoftmaxCrossEntropyLoss" && node->op_type() != "NegativeLogLikelihoodLoss") continue;
    const Value* scores = node->input(0);
    if (!scores || !scores->shape().rank_known || scores->shape().rank() < 2) return 0;
    const Dim& c = scores->shape().dims[1];
    *has_ignore = node->has_attr("ignore_index");
    *ignore = node->attr_i("ignore_index", 0);
    return c.is_static() ? c.value : 0;
  }
  return 0;
}

// Fails naming the file, the array and the sample of the first label outside [0, classes).
void check_labels(const Tensor& t, const Value* v, const std::string& path) {
  if (t.dtype() != DataType::kInt64 && t.dtype() != DataType::kInt32) return;
  int64_t ignore = 0;
  bool has_ignore = false;
  const int64_t classes = label_classes(v, &ignore, &has_ignore);
  if (classes <= 0) return;
  for (int64_t i = 0; i < t.numel(); ++i) {
    int64_t l = t.dtype() == DataType::kInt64 ? static_cast<const int64_t*>(t.raw())[i]
                                              : static_cast<const int32_t*>(t.raw())[i];
    if ((l < 0 || l >= classes) && !(has_ignore && l == ignore))
      fail(path, ": array '", v->name(), "' ", locate(t, i), " holds label ", l, ", outside the ", classes,
           " classes [0, ", classes, ") of the model's output");
  }
}

}  // namespace

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
    check_finite(t, path, v->name());
    check_labels(t, v, path);
    d.arrays_[v->name()] = t;
  }
  if (d.size_ < 0) d.size_ = 0;
  OTTER_CHECK(d.size_ > 0 || wanted.empty(), path, ": the data set is empty (array '", first, "' has 0 samples)");
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
