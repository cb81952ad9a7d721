// Resource limits (see limits.h): defaults, environment overrides and the checked products.
#include "graph/limits.h"

#include <cstdlib>
#include <limits>

#include "graph/error.h"

namespace otter {

namespace {

// A positive byte count from the environment variable `name`, or `dflt` when unset. A malformed
// value fails naming the variable (silently ignoring it would hide a typo).
uint64_t env_bytes(const char* name, uint64_t dflt) {
  const char* s = std::getenv(name);
  if (!s || !*s) return dflt;
  char* end = nullptr;
  unsigned long long v = std::strtoull(s, &end, 10);
  if (*end != '\0' || v == 0 || s[0] == '-')
    fail("environment variable ", name, "='", s, "' is not a positive number of bytes");
  return v;
}

std::string dims_text(const std::vector<int64_t>& dims) {
  std::string s = "[";
  for (size_t i = 0; i < dims.size(); ++i) s += str_cat(i ? "," : "", dims[i]);
  return s + "]";
}

}  // namespace

uint64_t max_tensor_bytes() {
  static const uint64_t v = env_bytes("OTTER_MAX_TENSOR_BYTES", kDefaultMaxTensorBytes);
  return v;
}

uint64_t max_npz_bytes() {
  static const uint64_t v = env_bytes("OTTER_MAX_NPZ_BYTES", kDefaultMaxNpzBytes);
  return v;
}

uint64_t checked_tensor_bytes(uint64_t count, uint64_t elem_size, const std::string& what) {
  const uint64_t limit = max_tensor_bytes();
  if (elem_size != 0 && count > limit / elem_size)
    fail(what, ": ", count, " elements of ", elem_size, " bytes exceed the limit of ", limit,
         " bytes per tensor (OTTER_MAX_TENSOR_BYTES)");
  return count * elem_size;
}

int64_t checked_num_elements(const std::vector<int64_t>& dims, const std::string& what) {
  for (int64_t d : dims)
    if (d < 0) fail(what, ": negative dimension in shape ", dims_text(dims));
  int64_t n = 1;
  bool overflow = false;
  for (int64_t d : dims) {
    if (d == 0) return 0;
    overflow |= __builtin_mul_overflow(n, d, &n);
  }
  if (overflow) fail(what, ": shape ", dims_text(dims), " has more elements than int64 can count");
  return n;
}

}  // namespace otter
