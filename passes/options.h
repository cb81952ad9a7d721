// Typed pass options. Each pass keeps its options in a plain struct (defaults are the fields'
// initialisers) and declares them once, one line per option, in a table bound to the fields:
//
//   struct GradAccumulationOptions {
//     int64_t steps = 1;
//     bool operator==(const GradAccumulationOptions&) const = default;
//     static const OptionTable<GradAccumulationOptions>& table();
//   };
//   const OptionTable<GradAccumulationOptions>& GradAccumulationOptions::table() {
//     using S = GradAccumulationOptions;
//     static const OptionTable<S> t{
//         option("steps", &S::steps, "micro-batches per optimizer step (K)").at_least(1).always(),
//     };
//     return t;
//   }
//
// The table parses `pass{k=v,...}` values into the struct (types, ranges, enum choices checked;
// one error naming the pass, the option and what it accepts), prints a struct back to pipeline
// text (only values that differ from the defaults, plus those marked always(), in declaration
// order), and describes the options for `otter-opt --list-passes` and docs/passes.md.
// Value types: int64_t, double, bool, std::string, enums with a name table (EnumNames, found by
// the ADL function `enum_names(E)` declared next to the enum), ByteSize ("64MiB"), GlobList
// (';'-separated patterns), and std::optional of any of these (unset: the default; printed only
// when set). See docs/architecture.md for a worked example of a new pass with options.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace otter {

// ---- value types -------------------------------------------------------------------------------

// A size in bytes, written 4096, 64KiB, 64K, 1.5MiB, 2G (binary units) and printed in the largest
// binary unit that divides it exactly ("64MiB", "1000").
struct ByteSize {
  int64_t bytes = 0;
  auto operator<=>(const ByteSize&) const = default;
};

// Name patterns with * and ? (passes/autodiff.h glob_match), written a*;b?.
using GlobList = std::vector<std::string>;

// The names of an enum's values, for parsing and printing.
template <class E>
class EnumNames {
 public:
  EnumNames(std::initializer_list<std::pair<E, const char*>> entries) {
    for (const auto& [e, n] : entries) entries_.emplace_back(e, n);
  }
  const std::string& name(E e) const {
    for (const auto& [v, n] : entries_)
      if (v == e) return n;
    static const std::string unknown = "?";
    return unknown;
  }
  std::optional<E> find(const std::string& s) const {
    for (const auto& [v, n] : entries_)
      if (n == s) return v;
    return std::nullopt;
  }
  std::string choices() const {
    std::string out;
    for (const auto& [v, n] : entries_) out += (out.empty() ? "" : "|") + n;
    return out;
  }
  // "a, b or c", as command-line errors list the choices.
  std::string in_words() const {
    std::string out;
    for (size_t i = 0; i < entries_.size(); ++i)
      out += (i == 0 ? "" : i + 1 == entries_.size() ? " or " : ", ") + entries_[i].second;
    return out;
  }
  const std::vector<std::pair<E, std::string>>& entries() const { return entries_; }

 private:
  std::vector<std::pair<E, std::string>> entries_;
};

// The name of an enum value ("fp16").
template <class E>
const std::string& enum_name(E e) {
  return enum_names(e).name(e);
}
[[noreturn]] void fail_option_value(const std::string& what, const std::string& expected, const std::string& got);
// Parses one of E's names; fails with "<what> must be a, b or c, got 'x'".
template <class E>
E parse_enum(const std::string& text, const std::string& what) {
  auto e = enum_names(E{}).find(text);
  if (!e) fail_option_value(what, "must be " + enum_names(E{}).in_words(), text);
  return *e;
}

// ---- codecs: text <-> value of each option type ----------------------------------------------------

// Shortest text that reads back as the same double ("0.001", "1e-04").
std::string format_number(double v);
// "" when `v` can be written as an option value (non-empty, none of , { } ; or whitespace), else why not.
std::string unwritable_reason(const std::string& v);

namespace option_codec {
// Each parse returns "" on success, else what was expected ("expects an int").
std::string parse(const std::string& s, int64_t& out);
std::string parse(const std::string& s, double& out);
std::string parse(const std::string& s, bool& out);
std::string parse(const std::string& s, std::string& out);
std::string parse(const std::string& s, GlobList& out);
std::string parse(const std::string& s, ByteSize& out);
std::string print(int64_t v);
std::string print(double v);
std::string print(bool v);
std::string print(const std::string& v);
std::string print(const GlobList& v);
std::string print(const ByteSize& v);
const char* type_name(const int64_t*);
const char* type_name(const double*);
const char* type_name(const bool*);
const char* type_name(const std::string*);
const char* type_name(const GlobList*);
const char* type_name(const ByteSize*);
// Non-default candidates for tests (a valid value differing from `d`).
std::vector<int64_t> samples(int64_t d);
std::vector<double> samples(double d);
std::vector<bool> samples(bool d);
std::vector<std::string> samples(const std::string& d);
std::vector<GlobList> samples(const GlobList& d);
std::vector<ByteSize> samples(const ByteSize& d);
inline std::optional<double> numeric(int64_t v) { return static_cast<double>(v); }
inline std::optional<double> numeric(double v) { return v; }
inline std::optional<double> numeric(const ByteSize& v) { return static_cast<double>(v.bytes); }
template <class T>
std::optional<double> numeric(const T&) {
  return std::nullopt;
}

template <class E, std::enable_if_t<std::is_enum_v<E>, int> = 0>
std::string parse(const std::string& s, E& out) {
  auto e = enum_names(E{}).find(s);
  if (!e) return "must be one of " + enum_names(E{}).choices();
  out = *e;
  return "";
}
template <class E, std::enable_if_t<std::is_enum_v<E>, int> = 0>
std::string print(E v) {
  return enum_name(v);
}
template <class E, std::enable_if_t<std::is_enum_v<E>, int> = 0>
const char* type_name(const E*) {
  return "enum";
}
template <class E, std::enable_if_t<std::is_enum_v<E>, int> = 0>
std::vector<E> samples(E d) {
  std::vector<E> out;
  for (const auto& [v, n] : enum_names(E{}).entries())
    if (v != d) out.push_back(v);
  return out;
}
template <class T>
std::string parse(const std::string& s, std::optional<T>& out) {
  T v{};
  std::string err = parse(s, v);
  if (err.empty()) out = v;
  return err;
}
template <class T>
std::string print(const std::optional<T>& v) {
  return v ? print(*v) : "";
}
template <class T>
const char* type_name(const std::optional<T>*) {
  return type_name(static_cast<const T*>(nullptr));
}
template <class T>
std::vector<std::optional<T>> samples(const std::optional<T>&) {
  std::vector<std::optional<T>> out;
  for (const T& v : samples(T{})) out.emplace_back(v);
  out.emplace_back(T{});
  return out;
}
template <class T>
std::optional<double> numeric(const std::optional<T>& v) {
  return v ? numeric(*v) : std::nullopt;
}
// "" when the value can be written into pipeline text, else why not.
std::string unwritable(const GlobList& v);
template <class T>
std::string unwritable(const T& v) {
  return unwritable_reason(print(v));
}
template <class T>
std::string unwritable(const std::optional<T>& v) {
  return v ? unwritable(*v) : "";
}
template <class T, std::enable_if_t<!std::is_enum_v<T>, int> = 0>
std::vector<std::string> choices(const T*) {
  return {};
}
template <class E, std::enable_if_t<std::is_enum_v<E>, int> = 0>
std::vector<std::string> choices(const E*) {
  std::vector<std::string> out;
  for (const auto& [v, n] : enum_names(E{}).entries()) out.push_back(n);
  return out;
}
template <class T>
std::vector<std::string> choices(const std::optional<T>*) {
  return choices(static_cast<const T*>(nullptr));
}
}  // namespace option_codec

// ---- declarations ----------------------------------------------------------------------------------

// What --list-passes and error messages show of one option.
struct OptionInfo {
  std::string name;
  std::string type;          // int, float, bool, string, list, bytes; for enums: empty (see choices)
  std::vector<std::string> choices;  // an enum's allowed names
  std::string default_text;  // "" when there is none
  std::string help;
  std::string sample;        // a valid value that differs from the default (for round-trip tests)
  // "type: a|b (default a)", as error messages list the valid options.
  std::string describe() const;
};

// One declared option of options struct S, over the field's type.
template <class S>
class OptionDecl {
 public:
  virtual ~OptionDecl() = default;
  virtual OptionInfo info() const = 0;
  virtual bool always_printed() const = 0;
  // Sets the field from text: "" on success, else the reason ("expects an int", "must be >= 1").
  virtual std::string parse_into(S& s, const std::string& text) const = 0;
  virtual std::string print(const S& s) const = 0;
  virtual bool at_default(const S& s) const = 0;
  // "" when the field's value is allowed (range, choices, custom check), else why not.
  virtual std::string check(const S& s) const = 0;
};

// One option bound to field `field` of S; the constraints chain: option(...).at_least(1).always().
template <class S, class T>
class FieldOption : public OptionDecl<S> {
 public:
  FieldOption(std::string name, T S::*field, std::string help)
      : name_(std::move(name)), field_(field), help_(std::move(help)) {}

  FieldOption& at_least(double lo) { return bound(lo, &lo_, &lo_open_, false); }
  FieldOption& above(double lo) { return bound(lo, &lo_, &lo_open_, true); }
  FieldOption& at_most(double hi) { return bound(hi, &hi_, &hi_open_, false); }
  FieldOption& below(double hi) { return bound(hi, &hi_, &hi_open_, true); }
  // Only these values of an enum (a subset of its names).
  template <class E>
  FieldOption& among(std::initializer_list<E> allowed) {
    for (E e : allowed) among_.push_back(enum_name(e));
    return *this;
  }
  // A further check: returns "" or what the value must be ("must be a power of two").
  FieldOption& check_with(std::function<std::string(const T&)> f) {
    custom_ = std::move(f);
    return *this;
  }
  // Always written into pipeline text, also at its default (the options a reader looks for first).
  FieldOption& always() {
    always_ = true;
    return *this;
  }
  // The default as --list-passes shows it, where the field's initialiser is a placeholder.
  FieldOption& default_text(std::string t) {
    default_text_ = std::move(t);
    return *this;
  }

  OptionInfo info() const override {
    OptionInfo i;
    i.name = name_;
    const T* tag = nullptr;
    i.choices = among_.empty() ? option_codec::choices(tag) : among_;
    i.type = i.choices.empty() ? option_codec::type_name(tag) : "";
    i.default_text = default_text_ ? *default_text_ : option_codec::print(S{}.*field_);
    i.help = help_;
    S s{};
    for (const T& v : option_codec::samples(s.*field_)) {
      S t{};
      t.*field_ = v;
      if (!at_default(t) && check(t).empty()) {
        i.sample = option_codec::print(v);
        break;
      }
    }
    return i;
  }
  bool always_printed() const override { return always_; }
  std::string parse_into(S& s, const std::string& text) const override {
    T v{};
    std::string err = option_codec::parse(text, v);
    if (!err.empty()) return err;
    S t{};
    t.*field_ = v;
    err = check(t);
    if (!err.empty()) return err;
    s.*field_ = std::move(v);
    return "";
  }
  std::string print(const S& s) const override { return option_codec::print(s.*field_); }
  bool at_default(const S& s) const override { return s.*field_ == S{}.*field_; }
  std::string check(const S& s) const override {
    const T& v = s.*field_;
    if (std::optional<double> x = option_codec::numeric(v)) {
      bool lo_ok = !lo_ || (lo_open_ ? *x > *lo_ : *x >= *lo_);
      bool hi_ok = !hi_ || (hi_open_ ? *x < *hi_ : *x <= *hi_);
      if (!lo_ok || !hi_ok) return range_text();
    }
    if (!among_.empty()) {
      std::string p = option_codec::print(v);
      bool ok = p.empty();
      std::string list;
      for (const auto& a : among_) {
        ok |= a == p;
        list += (list.empty() ? "" : "|") + a;
      }
      if (!ok) return "must be one of " + list;
    }
    if (custom_) {
      std::string err = custom_(v);
      if (!err.empty()) return err;
    }
    return v == S{}.*field_ ? "" : option_codec::unwritable(v);
  }

 private:
  FieldOption& bound(double v, std::optional<double>* slot, bool* open, bool is_open) {
    *slot = v;
    *open = is_open;
    return *this;
  }
  std::string range_text() const {
    if (lo_ && hi_)
      return "must be in " + std::string(lo_open_ ? "(" : "[") + format_number(*lo_) + ", " + format_number(*hi_) +
             (hi_open_ ? ")" : "]");
    if (lo_) return std::string("must be ") + (lo_open_ ? "> " : ">= ") + format_number(*lo_);
    return std::string("must be ") + (hi_open_ ? "< " : "<= ") + format_number(*hi_);
  }

  std::string name_;
  T S::*field_;
  std::string help_;
  std::optional<double> lo_, hi_;
  bool lo_open_ = false, hi_open_ = false, always_ = false;
  std::vector<std::string> among_;
  std::function<std::string(const T&)> custom_;
  std::optional<std::string> default_text_;
};

// Declares option `name` bound to `field` (S and T deduced from the member pointer).
template <class S, class T>
FieldOption<S, T> option(std::string name, T S::*field, std::string help) {
  return FieldOption<S, T>(std::move(name), field, std::move(help));
}

// Every option of S, in declaration order (which is the order of printed pipeline text).
template <class S>
class OptionTable {
 public:
  template <class... O>
  explicit OptionTable(const O&... decls) {
    (decls_.push_back(std::make_shared<O>(decls)), ...);
  }
  std::vector<OptionInfo> info() const {
    std::vector<OptionInfo> out;
    for (const auto& d : decls_) out.push_back(d->info());
    return out;
  }
  // Parses `k=v` values (defaults for the rest); `owner` names the pass in errors:
  //   pass 'grad-accumulation': option 'steps' expects an int, got 'four'
  S parse(const std::map<std::string, std::string>& values, const std::string& owner) const {
    S s{};
    for (const auto& [k, v] : values) {
      const OptionDecl<S>* d = find(k);
      if (!d) fail_unknown(owner, k, info());
      std::string err = d->parse_into(s, v);
      if (!err.empty()) fail_option_value("pass '" + owner + "': option '" + k + "'", err, v);
    }
    return s;
  }
  // Fails like parse() when a field filled in C++ is out of range or unwritable.
  void check(const S& s, const std::string& owner) const {
    for (const auto& d : decls_) {
      std::string err = d->check(s);
      if (!err.empty()) fail_option_value("pass '" + owner + "': option '" + d->info().name + "'", err, d->print(s));
    }
  }
  // "k=v,k2=v2": the values that differ from the defaults and those always printed, in order.
  std::string print(const S& s, const std::string& owner) const {
    check(s, owner);
    std::string out;
    for (const auto& d : decls_) {
      const std::string p = d->print(s);
      if (p.empty() || (!d->always_printed() && d->at_default(s))) continue;
      out += (out.empty() ? "" : ",") + d->info().name + "=" + p;
    }
    return out;
  }

 private:
  const OptionDecl<S>* find(const std::string& k) const {
    for (const auto& d : decls_)
      if (d->info().name == k) return d.get();
    return nullptr;
  }
  [[noreturn]] static void fail_unknown(const std::string& owner, const std::string& k,
                                        const std::vector<OptionInfo>& valid);
  std::vector<std::shared_ptr<OptionDecl<S>>> decls_;
};

[[noreturn]] void fail_unknown_option(const std::string& owner, const std::string& k,
                                      const std::vector<OptionInfo>& valid);
template <class S>
void OptionTable<S>::fail_unknown(const std::string& owner, const std::string& k,
                                  const std::vector<OptionInfo>& valid) {
  fail_unknown_option(owner, k, valid);
}

// `name{k=v,...}` for a pass and its options struct (just `name` when nothing is printed).
template <class S>
std::string pass_text(const std::string& name, const S& s) {
  std::string o = S::table().print(s, name);
  return o.empty() ? name : name + "{" + o + "}";
}

// Options of a pass that takes none.
struct NoOptions {
  bool operator==(const NoOptions&) const = default;
  static const OptionTable<NoOptions>& table();
};

}  // namespace otter
