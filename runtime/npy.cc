// The .npy format: numpy's dtype strings, the header dict, and parsing and serializing one array.
//
// Supported element types are numpy's little-endian '<f4' '<f8' '<f2' '<i8' '<i4' '|i1' '|u1'
// '|b1'. bfloat16 has no numpy dtype, so a bf16 tensor is refused on write (cast it to float32
// first) rather than stored under a descr that numpy would read back as something else.
#include <bit>
#include <cstring>
#include <limits>
#include <string_view>

#include "runtime/npz.h"
#include "runtime/npz_format.h"

namespace otter {

static_assert(std::endian::native == std::endian::little, "npy.cc copies little-endian array data as is");

using namespace npz_detail;

namespace {

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

}  // namespace

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

// `what` names the tensor in messages.
std::string npz_detail::serialize_npy_as(const Tensor& t, const std::string& what) {
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

std::string serialize_npy(const Tensor& t) { return serialize_npy_as(t, t.describe()); }

}  // namespace otter
