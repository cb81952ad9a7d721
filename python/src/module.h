// Shared declarations of the Python module's source files: the binders, the options mapping and
// the docstrings of otter.TrainingSession.
#pragma once

#include <pybind11/pybind11.h>

#include <string>

#include "runtime/training_session.h"

namespace otter::python {

// Python keyword arguments -> TrainingOptions (python/src/session.cc): the one place that knows
// the Python option names. Keywords not given, or None, keep the C++ defaults.
TrainingOptions training_options(const pybind11::kwargs& kw);
// TrainingSession's docstring: the keyword arguments with the defaults of those structs.
std::string session_doc();

void bind_session(pybind11::module_& m);

namespace doc {
extern const char* kSession;  // filled in at import with the C++ defaults (module.cc)
inline constexpr const char* kStep =
    "step(feeds) -> dict\n\n"
    "One optimizer step on a global batch of K*b samples: feeds maps every input name (see `inputs`)\n"
    "to an array whose first axis has K*b rows; they are taken as K micro-batches in order, exactly as\n"
    "otter-train does. Returns {'loss': mean of the K losses, 'lr', 'loss_scale', 'skipped', 'step'}.\n"
    "C-contiguous arrays of the input's dtype are read in place (no copy); other layouts are copied\n"
    "once. A wrong name, dtype or shape raises otter.Error. Releases the GIL while it runs (threads\n"
    "sharing a session take turns).";
inline constexpr const char* kMicroStep =
    "micro_step(feeds) -> None\n\n"
    "One micro-batch of b rows: forward and backward, gradients accumulated. Take K of them, then\n"
    "apply(); step() is exactly that. Releases the GIL.";
inline constexpr const char* kApply =
    "apply() -> dict\n\n"
    "The optimizer step after K micro_step() calls (otter.Error otherwise); returns what step() does.";
inline constexpr const char* kEvaluate =
    "evaluate(feeds) -> dict\n\n"
    "Loss (and accuracy, for the ce loss) over every row of feeds, in eval mode (BatchNorm running\n"
    "statistics, no Dropout), with the current weights: {'loss', 'accuracy', 'samples'}.";
inline constexpr const char* kSave =
    "save(dir, epoch=0, position=0) -> None\n\n"
    "Writes a checkpoint otter-train --resume reads (runtime/checkpoint.h); epoch and position are the\n"
    "data loader's place (batches already taken in the epoch) that a resumed run continues from.";
inline constexpr const char* kLoad =
    "load(dir) -> dict\n\n"
    "Restores a checkpoint of this model and options (from save() or otter-train --save); returns\n"
    "{'epoch', 'position', 'step'} so a Python loop can continue where it stopped.";
inline constexpr const char* kExport =
    "export(path) -> None\n\nWrites the original model with the trained weights (ONNX).";
inline constexpr const char* kParameters =
    "parameters() -> dict[str, numpy.ndarray]\n\n"
    "The trained parameters (fp32 master weights), by name, as COPIES: later steps do not change them\n"
    "and writing them does not change the session (use set_parameters). In a data-parallel job with\n"
    "zero=1 the masters it shards are gathered whole from every rank: every rank must call it.";
inline constexpr const char* kState =
    "state() -> dict[str, numpy.ndarray]\n\n"
    "Copies of every persistent tensor: parameters, optimizer moments and step, loss scale, half\n"
    "copies (bf16 ones as uint16 bit patterns), BatchNorm statistics, gradient accumulators.";
inline constexpr const char* kSetParameters =
    "set_parameters(values) -> None\n\n"
    "Replaces parameters by name (arrays of the same dtype and shape, copied), with their half copies\n"
    "under mixed precision. Raises otter.Error, changing nothing, on an unknown name or a mismatch.";
}  // namespace doc

}  // namespace otter::python
