// .npz archives: reading every array of an archive by name (see runtime/npz.h). The zip layer is in
// runtime/zip_reader.cc, the .npy layer in runtime/npy.cc, writing in runtime/npz_writer.cc.
#include "runtime/npz.h"

#include <algorithm>
#include <string_view>

#include "graph/error.h"
#include "graph/limits.h"
#include "runtime/npz_format.h"

namespace otter {

using namespace npz_detail;

Tensor read_npy(const std::string& path) { return parse_npy(read_file(path), str_cat("'", path, "'")); }

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

NpzArchive parse_npz(const std::string& bytes, const std::string& path) {
  std::vector<ZipEntry> entries = zip_entries(bytes, path);
  // All arrays together stay within OTTER_MAX_NPZ_BYTES (each entry is checked again as it is read).
  uint64_t total = 0;
  for (const ZipEntry& entry : entries) {
    total += std::min(entry.size, max_npz_bytes() + 1);
    if (total > max_npz_bytes())
      fail("'", path, "': its arrays hold more than the limit of ", max_npz_bytes(),
           " uncompressed bytes per archive (OTTER_MAX_NPZ_BYTES)");
  }
  NpzArchive archive;
  archive.path = path;
  for (const ZipEntry& entry : entries) {
    if (!entry.name.empty() && entry.name.back() == '/') continue;  // a directory
    constexpr std::string_view kSuffix = ".npy";
    if (entry.name.size() <= kSuffix.size() ||
        entry.name.compare(entry.name.size() - kSuffix.size(), kSuffix.size(), kSuffix) != 0)
      fail("'", path, "': entry '", entry.name, "' is not a .npy array");
    std::string name = entry.name.substr(0, entry.name.size() - kSuffix.size());
    std::string what = str_cat("'", path, "': array '", name, "'");
    if (archive.find(name)) fail(what, " appears twice in the archive");
    archive.arrays.emplace_back(name, parse_npy(zip_contents(bytes, path, entry, what), what));
  }
  return archive;
}

NpzArchive read_npz(const std::string& path) { return parse_npz(read_file(path), path); }

}  // namespace otter
