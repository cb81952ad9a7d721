#!/usr/bin/env python3
"""Optional cross-check: runs each exported model with ONNX Runtime on its forward_ref.npz inputs.

This checks that the PyTorch numbers recorded by make_forward_refs.py are what the ONNX file
means, with a second, independent implementation. It also exposes each BatchNormalization's
updated running statistics (outputs 2 and 3, not graph outputs in the export) and compares them
with both recorded versions: ONNX's spec (population variance) must match `updated_onnx/`, while
PyTorch's `updated/` running_var (unbiased variance) is expected to differ.

Needs onnxruntime and onnx, which Debian does not package; use a virtual environment:

    /usr/bin/python3 -m venv /tmp/ortvenv && /tmp/ortvenv/bin/pip install onnxruntime onnx
    /tmp/ortvenv/bin/python models/check_with_onnxruntime.py

Graph optimisations are switched off: ONNX Runtime's Conv+BatchNormalization fusion assumes
inference mode and folds the running statistics into the convolution, which is wrong for these
training-mode exports (the CNN's logits then differ by about 0.03).
"""

import os
import sys

import numpy as np
import onnx
import onnxruntime as ort

HERE = os.path.dirname(os.path.abspath(__file__))
MODELS = ["digits/mlp", "digits/cnn", "gpt/gpt", "resnet18/resnet18"]
TOLERANCE = 1e-4  # relative to the largest magnitude of each array


def expose_batchnorm_state(model):
    """Adds each BatchNormalization's updated statistics to the graph outputs."""
    names = []
    for node in model.graph.node:
        if node.op_type != "BatchNormalization" or len(node.output) < 3:
            continue
        bn = node.input[3][: -len(".running_mean")]
        for output, stat in zip(node.output[1:3], ("running_mean", "running_var")):
            model.graph.output.append(
                onnx.helper.make_tensor_value_info(output, onnx.TensorProto.FLOAT, None))
            names.append(f"{bn}.{stat}")
    return names


def relative_error(got, want):
    return float(np.abs(got - want).max() / max(np.abs(want).max(), 1e-12))


def check(stem):
    onnx_file = os.path.join(HERE, stem + ".onnx")
    ref_file = os.path.join(HERE, stem + "_forward_ref.npz")
    if not (os.path.exists(onnx_file) and os.path.exists(ref_file)):
        print(f"{stem}: skipped (run export_models.py and make_forward_refs.py first)")
        return True
    model = onnx.load(onnx_file)
    graph_outputs = [o.name for o in model.graph.output]
    state_names = expose_batchnorm_state(model)
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    session = ort.InferenceSession(model.SerializeToString(), options,
                                   providers=["CPUExecutionProvider"])
    ref = np.load(ref_file)
    results = session.run(None, {i.name: ref[i.name] for i in session.get_inputs()})

    ok = True
    for name, got in zip(graph_outputs, results):
        err = relative_error(got, ref[name])
        ok &= err <= TOLERANCE
        print(f"{stem}: {name} {list(got.shape)} relative error {err:.1e}")
    worst = {"updated": 0.0, "updated_onnx": 0.0}
    for name, got in zip(state_names, results[len(graph_outputs):]):
        for prefix in worst:
            if f"{prefix}/{name}" in ref:
                worst[prefix] = max(worst[prefix], relative_error(got, ref[f"{prefix}/{name}"]))
        if name.endswith("running_mean"):
            worst["updated_onnx"] = max(worst["updated_onnx"],
                                        relative_error(got, ref[f"updated/{name}"]))
    if state_names:
        ok &= worst["updated_onnx"] <= TOLERANCE
        print(f"{stem}: {len(state_names) // 2} BatchNorm states, ONNX spec relative error "
              f"{worst['updated_onnx']:.1e}, PyTorch's (unbiased running_var) {worst['updated']:.1e}")
    return ok


def main():
    ok = all([check(stem) for stem in MODELS])
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
