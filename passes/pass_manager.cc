// Pass manager, pipeline parser, registry and instruments.
#include "passes/pass_manager.h"

#include <cctype>
#include <chrono>
#include <cstdlib>
#include <iomanip>

#include "graph/error.h"
#include "graph/verifier.h"

namespace otter {

std::string PassOptions::get_string(const std::string& k, const std::string& dflt) const {
  auto it = values_.find(k);
  return it == values_.end() ? dflt : it->second;
}

int64_t PassOptions::get_int(const std::string& k, int64_t dflt) const {
  auto it = values_.find(k);
  if (it == values_.end()) return dflt;
  char* end = nullptr;
  long long v = std::strtoll(it->second.c_str(), &end, 10);
  OTTER_CHECK(end && *end == 0 && !it->second.empty(), "option '", k, "' expects an int, got '", it->second, "'");
  return v;
}

double PassOptions::get_float(const std::string& k, double dflt) const {
  auto it = values_.find(k);
  if (it == values_.end()) return dflt;
  char* end = nullptr;
  double v = std::strtod(it->second.c_str(), &end);
  OTTER_CHECK(end && *end == 0 && !it->second.empty(), "option '", k, "' expects a float, got '", it->second, "'");
  return v;
}

bool PassOptions::get_bool(const std::string& k, bool dflt) const {
  auto it = values_.find(k);
  if (it == values_.end()) return dflt;
  const std::string& s = it->second;
  if (s == "1" || s == "true" || s == "on") return true;
  if (s == "0" || s == "false" || s == "off") return false;
  fail("option '", k, "' expects a bool (true|false), got '", s, "'");
}

// ---- pipeline parser ---------------------------------------------------------------------------

std::vector<PipelineEntry> parse_pipeline(const std::string& text) {
  std::vector<PipelineEntry> out;
  size_t i = 0;
  auto skip_ws = [&] { while (i < text.size() && std::isspace(static_cast<unsigned char>(text[i]))) ++i; };
  auto err = [&](const std::string& what) -> void {
    fail("bad pipeline '", text, "' at position ", i, ": ", what);
  };
  auto is_name_char = [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.';
  };
  skip_ws();
  if (i == text.size()) return out;
  while (true) {
    skip_ws();
    size_t start = i;
    while (i < text.size() && is_name_char(text[i])) ++i;
    if (i == start) err("expected a pass name");
    PipelineEntry e;
    e.name = text.substr(start, i - start);
    skip_ws();
    if (i < text.size() && text[i] == '{') {
      ++i;
      skip_ws();
      if (i < text.size() && text[i] == '}') {
        ++i;
      } else {
        while (true) {
          skip_ws();
          size_t ks = i;
          while (i < text.size() && is_name_char(text[i])) ++i;
          if (i == ks) err("expected an option name");
          std::string key = text.substr(ks, i - ks);
          skip_ws();
          if (i >= text.size() || text[i] != '=') err("expected '=' after option '" + key + "'");
          ++i;
          skip_ws();
          size_t vs = i;
          while (i < text.size() && text[i] != ',' && text[i] != '}' && text[i] != '{') ++i;
          std::string val = text.substr(vs, i - vs);
          while (!val.empty() && std::isspace(static_cast<unsigned char>(val.back()))) val.pop_back();
          if (val.empty()) err("option '" + key + "' has no value");
          if (e.options.has(key)) err("option '" + key + "' given twice");
          e.options.set(key, val);
          if (i >= text.size()) err("missing '}'");
          if (text[i] == '{') err("unexpected '{'");
          if (text[i] == '}') { ++i; break; }
          ++i;  // ','
        }
      }
    }
    e.text = text.substr(start, i - start);
    out.push_back(std::move(e));
    skip_ws();
    if (i == text.size()) break;
    if (text[i] != ',') err("expected ',' between passes");
    ++i;
  }
  return out;
}

// ---- registry ------------------------------------------------------------------------------------

PassRegistry& PassRegistry::instance() {
  static PassRegistry* r = [] {
    auto* reg = new PassRegistry();
    register_all_passes(*reg);
    return reg;
  }();
  return *r;
}

void PassRegistry::add(const std::string& name, PassFactory f) {
  OTTER_CHECK(!factories_.count(name) && !aliases_.count(name), "pass '", name, "' registered twice");
  factories_[name] = std::move(f);
}

void PassRegistry::add_alias(const std::string& name, std::string pipeline, std::string summary) {
  OTTER_CHECK(!factories_.count(name) && !aliases_.count(name), "pipeline '", name, "' registered twice");
  aliases_[name] = {std::move(pipeline), std::move(summary)};
}

bool PassRegistry::has(const std::string& name) const {
  return factories_.count(name) || aliases_.count(name);
}

std::vector<std::string> PassRegistry::names() const {
  std::vector<std::string> out;
  for (const auto& [n, f] : factories_) out.push_back(n);
  return out;
}

std::unique_ptr<Pass> PassRegistry::create(const std::string& name) const {
  auto it = factories_.find(name);
  if (it != factories_.end()) return it->second();
  std::string valid;
  for (const auto& [n, f] : factories_) valid += (valid.empty() ? "" : ", ") + n;
  for (const auto& [n, a] : aliases_) valid += ", " + n;
  fail("unknown pass '", name, "' (valid passes: ", valid, ")");
}

// ---- manager -------------------------------------------------------------------------------------

void PassManager::set_disabled(const std::set<std::string>& names) {
  const PassRegistry& reg = PassRegistry::instance();
  for (const std::string& n : names) {
    auto alias = reg.aliases().find(n);
    if (alias != reg.aliases().end())
      fail("cannot disable '", n, "': it is a named pipeline (", alias->second.first, "); disable passes in it");
    reg.create(n);  // fails on an unknown name, listing the valid passes
  }
  disabled_ = names;
}

std::vector<std::string> PassManager::unused_disabled() const {
  std::vector<std::string> out;
  for (const std::string& n : disabled_)
    if (!disabled_seen_.count(n)) out.push_back(n);
  return out;
}

void PassManager::add_pipeline(const std::string& text) {
  const PassRegistry& reg = PassRegistry::instance();
  for (const PipelineEntry& e : parse_pipeline(text)) {
    auto alias = reg.aliases().find(e.name);
    if (alias != reg.aliases().end()) {
      OTTER_CHECK(e.options.values().empty(), "named pipeline '", e.name, "' takes no options");
      add_pipeline(alias->second.first);
      continue;
    }
    auto p = reg.create(e.name);
    p->configure(e.options);  // checked also when disabled: a typo should not go unnoticed
    if (disabled_.count(e.name)) {
      disabled_seen_.insert(e.name);
      continue;
    }
    passes_.push_back(std::move(p));
    texts_.push_back(e.text);
  }
}

std::string PassManager::pipeline_text() const {
  std::string out;
  for (const std::string& t : texts_) out += (out.empty() ? "" : ",") + t;
  return out;
}

void PassManager::run(Graph& g) {
  for (size_t k = 0; k < passes_.size(); ++k) {
    Pass& p = *passes_[k];
    std::string unmet = p.unmet_precondition(g);
    if (!unmet.empty()) {
      std::string before;
      for (size_t j = 0; j < k; ++j) before += (before.empty() ? "" : ",") + passes_[j]->name();
      fail("pass '", p.name(), "' cannot run: ", unmet, " (passes before it: ",
           before.empty() ? std::string("none") : before, ")");
    }
    for (PassInstrument* in : instruments_) in->before_pass(p, g, static_cast<int>(k));
    auto t0 = std::chrono::steady_clock::now();
    try {
      p.run(g, ctx_);
    } catch (const Error& e) {
      fail("pass '", p.name(), "' failed: ", e.what());
    }
    double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (verify_) verify_or_throw(g, "pass '" + p.name() + "'");
    for (PassInstrument* in : instruments_) in->after_pass(p, g, static_cast<int>(k), secs);
  }
}

void TimingInstrument::after_pass(const Pass& p, const Graph&, int, double seconds) {
  times_.emplace_back(p.name(), seconds);
}

void TimingInstrument::report(std::ostream& os) const {
  double total = 0;
  for (const auto& [n, s] : times_) total += s;
  os << "pass timing (total " << std::fixed << std::setprecision(3) << total * 1e3 << " ms):\n";
  for (const auto& [n, s] : times_) os << "  " << std::setw(10) << s * 1e3 << " ms  " << n << "\n";
}

}  // namespace otter
