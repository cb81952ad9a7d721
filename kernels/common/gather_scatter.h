// Index arithmetic of GatherElements / ScatterElements and GatherND / ScatterND, shared by the CPU
// (kernels/cpu/gather_scatter.cc) and CUDA (kernels/cuda/gather_scatter.cu) kernels: the geometry
// each kernel resolves on the host once (with its checks), the data offset of one index element
// or index tuple, and the scatter reductions.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

#include "graph/ir.h"
#include "kernels/common/convert.h"

namespace otter {

constexpr int kMaxIndexRank = 8;

// GatherElements / ScatterElements: indices (and the output / updates) of rank `rank`, each
// element naming a position along `axis` of data.
struct ElementsGeom {
  int rank = 0, axis = 0;
  int64_t axis_len = 0;
  int64_t idx_dims[kMaxIndexRank] = {};
  int64_t data_strides[kMaxIndexRank] = {};
};

// Data offset that element i of the indices (holding index v) addresses, or -1 when v is out of
// range (negative v counts from the end of the axis).
OTTER_HD int64_t elements_offset(const ElementsGeom& g, int64_t i, int64_t v) {
  if (v < 0) v += g.axis_len;
  if (v < 0 || v >= g.axis_len) return -1;
  int64_t off = 0;
  for (int d = g.rank - 1; d >= 0; --d) {
    const int64_t c = i % g.idx_dims[d];
    i /= g.idx_dims[d];
    off += (d == g.axis ? v : c) * g.data_strides[d];
  }
  return off;
}

// The geometry of data and indices dims around axis (possibly negative); "" or what is wrong.
// With `same_extent` (ScatterElements) the indices may not be larger than data off the axis.
inline std::string make_elements_geom(const std::vector<int64_t>& data, const std::vector<int64_t>& idx, int64_t axis,
                                      ElementsGeom* g) {
  const int64_t r = static_cast<int64_t>(data.size());
  if (r == 0) return "data must have rank >= 1";
  if (r > kMaxIndexRank) return "data has rank above 8";
  if (static_cast<int64_t>(idx.size()) != r) return "indices must have the rank of data";
  if (axis < -r || axis >= r) return "attribute 'axis' is out of range";
  g->rank = static_cast<int>(r);
  g->axis = static_cast<int>(axis < 0 ? axis + r : axis);
  g->axis_len = data[g->axis];
  int64_t stride = 1;
  for (int64_t d = r - 1; d >= 0; --d) {
    if (d != g->axis && idx[d] > data[d]) return "indices are larger than data off the axis";
    g->idx_dims[d] = idx[d];
    g->data_strides[d] = stride;
    stride *= data[d];
  }
  return "";
}

// GatherND / ScatterND: indices [batch..., tuples..., k]; each k-tuple addresses a slice of `slice`
// elements of data within its batch (batch_dims leading dims shared by data and indices).
struct NdGeom {
  int k = 0;
  int64_t batches = 1, tuples = 1, slice = 1, batch_stride = 0;
  int64_t dims[kMaxIndexRank] = {};     // data dims addressed by the tuple
  int64_t strides[kMaxIndexRank] = {};  // and their strides
};

// Data offset of the slice that the tuple (k indices) of global tuple number t addresses, or -1
// with *bad set to the tuple position of an out-of-range index.
template <typename I>
OTTER_HD int64_t nd_offset(const NdGeom& g, int64_t t, const I* tuple, int* bad) {
  int64_t off = (t / g.tuples) * g.batch_stride;
  for (int j = 0; j < g.k; ++j) {
    int64_t v = static_cast<int64_t>(tuple[j]);
    if (v < 0) v += g.dims[j];
    if (v < 0 || v >= g.dims[j]) {
      *bad = j;
      return -1;
    }
    off += v * g.strides[j];
  }
  return off;
}

// The geometry of data and indices dims with batch_dims leading batch dims; "" or what is wrong.
inline std::string make_nd_geom(const std::vector<int64_t>& data, const std::vector<int64_t>& idx, int64_t batch_dims,
                                NdGeom* g) {
  const int64_t r = static_cast<int64_t>(data.size()), q = static_cast<int64_t>(idx.size());
  if (r < 1 || q < 1) return "data and indices must have rank >= 1";
  if (batch_dims < 0 || batch_dims >= std::min(r, q)) return "attribute 'batch_dims' is out of range";
  const int64_t k = idx[q - 1];
  if (k < 1 || k > r - batch_dims || k > kMaxIndexRank) return "the last dim of indices is out of range for data";
  g->k = static_cast<int>(k);
  for (int64_t d = 0; d < batch_dims; ++d) {
    if (data[d] != idx[d]) return "data and indices differ in a batch dim";
    g->batches *= data[d];
  }
  g->tuples = 1;
  for (int64_t d = batch_dims; d < q - 1; ++d) g->tuples *= idx[d];
  g->slice = 1;
  for (int64_t d = batch_dims + k; d < r; ++d) g->slice *= data[d];
  int64_t stride = g->slice;
  for (int64_t j = k - 1; j >= 0; --j) {
    g->dims[j] = data[batch_dims + j];
    g->strides[j] = stride;
    stride *= data[batch_dims + j];
  }
  g->batch_stride = stride;
  return "";
}

// GatherND's output dims: indices[:-1] + data[batch_dims + k:].
inline std::vector<int64_t> nd_gather_dims(const std::vector<int64_t>& data, const std::vector<int64_t>& idx,
                                           int64_t batch_dims) {
  std::vector<int64_t> out(idx.begin(), idx.end() - 1);
  out.insert(out.end(), data.begin() + batch_dims + idx.back(), data.end());
  return out;
}

// How a scatter combines an update u with the value x it lands on.
enum class ScatterReduction : uint8_t { kNone, kAdd, kMul, kMax, kMin };

template <typename S>
OTTER_HD S scatter_combine(ScatterReduction r, S x, S u) {
  if (r == ScatterReduction::kNone) return u;
  const auto a = load_value(x), b = load_value(u);
  using C = std::remove_const_t<decltype(a)>;
  C v = a;
  switch (r) {
    case ScatterReduction::kAdd:
      v = static_cast<C>(a + b);
      break;
    case ScatterReduction::kMul:
      v = static_cast<C>(a * b);
      break;
    case ScatterReduction::kMax:
      v = b > a ? b : a;
      break;
    case ScatterReduction::kMin:
      v = b < a ? b : a;
      break;
    case ScatterReduction::kNone:
      break;
  }
  return store_value<S>(v);
}

// DepthToSpace / SpaceToDepth of an NCHW input [n, c, h, w] with block b: the input offset that
// output element i copies (DepthToSpace in DCR or CRD channel order; SpaceToDepth is DCR's inverse).
struct SpaceDepthGeom {
  int64_t n = 0, c = 0, h = 0, w = 0, b = 1;
  bool to_space = true, crd = false;
};

OTTER_HD int64_t space_depth_source(const SpaceDepthGeom& g, int64_t i) {
  const int64_t b = g.b;
  if (g.to_space) {
    const int64_t oc_n = g.c / (b * b), ow = g.w * b, oh = g.h * b;
    const int64_t x = i % ow, y = (i / ow) % oh, oc = (i / (ow * oh)) % oc_n, on = i / (ow * oh * oc_n);
    const int64_t by = y % b, bx = x % b;
    const int64_t ic = g.crd ? oc * b * b + by * b + bx : (by * b + bx) * oc_n + oc;
    return ((on * g.c + ic) * g.h + y / b) * g.w + x / b;
  }
  const int64_t ow = g.w / b, oh = g.h / b, oc_n = g.c * b * b;
  const int64_t x = i % ow, y = (i / ow) % oh, oc = (i / (ow * oh)) % oc_n, on = i / (ow * oh * oc_n);
  const int64_t ic = oc % g.c, blk = oc / g.c;
  return ((on * g.c + ic) * g.h + y * b + blk / b) * g.w + x * b + blk % b;
}

// The geometry of input dims for the op; "" or what is wrong. *out receives the output dims.
inline std::string make_space_depth_geom(const std::vector<int64_t>& x, int64_t b, bool to_space, bool crd,
                                         SpaceDepthGeom* g, std::vector<int64_t>* out) {
  if (x.size() != 4) return "input must be 4-D (N, C, H, W)";
  if (b < 1) return "attribute 'blocksize' must be positive";
  *g = {x[0], x[1], x[2], x[3], b, to_space, crd};
  if (to_space) {
    if (x[1] % (b * b)) return "the channels are not divisible by blocksize^2";
    *out = {x[0], x[1] / (b * b), x[2] * b, x[3] * b};
  } else {
    if (x[2] % b || x[3] % b) return "the height and width are not divisible by blocksize";
    *out = {x[0], x[1] * b * b, x[2] / b, x[3] / b};
  }
  return "";
}

// The reduction named by the attribute value; false when it is none of none/add/mul/max/min.
inline bool parse_scatter_reduction(const std::string& s, ScatterReduction* r) {
  if (s == "none")
    *r = ScatterReduction::kNone;
  else if (s == "add")
    *r = ScatterReduction::kAdd;
  else if (s == "mul")
    *r = ScatterReduction::kMul;
  else if (s == "max")
    *r = ScatterReduction::kMax;
  else if (s == "min")
    *r = ScatterReduction::kMin;
  else
    return false;
  return true;
}

// The reduction attribute of a ScatterElements / ScatterND node (fails naming it when unknown).
inline ScatterReduction scatter_reduction(const Node& n) {
  ScatterReduction r;
  const std::string s = n.attr_s("reduction", "none");
  if (!parse_scatter_reduction(s, &r))
    fail(n.describe(), ": attribute 'reduction' must be none, add, mul, max or min, got '", s, "'");
  return r;
}

}  // namespace otter
