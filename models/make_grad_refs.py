#!/usr/bin/env python3
"""Records PyTorch losses and parameter gradients of the exported models, as <model>_grad_ref.npz.

Each module is rebuilt and loaded with its ONNX file's initializers (make_forward_refs.load_from_onnx),
then run once in train() mode on the inputs of the forward references (make_forward_refs.reference_inputs)
with fixed labels; the loss is F.cross_entropy over the flattened logits (mean over all positions,
as otter's add-loss{type=ce}), and loss.backward() gives the gradients:

    mlp, cnn   the first 16 digits test samples and their labels
    gpt        seeded random tokens [4,16]; labels seeded random tokens [4,16]
    resnet18   seeded random images [16,3,32,32] (not the forward references' 4: with 4 images the
               last stage's BatchNorm normalises 4 values per channel, and PyTorch's own float32
               gradients then differ from float64 by 8e-5 relative; with 16 by 9e-6); labels seeded
               random classes [16]

Arrays in digits/mlp_grad_ref.npz, digits/cnn_grad_ref.npz, gpt/gpt_grad_ref.npz and
resnet18/resnet18_grad_ref.npz (the last, like resnet18.onnx, is not committed):

    <input name>         the model input (x or tokens)
    labels               int64, the logits' shape without the class axis
    loss                 float32 scalar
    grad/<initializer>   dloss/dparameter for every trainable initializer (every nn.Parameter; the
                         BatchNorm running statistics are buffers and get none)
    loss64, grad64/...   the same with the module and the float input in float64 (same weights and
                         inputs, widened): a reference free of float32 rounding, for checking the
                         backward graph itself to ~1e-12 where float32 results are chaotic (in
                         ResNet-18 a ReLU input of 1e-5 flips sign under float32 rounding)

Run: /usr/bin/python3 models/make_grad_refs.py [--only mlp,cnn,gpt,resnet18]
(default mlp, cnn, gpt; resnet18 needs `export_models.py --only resnet18` first).
"""

import os
import sys

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import export_models  # noqa: E402
import make_forward_refs  # noqa: E402

LABEL_SEED = make_forward_refs.INPUT_SEED + 1
CLASSES = {"gpt": 64, "resnet18": 10}
RESNET_IMAGES = 16


def grad_ref_path(name):
    """digits/mlp.onnx -> digits/mlp_grad_ref.npz."""
    return export_models.onnx_path(name)[:-len(".onnx")] + "_grad_ref.npz"


def reference_inputs(name):
    if name != "resnet18":
        return make_forward_refs.reference_inputs(name)
    generator = torch.Generator().manual_seed(make_forward_refs.INPUT_SEED)
    return torch.rand(RESNET_IMAGES, 3, 32, 32, generator=generator), None


def reference_labels(name, x, digits_labels):
    if digits_labels is not None:
        return torch.from_numpy(digits_labels).long()
    generator = torch.Generator().manual_seed(LABEL_SEED)
    shape = tuple(x.shape) if name == "gpt" else (x.shape[0],)
    return torch.randint(0, CLASSES[name], shape, generator=generator)


def loss_and_grads(name, dtype, x, labels):
    """The loss and {parameter name: gradient} of one train()-mode pass in `dtype`."""
    model, graph = make_forward_refs.load_from_onnx(name)
    model = model.to(dtype)
    model.train()
    logits = model(x.to(dtype) if x.is_floating_point() else x)
    loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), labels.reshape(-1))
    loss.backward()
    initializers = {i.name for i in graph.initializer}
    grads = {}
    for pname, p in model.named_parameters():
        if pname not in initializers:
            sys.exit(f"{name}: parameter {pname} is not an initializer of the ONNX file")
        grads[pname] = p.grad.numpy()
    return loss.detach().numpy(), grads, graph


def run(name):
    x, digits_labels = reference_inputs(name)
    labels = reference_labels(name, x, digits_labels)
    loss, grads, graph = loss_and_grads(name, torch.float32, x, labels)
    loss64, grads64, _ = loss_and_grads(name, torch.float64, x, labels)
    arrays = {graph.input[0].name: x.numpy(), "labels": labels.numpy(), "loss": loss, "loss64": loss64}
    arrays.update({f"grad/{k}": v for k, v in grads.items()})
    arrays.update({f"grad64/{k}": v for k, v in grads64.items()})

    path = grad_ref_path(name)
    np.savez_compressed(path, **arrays)
    # Relative to each gradient's largest entry, floored at 1e-3 of the model's largest (as the C++
    # test does: gradients that are zero in exact arithmetic are float32 noise).
    floor = 1e-3 * max(float(np.abs(g).max()) for g in grads64.values())
    drift = max(float(np.abs(grads[k] - grads64[k]).max() / max(np.abs(grads64[k]).max(), floor)) for k in grads)
    print(f"{os.path.relpath(path, export_models.HERE)}: loss {loss.item():.6f}, {len(grads)} parameter "
          f"gradients, max |grad| {max(float(np.abs(g).max()) for g in grads.values()):.4g}, "
          f"float32 vs float64 {drift:.2g}")


def main():
    make_forward_refs.run_each_model(__doc__, run)


if __name__ == "__main__":
    main()
