// ONNX backend node-test conformance runner: runs every node test of Debian's libonnx-testdata
// through otter's importer (which upgrades opsets 7-12 with ONNX's version converter) and CPU
// executor, and prints passed / failed / excluded per op and in total. A test whose op or type otter
// lacks counts as failed. The only exclusions are sequence, optional, map and string values and the
// signal-processing ops (DFT, STFT, window functions, MelWeightMatrix), each printed with its reason.
// Exit status 0 when exactly the tests listed in tests/conformance/known_failures.txt fail.
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
    return {"failed", str_cat("unsupported: ", e.what())};
  }
  std::unique_ptr<Executor> ex;
  try {
    ex = std::make_unique<Executor>(*g);
  } catch (const Error& e) {
    return {"failed", str_cat("unsupported: ", e.what())};
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
        return {"failed", str_cat("unsupported: ", e.what())};
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
        return {"failed", str_cat("unsupported: ", e.what())};
      }
      std::string why;
      if (!close_enough(out.at(g->outputs()[i]->name()), want, &why))
        return {"failed", str_cat(set.filename().string(), " output '", g->outputs()[i]->name(), "': ", why)};
    }
  }
  return {"passed", ""};
}

std::map<std::string, std::string> read_known_failures(const std::string& path) {
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
    OTTER_CHECK(!reason.empty(), path, ": known failure '", name, "' has no reason");
    out[name] = reason;
  }
  return out;
}

// The reason a test lies outside the conformance count, or "" when it counts: sequence, optional,
// map and string values, and the signal-processing ops (the only exclusions the count allows).
std::string exclusion_reason(const onnx::ModelProto& m) {
  static const std::set<std::string> kSignalOps = {"DFT",           "STFT",           "HannWindow",
                                                   "HammingWindow", "BlackmanWindow", "MelWeightMatrix"};
  auto value_reason = [](const onnx::ValueInfoProto& v) -> std::string {
    switch (v.type().value_case()) {
      case onnx::TypeProto::kSequenceType:
        return "sequence values are outside otter's IR (tensors only)";
      case onnx::TypeProto::kOptionalType:
        return "optional values are outside otter's IR (tensors only)";
      case onnx::TypeProto::kMapType:
        return "map values are outside otter's IR (tensors only)";
      case onnx::TypeProto::kTensorType:
        if (v.type().tensor_type().elem_type() == onnx::TensorProto::STRING)
          return "string tensors are outside otter's types (a training runtime: numbers and bool)";
        return "";
      default:
        return "";
    }
  };
  for (const auto& n : m.graph().node())
    if (kSignalOps.count(n.op_type()))
      return str_cat("signal-processing op ", n.op_type(),
                     " (DFT, STFT, window functions, MelWeightMatrix) is out of scope");
  for (const auto* list : {&m.graph().input(), &m.graph().output()})
    for (const auto& v : *list)
      if (std::string r = value_reason(v); !r.empty()) return r;
  return "";
}

// The op a test is counted under: the single op, or for expanded tests the op named earliest in the
// test name.
std::string attribute_op(const std::string& name, const std::set<std::string>& ops) {
  std::string op = ops.empty() ? "(none)" : *ops.begin();
  size_t best = std::string::npos;
  for (const auto& o : ops) {
    std::string snake;
    for (char c : o) {
      if (std::isupper(static_cast<unsigned char>(c)) && !snake.empty()) snake += '_';
      snake += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    }
    size_t pos = name.find(snake);
    if (pos != std::string::npos && pos < best) {
      best = pos;
      op = o;
    }
  }
  return op;
}

struct Counts {
  int passed = 0, failed = 0, excluded = 0;
};

struct Report {
  std::map<std::string, Counts> per_op;
  Counts total;
  std::vector<std::string> excluded;    // "name: reason"
  std::vector<std::string> failures;    // "name: detail"
  std::vector<std::string> unexpected;  // failures not in known_failures.txt, listed ones that pass
};

void print_report(const Report& r, bool list_failures) {
  std::cout << std::left << std::setw(28) << "op" << std::right << std::setw(8) << "passed" << std::setw(8) << "failed"
            << std::setw(10) << "excluded"
            << "\n";
  for (const auto& [op, c] : r.per_op)
    std::cout << std::left << std::setw(28) << op << std::right << std::setw(8) << c.passed << std::setw(8) << c.failed
              << std::setw(10) << c.excluded << "\n";
  std::cout << "\nexcluded (" << r.excluded.size() << "):\n";
  for (const auto& e : r.excluded) std::cout << "  " << e << "\n";
  if (list_failures) {
    std::cout << "\nfailed (" << r.failures.size() << "):\n";
    for (const auto& f : r.failures) std::cout << "  " << f.substr(0, 300) << "\n";
  }
  if (!r.unexpected.empty()) {
    std::cout << "\nunexpected (not as tests/conformance/known_failures.txt says):\n";
    for (const auto& f : r.unexpected) std::cout << "  " << f.substr(0, 400) << "\n";
  }
  const Counts& t = r.total;
  int all = t.passed + t.failed + t.excluded, counted = t.passed + t.failed;
  std::cout << "conformance: " << all << " node tests: " << t.passed << " passed, " << t.failed << " failed, "
            << t.excluded << " excluded; " << std::fixed << std::setprecision(1)
            << (counted ? 100.0 * t.passed / counted : 0.0) << "% of the " << counted << " counted tests pass\n";
}

}  // namespace

int main(int argc, char** argv) {
  std::string data_dir = "/usr/share/libonnx-testdata/data/node";
  std::string known_path = std::string(OTTER_SOURCE_DIR) + "/tests/conformance/known_failures.txt";
  bool verbose = false, list_failures = false;
  std::string filter;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "-v") verbose = true;
    else if (a == "--failures")
      list_failures = true;
    else if (a == "--data" && i + 1 < argc) data_dir = argv[++i];
    else if (a == "--filter" && i + 1 < argc) filter = argv[++i];
    else {
      std::cerr << "usage: conformance [-v] [--failures] [--data DIR] [--filter SUBSTRING]\n";
      return 2;
    }
  }
  if (!fs::is_directory(data_dir)) {
    std::cerr << "error: " << data_dir << " not found (install Debian's libonnx-testdata)\n";
    return 1;
  }
  auto known = read_known_failures(known_path);
  std::vector<fs::path> dirs;
  for (const auto& e : fs::directory_iterator(data_dir))
    if (e.is_directory()) dirs.push_back(e.path());
  std::sort(dirs.begin(), dirs.end());
  Report rep;
  std::set<std::string> seen;
  for (const fs::path& dir : dirs) {
    std::string name = dir.filename().string();
    if (!filter.empty() && name.find(filter) == std::string::npos) continue;
    seen.insert(name);
    onnx::ModelProto m;
    std::ifstream in(dir / "model.onnx", std::ios::binary);
    Outcome r;
    std::set<std::string> ops;
    if (!m.ParseFromIstream(&in)) {
      r = {"failed", "model.onnx does not parse"};
    } else {
      for (const auto& n : m.graph().node()) ops.insert(n.op_type());
      std::string why = exclusion_reason(m);
      r = why.empty() ? run_test(dir) : Outcome{"excluded", why};
    }
    Counts& c = rep.per_op[attribute_op(name, ops)];
    auto k = known.find(name);
    if (r.status == "passed") {
      ++c.passed, ++rep.total.passed;
      if (k != known.end()) rep.unexpected.push_back(name + ": passes; remove it from known_failures.txt");
    } else if (r.status == "excluded") {
      ++c.excluded, ++rep.total.excluded;
      rep.excluded.push_back(name + ": " + r.detail);
    } else {
      ++c.failed, ++rep.total.failed;
      rep.failures.push_back(name + ": " + r.detail);
      if (k == known.end()) rep.unexpected.push_back(name + ": fails: " + r.detail);
    }
    if (verbose) std::cout << std::left << std::setw(60) << name << r.status << (r.detail.empty() ? "" : "  " + r.detail) << "\n";
  }
  for (const auto& [name, reason] : known)
    if (!seen.count(name) && filter.empty())
      rep.unexpected.push_back(name + ": listed in known_failures.txt but not found");
  print_report(rep, list_failures);
  return rep.unexpected.empty() ? 0 : 1;
}
