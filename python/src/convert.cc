// numpy <-> Tensor conversions of the Python module (see convert.h).
#include "convert.h"

#include <cstring>

#include "graph/error.h"

namespace py = pybind11;

namespace otter::python {

FeedCounters& feed_counters() {
  static FeedCounters c;
  return c;
}

namespace {

// otter's element type for a numpy dtype (kUndefined when it has none).
DataType dtype_of(const py::dtype& d) {
  struct Entry {
    char kind;
    py::ssize_t size;
    DataType type;
  };
  static constexpr Entry kTypes[] = {
      {'f', 4, DataType::kFloat32}, {'f', 8, DataType::kFloat64}, {'f', 2, DataType::kFloat16},
      {'i', 8, DataType::kInt64},   {'i', 4, DataType::kInt32},   {'i', 1, DataType::kInt8},
      {'u', 1, DataType::kUInt8},   {'b', 1, DataType::kBool},
  };
  for (const Entry& e : kTypes)
    if (e.kind == d.kind() && e.size == d.itemsize()) return e.type;
  return DataType::kUndefined;
}

py::dtype numpy_dtype(DataType t) {
  switch (t) {
    case DataType::kFloat32:
      return py::dtype::of<float>();
    case DataType::kFloat64:
      return py::dtype::of<double>();
    case DataType::kFloat16:
      return py::dtype("float16");
    case DataType::kBFloat16:
      return py::dtype::of<uint16_t>();
    case DataType::kInt64:
      return py::dtype::of<int64_t>();
    case DataType::kInt32:
      return py::dtype::of<int32_t>();
    case DataType::kInt8:
      return py::dtype::of<int8_t>();
    case DataType::kUInt8:
      return py::dtype::of<uint8_t>();
    case DataType::kBool:
      return py::dtype::of<bool>();
    default:
      break;
  }
  fail("no numpy type for otter type ", dtype_name(t));
}

// Releases the array when the last tensor over its buffer goes; that may happen on a thread that
// released the GIL (inside a long call), so it takes the GIL first.
std::shared_ptr<void> keep_alive(py::array a) {
  PyObject* obj = a.release().ptr();
  return std::shared_ptr<void>(obj, [](void* p) {
    py::gil_scoped_acquire gil;
    Py_DECREF(static_cast<PyObject*>(p));
  });
}

}  // namespace

Tensor tensor_from_array(const py::handle& obj, const char* prefix, const std::string& name) {
  // Other array-likes (lists, scalars) become an array first: a conversion, counted as a copy.
  const bool is_array = py::isinstance<py::array>(obj);
  py::array a = py::array::ensure(obj);
  OTTER_CHECK(a && (is_array || a.dtype().kind() != 'O'), prefix, "'", name, "' is a ",
              std::string(py::str(py::type::of(obj).attr("__name__"))), ", not an array of numbers");
  bool copied = !is_array;
  const DataType t = dtype_of(a.dtype());
  OTTER_CHECK(t != DataType::kUndefined, prefix, "'", name, "' has numpy type ", std::string(py::str(a.dtype())),
              ", which otter has no type for (f32, f64, f16, i64, i32, i8, u8, bool)");
  std::vector<int64_t> dims(a.shape(), a.shape() + a.ndim());
  const int flags = a.flags();
  const bool in_place = (flags & py::detail::npy_api::NPY_ARRAY_C_CONTIGUOUS_) &&
                        (flags & py::detail::npy_api::NPY_ARRAY_ALIGNED_) && a.dtype().byteorder() != '>';
  if (!in_place) {
    // One copy into a C-contiguous, aligned, native-order array, which is then wrapped.
    a = py::array::ensure(a.attr("astype")(a.dtype().attr("newbyteorder")("="), py::arg("order") = "C"),
                          py::array::c_style);
    copied = true;
  }
  ++(copied ? feed_counters().copied : feed_counters().wrapped);
  void* data = const_cast<void*>(a.data());
  const size_t bytes = static_cast<size_t>(a.nbytes());
  auto storage = std::make_shared<Storage>(data, bytes, keep_alive(std::move(a)));
  return Tensor(t, std::move(dims), std::move(storage));
}

py::array array_from_tensor(const Tensor& t) {
  OTTER_CHECK(t.on_host(), "array_from_tensor: ", t.describe(), " is not on the host");
  std::vector<py::ssize_t> shape(t.dims().begin(), t.dims().end());
  py::array a(numpy_dtype(t.dtype()), shape);
  if (t.nbytes()) std::memcpy(a.mutable_data(), t.raw(), t.nbytes());
  return a;
}

NpzArchive feeds_archive(const py::dict& feeds, const std::vector<const Value*>& wanted) {
  NpzArchive a;
  a.path = "feeds";
  for (auto [key, value] : feeds) {
    OTTER_CHECK(py::isinstance<py::str>(key), "feeds: keys must be array names (str), got ",
                std::string(py::str(py::repr(key))));
    std::string name = key.cast<std::string>();
    bool known = false;
    for (const Value* v : wanted) known = known || v->name() == name;
    if (!known) {
      std::string names;
      for (const Value* v : wanted) names += str_cat(names.empty() ? "" : ", ", v->name());
      fail("feeds: unknown array '", name, "' (the model takes: ", names, ")");
    }
    a.arrays.emplace_back(name, tensor_from_array(value, "feeds: array ", name));
  }
  return a;
}

}  // namespace otter::python
