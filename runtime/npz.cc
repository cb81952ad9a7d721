// .npy / .npz reading and writing: numpy's array format inside stored or deflated zip archives.
//
// Supported element types are numpy's little-endian '<f4' '<f8' '<f2' '<i8' '<i4' '|i1' '|u1'
// '|b1'. bfloat16 has no numpy dtype, so a bf16 tensor is refused on write (cast it to float32
// first) rather than stored under a descr that numpy would read back as something else.
// Archives: stored (method 0) and deflated (method 8) entries, zip64 extra fields and records,
// data descriptors (sizes are taken from the central directory), CRC-32 checked on read.
#include "runtime/npz.h"

#include <zlib.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>

namespace otter {

static_assert(std::endian::native == std::endian::little,
              "npz.cc copies little-endian array data as is");

namespace {

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

// ---------------------------------------------------------------------------------------------
// numpy dtypes

struct NpyType {
  const char* descr;  // as numpy writes it
  DataType dtype;
};

constexpr NpyType kNpyTypes[] = {
    {"<f4", DataType::kFloat32}, {"<f8", DataType::kFloat64}, {"<f2", DataType::kFloat16},
    {"<i8", DataType::kInt64},   {"<i4", DataType::kInt32},   {"|i1", DataType::kInt8},
    {"|u1", DataType::kUInt8},   {"|b1", DataType::kBool},
};

DataType dtype_from_descr(const std::string& descr, const std::string& what) {
  // numpy writes '<' for little-endian and '|' for single-byte types; '=' (native) means
  // little-endian here too, and single-byte types have no byte order at all.
  if (descr.size() == 3 && (descr[0] == '<' || descr[0] == '|' || descr[0] == '=' ||
                            (descr[0] == '>' && descr[2] == '1'))) {
    for (const NpyType& t : kNpyTypes)
      if (descr.compare(1, 2, t.descr + 1) == 0) return t.dtype;
  }
  if (descr.size() == 3 && descr[0] == '>')
    fail(what, ": big-endian dtype '", descr, "' is not supported (store it little-endian)");
  fail(what, ": unsupported dtype '", descr, "' (otter reads <f4 <f8 <f2 <i8 <i4 |i1 |u1 |b1)");
}

const char* descr_from_dtype(DataType dtype, const std::string& what) {
  for (const NpyType& t : kNpyTypes)
    if (t.dtype == dtype) return t.descr;
  if (dtype == DataType::kBFloat16)
    fail(what, ": bfloat16 has no numpy dtype; cast the tensor to float32 before saving it");
  fail(what, ": cannot save a tensor of type ", dtype_name(dtype));
}

// ---------------------------------------------------------------------------------------------
// The .npy header: a Python dict literal such as
//   {'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }

struct NpyHeader {
  std::string descr;
  bool fortran_order = false;
  std::vector<int64_t> shape;
};

class HeaderParser {
 public:
  HeaderParser(std::string_view text, const std::string& what) : text_(text), what_(what) {}

  NpyHeader parse() {
    NpyHeader h;
    bool seen_descr = false, seen_order = false, seen_shape = false;
    expect('{');
    while (!try_consume('}')) {
      std::string key = parse_string();
      expect(':');
      if (key == "descr") {
        skip_space();
        if (peek() != '\'' && peek() != '"')
          bad("structured dtypes are not supported (descr is not a plain type string)");
        h.descr = parse_string();
        seen_descr = true;
      } else if (key == "fortran_order") {
        h.fortran_order = parse_bool();
        seen_order = true;
      } else if (key == "shape") {
        h.shape = parse_shape();
        seen_shape = true;
      } else {
        bad(str_cat("unexpected key '", key, "'"));
      }
      if (!try_consume(',')) {
        expect('}');
        break;
      }
    }
    if (!seen_descr || !seen_order || !seen_shape)
      bad("the header lacks one of 'descr', 'fortran_order', 'shape'");
    return h;
  }

 private:
  [[noreturn]] void bad(const std::string& why) const {
    fail(what_, ": malformed .npy header (", why, "): ", text_);
  }
  void skip_space() {
    while (pos_ < text_.size() &&
           (text_[pos_] == ' ' || text_[pos_] == '\n' || text_[pos_] == '\t'))
      ++pos_;
  }
  char peek() const { return pos_ < text_.size() ? text_[pos_] : '\0'; }
  bool try_consume(char c) {
    skip_space();
    if (peek() != c) return false;
    ++pos_;
    return true;
  }
  void expect(char c) {
    if (!try_consume(c)) bad(str_cat("expected '", c, "' at offset ", pos_));
  }
  std::string parse_string() {
    skip_space();
    char quote = peek();
    if (quote != '\'' && quote != '"') bad(str_cat("expected a string at offset ", pos_));
    size_t end = text_.find(quote, pos_ + 1);
    if (end == std::string_view::npos) bad("unterminated string");
    std::string s(text_.substr(pos_ + 1, end - pos_ - 1));
    pos_ = end + 1;
    return s;
  }
  bool parse_bool() {
    skip_space();
    for (auto [word, value] : {std::pair{"True", true}, std::pair{"False", false}}) {
      size_t n = std::strlen(word);
      if (text_.compare(pos_, n, word) == 0) {
        pos_ += n;
        return value;
      }
    }
    bad("fortran_order is neither True nor False");
  }
  std::vector<int64_t> parse_shape() {
    std::vector<int64_t> shape;
    expect('(');
    while (!try_consume(')')) {
      skip_space();
      size_t start = pos_;
      int64_t d = 0;
      while (peek() >= '0' && peek() <= '9') {
        if (d > (std::numeric_limits<int64_t>::max() - 9) / 10) bad("dimension too large");
        d = d * 10 + (text_[pos_++] - '0');
      }
      if (pos_ == start) bad(str_cat("expected a dimension at offset ", pos_));
      shape.push_back(d);
      if (!try_consume(',')) {
        expect(')');
        break;
      }
    }
    return shape;
  }

  std::string_view text_;
  const std::string& what_;
  size_t pos_ = 0;
};

// ---------------------------------------------------------------------------------------------
// Little-endian byte access

uint16_t load16(const char* p) {
  uint16_t v;
  std::memcpy(&v, p, 2);
  return v;
}
uint32_t load32(const char* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}
uint64_t load64(const char* p) {
  uint64_t v;
  std::memcpy(&v, p, 8);
  return v;
}
void put16(std::string& out, uint16_t v) { out.append(reinterpret_cast<const char*>(&v), 2); }
void put32(std::string& out, uint32_t v) { out.append(reinterpret_cast<const char*>(&v), 4); }
void put64(std::string& out, uint64_t v) { out.append(reinterpret_cast<const char*>(&v), 8); }

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
// half-written file under the final name.
void write_file_atomically(const std::string& path, const std::string& bytes) {
  std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) fail("cannot create '", tmp, "': ", std::strerror(errno));
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    out.close();
    if (!out) {
      std::remove(tmp.c_str());
      fail("error writing '", tmp, "'");
    }
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) {
    std::remove(tmp.c_str());
    fail("cannot rename '", tmp, "' to '", path, "': ", ec.message());
  }
}

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
// Zip reading

struct ZipEntry {
  std::string name;
  uint16_t flags = 0;
  uint16_t method = 0;
  uint32_t crc = 0;
  uint64_t compressed_size = 0;
  uint64_t size = 0;
  uint64_t local_offset = 0;
};

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

// -----------------------------------------------------------------------------------------------
// .npy

Tensor parse_npy(const std::string& bytes, const std::string& what) {
  size_t magic_seen = std::min(bytes.size(), kNpyMagicSize);
  if (bytes.compare(0, magic_seen, kNpyMagic, magic_seen) != 0)
    fail(what, ": not a .npy array (bad magic)");
  if (bytes.size() < kNpyMagicSize + 4)
    fail(what, ": truncated .npy data (", bytes.size(), " bytes)");
  int major = static_cast<unsigned char>(bytes[6]);
  size_t header_len, header_start;
  if (major == 1) {
    header_len = load16(bytes.data() + 8);
    header_start = 10;
  } else if (major == 2 || major == 3) {
    if (bytes.size() < 12) fail(what, ": truncated .npy header");
    header_len = load32(bytes.data() + 8);
    header_start = 12;
  } else {
    fail(what, ": unsupported .npy format version ", major, ".",
         static_cast<int>(static_cast<unsigned char>(bytes[7])));
  }
  if (header_len > bytes.size() - header_start) fail(what, ": truncated .npy header");
  NpyHeader h =
      HeaderParser(std::string_view(bytes).substr(header_start, header_len), what).parse();
  DataType dtype = dtype_from_descr(h.descr, what);
  if (h.fortran_order && h.shape.size() >= 2)
    fail(what, ": Fortran-ordered arrays are not supported (save np.ascontiguousarray(a))");

  size_t data_start = header_start + header_len;
  uint64_t count = 1;
  for (int64_t d : h.shape) {
    if (d != 0 && count > std::numeric_limits<uint64_t>::max() / 16 / static_cast<uint64_t>(d))
      fail(what, ": shape ", dims_to_string(h.shape), " is too large");
    count *= static_cast<uint64_t>(d);
  }
  uint64_t nbytes = count * dtype_size(dtype);
  uint64_t available = bytes.size() - data_start;
  if (available < nbytes)
    fail(what, ": truncated array data (", available, " of ", nbytes, " bytes for ",
         dtype_name(dtype), dims_to_string(h.shape), ")");
  if (available > nbytes)
    fail(what, ": ", available - nbytes, " unexpected bytes after the array data of ",
         dtype_name(dtype), dims_to_string(h.shape));

  Tensor t(dtype, h.shape);
  if (nbytes) std::memcpy(t.raw(), bytes.data() + data_start, static_cast<size_t>(nbytes));
  if (dtype == DataType::kBool) {  // canonical 0/1 whatever byte numpy stored
    auto* p = static_cast<uint8_t*>(t.raw());
    for (uint64_t i = 0; i < count; ++i) p[i] = p[i] != 0;
  }
  return t;
}

namespace {

// `what` names the tensor in messages.
std::string serialize_npy_as(const Tensor& t, const std::string& what) {
  OTTER_CHECK(t.defined(), what, ": cannot save an undefined tensor");
  std::string dict = str_cat("{'descr': '", descr_from_dtype(t.dtype(), what),
                             "', 'fortran_order': False, 'shape': (");
  for (int64_t i = 0; i < t.rank(); ++i) dict += str_cat(i ? ", " : "", t.dim(i));
  dict += t.rank() == 1 ? ",), }" : "), }";
  // numpy pads the header with spaces and a newline so the data starts 64-byte aligned.
  auto padded = [&](size_t prefix) {
    size_t total = prefix + dict.size() + 1;
    return dict + std::string((kNpyAlign - total % kNpyAlign) % kNpyAlign, ' ') + "\n";
  };
  std::string header = padded(10);
  int major = 1;
  if (header.size() > kMax16) {
    header = padded(12);
    major = 2;
  }
  std::string out(kNpyMagic, kNpyMagicSize);
  out += static_cast<char>(major);
  out += '\0';
  if (major == 1)
    put16(out, static_cast<uint16_t>(header.size()));
  else
    put32(out, static_cast<uint32_t>(header.size()));
  out += header;
  out.append(static_cast<const char*>(t.raw()), t.nbytes());
  return out;
}

}  // namespace

std::string serialize_npy(const Tensor& t) { return serialize_npy_as(t, t.describe()); }

Tensor read_npy(const std::string& path) {
  return parse_npy(read_file(path), str_cat("'", path, "'"));
}

void write_npy(const std::string& path, const Tensor& t) {
  write_file_atomically(path, serialize_npy_as(t, str_cat("write_npy '", path, "'")));
}

// -----------------------------------------------------------------------------------------------
// .npz

const Tensor* NpzArchive::find(const std::string& name) const {
  for (const auto& [n, t] : arrays)
    if (n == name) return &t;
  return nullptr;
}

const Tensor& NpzArchive::get(const std::string& name) const {
  if (const Tensor* t = find(name)) return *t;
  std::string names;
  for (const auto& [n, t] : arrays) names += str_cat(names.empty() ? "" : ", ", n);
  fail("'", path, "' has no array '", name, "' (it has: ", names.empty() ? "none" : names, ")");
}

NpzArchive read_npz(const std::string& path) {
  std::string bytes = read_file(path);
  ZipReader zip(bytes, path);
  NpzArchive archive;
  archive.path = path;
  for (const ZipEntry& entry : zip.central_directory()) {
    if (!entry.name.empty() && entry.name.back() == '/') continue;  // a directory
    constexpr std::string_view kSuffix = ".npy";
    if (entry.name.size() <= kSuffix.size() ||
        entry.name.compare(entry.name.size() - kSuffix.size(), kSuffix.size(), kSuffix) != 0)
      fail("'", path, "': entry '", entry.name, "' is not a .npy array");
    std::string name = entry.name.substr(0, entry.name.size() - kSuffix.size());
    std::string what = str_cat("'", path, "': array '", name, "'");
    if (archive.find(name)) fail(what, " appears twice in the archive");
    archive.arrays.emplace_back(name, parse_npy(zip.contents(entry, what), what));
  }
  return archive;
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

}  // namespace otter
