// Pass-manager instruments of otter-opt: graph dumps before/after passes (text, DOT or JSON, to a
// stream or one numbered file per dump), unified diffs of each pass's change, and per-pass
// statistics. (TimingInstrument sits beside the manager in pass_manager.h.)
#pragma once

#include <map>
#include <ostream>
#include <set>
#include <string>
#include <vector>

#include "passes/pass_manager.h"

namespace otter {

class JsonWriter;

enum class GraphFormat : uint8_t { kText, kDot, kJson };
// "text", "dot", "json"; fails naming the valid choices.
GraphFormat graph_format_from_name(const std::string& name);
const char* graph_format_extension(GraphFormat f);  // "txt", "dot", "json"
void print_graph_as(const Graph& g, GraphFormat f, std::ostream& os);

// Which dumps a PrintInstrument makes.
struct PrintSelection {
  bool after_all = false;
  bool before_all = false;
  bool after_change = false;     // of the passes selected for after-dumps (all when none), only
                                 // those that changed the printed graph
  std::set<std::string> after;   // after these passes
  std::set<std::string> before;  // before these passes
  bool diff = false;             // after-dumps become unified diffs of the text form
  bool wants_after(const std::string& pass) const {
    return after_all || after.count(pass) || (after_change && after.empty());
  }
  bool wants_before(const std::string& pass) const { return before_all || before.count(pass); }
  bool empty() const { return !after_all && !before_all && !after_change && after.empty() && before.empty(); }
};

// Prints the graph around passes, each dump opened by a stable banner naming the pass:
//   // ----- IR dump after add-loss ----- //
//   // ----- IR diff of add-loss ----- //      (--diff; "(no change)" when the pass changed nothing)
// In JSON each dump is one line {"dump":"after","pass":"add-loss","index":2,"graph":{...}}.
// With a dump folder, each dump is a file instead: 00-input.txt (the graph before the first
// pass), then NN-<pass>.txt after pass NN (1-based), NN-<pass>.before.txt, NN-<pass>.diff.
class PrintInstrument : public PassInstrument {
 public:
  PrintInstrument(std::ostream& os, PrintSelection sel, GraphFormat format = GraphFormat::kText,
                  std::string dump_dir = "");
  void before_pass(const Pass& p, const Graph& g, int index) override;
  void after_pass(const Pass& p, const Graph& g, int index, double seconds) override;
  // "// ----- IR dump after add-loss ----- //" for what = "IR dump after".
  static std::string banner(const std::string& what, const Pass& p);

 private:
  void dump(const std::string& when, const Pass& p, int index, const Graph& g);
  void write(const std::string& file_stem, const std::string& text);
  std::ostream& os_;
  PrintSelection sel_;
  GraphFormat format_;
  std::string dump_dir_;
  std::string text_before_;  // text form before the running pass (for diffs and change detection)
};

// Per pass: its counters (casts_inserted, grads_fused, ...) and the node count before and after.
class StatsInstrument : public PassInstrument {
 public:
  struct Record {
    int index = 0;
    std::string pass;
    int64_t nodes_before = 0, nodes_after = 0;
    std::map<std::string, int64_t> counters;
  };
  void before_pass(const Pass& p, const Graph& g, int index) override;
  void after_pass(const Pass& p, const Graph& g, int index, double seconds) override;
  const std::vector<Record>& records() const { return records_; }
  void report(std::ostream& os) const;
  void write_json(JsonWriter& w) const;  // an array of records

 private:
  int64_t nodes_before_ = 0;
  std::vector<Record> records_;
};

}  // namespace otter
