#!/usr/bin/env python3
"""ONNX Runtime Training side of `otter-bench --vs-ort`: trains a benchmark model with ONNX Runtime's
on-device training API (onnxruntime-training-cpu, from the virtual environment scripts/ort-venv.sh
makes) on the same batches, optimizer (AdamW), learning rate and thread count as otter, and prints
one JSON object with the step times, in torch_bench.py's fields.

The training artifacts come from onnxruntime.training.artifacts.generate_artifacts on the model's
ONNX file: the parameters that require gradients are the PyTorch module's parameters
(export_models.py names the initializers after them) or, with --params, the names that file lists
(otter-bench writes otter's trainable parameters there for the zoo transformers, whose modules are
not built here), every other initializer frozen; the model inputs are the ONNX graph's, in its
order, read from the batches by name; the loss is ORT's CrossEntropyLoss block
over the logits flattened to [samples, classes] (a Reshape appended to the graph), and the
optimizer ORT's AdamW. One step = forward + backward (Module), Optimizer.step(), lazy_reset_grad().

    .venv-ort/bin/python models/bench/ort_bench.py --model gpt --onnx models/gpt/gpt.onnx --data BATCHES.npz --batch 32 \\
        [--steps 20] [--warmup 3] [--threads 2] [--lr 1e-3]
    .venv-ort/bin/python models/bench/ort_bench.py --params PARAMS.txt --onnx models/zoo/bert/bert_op17.onnx ...
"""

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
import types

import numpy as np
import onnx
from onnx import helper, numpy_helper

MODELS_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")


def parameter_names(name):
    """The PyTorch module's parameter names, from a child /usr/bin/python3 (torch stays out of this
    process, so its resident memory is ONNX Runtime's alone)."""
    code = ("import sys, json; sys.path.insert(0, %r); import export_models; "
            "print(json.dumps([n for n, _ in export_models.build(%r).named_parameters()]))") % (MODELS_DIR, name)
    return set(json.loads(subprocess.check_output(["/usr/bin/python3", "-c", code])))


def listed_names(path):
    """The parameter names in `path`, one a line."""
    with open(path) as f:
        return {line.strip() for line in f if line.strip()}


def training_model(name, params_path, path):
    """The benchmark model with its logits flattened to 2-D, and its trained and frozen initializers."""
    params = listed_names(params_path) if params_path else parameter_names(name)
    model = onnx.load(path)
    g = model.graph
    missing = sorted(params - {i.name for i in g.initializer})
    if params_path and missing:
        sys.exit(f"ort_bench: {params_path} names {len(missing)} parameters that are no initializers of {path}: "
                 + ", ".join(missing[:5]))
    out = g.output[0]
    classes = out.type.tensor_type.shape.dim[-1].dim_value
    g.initializer.append(numpy_helper.from_array(np.array([-1, classes], dtype=np.int64), "ort_bench_shape"))
    g.node.append(helper.make_node("Reshape", [out.name, "ort_bench_shape"], ["logits_2d"]))
    del g.output[:]
    g.output.append(helper.make_tensor_value_info("logits_2d", onnx.TensorProto.FLOAT, [None, classes]))
    # ORT's LayerNormalization gradient reads the saved mean and inverse deviation (outputs 1, 2).
    for i, n in enumerate(g.node):
        if n.op_type == "LayerNormalization" and len(n.output) == 1:
            n.output.extend([f"ort_bench_ln{i}_mean", f"ort_bench_ln{i}_inv_std"])
    requires_grad = [i.name for i in g.initializer if i.name in params]
    frozen = [i.name for i in g.initializer if i.name not in params and i.name != "ort_bench_shape"]
    return model, requires_grad, frozen


def on_device_api():
    """onnxruntime and its on-device training classes, without running onnxruntime/training/__init__.py:
    that imports ORTModule's helpers and with them torch (300 MB resident), which the on-device API
    does not use. torch is barred from this process, so that its peak memory is ONNX Runtime's."""
    sys.modules["torch"] = None
    import onnxruntime
    package = types.ModuleType("onnxruntime.training")
    package.__path__ = [os.path.join(os.path.dirname(onnxruntime.__file__), "training")]
    sys.modules["onnxruntime.training"] = package
    from onnxruntime.training.api import CheckpointState, Module, Optimizer
    return onnxruntime, (CheckpointState, Module, Optimizer)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", help="benchmark model name (export_models.py): train its PyTorch module's parameters")
    p.add_argument("--params", help="train the parameters this file lists, one name a line, instead")
    p.add_argument("--onnx", required=True, help="its ONNX file")
    p.add_argument("--data", required=True)
    p.add_argument("--batch", type=int, required=True)
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--make-artifacts", metavar="DIR", help="only write the training artifacts into DIR")
    a = p.parse_args()
    if bool(a.model) == bool(a.params):
        sys.exit("ort_bench: give one of --model and --params")
    if a.make_artifacts:
        import onnxruntime
        from onnxruntime.training import artifacts

        onnxruntime.set_default_logger_severity(3)
        model, requires_grad, frozen = training_model(a.model, a.params, a.onnx)
        artifacts.generate_artifacts(model, requires_grad=requires_grad, frozen_params=frozen,
                                     loss=artifacts.LossType.CrossEntropyLoss, optimizer=artifacts.OptimType.AdamW,
                                     artifact_directory=a.make_artifacts)
        return
    ort, (CheckpointState, Module, Optimizer) = on_device_api()
    ort.set_default_logger_severity(3)
    data = np.load(a.data)
    g = onnx.load(a.onnx, load_external_data=False).graph
    initializers = {i.name for i in g.initializer}
    input_names = [i.name for i in g.input if i.name not in initializers]
    missing = [n for n in input_names + ["labels"] if n not in data.files]
    if missing:
        sys.exit(f"ort_bench: {a.data} lacks the arrays {', '.join(missing)} (it has {', '.join(data.files)})")
    xs, ys = [data[n] for n in input_names], data["labels"].astype(np.int64)
    samples = ys.shape[0]
    if samples < a.batch:
        sys.exit(f"ort_bench: {a.data} has {samples} samples, one step needs {a.batch}")
    with tempfile.TemporaryDirectory() as d:
        # The artifacts come from a child process: generate_artifacts' imports stay out of this one.
        # Its log (ONNX Runtime's info lines while it builds the gradient graph) shows on failure only.
        which = ["--model", a.model] if a.model else ["--params", a.params]
        child = subprocess.run([sys.executable, os.path.abspath(__file__)] + which + ["--onnx", a.onnx,
                                "--data", a.data, "--batch", str(a.batch), "--make-artifacts", d],
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        if child.returncode != 0:
            sys.exit(f"ort_bench: generate_artifacts failed for {a.onnx}:\n{child.stdout[-4000:]}")
        so = ort.SessionOptions()
        so.intra_op_num_threads = a.threads
        so.inter_op_num_threads = 1
        state = CheckpointState.load_checkpoint(os.path.join(d, "checkpoint"))
        # No eval model: it is not timed, and ORT rejects the training-mode BatchNormalization
        # (three outputs) that the exported CNN and ResNet-18 have in it.
        module = Module(os.path.join(d, "training_model.onnx"), state, None, device="cpu", session_options=so)
        opt = Optimizer(os.path.join(d, "optimizer_model.onnx"), module)
        opt.set_learning_rate(a.lr)
        module.train()

        def step(s):
            start = (s % (samples // a.batch)) * a.batch
            loss = module(*[x[start:start + a.batch] for x in xs], ys[start:start + a.batch].reshape(-1))
            opt.step()
            module.lazy_reset_grad()
            return float(loss)

        rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
        for s in range(a.warmup):
            step(s)
        times, loss = [], None
        for s in range(a.warmup, a.warmup + a.steps):
            t0 = time.perf_counter()
            loss = step(s)
            times.append((time.perf_counter() - t0) * 1e3)
    peak_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    print(json.dumps({
        "framework": "onnxruntime-training " + ort.__version__, "model": a.model or a.onnx, "device": "cpu",
        "precision": "fp32", "batch": a.batch, "accum": 1, "threads": a.threads, "steps": a.steps,
        "ms_per_step": statistics.median(times), "ms_min": min(times), "ms_max": max(times),
        "peak_bytes": max(0, peak_rss - rss_before), "peak_rss_bytes": peak_rss, "final_loss": loss,
    }))


if __name__ == "__main__":
    main()
