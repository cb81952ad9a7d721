// Tests of .npy/.npz reading and writing against fixtures written by numpy (tests/data).
#include "runtime/npz.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>

namespace otter {
namespace {

namespace fs = std::filesystem;

std::string data_path(const std::string& name) {
  return std::string(OTTER_SOURCE_DIR) + "/tests/data/" + name;
}

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void spit(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

std::string temp_path(const std::string& name) {
  fs::path dir = fs::path(testing::TempDir()) / "otter_npz_test";
  fs::create_directories(dir);
  return (dir / name).string();
}

// The fixture arrays, as documented in tests/data/make_npz_fixtures.py: each element is a formula
// of its flat index.
struct Expected {
  std::string name;
  DataType dtype;
  std::vector<int64_t> dims;
  std::function<double(int64_t)> value;
};

const std::vector<Expected>& expected_arrays() {
  static const std::vector<Expected> kArrays = {
      {"f4", DataType::kFloat32, {3, 4}, [](int64_t i) { return 0.5 * i - 1; }},
      {"f8", DataType::kFloat64, {2, 3}, [](int64_t i) { return i / 3.0; }},
      {"f2", DataType::kFloat16, {8}, [](int64_t i) { return 0.25 * (i - 4); }},
      {"i8", DataType::kInt64, {5}, [](int64_t i) { return (i - 2) * 1e12; }},
      {"i4", DataType::kInt32, {2, 3}, [](int64_t i) { return 1000.0 * (i - 3); }},
      {"i1", DataType::kInt8, {2, 5}, [](int64_t i) { return i - 5.0; }},
      {"u1", DataType::kUInt8, {6}, [](int64_t i) { return 250.0 + i; }},
      {"b1", DataType::kBool, {7}, [](int64_t i) { return i % 3 == 0 ? 1.0 : 0.0; }},
      {"scalar", DataType::kFloat32, {}, [](int64_t) { return 3.5; }},
      {"empty", DataType::kFloat32, {0, 3}, [](int64_t) { return 0.0; }},
      {"empty3", DataType::kInt64, {2, 0, 4}, [](int64_t) { return 0.0; }},
      {"nd", DataType::kFloat32, {2, 3, 4, 5}, [](int64_t i) { return double(i); }},
  };
  return kArrays;
}

void expect_matches(const Expected& e, const Tensor& t) {
  SCOPED_TRACE(e.name);
  ASSERT_EQ(t.dtype(), e.dtype) << t.describe();
  ASSERT_EQ(t.dims(), e.dims);
  for (int64_t i = 0; i < t.numel(); ++i) ASSERT_EQ(t.get_as_double(i), e.value(i)) << "at " << i;
}

class FixtureArchive : public testing::TestWithParam<const char*> {};

TEST_P(FixtureArchive, ReadsEveryArrayWithNumpysValues) {
  NpzArchive a = read_npz(data_path(GetParam()));
  const auto& expected = expected_arrays();
  ASSERT_EQ(a.arrays.size(), expected.size());
  for (size_t k = 0; k < expected.size(); ++k) {
    EXPECT_EQ(a.arrays[k].first, expected[k].name);
    expect_matches(expected[k], a.arrays[k].second);
    expect_matches(expected[k], a.get(expected[k].name));
  }
  // Values numpy stores exactly: spot-check raw storage too.
  EXPECT_EQ(a.get("i8").data<int64_t>()[0], -2000000000000);
  EXPECT_EQ(a.get("u1").data<uint8_t>()[5], 255);
  EXPECT_EQ(a.get("f2").data<Half>()[0].bits, 0xbc00);  // -1.0 in binary16
}

INSTANTIATE_TEST_SUITE_P(Npz, FixtureArchive,
                         testing::Values("stored.npz", "deflated.npz", "streamed.npz", "zip64.npz"),
                         [](const auto& info) {
                           std::string s = info.param;
                           return s.substr(0, s.find('.'));
                         });

TEST(Npy, ReadsFormatVersions1To3) {
  for (const char* file : {"v1.npy", "v2.npy", "v3.npy"})
    expect_matches(expected_arrays()[0], read_npy(data_path(file)));
}

// numpy's stored .npz holds each array's .npy bytes verbatim, so serialize_npy must reproduce them
// byte for byte (header text, padding to 64 bytes, data) for every dtype and shape.
TEST(Npy, SerializeReproducesNumpysBytes) {
  std::string archive = slurp(data_path("stored.npz"));
  for (const Expected& e : expected_arrays()) {
    Tensor t(e.dtype, e.dims);
    for (int64_t i = 0; i < t.numel(); ++i) {
      double v = e.value(i);
      switch (e.dtype) {
        case DataType::kFloat32:
          t.data<float>()[i] = float(v);
          break;
        case DataType::kFloat64:
          t.data<double>()[i] = v;
          break;
        case DataType::kFloat16:
          t.data<Half>()[i].bits = 0;
          break;  // filled below
        case DataType::kInt64:
          t.data<int64_t>()[i] = int64_t(v);
          break;
        case DataType::kInt32:
          t.data<int32_t>()[i] = int32_t(v);
          break;
        case DataType::kInt8:
          t.data<int8_t>()[i] = int8_t(v);
          break;
        case DataType::kUInt8:
          t.data<uint8_t>()[i] = uint8_t(v);
          break;
        case DataType::kBool:
          t.data<bool>()[i] = v != 0;
          break;
        default:
          FAIL();
      }
    }
    if (e.dtype == DataType::kFloat16) {
      // 0.25 * (i - 4) for i = 0..7 in IEEE binary16, by hand.
      const uint16_t bits[] = {0xbc00, 0xba00, 0xb800, 0xb400, 0x0000, 0x3400, 0x3800, 0x3a00};
      for (int i = 0; i < 8; ++i) t.data<Half>()[i].bits = bits[i];
    }
    std::string npy = serialize_npy(t);
    EXPECT_EQ(npy.size() % 64, t.nbytes() % 64) << e.name << ": data must start 64-byte aligned";
    EXPECT_NE(archive.find(npy), std::string::npos) << e.name << " header: " << npy.substr(10, 80);
  }
}

TEST(Npy, WriteAndReadSingleFile) {
  std::string path = temp_path("one.npy");
  Tensor t = Tensor::from_vector<int32_t>({2, 2}, {1, -2, 3, -4});
  write_npy(path, t);
  EXPECT_TRUE(read_npy(path).bitwise_equal(t));
  EXPECT_EQ(slurp(path), serialize_npy(t));
  EXPECT_FALSE(fs::exists(path + ".tmp"));
}

// Expects `fn` to throw an otter::Error whose message contains every one of `parts`.
template <typename Fn>
void expect_error(Fn fn, std::initializer_list<std::string> parts) {
  try {
    fn();
    ADD_FAILURE() << "no error thrown";
  } catch (const Error& err) {
    std::string msg = err.what();
    for (const std::string& p : parts) EXPECT_NE(msg.find(p), std::string::npos) << msg;
  }
}

TEST(NpyErrors, RefusesFortranOrderUnsupportedDtypesAndBigEndian) {
  expect_error([] { read_npy(data_path("fortran.npy")); }, {"fortran.npy", "Fortran"});
  expect_error([] { read_npy(data_path("uint16.npy")); }, {"uint16.npy", "'<u2'"});
  expect_error([] { read_npy(data_path("bigendian.npy")); }, {"bigendian.npy", "big-endian"});
}

TEST(NpyErrors, RefusesBadHeadersAndTruncatedData) {
  std::string good = slurp(data_path("v1.npy"));
  expect_error([] { parse_npy("NUMPY", "x.npy"); }, {"x.npy", "bad magic"});
  expect_error([&] { parse_npy(good.substr(0, 8), "x.npy"); }, {"x.npy", "truncated"});
  expect_error([&] { parse_npy(good.substr(0, 40), "x.npy"); }, {"x.npy", "truncated"});
  expect_error([&] { parse_npy(good.substr(0, good.size() - 1), "x.npy"); },
               {"x.npy", "truncated array data"});
  expect_error([&] { parse_npy(good + "x", "x.npy"); }, {"x.npy", "unexpected bytes"});
  std::string bad = good;
  bad.replace(bad.find("'shape'"), 7, "'shapo'");
  expect_error([&] { parse_npy(bad, "x.npy"); }, {"x.npy", "malformed", "shapo"});
  bad = good;
  bad[6] = 9;
  expect_error([&] { parse_npy(bad, "x.npy"); }, {"x.npy", "version 9"});
}

TEST(NpyErrors, RefusesToWriteBFloat16) {
  Tensor t(DataType::kBFloat16, {2});
  expect_error([&] { serialize_npy(t); }, {"bfloat16", "float32"});
}

TEST(NpzErrors, MissingFileNotAZipAndMissingArray) {
  expect_error([] { read_npz(data_path("no_such.npz")); }, {"no_such.npz", "cannot open"});
  expect_error([] { read_npz(data_path("v1.npy")); }, {"v1.npy", "not a zip", "read_npy"});
  std::string junk = temp_path("junk.npz");
  spit(junk, std::string(100, 'z'));
  expect_error([&] { read_npz(junk); }, {"junk.npz", "not a zip"});
  NpzArchive a = read_npz(data_path("stored.npz"));
  EXPECT_EQ(a.find("nope"), nullptr);
  expect_error([&] { a.get("nope"); }, {"stored.npz", "'nope'", "f4, f8, f2", "nd"});
}

TEST(NpzErrors, TruncatedArchives) {
  std::string bytes = slurp(data_path("deflated.npz"));
  for (size_t keep : {size_t{10}, bytes.size() / 2, bytes.size() - 30, bytes.size() - 1}) {
    SCOPED_TRACE(keep);
    std::string path = temp_path("truncated.npz");
    spit(path, bytes.substr(0, keep));
    expect_error([&] { read_npz(path); }, {"truncated.npz"});
  }
}

TEST(NpzErrors, CrcMismatchNamesTheArray) {
  std::string bytes = slurp(data_path("stored.npz"));
  // Flip one byte of the stored data of array "nd" (its last element).
  Tensor nd = read_npz(data_path("stored.npz")).get("nd");
  size_t at = bytes.find(serialize_npy(nd));
  ASSERT_NE(at, std::string::npos);
  bytes[at + serialize_npy(nd).size() - 1] ^= 0x40;
  std::string path = temp_path("crc.npz");
  spit(path, bytes);
  expect_error([&] { read_npz(path); }, {"crc.npz", "'nd'", "CRC-32"});
}

TEST(NpzErrors, CorruptDeflateData) {
  std::string bytes = slurp(data_path("deflated.npz"));
  // Scramble the middle of the first entry's compressed data.
  for (size_t i = 60; i < 90; ++i) bytes[i] = static_cast<char>(0xff);
  std::string path = temp_path("corrupt.npz");
  spit(path, bytes);
  expect_error([&] { read_npz(path); }, {"corrupt.npz", "'f4'"});
}

// The digits data sets in models/ (np.savez_compressed): 450 test samples, 8x8 pixels in [0,1]
// on a 1/16 grid, the two views holding the same pixels.
TEST(NpzErrors, RefusesAZipBombBeforeInflating) {
  // A deflated entry whose central directory claims 2^32 - 2 bytes: more than deflate can expand
  // its few compressed bytes to. Refused from the record alone, nothing allocated.
  std::string good = slurp(data_path("deflated.npz"));
  std::string bomb = good;
  size_t cd = bomb.find(std::string("PK\x01\x02", 4));
  ASSERT_NE(cd, std::string::npos);
  const uint32_t claimed = 0xfffffffeu;
  std::memcpy(&bomb[cd + 24], &claimed, 4);
  std::string path = temp_path("bomb.npz");
  spit(path, bomb);
  expect_error([&] { read_npz(path); }, {"bomb.npz", "4294967294", "deflate's maximum ratio"});
}

TEST(NpzShipped, ReadsTheDigitsDataSets) {
  std::string dir = std::string(OTTER_SOURCE_DIR) + "/models/digits/";
  NpzArchive flat = read_npz(dir + "test.npz");
  NpzArchive img = read_npz(dir + "test_img.npz");
  const Tensor& x = flat.get("x");
  const Tensor& labels = flat.get("labels");
  ASSERT_EQ(x.dims(), (std::vector<int64_t>{450, 64}));
  ASSERT_EQ(labels.dims(), (std::vector<int64_t>{450}));
  ASSERT_EQ(img.get("x").dims(), (std::vector<int64_t>{450, 1, 8, 8}));
  EXPECT_EQ(std::memcmp(x.raw(), img.get("x").raw(), x.nbytes()), 0);
  EXPECT_TRUE(img.get("labels").bitwise_equal(labels));
  for (int64_t i = 0; i < x.numel(); ++i) {
    float v = x.data<float>()[i];
    ASSERT_TRUE(v >= 0 && v <= 1 && v * 16 == std::round(v * 16)) << v;
  }
  for (int64_t i = 0; i < labels.numel(); ++i) ASSERT_LT(uint64_t(labels.data<int64_t>()[i]), 10u);
  // BatchNorm state arrays have '/' in their names.
  NpzArchive ref = read_npz(dir + "cnn_forward_ref.npz");
  EXPECT_EQ(ref.get("updated/bn1.running_var").dims(), (std::vector<int64_t>{8}));
}

std::vector<std::pair<std::string, Tensor>> sample_arrays() {
  Tensor b(DataType::kBool, {3});
  b.data<bool>()[1] = true;
  Tensor h(DataType::kFloat16, {2});
  h.data<Half>()[0].bits = 0x3c00;
  h.data<Half>()[1].bits = 0xc000;
  std::vector<float> big(5000);
  for (size_t i = 0; i < big.size(); ++i) big[i] = float(i % 7);
  return {
      {"x", Tensor::from_vector<float>({2, 3}, {1, 2, 3, 4, 5, 6})},
      {"labels", Tensor::from_vector<int64_t>({2}, {7, -9})},
      {"grad/fc.weight", Tensor::from_vector<double>({1, 1}, {0.125})},
      {"i4", Tensor::from_vector<int32_t>({2}, {-1, 1 << 30})},
      {"i1", Tensor::from_vector<int8_t>({1}, {-128})},
      {"u1", Tensor::from_vector<uint8_t>({1}, {200})},
      {"mask", b},
      {"half", h},
      {"scalar", Tensor::scalar<float>(-2.5f)},
      {"empty", Tensor(DataType::kInt64, {0, 4})},
      {"big", Tensor::from_vector<float>({50, 100}, big)},
  };
}

class NpzWrite : public testing::TestWithParam<bool> {};

TEST_P(NpzWrite, RoundTripsEveryDtype) {
  bool compress = GetParam();
  auto arrays = sample_arrays();
  std::string path = temp_path(compress ? "written_deflated.npz" : "written_stored.npz");
  write_npz(path, arrays, compress);
  EXPECT_FALSE(fs::exists(path + ".tmp"));
  NpzArchive back = read_npz(path);
  ASSERT_EQ(back.arrays.size(), arrays.size());
  for (size_t k = 0; k < arrays.size(); ++k) {
    EXPECT_EQ(back.arrays[k].first, arrays[k].first);
    EXPECT_TRUE(back.arrays[k].second.bitwise_equal(arrays[k].second)) << arrays[k].first;
  }
  size_t raw = 0;
  for (const auto& [n, t] : arrays) raw += t.nbytes();
  if (compress)
    EXPECT_LT(fs::file_size(path), raw / 4) << "deflate should shrink repeated data";
  else
    EXPECT_GT(fs::file_size(path), raw);
  // Kept in the build tree so a person can check it with numpy: np.load("written_stored.npz").
  fs::copy_file(path, std::string(OTTER_BINARY_DIR) + "/" + fs::path(path).filename().string(),
                fs::copy_options::overwrite_existing);
}

INSTANTIATE_TEST_SUITE_P(Npz, NpzWrite, testing::Bool(),
                         [](const auto& info) { return info.param ? "Deflated" : "Stored"; });

TEST(NpzWrite, StoredEntriesHoldTheNpyBytesVerbatim) {
  auto arrays = sample_arrays();
  std::string path = temp_path("verbatim.npz");
  write_npz(path, arrays);
  std::string bytes = slurp(path);
  for (const auto& [name, t] : arrays) {
    EXPECT_NE(bytes.find(name + ".npy" + serialize_npy(t)), std::string::npos) << name;
  }
}

TEST(NpzWrite, FailedWriteKeepsThePreviousFile) {
  std::string path = temp_path("keep.npz");
  write_npz(path, {{"a", Tensor::scalar<float>(1.0f)}});
  std::string before = slurp(path);
  expect_error(
      [&] {
        write_npz(path, {{"b", Tensor(DataType::kBFloat16, {1})}});
      },
      {"keep.npz", "'b'", "bfloat16"});
  expect_error([&] { write_npz(path, {{"u", Tensor()}}); }, {"keep.npz", "'u'", "undefined"});
  Tensor one = Tensor::scalar<float>(2.0f);
  expect_error([&] { write_npz(path, {{"a", one}, {"a", one}}); }, {"keep.npz", "'a'", "twice"});
  EXPECT_EQ(slurp(path), before);
  EXPECT_FALSE(fs::exists(path + ".tmp"));
  expect_error([&] { write_npz(temp_path("no/such/dir.npz"), {}); }, {"dir.npz.tmp"});
}

TEST(NpzWrite, OverwritesAndWritesEmptyArchives) {
  std::string path = temp_path("over.npz");
  write_npz(path, {{"a", Tensor::scalar<int64_t>(1)}});
  write_npz(path, {});
  EXPECT_TRUE(read_npz(path).arrays.empty());
  EXPECT_EQ(fs::file_size(path), 22u);  // just the end of central directory record
}

}  // namespace
}  // namespace otter
