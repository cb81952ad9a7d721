// .npy / .npz reading and writing (stored and deflated archives, every otter dtype): the public
// interface of runtime/npz.cc, runtime/npy.cc, runtime/zip_reader.cc and runtime/npz_writer.cc.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "graph/tensor.h"

namespace otter {

// Arrays of an .npz archive in archive order (names without the ".npy" suffix).
struct NpzArchive {
  std::vector<std::pair<std::string, Tensor>> arrays;
  const Tensor* find(const std::string& name) const;
  // Fails naming the file and listing the arrays it has.
  const Tensor& get(const std::string& name) const;
  std::string path;  // for messages
};

// Refuses archives over OTTER_MAX_NPZ_BYTES uncompressed and entries that claim more than deflate
// can produce (graph/limits.h), before allocating.
NpzArchive read_npz(const std::string& path);
// The same from the archive's bytes; `path` names it in messages.
NpzArchive parse_npz(const std::string& bytes, const std::string& path);
// Writes (deflated when `compress`) to a temporary name, then renames.
void write_npz(const std::string& path, const std::vector<std::pair<std::string, Tensor>>& arrays,
               bool compress = false);
Tensor read_npy(const std::string& path);
Tensor parse_npy(const std::string& bytes, const std::string& what);
std::string serialize_npy(const Tensor& t);
void write_npy(const std::string& path, const Tensor& t);

}  // namespace otter
