// Internal to the .npy/.npz files (runtime/npy.cc, runtime/zip_reader.cc, runtime/npz_writer.cc,
// runtime/npz.cc): format constants, little-endian byte access, and the pieces they share.
// Library users include runtime/npz.h instead.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "graph/tensor.h"

namespace otter::npz_detail {

constexpr char kNpyMagic[] = "\x93NUMPY";
constexpr size_t kNpyMagicSize = 6;
constexpr size_t kNpyAlign = 64;

constexpr uint32_t kLocalHeaderSig = 0x04034b50;
constexpr uint32_t kCentralHeaderSig = 0x02014b50;
constexpr uint32_t kEndOfCentralSig = 0x06054b50;
constexpr uint32_t kZip64EndSig = 0x06064b50;
constexpr uint32_t kZip64LocatorSig = 0x07064b50;
constexpr uint16_t kZip64ExtraId = 0x0001;
constexpr uint32_t kMax32 = 0xffffffffu;
constexpr uint16_t kMax16 = 0xffffu;
constexpr size_t kEndOfCentralSize = 22;
constexpr size_t kZlibChunk = size_t{1} << 30;  // zlib counts in 32-bit units

inline uint16_t load16(const char* p) {
  uint16_t v;
  std::memcpy(&v, p, 2);
  return v;
}
inline uint32_t load32(const char* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}
inline uint64_t load64(const char* p) {
  uint64_t v;
  std::memcpy(&v, p, 8);
  return v;
}
inline void put16(std::string& out, uint16_t v) { out.append(reinterpret_cast<const char*>(&v), 2); }
inline void put32(std::string& out, uint32_t v) { out.append(reinterpret_cast<const char*>(&v), 4); }
inline void put64(std::string& out, uint64_t v) { out.append(reinterpret_cast<const char*>(&v), 8); }

uint32_t crc32_of(const char* data, size_t n);
std::string read_file(const std::string& path);
// Writes `bytes` to path + ".tmp" and renames it over `path`, so a failed write never leaves a
// half-written file under the final name.
void write_file_atomically(const std::string& path, const std::string& bytes);

// The .npy bytes of `t`; `what` names the tensor in messages (runtime/npy.cc).
std::string serialize_npy_as(const Tensor& t, const std::string& what);

// One entry of a zip archive's central directory (runtime/zip_reader.cc).
struct ZipEntry {
  std::string name;
  uint16_t flags = 0;
  uint16_t method = 0;
  uint32_t crc = 0;
  uint64_t compressed_size = 0;
  uint64_t size = 0;
  uint64_t local_offset = 0;
};

// The entries of the archive `bytes` read from `path`, in central-directory order.
std::vector<ZipEntry> zip_entries(const std::string& bytes, const std::string& path);
// An entry's contents, decompressed and CRC-checked; `what` names it in messages. An entry that
// claims more than OTTER_MAX_NPZ_BYTES, or more than deflate can expand its compressed bytes to,
// is refused before anything is allocated.
std::string zip_contents(const std::string& bytes, const std::string& path, const ZipEntry& entry,
                         const std::string& what);

}  // namespace otter::npz_detail
