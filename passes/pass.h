// The Pass interface: a named graph-to-graph transformation with typed options and counters.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "graph/ir.h"

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

// A typed option declaration: name, type, default and help.
struct PassOption {
  enum class Type : uint8_t { kInt, kFloat, kString, kBool };
  std::string name;
  Type type = Type::kString;
  std::string default_value;
  std::string help;
  std::vector<std::string> choices;  // allowed values of a string option (empty: any)
};
const char* option_type_name(PassOption::Type t);

// Parsed option values, as given in `pass{k=v}` (validated against the declarations).
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
  virtual std::vector<PassOption> options() const { return {}; }
  // Applies option values (already validated) before run().
  virtual void configure(const PassOptions& opts) { opts_ = opts; }
  // What must hold before run(): "" when it does, else the reason, naming the pass that must run
  // first ("the gradients are not accumulated state: run grad-accumulation first"). The pass
  // manager checks it before running the pass.
  virtual std::string unmet_precondition(const Graph& g) const { return ""; }
  virtual void run(Graph& g, PassContext& ctx) = 0;
  // Counters kept by the last run (casts_inserted, nodes_removed, ...), in a stable order.
  const std::map<std::string, int64_t>& counters() const { return counters_; }

 protected:
  void count(const std::string& k, int64_t n = 1) { counters_[k] += n; }
  void reset_counters() { counters_.clear(); }
  PassOptions opts_;
  std::map<std::string, int64_t> counters_;
};

}  // namespace otter
