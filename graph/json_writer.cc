// Minimal streaming JSON writer.
#include "graph/json_writer.h"

#include <cmath>
#include <cstdio>
#include <cstring>

namespace otter {

void JsonWriter::separate() {
  if (after_key_) {
    after_key_ = false;
    return;
  }
  if (!first_.empty()) {
    if (!first_.back()) os_ << ',';
    first_.back() = false;
  }
}

void JsonWriter::open(char c) {
  separate();
  os_ << c;
  first_.push_back(true);
}

void JsonWriter::close(char c) {
  first_.pop_back();
  os_ << c;
}

void JsonWriter::key(std::string_view k) {
  value(k);
  os_ << ':';
  after_key_ = true;
}

void JsonWriter::value(std::string_view s) {
  separate();
  os_ << '"';
  for (char c : s) {
    switch (c) {
      case '"': os_ << "\\\""; break;
      case '\\': os_ << "\\\\"; break;
      case '\n': os_ << "\\n"; break;
      case '\t': os_ << "\\t"; break;
      case '\r': os_ << "\\r"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          os_ << buf;
        } else {
          os_ << c;
        }
    }
  }
  os_ << '"';
}

void JsonWriter::value(int64_t v) {
  separate();
  os_ << v;
}

void JsonWriter::value(double v) {
  separate();
  if (!std::isfinite(v)) {
    os_ << "null";
    return;
  }
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.9g", v);
  os_ << buf;
  if (!std::strpbrk(buf, ".e")) os_ << ".0";  // stays a float for readers that type numbers
}

void JsonWriter::value(bool v) {
  separate();
  os_ << (v ? "true" : "false");
}

void JsonWriter::null() {
  separate();
  os_ << "null";
}

}  // namespace otter
