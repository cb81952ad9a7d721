// ONNX backend node-test conformance runner: runs the official node tests from Debian's
// libonnx-testdata through otter's importer and CPU executor, for every op of otter's op set, and
// prints passed / failed / unsupported per op. Exit status 0 only when every in-scope test passes
// or is listed, with its reason, in tests/conformance/exclusions.txt.
//
// In scope: tests whose ops all belong to otter's op set and whose opset is within 13..21 (tests
// of older opsets are counted separately as out of range).
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <cstring>
#include <iostream>
#include <map>
#include <set>
#include <sstream>

#include "graph/onnx_io.h"
#include "graph/op_table.h"
#include "onnx/onnx_pb.h"
#include "runtime/executor.h"

namespace fs = std::filesystem;
using namespace otter;

namespace {

// otter's op set: every op of the default domain in the op table.
const std::set<std::string>& op_set() {
  static const std::set<std::string> ops = [] {
    std::set<std::string> s;
    for (const OpDef* d : OpTable::instance().all())
      if (d->domain.empty()) s.insert(d->op_type);
    return s;
  }();
  return ops;
}

struct Outcome {
  std::string status;  // passed, failed, unsupported, excluded
  std::string detail;
};

// Reads a test tensor for a graph value. ONNX's generator stored bfloat16 test tensors with the
// data type UINT16 (raw bits); where the graph value is bfloat16 those bits are taken as bfloat16.
Tensor read_test_tensor(const fs::path& p, const Value* v) {
  onnx::TensorProto proto;
  {
    std::ifstream in(p, std::ios::binary);
    OTTER_CHECK(in && proto.ParseFromIstream(&in), "cannot parse tensor file ", p.string());
  }
  if (proto.data_type() == onnx::TensorProto::UINT16 && v->dtype() == DataType::kBFloat16) {
    std::vector<int64_t> dims(proto.dims().begin(), proto.dims().end());
    Tensor t(DataType::kBFloat16, dims);
    auto* bits = static_cast<uint16_t*>(t.raw());
    if (!proto.raw_data().empty()) {
      OTTER_CHECK(proto.raw_data().size() == t.nbytes(), p.string(), ": raw_data size mismatch");
      std::memcpy(bits, proto.raw_data().data(), t.nbytes());
    } else {
      OTTER_CHECK(proto.int32_data_size() == t.numel(), p.string(), ": int32_data size mismatch");
      for (int64_t i = 0; i < t.numel(); ++i) bits[i] = static_cast<uint16_t>(proto.int32_data(static_cast<int>(i)));
    }
    return t;
  }
  return read_tensor_pb_file(p.string());
}

bool close_enough(const Tensor& got, const Tensor& want, std::string* why) {
  if (got.dtype() != want.dtype()) {
    *why = str_cat("dtype ", dtype_name(got.dtype()), " vs expected ", dtype_name(want.dtype()));
    return false;
  }
  if (got.dims() != want.dims()) {
    *why = str_cat("shape ", dims_to_string(got.dims()), " vs expected ", dims_to_string(want.dims()));
    return false;
  }
  const bool fp = is_float(want.dtype());
  const double rtol = 1e-3, atol = 1e-6;
  for (int64_t i = 0; i < want.numel(); ++i) {
    double a = got.get_as_double(i), b = want.get_as_double(i);
    if (fp && std::isnan(a) && std::isnan(b)) continue;
    if (fp && std::isinf(b) && a == b) continue;
    bool ok = fp ? std::abs(a - b) <= atol + rtol * std::abs(b) : a == b;
    if (!ok) {
      *why = str_cat("element ", i, ": ", a, " vs expected ", b);
      return false;
    }
  }
  return true;
}

Outcome run_test(const fs::path& dir) {
  std::unique_ptr<Graph> g;
  try {
    g = import_onnx_file((dir / "model.onnx").string());
  } catch (const Error& e) {
    return {"unsupported", e.what()};
  }
  std::unique_ptr<Executor> ex;
  try {
    ex = std::make_unique<Executor>(*g);
  } catch (const Error& e) {
    return {"unsupported", e.what()};
  }
  std::vector<fs::path> sets;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.is_directory() && e.path().filename().string().rfind("test_data_set_", 0) == 0) sets.push_back(e.path());
  std::sort(sets.begin(), sets.end());
  for (const fs::path& set : sets) {
    std::map<std::string, Tensor> feeds;
    for (size_t i = 0; i < g->inputs().size(); ++i) {
      fs::path p = set / str_cat("input_", i, ".pb");
      if (!fs::exists(p)) return {"failed", str_cat("missing ", p.string())};
      try {
        feeds[g->inputs()[i]->name()] = read_test_tensor(p, g->inputs()[i]);
      } catch (const Error& e) {
        return {"unsupported", e.what()};
      }
    }
    std::map<std::string, Tensor> out;
    try {
      out = ex->run(feeds);
    } catch (const Error& e) {
      return {"failed", e.what()};
    }
    for (size_t i = 0; i < g->outputs().size(); ++i) {
      fs::path p = set / str_cat("output_", i, ".pb");
      if (!fs::exists(p)) continue;
      Tensor want;
      try {
        want = read_test_tensor(p, g->outputs()[i]);
      } catch (const Error& e) {
        return {"unsupported", e.what()};
      }
      std::string why;
      if (!close_enough(out.at(g->outputs()[i]->name()), want, &why))
        return {"failed", str_cat(set.filename().string(), " output '", g->outputs()[i]->name(), "': ", why)};
    }
  }
  return {"passed", ""};
}

std::map<std::string, std::string> read_exclusions(const std::string& path) {
  std::map<std::string, std::string> out;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream is(line);
    std::string name, reason;
    is >> name;
    std::getline(is, reason);
    reason.erase(0, reason.find_first_not_of(" \t"));
    OTTER_CHECK(!reason.empty(), path, ": exclusion '", name, "' has no reason");
    out[name] = reason;
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  std::string data_dir = "/usr/share/libonnx-testdata/data/node";
  std::string excl_path = std::string(OTTER_SOURCE_DIR) + "/tests/conformance/exclusions.txt";
  bool verbose = false;
  std::string filter;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "-v") verbose = true;
    else if (a == "--data" && i + 1 < argc) data_dir = argv[++i];
    else if (a == "--filter" && i + 1 < argc) filter = argv[++i];
    else { std::cerr << "usage: conformance [-v] [--data DIR] [--filter SUBSTRING]\n"; return 2; }
  }
  if (!fs::is_directory(data_dir)) {
    std::cerr << "error: " << data_dir << " not found (install Debian's libonnx-testdata)\n";
    return 1;
  }
  auto exclusions = read_exclusions(excl_path);
  std::vector<fs::path> dirs;
  for (const auto& e : fs::directory_iterator(data_dir))
    if (e.is_directory()) dirs.push_back(e.path());
  std::sort(dirs.begin(), dirs.end());

  struct Counts { int passed = 0, failed = 0, unsupported = 0, excluded = 0; };
  std::map<std::string, Counts> per_op;
  Counts total;
  int out_of_range = 0, out_of_set = 0;
  std::vector<std::string> failures;
  std::set<std::string> seen_exclusions;
  for (const fs::path& dir : dirs) {
    std::string name = dir.filename().string();
    if (!filter.empty() && name.find(filter) == std::string::npos) continue;
    onnx::ModelProto m;
    {
      std::ifstream in(dir / "model.onnx", std::ios::binary);
      if (!m.ParseFromIstream(&in)) continue;
    }
    int64_t opset = 0;
    for (const auto& o : m.opset_import())
      if (o.domain().empty() || o.domain() == "ai.onnx") opset = o.version();
    std::set<std::string> ops;
    bool other_domain = false;
    for (const auto& n : m.graph().node()) {
      ops.insert(n.op_type());
      if (!n.domain().empty() && n.domain() != "ai.onnx") other_domain = true;
    }
    if (ops.empty()) continue;
    bool in_set = !other_domain && std::all_of(ops.begin(), ops.end(), [](const std::string& o) { return op_set().count(o) > 0; });
    if (!in_set) { ++out_of_set; continue; }
    if (opset < kMinOnnxOpset || opset > kMaxOnnxOpset) { ++out_of_range; continue; }
    // Attribute the test to its op: the single op, or for expanded tests the first non-trivial one
    // named in the test name.
    std::string op = *ops.begin();
    if (ops.size() > 1) {
      std::string lname = name;
      size_t best = std::string::npos;
      for (const auto& o : ops) {
        std::string snake;
        for (char c : o) {
          if (std::isupper(static_cast<unsigned char>(c)) && !snake.empty()) snake += '_';
          snake += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
        }
        size_t pos = lname.find(snake);
        if (pos != std::string::npos && pos < best) { best = pos; op = o; }
      }
    }
    Outcome r = run_test(dir);
    auto ex = exclusions.find(name);
    if (ex != exclusions.end()) {
      seen_exclusions.insert(name);
      if (r.status == "passed") {
        failures.push_back(str_cat(name, ": listed as excluded (", ex->second, ") but passes; remove the exclusion"));
        ++per_op[op].failed;
        ++total.failed;
        continue;
      }
      r.status = "excluded";
    }
    Counts& c = per_op[op];
    if (r.status == "passed") { ++c.passed; ++total.passed; }
    else if (r.status == "failed") { ++c.failed; ++total.failed; failures.push_back(name + ": " + r.detail); }
    else if (r.status == "unsupported") { ++c.unsupported; ++total.unsupported; failures.push_back(name + " (unsupported): " + r.detail); }
    else { ++c.excluded; ++total.excluded; }
    if (verbose) std::cout << std::left << std::setw(60) << name << r.status << (r.detail.empty() ? "" : "  " + r.detail) << "\n";
  }
  for (const auto& [name, reason] : exclusions)
    if (!seen_exclusions.count(name) && filter.empty())
      failures.push_back(str_cat(name, ": listed in exclusions.txt but not found among in-scope tests"));

  std::cout << std::left << std::setw(28) << "op" << std::right << std::setw(8) << "passed" << std::setw(8) << "failed"
            << std::setw(13) << "unsupported" << std::setw(10) << "excluded" << "\n";
  for (const auto& [op, c] : per_op)
    std::cout << std::left << std::setw(28) << op << std::right << std::setw(8) << c.passed << std::setw(8) << c.failed
              << std::setw(13) << c.unsupported << std::setw(10) << c.excluded << "\n";
  std::cout << std::left << std::setw(28) << "TOTAL" << std::right << std::setw(8) << total.passed << std::setw(8)
            << total.failed << std::setw(13) << total.unsupported << std::setw(10) << total.excluded << "\n";
  std::cout << "(not counted: " << out_of_range << " tests of opsets outside 13..21, " << out_of_set
            << " tests using ops outside otter's op set)\n";
  if (!failures.empty()) {
    std::cout << "\nproblems:\n";
    for (const auto& f : failures) std::cout << "  " << f.substr(0, 400) << "\n";
  }
  std::cout << "conformance: " << total.passed << " passed, " << total.failed + total.unsupported << " failed, "
            << total.excluded << " excluded\n";
  return failures.empty() ? 0 : 1;
}
