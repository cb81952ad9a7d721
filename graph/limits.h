// Resource limits on what a file may make otter allocate (docs/robustness.md): each is checked
// before the allocation it guards and named in the error, and each can be changed through an
// environment variable read once, at first use.
//
//   OTTER_MAX_TENSOR_BYTES  bytes of one tensor (default 16 GiB): initializers, external data,
//                           npz arrays, and every tensor the runtime allocates
//   OTTER_MAX_NPZ_BYTES     uncompressed bytes of one .npz archive, all arrays together (default 16 GiB)
//
// Fixed, not configurable: subgraphs nest at most kMaxSubgraphDepth levels.
// Fixed by the formats, not configurable: a deflated zip entry cannot expand more than
// kMaxDeflateRatio times (deflate's own bound), so an entry that claims more is refused as corrupt.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace otter {

constexpr uint64_t kDefaultMaxTensorBytes = uint64_t{16} << 30;
constexpr uint64_t kDefaultMaxNpzBytes = uint64_t{16} << 30;
// Deflate emits at least one bit per 258 bytes of output, so no stream inflates more than ~1032x.
constexpr uint64_t kMaxDeflateRatio = 1032;
// Subgraphs (If branches, Loop and Scan bodies) nest at most this deep: import is recursive.
constexpr int kMaxSubgraphDepth = 32;

uint64_t max_tensor_bytes();
uint64_t max_npz_bytes();

// The bytes of `count` elements of `elem_size` bytes, or fails naming `what` when the product
// overflows or exceeds OTTER_MAX_TENSOR_BYTES.
uint64_t checked_tensor_bytes(uint64_t count, uint64_t elem_size, const std::string& what);
// The element count of `dims`; fails naming `what` when a dimension is negative or the product
// overflows int64.
int64_t checked_num_elements(const std::vector<int64_t>& dims, const std::string& what);

}  // namespace otter
