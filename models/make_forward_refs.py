#!/usr/bin/env python3
"""Records PyTorch forward passes of the exported models beside them, as <model>_forward_ref.npz.

Each module is rebuilt from export_models.py and loaded with the weights of its ONNX file, then
run once in train() mode (BatchNorm normalises with the batch statistics, as the training-mode
export does) on fixed inputs:

    mlp, cnn   the first 16 samples of digits/test.npz (test_img.npz for the CNN)
    gpt        seeded random tokens, int64 [4,16]
    resnet18   seeded random images, float32 [4,3,32,32]

Arrays in digits/mlp_forward_ref.npz, digits/cnn_forward_ref.npz, gpt/gpt_forward_ref.npz and
resnet18/resnet18_forward_ref.npz (the last, like resnet18.onnx, is not committed):

    <input name>, <output name>   every ONNX graph input and output (x or tokens; logits)
    labels                        the digits labels of those samples (mlp, cnn)
    updated/<bn>.running_mean     BatchNorm state after the step, as PyTorch updates it
    updated/<bn>.running_var      (momentum 0.1, running_var from the *unbiased* batch variance)
    updated_onnx/<bn>.running_var running_var as the ONNX BatchNormalization spec defines it (the
                                  population variance; running_mean is the same in both)

In the export the updated statistics are the 2nd and 3rd outputs of each BatchNormalization node
(training_mode=1, momentum=0.9 in ONNX's convention), which are not graph outputs.

Run: /usr/bin/python3 models/make_forward_refs.py [--only mlp,cnn,gpt,resnet18]
(default mlp, cnn, gpt; resnet18 needs `export_models.py --only resnet18` first).
"""

import argparse
import os
import sys

import numpy as np
import onnx
import torch
import torch.nn as nn
from onnx import numpy_helper

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import export_models  # noqa: E402

HERE = export_models.HERE
INPUT_SEED = 1234
DIGITS_SAMPLES = 16


def load_from_onnx(name):
    """The module of `name` holding the initializers of its ONNX file."""
    model = export_models.build(name)
    graph = onnx.load(export_models.onnx_path(name)).graph
    weights = {i.name: torch.from_numpy(numpy_helper.to_array(i).copy()) for i in graph.initializer}
    missing, unexpected = model.load_state_dict(weights, strict=False)
    # num_batches_tracked does not reach the export (see export_models.py).
    missing = [k for k in missing if not k.endswith(".num_batches_tracked")]
    if missing or unexpected:
        sys.exit(f"{name}: ONNX initializers do not match the module: missing {missing}, "
                 f"unexpected {unexpected}")
    return model, graph


def ref_path(name):
    """digits/mlp.onnx -> digits/mlp_forward_ref.npz."""
    return export_models.onnx_path(name)[:-len(".onnx")] + "_forward_ref.npz"


def reference_inputs(name):
    if name in ("mlp", "cnn"):
        data = np.load(os.path.join(HERE, "digits", "test.npz" if name == "mlp" else "test_img.npz"))
        return torch.from_numpy(data["x"][:DIGITS_SAMPLES]), data["labels"][:DIGITS_SAMPLES]
    generator = torch.Generator().manual_seed(INPUT_SEED)
    if name == "gpt":
        return torch.randint(0, 64, (4, 16), generator=generator), None
    return torch.rand(4, 3, 32, 32, generator=generator), None


def run(name):
    model, graph = load_from_onnx(name)
    x, labels = reference_inputs(name)
    model.train()

    batchnorms = {n: m for n, m in model.named_modules() if isinstance(m, nn.BatchNorm2d)}
    initial = {n: (m.running_mean.clone(), m.running_var.clone()) for n, m in batchnorms.items()}
    population_var = {}

    def record_var(bn_name):
        def hook(module, inputs):
            population_var[bn_name] = inputs[0].var(dim=(0, 2, 3), unbiased=False)
        return hook

    hooks = [m.register_forward_pre_hook(record_var(n)) for n, m in batchnorms.items()]
    with torch.no_grad():
        logits = model(x)
    for h in hooks:
        h.remove()

    (input_info,), (output_info,) = graph.input[:1], graph.output
    arrays = {input_info.name: x.numpy(), output_info.name: logits.numpy()}
    if labels is not None:
        arrays["labels"] = labels
    for bn_name, m in batchnorms.items():
        old_var = initial[bn_name][1]
        arrays[f"updated/{bn_name}.running_mean"] = m.running_mean.numpy()
        arrays[f"updated/{bn_name}.running_var"] = m.running_var.numpy()
        onnx_var = (1 - m.momentum) * old_var + m.momentum * population_var[bn_name]
        arrays[f"updated_onnx/{bn_name}.running_var"] = onnx_var.numpy()

    path = ref_path(name)
    np.savez_compressed(path, **arrays)
    print(f"{os.path.relpath(path, HERE)}: " +
          ", ".join(f"{k} {v.dtype}{list(v.shape)}" for k, v in arrays.items()
                    if not k.startswith("updated")) +
          (f", updated state of {len(batchnorms)} BatchNorm(s)" if batchnorms else ""))


def run_each_model(doc, run_one):
    """The command line of the reference scripts: run_one(name) for each model of --only."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("--only", default=",".join(export_models.DEFAULT_MODELS),
                        help=f"comma-separated subset of {','.join(export_models.MODELS)}")
    args = parser.parse_args()
    for name in args.only.split(","):
        if name not in export_models.MODELS:
            parser.error(f"unknown model '{name}'")
        run_one(name)


def main():
    run_each_model(__doc__, run)


if __name__ == "__main__":
    main()
