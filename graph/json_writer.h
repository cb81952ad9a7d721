// A minimal streaming JSON writer (compact, one document per call sequence) for the graph's JSON
// form and otter-opt's statistics; commas and string escaping are handled here.
#pragma once

#include <cstdint>
#include <ostream>
#include <string_view>
#include <vector>

namespace otter {

class JsonWriter {
 public:
  explicit JsonWriter(std::ostream& os) : os_(os) {}
  void begin_object() { open('{'); }
  void end_object() { close('}'); }
  void begin_array() { open('['); }
  void end_array() { close(']'); }
  // Inside an object: the key of the next value.
  void key(std::string_view k);
  void value(std::string_view s);
  void value(const char* s) { value(std::string_view(s)); }
  void value(int64_t v);
  void value(int v) { value(static_cast<int64_t>(v)); }
  // 9 significant digits, always with a '.' or exponent; non-finite values are written as null
  // (JSON has no inf/nan).
  void value(double v);
  void value(bool v);
  void null();
  // key(k) then value(v).
  template <typename T>
  void field(std::string_view k, const T& v) {
    key(k);
    value(v);
  }

 private:
  void separate();
  void open(char c);
  void close(char c);
  std::ostream& os_;
  std::vector<bool> first_;  // per open container: no element written yet
  bool after_key_ = false;
};

}  // namespace otter
