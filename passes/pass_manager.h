// The pass manager: parses pipelines ("a,b{k=v,k2=v2}"), instantiates passes from the registry,
// checks each pass's precondition, runs it, verifies the graph after it, and calls instruments
// around it (timing here; printing, diffs and statistics in passes/instruments.h).
#pragma once

#include <functional>
#include <memory>
#include <ostream>
#include <set>
#include <string>
#include <vector>

#include "passes/pass.h"

namespace otter {

// One element of a parsed pipeline.
struct PipelineEntry {
  std::string name;
  PassOptions options;
  std::string text;  // as written, for messages
};
// Parses "a,b{k=v,k2=v2}" (whitespace allowed around tokens); fails with the position on bad syntax.
std::vector<PipelineEntry> parse_pipeline(const std::string& text);

using PassFactory = std::function<std::unique_ptr<Pass>()>;

class PassRegistry {
 public:
  static PassRegistry& instance();  // every built-in pass (see register_all_passes)
  void add(const std::string& name, PassFactory f);
  // A named pipeline: an alias expanding to a pipeline text.
  void add_alias(const std::string& name, std::string pipeline, std::string summary);
  bool has(const std::string& name) const;
  std::unique_ptr<Pass> create(const std::string& name) const;  // fails listing valid names
  std::vector<std::string> names() const;
  const std::map<std::string, std::pair<std::string, std::string>>& aliases() const { return aliases_; }

 private:
  std::map<std::string, PassFactory> factories_;
  std::map<std::string, std::pair<std::string, std::string>> aliases_;  // name -> (pipeline, summary)
};

// Registers every built-in pass and named pipeline (one explicit function; no static initialisers).
void register_all_passes(PassRegistry& r);

// Hooks called around each pass.
class PassInstrument {
 public:
  virtual ~PassInstrument() = default;
  virtual void before_pass(const Pass& p, const Graph& g, int index) {}
  virtual void after_pass(const Pass& p, const Graph& g, int index, double seconds) {}
};

// Records wall time per pass.
class TimingInstrument : public PassInstrument {
 public:
  void after_pass(const Pass& p, const Graph& g, int index, double seconds) override;
  void report(std::ostream& os) const;

 private:
  std::vector<std::pair<std::string, double>> times_;
};

class PassManager {
 public:
  explicit PassManager(PassContext ctx = {}) : ctx_(ctx) {}
  // Appends passes from pipeline text (aliases expanded, options validated), leaving out disabled
  // passes.
  void add_pipeline(const std::string& text);
  // Passes to leave out of every pipeline added later, also inside named pipelines; fails on a
  // name that is no registered pass.
  void set_disabled(const std::set<std::string>& names);
  // Disabled names that no added pipeline contained (so a misspelt --disable does not go unnoticed).
  std::vector<std::string> unused_disabled() const;
  // The pipeline as it will run, each pass as written: "canonicalize,add-loss{type=ce},autodiff".
  std::string pipeline_text() const;
  void add(std::unique_ptr<Pass> p) {
    texts_.push_back(p->name());
    passes_.push_back(std::move(p));
  }
  void add_instrument(PassInstrument* i) { instruments_.push_back(i); }
  void set_verify(bool v) { verify_ = v; }
  void run(Graph& g);
  const std::vector<std::unique_ptr<Pass>>& passes() const { return passes_; }
  PassContext& context() { return ctx_; }

 private:
  PassContext ctx_;
  std::vector<std::unique_ptr<Pass>> passes_;
  std::vector<std::string> texts_;  // each pass as written in its pipeline
  std::vector<PassInstrument*> instruments_;
  std::set<std::string> disabled_, disabled_seen_;
  bool verify_ = true;
};

}  // namespace otter
