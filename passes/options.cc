// Typed pass options: the codecs of each value type and the shared error messages (see options.h).
#include "passes/options.h"

#include <cctype>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdlib>

#include "graph/error.h"

namespace otter {

std::string format_number(double v) {
  char buf[32];
  auto r = std::to_chars(buf, buf + sizeof(buf), v);
  return std::string(buf, r.ptr);
}

std::string unwritable_reason(const std::string& v) {
  if (v.empty()) return "cannot be empty in a pipeline";
  for (char c : v)
    if (c == ',' || c == '{' || c == '}' || c == ';' || std::isspace(static_cast<unsigned char>(c)))
      return "cannot be written into a pipeline (it has one of , { } ; or a space)";
  return "";
}

void fail_option_value(const std::string& what, const std::string& expected, const std::string& got) {
  fail(what, " ", expected, ", got '", got, "'");
}

std::string OptionInfo::describe() const {
  std::string t = type;
  for (const auto& c : choices) t += (t.empty() ? "" : "|") + c;
  return name + ": " + t + " (default " + (default_text.empty() ? "none" : default_text) + ")";
}

void fail_unknown_option(const std::string& owner, const std::string& k, const std::vector<OptionInfo>& valid) {
  std::string list;
  for (const auto& o : valid) list += (list.empty() ? "" : "; ") + o.describe();
  fail("pass '", owner, "' has no option '", k, "'",
       list.empty() ? std::string(" (it takes no options)") : " (valid options: " + list + ")");
}

const OptionTable<NoOptions>& NoOptions::table() {
  static const OptionTable<NoOptions> t{};
  return t;
}

namespace option_codec {

std::string parse(const std::string& s, int64_t& out) {
  char* end = nullptr;
  errno = 0;
  long long v = std::strtoll(s.c_str(), &end, 10);
  if (s.empty() || *end || errno == ERANGE) return "expects an int";
  out = v;
  return "";
}

std::string parse(const std::string& s, double& out) {
  char* end = nullptr;
  double v = std::strtod(s.c_str(), &end);
  if (s.empty() || *end) return "expects a float";
  if (!std::isfinite(v)) return "expects a finite float";
  out = v;
  return "";
}

std::string parse(const std::string& s, bool& out) {
  if (s == "1" || s == "true" || s == "on") out = true;
  else if (s == "0" || s == "false" || s == "off") out = false;
  else return "expects a bool (true|false)";
  return "";
}

std::string parse(const std::string& s, std::string& out) {
  std::string why = unwritable_reason(s);
  if (!why.empty()) return why;
  out = s;
  return "";
}

std::string parse(const std::string& s, GlobList& out) {
  GlobList v;
  std::string cur;
  for (char c : s + ";") {
    if (c != ';') {
      cur += c;
      continue;
    }
    if (cur.empty()) return "expects patterns separated by ';' (a*;b?), none of them empty";
    v.push_back(cur);
    cur.clear();
  }
  out = v;
  return "";
}

std::string parse(const std::string& s, ByteSize& out) {
  char* end = nullptr;
  double v = std::strtod(s.c_str(), &end);
  std::string unit = end ? std::string(end) : "";
  static const std::pair<const char*, double> kUnits[] = {
      {"", 1},           {"B", 1},          {"K", 1024.0},     {"KB", 1024.0},    {"KiB", 1024.0},
      {"M", 1048576.0},  {"MB", 1048576.0}, {"MiB", 1048576.0}, {"G", 1073741824.0}, {"GB", 1073741824.0},
      {"GiB", 1073741824.0}};
  const char* expected = "expects a byte size (4096, 64KiB, 1.5GiB)";
  if (s.empty() || end == s.c_str() || !std::isfinite(v) || v < 0) return expected;
  for (const auto& [u, f] : kUnits) {
    if (unit != u) continue;
    double b = v * f;
    if (b != std::floor(b) || b > 9.0e18) return expected;
    out.bytes = static_cast<int64_t>(b);
    return "";
  }
  return expected;
}

std::string print(int64_t v) { return std::to_string(v); }
std::string print(double v) { return format_number(v); }
std::string print(bool v) { return v ? "true" : "false"; }
std::string print(const std::string& v) { return v; }
std::string print(const GlobList& v) {
  std::string out;
  for (const auto& p : v) out += (out.empty() ? "" : ";") + p;
  return out;
}
std::string print(const ByteSize& v) {
  static const std::pair<const char*, int64_t> kUnits[] = {{"GiB", int64_t{1} << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}};
  for (const auto& [u, f] : kUnits)
    if (v.bytes != 0 && v.bytes % f == 0) return std::to_string(v.bytes / f) + u;
  return std::to_string(v.bytes);
}

std::string unwritable(const GlobList& v) {
  if (v.empty()) return "cannot be an empty list in a pipeline";
  for (const auto& p : v)
    if (std::string why = unwritable_reason(p); !why.empty()) return "has a pattern that " + why;
  return "";
}

const char* type_name(const int64_t*) { return "int"; }
const char* type_name(const double*) { return "float"; }
const char* type_name(const bool*) { return "bool"; }
const char* type_name(const std::string*) { return "string"; }
const char* type_name(const GlobList*) { return "globs"; }
const char* type_name(const ByteSize*) { return "bytes"; }

std::vector<int64_t> samples(int64_t d) { return {d * 2, d + 1, d - 1, 2, 1}; }
std::vector<double> samples(double d) { return {d * 2, d + 1, d / 2, 0.5, 1}; }
std::vector<bool> samples(bool d) { return {!d}; }
std::vector<std::string> samples(const std::string& d) { return {d == "x1" ? "x2" : "x1"}; }
std::vector<GlobList> samples(const GlobList&) { return {GlobList{"a.*", "b?"}}; }
std::vector<ByteSize> samples(const ByteSize& d) { return {ByteSize{d.bytes * 2}, ByteSize{3 << 20}}; }

}  // namespace option_codec
}  // namespace otter
