// otter.TrainingSession: runtime/training_session.h over numpy feeds. The keyword arguments map to
// TrainingOptions in one function (training_options), with otter-train train's meanings; options
// not given keep the C++ defaults.
#include <pybind11/stl.h>

#include <cmath>
#include <ctime>
#include <memory>
#include <mutex>
#include <type_traits>
#include <utility>

#include "convert.h"
#include "graph/error.h"
#include "module.h"
#include "runtime/dataset.h"
#include "runtime/training_session.h"

namespace py = pybind11;

namespace otter::python {

namespace {

template <typename T>
const char* type_words() {
  if constexpr (std::is_same_v<T, int64_t>)
    return "an integer";
  else if constexpr (std::is_same_v<T, double>)
    return "a number";
  else if constexpr (std::is_same_v<T, bool>)
    return "True or False";
  else if constexpr (std::is_same_v<T, std::string>)
    return "a string";
  else
    return "a list of strings";
}

template <typename T>
T take(const py::handle& v, const char* what) {
  // No silent narrowing: an integer option takes a Python int (not a float or a bool).
  const bool ok = std::is_same_v<T, int64_t> ? PyIndex_Check(v.ptr()) && !py::isinstance<py::bool_>(v)
                  : std::is_same_v<T, bool>  ? py::isinstance<py::bool_>(v)
                                             : true;
  try {
    if (ok) return v.cast<T>();
  } catch (const py::cast_error&) {
  }
  fail(what, ": expected ", type_words<T>(), ", got ", std::string(py::repr(v)));
}

std::vector<std::string> string_list(const py::handle& v, const char* what) {
  if (py::isinstance<py::str>(v)) {  // "a,b" as on the command line
    std::vector<std::string> out;
    std::string cur;
    for (char c : v.cast<std::string>() + ",") {
      if (c != ',')
        cur += c;
      else if (!cur.empty())
        out.push_back(std::exchange(cur, ""));
    }
    return out;
  }
  return take<std::vector<std::string>>(v, what);
}

// A Python option value as pipeline text writes it ("0.01", "true", "cosine").
std::string option_text(const py::handle& v, const std::string& what) {
  if (py::isinstance<py::bool_>(v)) return v.cast<bool>() ? "true" : "false";
  if (py::isinstance<py::int_>(v) || py::isinstance<py::float_>(v) || py::isinstance<py::str>(v))
    return py::str(v).cast<std::string>();
  fail(what, ": expected a number, a bool or a string, got ", std::string(py::repr(v)));
}

// optimizer="adamw" or optimizer={"type": "adamw", "lr": 0.01, ...}: the optimizer pass's options
// (OptimizerOptions::table(): the names and checks of its pipeline text), "name" for "type".
OptimizerOptions optimizer_options(const py::handle& v) {
  std::map<std::string, std::string> values;
  if (py::isinstance<py::str>(v)) {
    values["type"] = v.cast<std::string>();
  } else {
    OTTER_CHECK(py::isinstance<py::dict>(v), "optimizer: expected a name or a dict, got ", std::string(py::repr(v)));
    for (auto [key, val] : v.cast<py::dict>()) {
      std::string k = take<std::string>(key, "optimizer option name");
      values[k == "name" ? "type" : k] = option_text(val, "optimizer['" + k + "']");
    }
  }
  OptimizerOptions c = OptimizerOptions::table().parse(values, "optimizer");
  OTTER_CHECK(c.schedule == LrSchedule::kConstant || c.total > 0, "optimizer: schedule '", enum_name(c.schedule),
              "' needs 'total', the optimizer steps it spans (otter-train sets it from --epochs or --steps)");
  return c;
}

// The loss scaling the options hold, made explicit (from the precision's default) on first use.
LossScaleOptions& loss_scale_of(TrainingPipelineOptions& p) {
  if (!p.loss_scale) p.loss_scale = default_loss_scale(p.precision);
  return *p.loss_scale;
}

// loss_scale="dynamic" | "off" | a number (a fixed scale), as otter-train's --loss-scale.
void loss_scale_option(const py::handle& v, TrainingPipelineOptions& p) {
  LossScaleOptions& s = loss_scale_of(p);
  if (py::isinstance<py::str>(v)) {
    const std::string m = v.cast<std::string>();
    OTTER_CHECK(m == "dynamic" || m == "off", "loss_scale must be dynamic, off or a positive number, got '", m, "'");
    s.mode = m == "off" ? LossScaleMode::kOff : LossScaleMode::kDynamic;
    return;
  }
  const double x = take<double>(v, "loss_scale");
  OTTER_CHECK(x > 0 && std::isfinite(x), "loss_scale must be dynamic, off or a positive number, got ", x);
  s.mode = LossScaleMode::kStatic;
  s.init = x;
}

}  // namespace

// The one place that maps Python keyword arguments to the C++ options (see module.h).
TrainingOptions training_options(const py::kwargs& kw) {
  TrainingOptions o;
  o.device = "auto";  // as otter-train's --device
  TrainingPipelineOptions& p = o.pipeline;
  std::string loss_text = "ce";
  std::optional<std::string> output, labels;
  std::vector<std::pair<std::string, py::handle>> scale_kw;  // after precision, whose default they change
  for (auto [key, v] : kw) {
    const std::string k = key.cast<std::string>();
    if (v.is_none()) continue;  // None: the default
    const char* w = k.c_str();
    if (k == "loss")
      loss_text = take<std::string>(v, w);
    else if (k == "output")
      output = take<std::string>(v, w);
    else if (k == "labels")
      labels = take<std::string>(v, w);
    else if (k == "precision")
      p.precision = parse_enum<Precision>(take<std::string>(v, w), "precision");
    else if (k == "loss_scale" || k == "init_scale" || k == "scale_interval")
      scale_kw.emplace_back(k, v);
    else if (k == "accum")
      p.accum = take<int64_t>(v, w);
    else if (k == "optimizer")
      p.optimizer = optimizer_options(v);
    else if (k == "freeze")
      p.freeze = string_list(v, w);
    else if (k == "batch_size")
      o.batch_size = take<int64_t>(v, w);
    else if (k == "eval_batch_size")
      o.eval_batch_size = take<int64_t>(v, w);
    else if (k == "seed")
      o.seed = take<int64_t>(v, w);
    else if (k == "device")
      o.device = take<std::string>(v, w);
    else
      fail("TrainingSession: unknown option '", k, "' (loss, output, labels, precision, loss_scale, init_scale, ",
           "scale_interval, accum, optimizer, freeze, batch_size, eval_batch_size, seed, device)");
  }
  p.loss = LossSpec::parse(loss_text);
  if (output) p.loss.add.output = *output;
  if (labels) p.loss.add.labels = *labels;
  // loss_scale first: init_scale and scale_interval tune the dynamic scale it leaves on.
  for (const auto& [k, v] : scale_kw)
    if (k == "loss_scale") loss_scale_option(v, p);
  for (const auto& [k, v] : scale_kw) {
    if (k == "loss_scale") continue;
    LossScaleOptions& s = loss_scale_of(p);
    OTTER_CHECK(s.mode == LossScaleMode::kDynamic, k, " applies to dynamic loss scaling, which is off (precision ",
                enum_name(p.precision), ")");
    if (k == "init_scale") {
      s.init = take<double>(v, k.c_str());
      OTTER_CHECK(s.init > 0 && std::isfinite(s.init), "init_scale must be a positive number, got ", s.init);
    } else {
      s.interval = take<int64_t>(v, k.c_str());
      OTTER_CHECK(s.interval >= 1, "scale_interval must be >= 1, got ", s.interval);
    }
  }
  if (p.loss_scale && *p.loss_scale == default_loss_scale(p.precision)) p.loss_scale.reset();
  return o;
}

// TrainingSession's docstring, with the defaults read from the C++ option structs.
std::string session_doc() {
  const TrainingOptions o;
  const OptimizerOptions c;
  const LossScaleOptions dyn;
  std::ostringstream s;
  s << "TrainingSession(model_path, **options)\n\n"
    << "Trains an ONNX model with the options of `otter-train train` (docs: README.md, 'Python API'):\n"
    << "  loss='" << o.pipeline.loss.text() << "' (ce | mse | model:NAME), output=None, labels='" << o.pipeline.loss.add.labels
    << "',\n"
    << "  precision='" << enum_name(o.pipeline.precision) << "' (fp32 | fp16 | bf16), loss_scale=None ('dynamic' | 'off' |\n"
    << "  a fixed number; default dynamic for fp16), init_scale=" << dyn.init
    << ", scale_interval=" << dyn.interval << ",\n"
    << "  accum=" << o.pipeline.accum << " (K), batch_size=" << o.batch_size
    << " (micro-batch b), eval_batch_size=" << o.eval_batch_size << ", seed=" << o.seed << ",\n"
    << "  freeze=None (globs, a list or 'a,b'), device='auto' (auto | cpu | cuda),\n"
    << "  optimizer='" << enum_name(c.type) << "' or a dict with type, lr=" << c.lr << ", beta1=" << c.beta1
    << ", beta2=" << c.beta2 << ", eps=" << c.eps << ",\n"
    << "    weight_decay (0.01 for adamw, else 0), momentum (0.9 for type momentum, else 0), nesterov,\n"
    << "    clip_norm, schedule='" << enum_name(c.schedule) << "' (constant | linear-warmup | cosine), warmup, total\n"
    << "    (steps the schedule spans; needed by non-constant schedules), min_lr.\n"
    << "Options not given (or None) keep these defaults, which come from the C++ structs.";
  return s.str();
}

namespace {

py::dict step_dict(const StepResult& r) {
  py::dict d;
  d["loss"] = r.loss;
  d["lr"] = r.lr;
  d["loss_scale"] = r.loss_scale;
  d["skipped"] = r.skipped;
  d["step"] = r.step;
  return d;
}

// A session and, as otter-train has, the evaluation graph of the same options as a probe of the
// arrays a data set must provide (model inputs, batch dim unpinned, and labels): feeds are checked
// against it, so their errors read as otter-train's do for a data file.
struct Session {
  Session(const std::string& model, const TrainingOptions& o)
      : probe(model, o.pipeline.loss, cpu_device(), o.pipeline.lora.targets.empty() ? nullptr : &o.pipeline.lora), inputs(probe.data_inputs()), s(TrainingSession::create(model, o)) {}
  Evaluator probe;
  std::vector<const Value*> inputs;
  std::unique_ptr<TrainingSession> s;
  mutable std::mutex mu;  // one call at a time: the C++ session is not thread-safe
};

// Feeds checked as otter-train checks its data files, kept as views of the numpy buffers.
Dataset checked_feeds(const Session& s, const py::dict& feeds) {
  return Dataset::from_arrays(feeds_archive(feeds, s.inputs), s.inputs);
}

}  // namespace

// CPU time of the calling thread (the clock of Python's time.thread_time).
double thread_seconds() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

// Runs f() with the GIL released (the numpy arrays it reads are kept alive by the tensors) and the
// session locked, so that Python threads sharing a session take turns instead of racing.
template <typename F>
auto without_gil(const Session& s, F&& f) {
  py::gil_scoped_release nogil;
  std::lock_guard<std::mutex> lock(s.mu);
  return f();
}

// Numpy copies of persistent tensors: host copies taken under the lock, arrays made with the GIL.
py::dict tensors_dict(const Session& s, bool parameters_only) {
  auto host = without_gil(s, [&] {
    std::vector<std::pair<std::string, Tensor>> out;
    for (const std::string& n : parameters_only ? s.s->parameter_names() : s.s->state_names())
      out.emplace_back(n, s.s->tensor(n));
    return out;
  });
  py::dict d;
  for (const auto& [n, t] : host) d[py::str(n)] = array_from_tensor(t);
  return d;
}

using SessionClass = py::class_<Session>;

// Construction and the training calls.
void bind_steps(SessionClass& c) {
  c.def(py::init([](const std::string& model, const py::kwargs& kw) {
          TrainingOptions o = training_options(kw);
          py::gil_scoped_release nogil;
          return std::make_unique<Session>(model, o);
        }),
        py::arg("model_path"), doc::kSession);
  c.def(
      "step",
      [](Session& s, const py::dict& feeds) {
        Dataset d = checked_feeds(s, feeds);
        return step_dict(without_gil(s, [&] { return s.s->train_step(d.arrays()); }));
      },
      py::arg("feeds"), doc::kStep);
  c.def(
      "micro_step",
      [](Session& s, const py::dict& feeds) {
        Dataset d = checked_feeds(s, feeds);
        without_gil(s, [&] { s.s->micro_step(d.arrays()); });
      },
      py::arg("feeds"), doc::kMicroStep);
  c.def(
      "apply", [](Session& s) { return step_dict(without_gil(s, [&] { return s.s->apply(); })); }, doc::kApply);
  c.def(
      "evaluate",
      [](Session& s, const py::dict& feeds) {
        Dataset d = checked_feeds(s, feeds);
        EvalResult e = without_gil(s, [&] { return s.s->evaluate(d); });
        py::dict r;
        r["loss"] = e.loss;
        if (e.has_accuracy) r["accuracy"] = e.accuracy;
        r["samples"] = e.samples;
        return r;
      },
      py::arg("feeds"), doc::kEvaluate);
  c.def(
      "_time_steps",
      [](Session& s, const py::dict& feeds, int64_t steps) {
        // For models/bench/python_overhead.py: the same steps as step(), looped in C++.
        Dataset d = checked_feeds(s, feeds);
        return without_gil(s, [&] {
          const double t0 = thread_seconds();
          for (int64_t i = 0; i < steps; ++i) s.s->train_step(d.arrays());
          return thread_seconds() - t0;
        });
      },
      py::arg("feeds"), py::arg("steps"),
      "For benchmarks: CPU seconds of this thread (time.thread_time's clock) for `steps` step(feeds) calls made "
      "from C++.");
}

// Checkpoints, export and the weights.
void bind_state(SessionClass& c) {
  c.def(
      "save",
      [](const Session& s, const std::string& dir, int64_t epoch, int64_t position) {
        without_gil(s, [&] { s.s->save(dir, LoaderState{epoch, position}); });
      },
      py::arg("dir"), py::arg("epoch") = 0, py::arg("position") = 0, doc::kSave);
  c.def(
      "load",
      [](Session& s, const std::string& dir) {
        LoaderState l = without_gil(s, [&] { return s.s->load(dir); });
        py::dict r;
        r["epoch"] = l.epoch;
        r["position"] = l.position;
        r["step"] = s.s->steps_taken();
        return r;
      },
      py::arg("dir"), doc::kLoad);
  c.def(
      "export", [](const Session& s, const std::string& path) { without_gil(s, [&] { s.s->export_inference(path); }); },
      py::arg("path"), doc::kExport);
  c.def(
      "parameters", [](const Session& s) { return tensors_dict(s, true); }, doc::kParameters);
  c.def(
      "state", [](const Session& s) { return tensors_dict(s, false); }, doc::kState);
  c.def(
      "set_parameters",
      [](Session& s, const py::dict& values) {
        std::map<std::string, Tensor> t;
        for (auto [k, v] : values) {
          std::string name = take<std::string>(k, "set_parameters: parameter name");
          t[name] = tensor_from_array(v, "set_parameters: ", name);
        }
        without_gil(s, [&] { s.s->set_parameters(t); });
      },
      py::arg("values"), doc::kSetParameters);
}

void bind_properties(SessionClass& c) {
  auto prop = [&](const char* name, auto get, const char* help) {
    c.def_property_readonly(
        name, [get](const Session& s) { return get(*s.s); }, help);
  };
  prop(
      "pipeline", [](const TrainingSession& s) { return s.pipeline(); }, "The training pipeline (--print-pipeline).");
  prop(
      "batch_size", [](const TrainingSession& s) { return s.options().batch_size; }, "The micro-batch b.");
  prop(
      "accum", [](const TrainingSession& s) { return s.options().pipeline.accum; }, "Micro-batches per step, K.");
  prop(
      "global_batch", [](const TrainingSession& s) { return s.global_batch(); }, "Rows step() takes: K*b.");
  prop(
      "steps_taken", [](const TrainingSession& s) { return s.steps_taken(); }, "Optimizer steps taken so far.");
  prop(
      "pending_micro_steps", [](const TrainingSession& s) { return s.pending_micro_steps(); },
      "Micro-steps taken since the last apply().");
  prop(
      "device", [](const TrainingSession& s) { return s.device().describe(); }, "The device, in words.");
  prop(
      "inputs",
      [](const TrainingSession& s) {
        py::dict d;
        for (const Value* v : s.batch_inputs()) d[py::str(v->name())] = v->type_string();
        return d;
      },
      "Arrays a micro-batch provides: name -> type (dim 0 pinned to b).");
}

void bind_session(py::module_& m) {
  SessionClass c(m, "TrainingSession");
  bind_steps(c);
  bind_state(c);
  bind_properties(c);
}

}  // namespace otter::python
