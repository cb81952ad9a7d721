// Writing .npy and .npz files: zip records (stored or deflated entries, zip64 where sizes or
// offsets need it, reproducible timestamps) and atomic replacement of the target file.
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "graph/error.h"
#include "runtime/npz.h"
#include "runtime/npz_format.h"

namespace otter {

using namespace npz_detail;

namespace {

std::string deflate_raw(const std::string& in) {
  z_stream zs{};
  if (deflateInit2(&zs, Z_DEFAULT_COMPRESSION, Z_DEFLATED, -MAX_WBITS, 8, Z_DEFAULT_STRATEGY) !=
      Z_OK)
    fail("cannot initialise zlib for compression");
  std::string out;
  size_t in_left = in.size();
  zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
  char buf[1 << 16];
  int rc = Z_OK;
  while (rc != Z_STREAM_END) {
    if (zs.avail_in == 0 && in_left > 0) {
      zs.avail_in = static_cast<uInt>(std::min(in_left, kZlibChunk));
      in_left -= zs.avail_in;
    }
    zs.next_out = reinterpret_cast<Bytef*>(buf);
    zs.avail_out = sizeof(buf);
    rc = deflate(&zs, in_left == 0 ? Z_FINISH : Z_NO_FLUSH);
    if (rc == Z_STREAM_ERROR) {
      deflateEnd(&zs);
      fail("zlib compression failed");
    }
    out.append(buf, sizeof(buf) - zs.avail_out);
  }
  deflateEnd(&zs);
  return out;
}

// ---------------------------------------------------------------------------------------------
// Zip writing

struct WrittenEntry {
  std::string name;
  uint16_t method;
  uint32_t crc;
  uint64_t compressed_size;
  uint64_t size;
  uint64_t local_offset;
};

constexpr uint16_t kVersionDeflate = 20;  // zip 2.0
constexpr uint16_t kVersionZip64 = 45;    // zip 4.5
constexpr uint16_t kMadeByUnix = 3 << 8;
constexpr uint16_t kDosDate1980 = (0 << 9) | (1 << 5) | 1;  // 1980-01-01, for reproducible files
constexpr uint32_t kFileMode = 0100644u << 16;              // regular file, rw-r--r--

void put_local_header(std::string& out, const WrittenEntry& e) {
  bool zip64 = e.size >= kMax32 || e.compressed_size >= kMax32;
  put32(out, kLocalHeaderSig);
  put16(out, zip64 ? kVersionZip64 : kVersionDeflate);
  put16(out, 0);  // flags
  put16(out, e.method);
  put16(out, 0);  // time
  put16(out, kDosDate1980);
  put32(out, e.crc);
  put32(out, zip64 ? kMax32 : static_cast<uint32_t>(e.compressed_size));
  put32(out, zip64 ? kMax32 : static_cast<uint32_t>(e.size));
  put16(out, static_cast<uint16_t>(e.name.size()));
  put16(out, zip64 ? 20 : 0);
  out += e.name;
  if (zip64) {
    put16(out, kZip64ExtraId);
    put16(out, 16);
    put64(out, e.size);
    put64(out, e.compressed_size);
  }
}

void put_central_header(std::string& out, const WrittenEntry& e) {
  bool big_size = e.size >= kMax32, big_csize = e.compressed_size >= kMax32,
       big_offset = e.local_offset >= kMax32;
  // The local header of a big entry is zip64 as well; keep the recorded version consistent.
  bool zip64 = big_size || big_csize || big_offset;
  uint16_t extra_len = (big_size || big_csize ? 16 : 0) + (big_offset ? 8 : 0);
  put32(out, kCentralHeaderSig);
  put16(out, kMadeByUnix | kVersionZip64);
  put16(out, zip64 ? kVersionZip64 : kVersionDeflate);
  put16(out, 0);
  put16(out, e.method);
  put16(out, 0);
  put16(out, kDosDate1980);
  put32(out, e.crc);
  // A big entry's local header carries both sizes in zip64 form; mirror that here.
  put32(out, big_size || big_csize ? kMax32 : static_cast<uint32_t>(e.compressed_size));
  put32(out, big_size || big_csize ? kMax32 : static_cast<uint32_t>(e.size));
  put16(out, static_cast<uint16_t>(e.name.size()));
  put16(out, extra_len ? extra_len + 4 : 0);
  put16(out, 0);  // comment
  put16(out, 0);  // disk
  put16(out, 0);  // internal attributes
  put32(out, kFileMode);
  put32(out, big_offset ? kMax32 : static_cast<uint32_t>(e.local_offset));
  out += e.name;
  if (extra_len) {
    put16(out, kZip64ExtraId);
    put16(out, extra_len);
    if (big_size || big_csize) {
      put64(out, e.size);
      put64(out, e.compressed_size);
    }
    if (big_offset) put64(out, e.local_offset);
  }
}

void put_end_records(std::string& out, uint64_t count, uint64_t cd_offset, uint64_t cd_size) {
  if (count >= kMax16 || cd_offset >= kMax32 || cd_size >= kMax32) {
    uint64_t z_offset = out.size();
    put32(out, kZip64EndSig);
    put64(out, 44);  // size of the rest of the record
    put16(out, kMadeByUnix | kVersionZip64);
    put16(out, kVersionZip64);
    put32(out, 0);
    put32(out, 0);
    put64(out, count);
    put64(out, count);
    put64(out, cd_size);
    put64(out, cd_offset);
    put32(out, kZip64LocatorSig);
    put32(out, 0);
    put64(out, z_offset);
    put32(out, 1);  // total disks
  }
  put32(out, kEndOfCentralSig);
  put16(out, 0);
  put16(out, 0);
  put16(out, static_cast<uint16_t>(std::min<uint64_t>(count, kMax16)));
  put16(out, static_cast<uint16_t>(std::min<uint64_t>(count, kMax16)));
  put32(out, static_cast<uint32_t>(std::min<uint64_t>(cd_size, kMax32)));
  put32(out, static_cast<uint32_t>(std::min<uint64_t>(cd_offset, kMax32)));
  put16(out, 0);  // comment
}

std::string npy_entry_name(const std::string& name) { return name + ".npy"; }

}  // namespace

// half-written file under the final name.
void npz_detail::write_file_atomically(const std::string& path, const std::string& bytes) {
  std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) fail("cannot create '", tmp, "': ", std::strerror(errno));
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    out.close();
    if (!out) {
      const int err = errno;
      std::remove(tmp.c_str());
      fail("cannot write '", tmp, "': ", std::strerror(err));
    }
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) {
    std::remove(tmp.c_str());
    fail("cannot rename '", tmp, "' to '", path, "': ", ec.message());
  }
}

void write_npz(const std::string& path, const std::vector<std::pair<std::string, Tensor>>& arrays,
               bool compress) {
  std::string out;
  std::vector<WrittenEntry> entries;
  for (const auto& [name, tensor] : arrays) {
    OTTER_CHECK(!name.empty(), "write_npz '", path, "': empty array name");
    OTTER_CHECK(name.size() < kMax16 - 4, "write_npz '", path, "': array name too long");
    for (const WrittenEntry& e : entries)
      OTTER_CHECK(e.name != npy_entry_name(name), "write_npz '", path, "': array '", name,
                  "' given twice");
    std::string npy =
        serialize_npy_as(tensor, str_cat("write_npz '", path, "': array '", name, "'"));
    std::string deflated = compress ? deflate_raw(npy) : std::string();
    WrittenEntry e{npy_entry_name(name),
                   uint16_t(compress ? 8 : 0),
                   crc32_of(npy.data(), npy.size()),
                   compress ? deflated.size() : npy.size(),
                   npy.size(),
                   out.size()};
    put_local_header(out, e);
    out += compress ? deflated : npy;
    entries.push_back(std::move(e));
  }
  uint64_t cd_offset = out.size();
  for (const WrittenEntry& e : entries) put_central_header(out, e);
  put_end_records(out, entries.size(), cd_offset, out.size() - cd_offset);
  write_file_atomically(path, out);
}

void write_npy(const std::string& path, const Tensor& t) {
  write_file_atomically(path, serialize_npy_as(t, str_cat("write_npy '", path, "'")));
}

}  // namespace otter
