// otter-opt: runs a pass pipeline on a model and shows the graph (after each pass if asked),
// in the spirit of mlir-opt.
#include <fstream>
#include <iostream>

#include "graph/onnx_io.h"
#include "graph/printer.h"
#include "passes/pass_manager.h"
#include "runtime/constant_eval.h"
#include "tools/cli.h"

using namespace otter;

namespace {

const char* kUsage =
    "usage: otter-opt MODEL.onnx|MODEL.onnxtxt [--passes PIPELINE] [options]\n"
    "\n"
    "Runs a pass pipeline (comma-separated, options in braces: 'canonicalize,add-loss{type=ce}')\n"
    "and prints the resulting graph (or writes it with -o). Without --passes it prints the model.\n"
    "\n"
    "options:\n";

int run(int argc, char** argv) {
  cli::Args args("otter-opt", {
      {"passes", true, "pipeline to run", "PIPELINE"},
      {"print-after-all", false, "print the graph after every pass"},
      {"print-after", true, "print the graph after the named pass", "PASS"},
      {"print-before", true, "print the graph before the named pass", "PASS"},
      {"list-passes", false, "list registered passes with their options"},
      {"no-verify", false, "do not verify the graph after each pass"},
      {"timing", false, "report time per pass on stderr"},
      {"o", true, "write the transformed graph as an ONNX model", "OUT.onnx"},
      {"help", false, "show this help"},
  });
  args.parse(argc, argv, 1);
  if (args.has("help")) {
    std::cout << kUsage << args.help();
    return 0;
  }
  PassRegistry& reg = PassRegistry::instance();
  if (args.has("list-passes")) {
    for (const std::string& n : reg.names()) {
      auto p = reg.create(n);
      std::cout << n << ": " << p->summary() << "\n";
      for (const PassOption& o : p->options())
        std::cout << "    " << o.name << " (" << option_type_name(o.type) << ", default " << o.default_value
                  << "): " << o.help << "\n";
    }
    for (const auto& [n, a] : reg.aliases()) std::cout << n << ": " << a.second << " = " << a.first << "\n";
    return 0;
  }
  if (args.positional().size() != 1)
    fail("otter-opt: expected exactly one model file (see otter-opt --help)");
  auto g = import_onnx_file(args.positional()[0]);
  CpuConstantEvaluator evaluator;
  PassContext ctx;
  ctx.evaluator = &evaluator;
  PassManager pm(ctx);
  pm.add_pipeline(args.get("passes"));
  pm.set_verify(!args.has("no-verify"));
  std::unique_ptr<PrintInstrument> printer;
  if (args.has("print-after-all"))
    printer = std::make_unique<PrintInstrument>(std::cout, PrintInstrument::When::kAfterAll);
  else if (args.has("print-after"))
    printer = std::make_unique<PrintInstrument>(std::cout, PrintInstrument::When::kAfterNamed, args.get("print-after"));
  else if (args.has("print-before"))
    printer = std::make_unique<PrintInstrument>(std::cout, PrintInstrument::When::kBeforeNamed, args.get("print-before"));
  for (const char* k : {"print-after", "print-before"})
    if (args.has(k) && !reg.has(args.get(k))) fail("otter-opt: --", k, ": unknown pass '", args.get(k), "'");
  if (printer) pm.add_instrument(printer.get());
  TimingInstrument timing;
  if (args.has("timing")) pm.add_instrument(&timing);
  pm.run(*g);
  if (args.has("timing")) timing.report(std::cerr);
  if (args.has("o")) {
    export_onnx_file(*g, args.get("o"));
  } else if (!printer) {
    print_graph(*g, std::cout);
  }
  return 0;
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
