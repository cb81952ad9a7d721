// otter-train: the training command line (train, eval, grad, predict, kernels).
#include <algorithm>
#include <cstring>
#include <iostream>
#include <set>

#include "graph/onnx_io.h"
#include "graph/verifier.h"
#include "kernels/device.h"
#include "kernels/kernel.h"
#include "passes/pass_manager.h"
#include "passes/add_loss.h"
#include "passes/autodiff.h"
#include "runtime/constant_eval.h"
#include "runtime/dataset.h"
#include "runtime/executor.h"
#include "runtime/npz.h"
#include "tools/cli.h"

using namespace otter;

namespace {

const char* kUsage =
    "usage: otter-train COMMAND [options]\n"
    "\n"
    "commands:\n"
    "  grad MODEL.onnx --data D.npz --out G.npz [--loss ce|mse|model:NAME] [--batch-size B] [--freeze P]\n"
    "          one forward and backward pass on the first batch: the loss and every parameter gradient\n"
    "  predict MODEL.onnx --data IN.npz --out OUT.npz [--batch-size B] [--device cpu]\n"
    "          run the model (inference) on the arrays named after its inputs\n"
    "  kernels [--format text|tsv]\n"
    "          list the registered kernels: op, device, dtypes\n"
    "\n"
    "Run 'otter-train COMMAND --help' for the options of one command.\n";

// --device auto|cpu|cuda: auto picks CUDA where a device is present. A CUDA device is created in
// `holder`, which must outlive its use.
Device& pick_device(const std::string& s, std::unique_ptr<Device>& holder) {
  if (s == "cpu") return cpu_device();
  if (s == "cuda" || (s == "auto" && cuda_available())) {
    holder = make_cuda_device();
    return *holder;
  }
  if (s == "auto") return cpu_device();
  fail("--device must be auto, cpu or cuda, got '", s, "'");
}

// Rows [begin, end) of a tensor along axis 0 (a copy).
Tensor slice_rows(const Tensor& t, int64_t begin, int64_t end) {
  std::vector<int64_t> dims = t.dims();
  int64_t row = dims[0] ? t.nbytes() / dims[0] : 0;
  dims[0] = end - begin;
  Tensor out(t.dtype(), dims);
  if (out.nbytes()) std::memcpy(out.raw(), static_cast<const char*>(t.raw()) + begin * row, out.nbytes());
  return out;
}

Tensor concat_rows(const std::vector<Tensor>& parts) {
  std::vector<int64_t> dims = parts[0].dims();
  dims[0] = 0;
  for (const Tensor& p : parts) dims[0] += p.dim(0);
  Tensor out(parts[0].dtype(), dims);
  size_t off = 0;
  for (const Tensor& p : parts) {
    if (p.nbytes()) std::memcpy(static_cast<char*>(out.raw()) + off, p.raw(), p.nbytes());
    off += p.nbytes();
  }
  return out;
}

std::unique_ptr<Graph> load_and_canonicalize(const std::string& path) {
  auto g = import_onnx_file(path);
  CpuConstantEvaluator evaluator;
  PassContext ctx;
  ctx.evaluator = &evaluator;
  PassManager pm(ctx);
  pm.add_pipeline("canonicalize");
  pm.run(*g);
  return g;
}

// ---- the training graph and its data, shared by the commands that differentiate --------------

// Flags that choose the loss and what is trained.
const std::vector<cli::FlagSpec> kLossFlags = {
    {"loss", true, "ce (cross-entropy), mse, or model:NAME for a model that outputs its scalar loss NAME "
                   "(default ce)", "LOSS"},
    {"output", true, "model output the loss reads (default: the first output)", "NAME"},
    {"labels", true, "name of the labels array (default labels)", "NAME"},
    {"freeze", true, "parameters that get no gradient: name globs with * and ?, ';'-separated", "PATTERN"},
};

// Adds the loss (add-loss, unless the model outputs it) and the backward graph (autodiff) to a
// canonicalized model, as the flags say; returns the loss value. Fails naming the flag when the
// loss cannot be built.
const Value* add_training_graph(Graph& g, const cli::Args& args) {
  std::string loss = args.get("loss", "ce");
  std::string loss_name = "loss";  // what add-loss names it
  PassManager pm;
  PassOptions ad;
  if (loss.rfind("model:", 0) == 0) {
    std::string name = loss.substr(6);
    const Value* v = g.find_value(name);
    if (!v || !v->is_graph_output()) {
      std::string outs;
      for (const Value* o : g.outputs()) outs += (outs.empty() ? "" : ", ") + o->name();
      fail("--loss model:", name, ": the model has no output '", name, "' (outputs: ", outs, ")");
    }
    OTTER_CHECK(!args.has("output") && !args.has("labels"), "--output and --labels choose what add-loss reads; ",
                "--loss model:", name, " uses the model's own loss");
    loss_name = name;
  } else {
    OTTER_CHECK(loss == "ce" || loss == "mse", "--loss must be ce, mse or model:NAME, got '", loss, "'");
    auto add = std::make_unique<AddLossPass>();
    PassOptions al;
    al.set("type", loss);
    if (args.has("output")) al.set("output", args.get("output"));
    al.set("labels", args.get("labels", "labels"));
    add->configure(al);
    pm.add(std::move(add));
  }
  ad.set("loss", loss_name);
  ad.set("freeze", args.get("freeze", ""));
  auto autodiff = std::make_unique<AutodiffPass>();
  autodiff->configure(ad);
  pm.add(std::move(autodiff));
  pm.run(g);
  return g.value(loss_name);
}

// The first batch of the data file: its first --batch-size samples (every sample without the flag),
// of the arrays named after the graph's inputs (checked against their types and shapes).
std::map<std::string, Tensor> first_batch(const Graph& g, const std::string& path, const cli::Args& args) {
  std::vector<const Value*> inputs(g.inputs().begin(), g.inputs().end());
  Dataset data = Dataset::from_npz(path, inputs);
  if (!args.has("batch-size")) return data.arrays();
  int64_t batch = args.get_int("batch-size", 0);
  OTTER_CHECK(batch > 0, "--batch-size must be positive, got ", batch);
  return DataLoader(data, batch, /*shuffle=*/false, /*seed=*/0).next();
}

int cmd_grad(int argc, char** argv) {
  std::vector<cli::FlagSpec> flags = {
      {"data", true, "input arrays (.npz), named after the model inputs, plus the labels", "D.npz"},
      {"out", true, "where to write 'loss' and 'grad/<parameter>' arrays (.npz)", "G.npz"},
      {"batch-size", true, "use the first B samples (default: every sample)", "B"},
      {"device", true, "auto|cpu|cuda (default auto)", "DEVICE"},
      {"help", false, "show this help"},
  };
  flags.insert(flags.begin() + 2, kLossFlags.begin(), kLossFlags.end());
  cli::Args args("otter-train grad", flags);
  args.parse(argc, argv, 2);
  if (args.has("help")) {
    std::cout << "usage: otter-train grad MODEL.onnx --data D.npz --out G.npz [options]\n\n"
                 "One forward and backward pass on the first batch; writes the loss and the gradient of every\n"
                 "trainable parameter (frozen ones excluded) as 'loss' and 'grad/<initializer name>'.\n\n"
              << args.help();
    return 0;
  }
  if (args.positional().size() != 1) fail("grad: expected one model file (see otter-train grad --help)");
  if (!args.has("data")) fail("grad: --data D.npz is required");
  if (!args.has("out")) fail("grad: --out G.npz is required");
  std::unique_ptr<Device> cuda;
  Device& device = pick_device(args.get("device", "auto"), cuda);
  auto g = load_and_canonicalize(args.positional()[0]);
  const Value* loss = add_training_graph(*g, args);
  auto feeds = first_batch(*g, args.get("data"), args);
  ExecutorOptions eo;
  eo.device = &device;
  Executor ex(*g, eo);
  auto outputs = ex.run(feeds);
  std::vector<std::pair<std::string, Tensor>> out;
  out.emplace_back("loss", device.to_host(outputs.at(loss->name())));
  for (const auto& [param, grad] : g->gradients)
    out.emplace_back("grad/" + param->name(), device.to_host(outputs.at(grad->name())));
  write_npz(args.get("out"), out);
  std::cout << "loss " << out[0].second.get_as_double(0) << "; wrote " << g->gradients.size() << " parameter gradient"
            << (g->gradients.size() == 1 ? "" : "s") << " to " << args.get("out") << "\n";
  return 0;
}

int cmd_predict(int argc, char** argv) {
  cli::Args args("otter-train predict", {
      {"data", true, "input arrays (.npz), named after the model inputs", "IN.npz"},
      {"out", true, "where to write the outputs (.npz)", "OUT.npz"},
      {"batch-size", true, "feed B samples at a time (default: each array whole)", "B"},
      {"device", true, "auto|cpu|cuda (default auto)", "DEVICE"},
      {"help", false, "show this help"},
  });
  args.parse(argc, argv, 2);
  if (args.has("help")) {
    std::cout << "usage: otter-train predict MODEL.onnx --data IN.npz --out OUT.npz [options]\n\n" << args.help();
    return 0;
  }
  if (args.positional().size() != 1) fail("predict: expected one model file (see otter-train predict --help)");
  if (!args.has("data")) fail("predict: --data IN.npz is required");
  if (!args.has("out")) fail("predict: --out OUT.npz is required");
  std::unique_ptr<Device> cuda;
  Device& device = pick_device(args.get("device", "auto"), cuda);
  auto g = load_and_canonicalize(args.positional()[0]);
  NpzArchive data = read_npz(args.get("data"));
  std::map<std::string, Tensor> feeds;
  for (const Value* in : g->inputs()) {
    const Tensor* t = data.find(in->name());
    if (!t) {
      std::string have;
      for (const auto& [n, a] : data.arrays) have += (have.empty() ? "" : ", ") + n;
      fail(data.path, ": no array '", in->name(), "' for model input '", in->name(), "' (", in->type_string(),
           "); the file has: ", have.empty() ? "(none)" : have);
    }
    feeds[in->name()] = *t;
  }
  ExecutorOptions eo;
  eo.device = &device;
  Executor ex(*g, eo);
  std::map<std::string, Tensor> outputs;
  int64_t batch = args.get_int("batch-size", 0);
  if (batch < 0) fail("--batch-size must be positive");
  if (batch == 0 || feeds.empty()) {
    for (auto& [name, t] : ex.run(feeds)) outputs[name] = device.to_host(t);
  } else {
    int64_t n = -1;
    for (const auto& [name, t] : feeds) {
      OTTER_CHECK(t.rank() >= 1, "--batch-size: input '", name, "' has no sample axis");
      if (n < 0) n = t.dim(0);
      OTTER_CHECK(t.dim(0) == n, "--batch-size: input '", name, "' has ", t.dim(0), " samples, others ", n);
    }
    std::map<std::string, std::vector<Tensor>> parts;
    std::map<std::string, Tensor> last;
    for (int64_t b = 0; b < n; b += batch) {
      int64_t e = std::min(n, b + batch);
      std::map<std::string, Tensor> f;
      for (const auto& [name, t] : feeds) f[name] = slice_rows(t, b, e);
      for (auto& [name, dt] : ex.run(f)) {
        Tensor t = device.to_host(dt);
        // Outputs with a sample axis are concatenated; others (statistics) keep the last batch's.
        if (t.rank() >= 1 && t.dim(0) == e - b) parts[name].push_back(t);
        else last[name] = t;
      }
    }
    for (auto& [name, p] : parts) outputs[name] = concat_rows(p);
    for (auto& [name, t] : last) outputs.emplace(name, t);
  }
  std::vector<std::pair<std::string, Tensor>> out;
  for (const Value* o : g->outputs()) out.emplace_back(o->name(), outputs.at(o->name()));
  write_npz(args.get("out"), out);
  std::cout << "wrote " << out.size() << " output" << (out.size() == 1 ? "" : "s") << " to " << args.get("out") << "\n";
  return 0;
}

int cmd_kernels(int argc, char** argv) {
  cli::Args args("otter-train kernels", {
      {"format", true, "text|tsv (default text)", "FORMAT"},
      {"help", false, "show this help"},
  });
  args.parse(argc, argv, 2);
  if (args.has("help")) {
    std::cout << "usage: otter-train kernels [--format text|tsv]\n\n" << args.help();
    return 0;
  }
  std::string fmt = args.get("format", "text");
  if (fmt != "text" && fmt != "tsv") fail("--format must be text or tsv, got '", fmt, "'");
  std::vector<std::tuple<std::string, std::string, std::string>> rows;
  for (const KernelDef& d : KernelRegistry::instance().all()) {
    std::string op = d.domain.empty() ? d.op_type : d.domain + "." + d.op_type;
    std::string types;
    for (DataType t : d.dtypes) types += (types.empty() ? "" : ",") + std::string(dtype_name(t));
    if (types.empty()) types = "any";
    rows.emplace_back(op, device_name(d.device), types);
  }
  std::sort(rows.begin(), rows.end());
  rows.erase(std::unique(rows.begin(), rows.end()), rows.end());
  for (const auto& [op, dev, types] : rows) {
    if (fmt == "tsv") std::cout << op << '\t' << dev << '\t' << types << '\n';
    else {
      std::string o = op;
      o.resize(std::max<size_t>(o.size() + 1, 28), ' ');
      std::string dv = dev;
      dv.resize(6, ' ');
      std::cout << o << dv << types << '\n';
    }
  }
  return 0;
}

int run(int argc, char** argv) {
  if (argc < 2 || std::string(argv[1]) == "--help" || std::string(argv[1]) == "-h" ||
      std::string(argv[1]) == "help") {
    std::cout << kUsage;
    return argc < 2 ? 1 : 0;
  }
  std::string cmd = argv[1];
  if (cmd == "grad") return cmd_grad(argc, argv);
  if (cmd == "predict") return cmd_predict(argc, argv);
  if (cmd == "kernels") return cmd_kernels(argc, argv);
  fail("unknown command '", cmd, "' (commands: grad, predict, kernels; see otter-train --help)");
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 1;
  }
}
