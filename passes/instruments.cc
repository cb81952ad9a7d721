// Dump, diff and statistics instruments (see instruments.h).
#include "passes/instruments.h"

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "graph/error.h"
#include "graph/json_writer.h"
#include "graph/printer.h"
#include "graph/printer_dot.h"
#include "graph/printer_json.h"
#include "passes/unified_diff.h"

namespace otter {

GraphFormat graph_format_from_name(const std::string& name) {
  if (name == "text") return GraphFormat::kText;
  if (name == "dot") return GraphFormat::kDot;
  if (name == "json") return GraphFormat::kJson;
  fail("unknown graph format '", name, "' (valid formats: text, dot, json)");
}

const char* graph_format_extension(GraphFormat f) {
  switch (f) {
    case GraphFormat::kText: return "txt";
    case GraphFormat::kDot: return "dot";
    case GraphFormat::kJson: return "json";
  }
  return "?";
}

void print_graph_as(const Graph& g, GraphFormat f, std::ostream& os) {
  switch (f) {
    case GraphFormat::kText: print_graph(g, os); break;
    case GraphFormat::kDot: print_graph_dot(g, os); break;
    case GraphFormat::kJson: print_graph_json(g, os); break;
  }
}

// ---- PrintInstrument --------------------------------------------------------------------------

PrintInstrument::PrintInstrument(std::ostream& os, PrintSelection sel, GraphFormat format, std::string dump_dir)
    : os_(os), sel_(std::move(sel)), format_(format), dump_dir_(std::move(dump_dir)) {
  if (dump_dir_.empty()) return;
  std::error_code ec;
  std::filesystem::create_directories(dump_dir_, ec);
  OTTER_CHECK(!ec && std::filesystem::is_directory(dump_dir_), "cannot create dump folder '", dump_dir_,
              "': ", ec ? ec.message() : "not a folder");
}

std::string PrintInstrument::banner(const std::string& what, const Pass& p) {
  return str_cat("// ----- ", what, " ", p.name(), " ----- //");
}

namespace {

std::string numbered(int index, const std::string& name) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "%02d-", index);
  return buf + name;
}

}  // namespace

void PrintInstrument::write(const std::string& file_stem, const std::string& text) {
  if (dump_dir_.empty()) {
    os_ << text;
    return;
  }
  std::string path = (std::filesystem::path(dump_dir_) / file_stem).string();
  std::ofstream f(path, std::ios::binary);
  f << text;
  OTTER_CHECK(f.good(), "cannot write dump file '", path, "'");
}

void PrintInstrument::dump(const std::string& when, const Pass& p, int index, const Graph& g) {
  std::ostringstream os;
  if (format_ == GraphFormat::kJson && dump_dir_.empty()) {
    JsonWriter w(os);
    w.begin_object();
    w.field("dump", when);
    w.field("pass", p.name());
    w.field("index", index + 1);
    w.key("graph");
    write_graph_json(g, w);
    w.end_object();
    os << "\n";
  } else {
    if (format_ != GraphFormat::kJson) os << banner("IR dump " + when, p) << "\n";
    print_graph_as(g, format_, os);
  }
  std::string stem = numbered(index + 1, p.name()) + (when == "before" ? ".before." : ".");
  write(stem + graph_format_extension(format_), os.str());
}

void PrintInstrument::before_pass(const Pass& p, const Graph& g, int index) {
  if (index == 0 && !dump_dir_.empty()) {
    std::ostringstream os;
    print_graph_as(g, format_, os);
    write(std::string("00-input.") + graph_format_extension(format_), os.str());
  }
  if (sel_.diff || sel_.after_change) text_before_ = graph_to_string(g);
  if (sel_.wants_before(p.name())) dump("before", p, index, g);
}

void PrintInstrument::after_pass(const Pass& p, const Graph& g, int index, double) {
  if (!sel_.wants_after(p.name())) return;
  if (!sel_.diff && !sel_.after_change) {
    dump("after", p, index, g);
    return;
  }
  std::string after = graph_to_string(g);
  if (sel_.after_change && after == text_before_) return;
  if (!sel_.diff) {
    dump("after", p, index, g);
    return;
  }
  std::string d = unified_diff(text_before_, after, "before " + p.name(), "after " + p.name());
  write(numbered(index + 1, p.name()) + ".diff",
        banner("IR diff of", p) + "\n" + (d.empty() ? std::string("(no change)\n") : d));
}

// ---- StatsInstrument --------------------------------------------------------------------------

void StatsInstrument::before_pass(const Pass&, const Graph& g, int) {
  nodes_before_ = static_cast<int64_t>(g.nodes().size());
}

void StatsInstrument::after_pass(const Pass& p, const Graph& g, int index, double) {
  records_.push_back({index + 1, p.name(), nodes_before_, static_cast<int64_t>(g.nodes().size()), p.counters()});
}

void StatsInstrument::report(std::ostream& os) const {
  os << "pass statistics:\n";
  for (const Record& r : records_) {
    os << "  " << numbered(r.index, r.pass) << ": nodes " << r.nodes_before << " -> " << r.nodes_after << "\n";
    for (const auto& [k, v] : r.counters) os << "      " << k << " = " << v << "\n";
  }
}

void StatsInstrument::write_json(JsonWriter& w) const {
  w.begin_array();
  for (const Record& r : records_) {
    w.begin_object();
    w.field("index", r.index);
    w.field("pass", r.pass);
    w.field("nodes_before", r.nodes_before);
    w.field("nodes_after", r.nodes_after);
    w.key("counters");
    w.begin_object();
    for (const auto& [k, v] : r.counters) w.field(k, v);
    w.end_object();
    w.end_object();
  }
  w.end_array();
}

}  // namespace otter
