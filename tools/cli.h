// A small command-line parser shared by otter's tools: --flag value, --flag=value, boolean
// switches, positionals; unknown flags are errors that list the valid ones.
#pragma once

#include <cstdlib>
#include <exception>
#include <iostream>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "graph/error.h"
#include "passes/options.h"

namespace otter::cli {

struct FlagSpec {
  std::string name;   // without leading dashes
  bool takes_value = true;
  std::string help;
  std::string value_name = "VALUE";
};

class Args {
 public:
  Args(const std::string& tool, std::vector<FlagSpec> specs) : tool_(tool), specs_(std::move(specs)) {}

  void parse(int argc, char** argv, int first) {
    for (int i = first; i < argc; ++i) {
      std::string a = argv[i];
      if (a == "--") {
        for (++i; i < argc; ++i) positional_.push_back(argv[i]);
        break;
      }
      if (a.size() > 1 && a[0] == '-' && !(a.size() > 1 && (std::isdigit(static_cast<unsigned char>(a[1])) || a[1] == '.'))) {
        std::string body = a.substr(a[1] == '-' ? 2 : 1);
        std::string value;
        bool has_eq = false;
        if (auto eq = body.find('='); eq != std::string::npos) {
          value = body.substr(eq + 1);
          body = body.substr(0, eq);
          has_eq = true;
        }
        const FlagSpec* spec = find(body);
        if (!spec) fail(tool_, ": unknown flag '", a, "' (see ", tool_, " --help)");
        if (spec->takes_value) {
          if (!has_eq) {
            if (i + 1 >= argc) fail(tool_, ": flag --", body, " needs a value");
            value = argv[++i];
          }
        } else {
          if (has_eq) fail(tool_, ": flag --", body, " takes no value");
          value = "1";
        }
        if (values_.count(body) && spec->takes_value) fail(tool_, ": flag --", body, " given twice");
        values_[body] = value;
      } else {
        positional_.push_back(a);
      }
    }
  }

  bool has(const std::string& k) const { return values_.count(k) != 0; }
  std::string get(const std::string& k, const std::string& dflt = "") const {
    auto it = values_.find(k);
    return it == values_.end() ? dflt : it->second;
  }
  int64_t get_int(const std::string& k, int64_t dflt) const {
    if (!has(k)) return dflt;
    const std::string& s = values_.at(k);
    char* end = nullptr;
    long long v = std::strtoll(s.c_str(), &end, 10);
    if (s.empty() || *end) fail(tool_, ": --", k, " expects an integer, got '", s, "'");
    return v;
  }
  double get_float(const std::string& k, double dflt) const {
    if (!has(k)) return dflt;
    const std::string& s = values_.at(k);
    char* end = nullptr;
    double v = std::strtod(s.c_str(), &end);
    if (s.empty() || *end) fail(tool_, ": --", k, " expects a number, got '", s, "'");
    return v;
  }
  // An enum flag by its names (passes/options.h): "--precision must be fp32, fp16 or bf16, got 'fp8'".
  template <class E>
  E get_enum(const std::string& k, E dflt) const {
    return has(k) ? parse_enum<E>(values_.at(k), "--" + k) : dflt;
  }
  const std::vector<std::string>& positional() const { return positional_; }
  std::string help() const {
    std::string out;
    for (const auto& s : specs_) {
      std::string lhs = (s.name.size() == 1 ? "  -" : "  --") + s.name + (s.takes_value ? " " + s.value_name : "");
      if (lhs.size() < 28) lhs.resize(28, ' ');
      else lhs += "\n" + std::string(28, ' ');
      out += lhs + s.help + "\n";
    }
    return out;
  }

 private:
  const FlagSpec* find(const std::string& n) const {
    for (const auto& s : specs_)
      if (s.name == n) return &s;
    return nullptr;
  }
  std::string tool_;
  std::vector<FlagSpec> specs_;
  std::map<std::string, std::string> values_;
  std::vector<std::string> positional_;
};

// A tool's main(): runs `run`, turning an escaping exception into "error: ..." on stderr and exit 1.
inline int guarded_main(int (*run)(int, char**), int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 1;
  }
}

}  // namespace otter::cli
