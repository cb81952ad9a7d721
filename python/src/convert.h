// numpy arrays <-> otter host tensors for the Python module: feeds are wrapped without copying
// when their layout allows it (and copied once otherwise), results come back as numpy copies.
#pragma once

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "graph/ir.h"
#include "graph/tensor.h"
#include "runtime/npz.h"

namespace otter::python {

// How feeds reached otter since the process started: wrapped in place (the tensor reads the numpy
// buffer) or copied once first (another layout). Exposed as otter._feed_counters() for tests.
struct FeedCounters {
  int64_t wrapped = 0;
  int64_t copied = 0;
};
FeedCounters& feed_counters();

// A host tensor over the array's own buffer when it is C-contiguous, aligned, in native byte order
// and of an element type otter has; over a C-contiguous copy when only the layout differs. Fails
// (otter::Error, naming `what`) on element types otter does not have. The tensor keeps the array
// alive; otter reads feeds and never writes them.
// Messages name the array as `prefix` + "'" + name + "'" (built only when one is needed).
Tensor tensor_from_array(const pybind11::handle& obj, const char* prefix, const std::string& name);

// A numpy copy of a host tensor (bf16, which numpy lacks, as its uint16 bit patterns).
pybind11::array array_from_tensor(const Tensor& t);

// A dict name -> array as an archive named "feeds" (messages then read "feeds: array 'x' ..."),
// checked against `wanted` as the command line checks .npz files (runtime/dataset.h), plus: every
// name must be one of `wanted`.
NpzArchive feeds_archive(const pybind11::dict& feeds, const std::vector<const Value*>& wanted);

}  // namespace otter::python
