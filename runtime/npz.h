// .npy / .npz reading and writing (stored and deflated archives, every otter dtype).
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

NpzArchive read_npz(const std::string& path);
// Writes (deflated when `compress`) to a temporary name, then renames.
void write_npz(const std::string& path, const std::vector<std::pair<std::string, Tensor>>& arrays,
               bool compress = false);
Tensor read_npy(const std::string& path);
Tensor parse_npy(const std::string& bytes, const std::string& what);
std::string serialize_npy(const Tensor& t);
void write_npy(const std::string& path, const Tensor& t);

}  // namespace otter
