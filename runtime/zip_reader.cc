// Zip archive reading for .npz: the central directory (zip64 records and extra fields included),
// stored and deflated entries, CRC-32 checks. Sizes come from the central directory, so data
// descriptors need no special handling; claimed sizes are checked against OTTER_MAX_NPZ_BYTES and
// deflate's maximum ratio (graph/limits.h) before any buffer is allocated.
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <limits>
#include <sstream>

#include "graph/error.h"
#include "graph/limits.h"
#include "runtime/npz_format.h"

namespace otter::npz_detail {

namespace {

// ---------------------------------------------------------------------------------------------
// Raw deflate (zip method 8)

std::string inflate_raw(const char* data, size_t size, uint64_t expected_size,
                        const std::string& what) {
  if (expected_size > std::numeric_limits<size_t>::max() / 2)
    fail(what, ": uncompressed size ", expected_size, " is too large");
  std::string out(static_cast<size_t>(expected_size), '\0');
  z_stream zs{};
  if (inflateInit2(&zs, -MAX_WBITS) != Z_OK) fail(what, ": cannot initialise zlib");
  size_t in_left = size, out_left = out.size();
  zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data));
  zs.next_out = reinterpret_cast<Bytef*>(out.data());
  int rc = Z_OK;
  for (;;) {
    if (zs.avail_in == 0 && in_left > 0) {
      zs.avail_in = static_cast<uInt>(std::min(in_left, kZlibChunk));
      in_left -= zs.avail_in;
    }
    if (zs.avail_out == 0 && out_left > 0) {
      zs.avail_out = static_cast<uInt>(std::min(out_left, kZlibChunk));
      out_left -= zs.avail_out;
    }
    rc = inflate(&zs, Z_NO_FLUSH);
    if (rc == Z_STREAM_END) break;
    if (rc == Z_OK) continue;
    // Z_BUF_ERROR means no progress was possible: input or output space ran out.
    bool input_done = zs.avail_in == 0 && in_left == 0;
    bool output_full = zs.avail_out == 0 && out_left == 0;
    if (rc != Z_BUF_ERROR || (!input_done && !output_full)) {
      std::string msg = zs.msg ? zs.msg : "zlib error";
      inflateEnd(&zs);
      fail(what, ": corrupt deflate data (", msg, ")");
    }
    uint64_t produced = zs.total_out;
    inflateEnd(&zs);
    if (input_done)
      fail(what, ": deflate data is truncated (", produced, " of ", expected_size, " bytes)");
    fail(what, ": deflate data is longer than the recorded size of ", expected_size, " bytes");
  }
  uint64_t produced = zs.total_out;
  inflateEnd(&zs);
  if (produced != expected_size)
    fail(what, ": inflated to ", produced, " bytes, the archive records ", expected_size);
  return out;
}

// Bounds-checked view of the archive bytes; every read names the archive when it runs off the end.
class ZipReader {
 public:
  ZipReader(const std::string& bytes, const std::string& path) : bytes_(bytes), path_(path) {}

  std::vector<ZipEntry> central_directory() {
    size_t eocd = find_end_of_central();
    const char* e = at(eocd, kEndOfCentralSize, "end of central directory");
    uint64_t disk = load16(e + 4), cd_disk = load16(e + 6);
    uint64_t count = load16(e + 10);
    uint64_t cd_size = load32(e + 12), cd_offset = load32(e + 16);
    if (count == kMax16 || cd_size == kMax32 || cd_offset == kMax32) {
      // zip64: a locator right before the end record points to the zip64 end record.
      if (eocd < 20) truncated("zip64 end of central directory locator");
      const char* loc = at(eocd - 20, 20, "zip64 end of central directory locator");
      if (load32(loc) != kZip64LocatorSig) bad("zip64 end of central directory locator is missing");
      uint64_t z_offset = load64(loc + 8);
      const char* z = at(z_offset, 56, "zip64 end of central directory");
      if (load32(z) != kZip64EndSig) bad("zip64 end of central directory record is missing");
      disk = load32(z + 16);
      cd_disk = load32(z + 20);
      count = load64(z + 32);
      cd_size = load64(z + 40);
      cd_offset = load64(z + 48);
    }
    if (disk != 0 || cd_disk != 0) bad("multi-disk archives are not supported");

    std::vector<ZipEntry> entries;
    uint64_t pos = cd_offset;
    for (uint64_t i = 0; i < count; ++i) {
      const char* h = at(pos, 46, "central directory");
      if (load32(h) != kCentralHeaderSig)
        bad(str_cat("central directory entry ", i, " is corrupt"));
      ZipEntry entry;
      entry.flags = load16(h + 8);
      entry.method = load16(h + 10);
      entry.crc = load32(h + 16);
      entry.compressed_size = load32(h + 20);
      entry.size = load32(h + 24);
      uint16_t name_len = load16(h + 28), extra_len = load16(h + 30), comment_len = load16(h + 32);
      entry.local_offset = load32(h + 42);
      entry.name.assign(at(pos + 46, name_len, "central directory"), name_len);
      read_zip64_extra(at(pos + 46 + name_len, extra_len, "central directory"), extra_len, entry);
      pos += 46 + uint64_t{name_len} + extra_len + comment_len;
      entries.push_back(std::move(entry));
    }
    if (pos > cd_offset + cd_size) bad("central directory is longer than recorded");
    return entries;
  }

  // The entry's contents, decompressed and CRC-checked.
  std::string contents(const ZipEntry& entry, const std::string& what) {
    if (entry.flags & 0x1) fail(what, ": encrypted entries are not supported");
    if (entry.method != 0 && entry.method != 8)
      fail(what, ": unsupported zip compression method ", entry.method,
           " (otter reads stored and deflated entries)");
    check_claimed_size(entry, what);
    const char* h = at(entry.local_offset, 30, "local file header");
    if (load32(h) != kLocalHeaderSig) fail(what, ": local file header is corrupt");
    uint64_t data_offset = entry.local_offset + 30 + load16(h + 26) + load16(h + 28);
    const char* data = at(data_offset, entry.compressed_size, "entry data");
    std::string out;
    if (entry.method == 0) {
      if (entry.compressed_size != entry.size)
        fail(what, ": stored entry has compressed size ", entry.compressed_size, " but size ",
             entry.size);
      out.assign(data, static_cast<size_t>(entry.size));
    } else {
      out = inflate_raw(data, static_cast<size_t>(entry.compressed_size), entry.size, what);
    }
    uint32_t crc = crc32_of(out.data(), out.size());
    if (crc != entry.crc)
      fail(what, ": CRC-32 mismatch (computed ", crc, ", archive records ", entry.crc,
           "); the file is corrupt");
    return out;
  }

 private:
  // Refuses, before any allocation, an entry whose recorded size is over OTTER_MAX_NPZ_BYTES or
  // beyond what deflate can expand its compressed bytes to (a zip bomb or a corrupt record).
  void check_claimed_size(const ZipEntry& entry, const std::string& what) const {
    const uint64_t limit = max_npz_bytes();
    if (entry.size > limit)
      fail(what, ": uncompressed size ", entry.size, " bytes exceeds the limit of ", limit,
           " bytes per archive (OTTER_MAX_NPZ_BYTES)");
    if (entry.method == 8 && entry.size / kMaxDeflateRatio > entry.compressed_size + 1)
      fail(what, ": ", entry.compressed_size, " deflated bytes claim to expand to ", entry.size,
           ", more than deflate's maximum ratio of ", kMaxDeflateRatio, ":1 (corrupt or a zip bomb)");
  }
  [[noreturn]] void bad(const std::string& why) const { fail("'", path_, "': ", why); }
  [[noreturn]] void truncated(const char* part) const {
    fail("'", path_, "' is truncated (", part, " lies past the end of the file)");
  }
  const char* at(uint64_t offset, uint64_t n, const char* part) const {
    if (offset > bytes_.size() || n > bytes_.size() - offset) truncated(part);
    return bytes_.data() + offset;
  }

  size_t find_end_of_central() const {
    if (bytes_.size() < kEndOfCentralSize) {
      if (bytes_.size() >= 4 && load32(bytes_.data()) == kLocalHeaderSig)
        truncated("end of central directory");
      bad("not a zip archive (too short)");
    }
    // The end record sits at the end, followed by a comment of at most 65535 bytes.
    size_t last = bytes_.size() - kEndOfCentralSize;
    size_t first = last > kMax16 ? last - kMax16 : 0;
    for (size_t p = last + 1; p-- > first;)
      if (load32(bytes_.data() + p) == kEndOfCentralSig) return p;
    if (load32(bytes_.data()) == kLocalHeaderSig)
      bad("zip archive is truncated (no end of central directory record)");
    if (bytes_.compare(0, kNpyMagicSize, kNpyMagic) == 0)
      bad("not a zip archive: this is a single .npy array (read it with read_npy)");
    bad("not a zip archive (no end of central directory record)");
  }

  // Values saturated at 0xffffffff in the fixed header are in the zip64 extra field, in the
  // order size, compressed size, local header offset.
  void read_zip64_extra(const char* extra, size_t len, ZipEntry& entry) const {
    bool need_size = entry.size == kMax32, need_csize = entry.compressed_size == kMax32,
         need_offset = entry.local_offset == kMax32;
    if (!need_size && !need_csize && !need_offset) return;
    size_t p = 0;
    while (p + 4 <= len) {
      uint16_t id = load16(extra + p), n = load16(extra + p + 2);
      if (p + 4 + n > len) break;
      if (id == kZip64ExtraId) {
        const char* f = extra + p + 4;
        size_t avail = n;
        auto take = [&](uint64_t& v) {
          if (avail < 8) bad(str_cat("zip64 extra field of '", entry.name, "' is too short"));
          v = load64(f);
          f += 8;
          avail -= 8;
        };
        if (need_size) take(entry.size);
        if (need_csize) take(entry.compressed_size);
        if (need_offset) take(entry.local_offset);
        return;
      }
      p += 4 + n;
    }
    bad(str_cat("entry '", entry.name, "' needs a zip64 extra field and has none"));
  }

  const std::string& bytes_;
  const std::string& path_;
};

}  // namespace

uint32_t crc32_of(const char* data, size_t n) {
  uLong crc = crc32(0L, Z_NULL, 0);
  while (n > 0) {
    size_t chunk = std::min(n, kZlibChunk);
    crc = crc32(crc, reinterpret_cast<const Bytef*>(data), static_cast<uInt>(chunk));
    data += chunk;
    n -= chunk;
  }
  return static_cast<uint32_t>(crc);
}
std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("cannot open '", path, "': ", std::strerror(errno));
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) fail("error reading '", path, "'");
  return std::move(ss).str();
}

// Writes `bytes` to path + ".tmp" and renames it over `path`, so a failed write never leaves a
std::vector<ZipEntry> zip_entries(const std::string& bytes, const std::string& path) {
  return ZipReader(bytes, path).central_directory();
}

std::string zip_contents(const std::string& bytes, const std::string& path, const ZipEntry& entry,
                         const std::string& what) {
  return ZipReader(bytes, path).contents(entry, what);
}

}  // namespace otter::npz_detail
