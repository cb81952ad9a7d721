// Minimal JSON writing and flat-object reading (see json.h).
#include "runtime/json.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdio>

#include "graph/error.h"

namespace otter {

std::string json_quote(const std::string& s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof(buf), "\\u%04x", c);
          out += buf;
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  return out + "\"";
}

JsonObject& JsonObject::raw(const std::string& key, const std::string& text) {
  body_ += (body_.empty() ? "" : ", ") + json_quote(key) + ": " + text;
  return *this;
}

JsonObject& JsonObject::add(const std::string& key, const std::string& value) { return raw(key, json_quote(value)); }

namespace {

template <typename T>
std::string shortest(T value) {
  if (!std::isfinite(value)) return "null";
  char buf[32];
  auto r = std::to_chars(buf, buf + sizeof(buf), value);
  return std::string(buf, r.ptr);
}

}  // namespace

JsonObject& JsonObject::add(const std::string& key, double value) { return raw(key, shortest(value)); }

JsonObject& JsonObject::add(const std::string& key, float value) { return raw(key, shortest(value)); }

JsonObject& JsonObject::add(const std::string& key, int64_t value) { return raw(key, std::to_string(value)); }

JsonObject& JsonObject::add(const std::string& key, bool value) { return raw(key, value ? "true" : "false"); }

namespace {

class FlatReader {
 public:
  FlatReader(const std::string& t, const std::string& what) : t_(t), what_(what) {}

  std::map<std::string, std::string> object() {
    std::map<std::string, std::string> out;
    expect('{');
    if (peek() == '}') {
      ++i_;
    } else {
      while (true) {
        std::string key = string();
        expect(':');
        std::string value = peek() == '"' ? string() : literal();
        if (!out.emplace(key, value).second) error("key '" + key + "' given twice");
        if (peek() == ',') { ++i_; continue; }
        expect('}');
        break;
      }
    }
    if (peek() != 0) error("text after the object");
    return out;
  }

 private:
  char peek() {
    while (i_ < t_.size() && std::isspace(static_cast<unsigned char>(t_[i_]))) ++i_;
    return i_ < t_.size() ? t_[i_] : 0;
  }
  void expect(char c) {
    if (peek() != c) error(std::string("expected '") + c + "'");
    ++i_;
  }
  [[noreturn]] void error(const std::string& msg) { fail(what_, ": not a flat JSON object (", msg, " at byte ", i_, ")"); }

  std::string string() {
    expect('"');
    std::string out;
    while (i_ < t_.size() && t_[i_] != '"') {
      char c = t_[i_++];
      if (c != '\\') { out += c; continue; }
      if (i_ >= t_.size()) break;
      char e = t_[i_++];
      switch (e) {
        case 'n': out += '\n'; break;
        case 'r': out += '\r'; break;
        case 't': out += '\t'; break;
        case 'u': {
          if (i_ + 4 > t_.size()) error("short \\u escape");
          if (!std::all_of(t_.begin() + i_, t_.begin() + i_ + 4, [](char h) { return std::isxdigit(h); }))
            error("\\u escape without 4 hex digits");
          unsigned code = std::stoul(t_.substr(i_, 4), nullptr, 16);
          if (code > 0x7f) error("non-ASCII \\u escape");
          out += static_cast<char>(code);
          i_ += 4;
          break;
        }
        default: out += e;
      }
    }
    if (i_ >= t_.size()) error("unterminated string");
    ++i_;
    return out;
  }

  std::string literal() {
    size_t start = i_;
    while (i_ < t_.size() && (std::isalnum(static_cast<unsigned char>(t_[i_])) || t_[i_] == '-' || t_[i_] == '+' ||
                              t_[i_] == '.'))
      ++i_;
    if (i_ == start) error("expected a value (nested objects and arrays are not read here)");
    return t_.substr(start, i_ - start);
  }

  const std::string& t_;
  std::string what_;
  size_t i_ = 0;
};

}  // namespace

std::map<std::string, std::string> parse_flat_json(const std::string& text, const std::string& what) {
  return FlatReader(text, what).object();
}

}  // namespace otter
