// A growable scratch buffer kept by a kernel (or a thread) between runs: no allocation or zeroing
// in the steady state; its contents are whatever the last user left.
#pragma once

#include <cstddef>
#include <vector>

namespace otter::cpu {

class Scratch {
 public:
  // Room for at least `count` elements of T (8-byte aligned; grown, never shrunk).
  template <typename T>
  T* get(size_t count) {
    const size_t words = (count * sizeof(T) + sizeof(double) - 1) / sizeof(double);
    if (buf_.size() < words) buf_.resize(words);
    return reinterpret_cast<T*>(buf_.data());
  }

 private:
  std::vector<double> buf_;
};

}  // namespace otter::cpu
