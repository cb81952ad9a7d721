// Error reporting for otter: one exception type carrying a message that names the culprit.
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>

namespace otter {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& msg) : std::runtime_error(msg) {}
};

template <typename... Args>
std::string str_cat(Args&&... args) {
  std::ostringstream os;
  (os << ... << std::forward<Args>(args));
  return os.str();
}

template <typename... Args>
[[noreturn]] void fail(Args&&... args) {
  throw Error(str_cat(std::forward<Args>(args)...));
}

}  // namespace otter

#define OTTER_CHECK(cond, ...)                     \
  do {                                             \
    if (!(cond)) ::otter::fail(__VA_ARGS__);       \
  } while (0)
