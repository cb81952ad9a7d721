// The extension module otter._otter: otter.Error, the pass pipeline (run_passes, Graph,
// list_passes) and the session (session.cc). The package python/otter/ re-exports it.
#include <pybind11/stl.h>

#include <memory>
#include <sstream>
#include <string>

#include "convert.h"
#include "graph/error.h"
#include "graph/graph_stats.h"
#include "graph/json_writer.h"
#include "graph/onnx_io.h"
#include "graph/op_table.h"
#include "graph/printer.h"
#include "module.h"
#include "passes/instruments.h"
#include "passes/pass_manager.h"
#include "runtime/constant_eval.h"

namespace py = pybind11;

namespace otter::python {

const char* doc::kSession = "";

namespace {

// A graph after a pipeline, with the per-pass statistics of the run.
struct PyGraph {
  std::unique_ptr<Graph> graph;
  std::string pipeline;
  std::string pass_stats_json;
};

py::object json_loads(const std::string& text) { return py::module_::import("json").attr("loads")(text); }

std::unique_ptr<PyGraph> run_passes(const py::object& model, const std::string& pipeline, int64_t batch) {
  OTTER_CHECK(batch >= 0, "run_passes: batch must be positive, got ", batch);
  auto out = std::make_unique<PyGraph>();
  if (py::isinstance<py::bytes>(model)) {
    std::string bytes = model.cast<std::string>();
    py::gil_scoped_release nogil;
    out->graph = import_onnx_bytes(bytes, ".", {}, "model bytes");
  } else {
    std::string path = py::str(py::module_::import("os").attr("fspath")(model));
    py::gil_scoped_release nogil;
    out->graph = import_onnx_file(path);
  }
  py::gil_scoped_release nogil;
  if (batch > 0) pin_batch(*out->graph, batch);  // as otter-opt --batch and otter-train do
  CpuConstantEvaluator evaluator;
  PassContext ctx;
  ctx.evaluator = &evaluator;
  PassManager pm(ctx);
  pm.add_pipeline(pipeline);
  pm.set_verify(true);  // as otter-opt does by default
  StatsInstrument stats;
  pm.add_instrument(&stats);
  pm.run(*out->graph);
  out->pipeline = pm.pipeline_text();
  std::ostringstream os;
  JsonWriter w(os);
  stats.write_json(w);
  out->pass_stats_json = os.str();
  return out;
}

py::dict graph_stats(const PyGraph& g, int64_t batch) {
  DimBindings b;
  if (batch > 0)
    for (const Value* v : g.graph->inputs())
      if (v->shape().rank_known && v->shape().rank() > 0 && v->shape().dims[0].is_symbolic())
        b[v->shape().dims[0].symbol] = batch;
  std::ostringstream os;
  JsonWriter w(os);
  write_graph_stats_json(compute_graph_stats(*g.graph, b), w);
  return json_loads(os.str());
}

py::dict list_passes() {
  const PassRegistry& reg = PassRegistry::instance();
  py::dict d;
  for (const std::string& n : reg.names()) {
    auto p = reg.create(n);
    py::list opts;
    for (const OptionInfo& o : p->options()) {
      py::dict od;
      od["name"] = o.name;
      od["type"] = o.choices.empty() ? o.type : "enum";
      od["default"] = o.default_text;
      od["help"] = o.help;
      od["choices"] = o.choices;
      opts.append(od);
    }
    py::dict e;
    e["summary"] = p->summary();
    e["options"] = opts;
    d[py::str(n)] = e;
  }
  for (const auto& [n, a] : reg.aliases()) {
    py::dict e;
    e["summary"] = a.second;
    e["pipeline"] = a.first;
    d[py::str(n)] = e;
  }
  return d;
}

}  // namespace

}  // namespace otter::python

PYBIND11_MODULE(_otter, m) {
  using namespace otter;
  using namespace otter::python;
  m.doc() = "otter's C++ runtime: training sessions over numpy arrays and the graph passes.";
  py::register_exception<Error>(m, "Error", PyExc_ValueError);
  static const std::string session = session_doc();
  doc::kSession = session.c_str();

  py::class_<PyGraph>(m, "Graph", "A graph after run_passes(): str() is the text dump (as otter-opt prints it).")
      .def("__str__", [](const PyGraph& g) { return graph_to_string(*g.graph); })
      .def("__repr__",
           [](const PyGraph& g) {
             return "<otter.Graph '" + g.graph->name + "', " + std::to_string(g.graph->nodes().size()) + " nodes>";
           })
      .def(
          "to_onnx", [](const PyGraph& g) { return py::bytes(export_onnx_bytes(*g.graph)); },
          "The graph as serialized ONNX ModelProto bytes (internal ops in domain ai.otter).")
      .def("stats", &graph_stats, py::arg("batch") = 0,
           "Statistics as otter-opt --stats --format json reports them: nodes by op, parameters, state,\n"
           "FLOPs, activation memory; batch binds the inputs' symbolic batch dim (0: leave it unbound).")
      .def(
          "pass_stats", [](const PyGraph& g) { return json_loads(g.pass_stats_json); },
          "Per-pass records of the run: pass, nodes before and after, counters.")
      .def_property_readonly(
          "pipeline", [](const PyGraph& g) { return g.pipeline; }, "The pipeline that ran.");
  m.def("run_passes", &run_passes, py::arg("model"), py::arg("pipeline"), py::arg("batch") = 0,
        "run_passes(model, pipeline, batch=0) -> Graph\n\n"
        "Imports model (a path, or serialized ONNX bytes) and runs the pass pipeline on it, as otter-opt\n"
        "--passes does (named pipelines such as 'default-train' expand); batch > 0 pins the inputs'\n"
        "batch dim first, as otter-opt --batch. Raises otter.Error with the pass's message.");
  m.def("list_passes", &list_passes,
        "list_passes() -> dict\n\nEvery registered pass (summary, options) and named pipeline (summary, pipeline).");
  m.def(
      "_feed_counters",
      []() {
        py::dict d;
        d["wrapped"] = feed_counters().wrapped;
        d["copied"] = feed_counters().copied;
        return d;
      },
      "For tests: feeds read in place ('wrapped') and feeds copied first ('copied') so far.");
  m.def(
      "_tensor_address",
      [](const py::handle& a) { return reinterpret_cast<uintptr_t>(tensor_from_array(a, "", "array").raw()); },
      "For tests: the address of the buffer a feed of this array would read.");
  bind_session(m);
}
