// Just enough JSON for otter's small files: one-line objects for logs (--log-json) and the
// checkpoint metadata, and a reader for flat objects of strings, numbers and booleans.
#pragma once

#include <cstdint>
#include <map>
#include <string>

namespace otter {

// A JSON string literal ("..." with escapes).
std::string json_quote(const std::string& s);

// Builds one flat JSON object, keys in insertion order: {"step": 3, "loss": 0.25}.
class JsonObject {
 public:
  JsonObject& add(const std::string& key, const std::string& value);
  JsonObject& add(const std::string& key, const char* value) { return add(key, std::string(value)); }
  // Shortest text that reads back as the same double; null for NaN and infinities (JSON has none).
  JsonObject& add(const std::string& key, double value);
  // The shortest text that reads back as the same float (0.01f prints as 0.01, not 0.0099999998).
  JsonObject& add(const std::string& key, float value);
  JsonObject& add(const std::string& key, int64_t value);
  JsonObject& add(const std::string& key, int value) { return add(key, static_cast<int64_t>(value)); }
  JsonObject& add(const std::string& key, bool value);
  std::string str() const { return body_.empty() ? "{}" : "{" + body_ + "}"; }

 private:
  JsonObject& raw(const std::string& key, const std::string& text);
  std::string body_;
};

// Reads a flat JSON object: key -> the string's contents (unescaped) or the literal's text
// (numbers, true, false, null). Fails naming `what` on anything else (nesting, bad syntax).
std::map<std::string, std::string> parse_flat_json(const std::string& text, const std::string& what);

}  // namespace otter
