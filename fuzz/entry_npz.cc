// The npz entry point (see entry_points.h), in a file of its own: it needs only the .npz reader, so
// a fuzzer of it builds from graph/tensor, graph/dtype, graph/limits and runtime's npz files alone.
#include <string>

#include "fuzz/entry_points.h"
#include "graph/error.h"
#include "runtime/npz.h"

namespace otter::fuzz {

void npz(const uint8_t* data, size_t size) {
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  // otter::Error is the one sanctioned way to refuse an input.
  try {
    parse_npz(bytes, "fuzz.npz");
  } catch (const Error&) {
  }
  try {
    parse_npy(bytes, "fuzz.npy");
  } catch (const Error&) {
  }
}

}  // namespace otter::fuzz
