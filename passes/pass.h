// The Pass interface: a named graph-to-graph transformation with typed options (passes/options.h)
// and counters.
#pragma once

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "graph/ir.h"
#include "passes/options.h"

namespace otter {

// Evaluates one node on constant host inputs (constant folding). Passes never run kernels
// themselves: the runtime hands them an evaluator backed by the CPU kernels.
class ConstantEvaluator {
 public:
  virtual ~ConstantEvaluator() = default;
  // Returns the node's outputs, or nullopt when the node cannot be evaluated here.
  virtual std::optional<std::vector<Tensor>> evaluate(const Node& n,
                                                      const std::vector<const Tensor*>& inputs) = 0;
};

// Services and settings shared by all passes of one pipeline run.
struct PassContext {
  ConstantEvaluator* evaluator = nullptr;
};

// Option values as written in `pass{k=v}`, before the pass parses them into its options struct.
class PassOptions {
 public:
  void set(const std::string& k, const std::string& v) { values_[k] = v; }
  bool has(const std::string& k) const { return values_.count(k) != 0; }
  const std::map<std::string, std::string>& values() const { return values_; }
  std::string get_string(const std::string& k, const std::string& dflt) const;
  int64_t get_int(const std::string& k, int64_t dflt) const;
  double get_float(const std::string& k, double dflt) const;
  bool get_bool(const std::string& k, bool dflt) const;

 private:
  std::map<std::string, std::string> values_;
};

class Pass {
 public:
  virtual ~Pass() = default;
  virtual std::string name() const = 0;
  virtual std::string summary() const = 0;
  // The options the pass takes (passes/options.h), for listings and messages.
  virtual std::vector<OptionInfo> options() const { return {}; }
  // Parses and checks option values before run(); fails naming the pass and the option.
  virtual void configure(const PassOptions& values) { NoOptions::table().parse(values.values(), name()); }
  // The options as pipeline text: the values that differ from the defaults ("steps=4").
  virtual std::string options_text() const { return ""; }
  // True when `other` is the same pass with equal options.
  virtual bool same_options(const Pass& other) const { return other.name() == name(); }
  // What must hold before run(): "" when it does, else the reason, naming the pass that must run
  // first ("the gradients are not accumulated state: run grad-accumulation first"). The pass
  // manager checks it before running the pass.
  virtual std::string unmet_precondition(const Graph& g) const { return ""; }
  virtual void run(Graph& g, PassContext& ctx) = 0;
  // The precondition of a pass that rewrites the forward graph only: "" until autodiff has run.
  std::string before_autodiff(const Graph& g) const {
    return g.gradients.empty() && !g.loss_seed
               ? std::string()
               : "the graph already has a backward graph: run " + name() + " before autodiff";
  }
  // Counters kept by the last run (casts_inserted, nodes_removed, ...), in a stable order.
  const std::map<std::string, int64_t>& counters() const { return counters_; }

 protected:
  void count(const std::string& k, int64_t n = 1) { counters_[k] += n; }
  void reset_counters() { counters_.clear(); }
  // Resets the counters to exactly `values` (a run's figures, in one call).
  void set_counters(std::initializer_list<std::pair<const char*, int64_t>> values) {
    counters_.clear();
    for (const auto& [k, n] : values) counters_[k] += n;
  }
  std::map<std::string, int64_t> counters_;
};

// A pass whose options are the struct S (S::table() declares them; passes/options.h).
template <class S>
class PassWithOptions : public Pass {
 public:
  using Options = S;
  std::vector<OptionInfo> options() const override { return S::table().info(); }
  void configure(const PassOptions& values) override { opts_ = S::table().parse(values.values(), name()); }
  std::string options_text() const override { return S::table().print(opts_, name()); }
  bool same_options(const Pass& other) const override {
    auto* o = dynamic_cast<const PassWithOptions<S>*>(&other);
    return o && o->name() == name() && o->opts_ == opts_;
  }
  const S& typed_options() const { return opts_; }
  // Sets the options from a struct filled in C++ (checked as parsed ones are).
  void set_options(const S& s) {
    S::table().check(s, name());
    opts_ = s;
  }

 protected:
  S opts_;
};

}  // namespace otter
