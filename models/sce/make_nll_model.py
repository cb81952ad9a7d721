#!/usr/bin/env python3
"""Classifiers that carry their own loss as log-softmax + NLL, and PyTorch's loss and gradients
(tests/runtime/fuse_softmax_ce_test.cc, passes/fuse_softmax_ce.h).

Two small models (torch.manual_seed(0) weights), exported in training mode at opset 17 with the
batch axis symbolic (N), inputs x and y, the scalar output `loss`:

  nll_log_softmax.onnx     x f32[N,16] -> Linear(16,32) -> Tanh -> Linear(32,10) = logits;
                           loss = F.nll_loss(F.log_softmax(logits, dim=-1), y, weight=CLASS_WEIGHTS,
                           ignore_index=IGNORE) (mean over the non-ignored rows, weighted).
                           Exported as LogSoftmax -> NegativeLogLikelihoodLoss: torch 1.13's
                           TorchScript exporter would itself rewrite this pair into
                           SoftmaxCrossEntropyLoss in its ONNX peephole pass
                           (torch._C._jit_pass_onnx_peephole); the script turns that pass off for
                           this export (the rest of the peephole only tidies: the weight Transposes
                           stay as nodes), so the file has the graph an exporter without that
                           rewrite writes.
  nll_log_of_softmax.onnx  x f32[N,4,16] -> Linear(16,10) -> transpose to [N,10,4] = scores (class
                           axis 1, 4 positions); loss = F.nll_loss(torch.log(torch.softmax(scores,
                           dim=1)), y, reduction="sum"), y i64[N,4]. The stock exporter writes this as
                           Softmax -> Log -> NegativeLogLikelihoodLoss (it fuses only LogSoftmax).

sce_refs.npz: for each model M (prefix "log_softmax/" or "log_of_softmax/"): M/x, M/y (seeded;
the first model's y has IGNORE at rows 1 and 5), M/loss (float32 scalar) and M/grad/<initializer>
(d loss / d parameter, PyTorch autograd in float32, the modules in train() mode).

With --bench DIR: also writes DIR/nll_bench.onnx (not committed, 1 MB): x f32[N,256] ->
Linear(256,1000) -> log_softmax -> nll_loss (mean), exported like the first model, for the
before/after profile in docs/performance.md ("Softmax + cross-entropy fusion").

Run: /usr/bin/python3 models/sce/make_nll_model.py [--bench /tmp/sce]
"""
import argparse
import contextlib
import os

import numpy as np
import onnx
import torch
import torch.nn.functional as F
from torch import nn

HERE = os.path.dirname(os.path.abspath(__file__))
CLASSES = 10
IGNORE = 7  # a valid class: ignoring it must change the loss
CLASS_WEIGHTS = [0.5, 1.0, 1.5, 2.0, 0.25, 1.0, 3.0, 1.0, 0.75, 1.25]


class LogSoftmaxNll(nn.Module):
    def __init__(self, features=16, hidden=32, classes=CLASSES, weighted=True):
        super().__init__()
        self.fc1 = nn.Linear(features, hidden) if hidden else None
        self.fc2 = nn.Linear(hidden or features, classes)
        self.weighted = weighted

    def forward(self, x, y):
        h = torch.tanh(self.fc1(x)) if self.fc1 is not None else x
        logits = self.fc2(h)
        if not self.weighted:
            return F.nll_loss(F.log_softmax(logits, dim=-1), y)
        # Made in forward, the weights export as a Constant (a buffer would be an initializer, which
        # otter trains unless frozen).
        weight = torch.tensor(CLASS_WEIGHTS)
        return F.nll_loss(F.log_softmax(logits, dim=-1), y, weight=weight, ignore_index=IGNORE)


class LogOfSoftmaxNll(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(16, CLASSES)

    def forward(self, x, y):
        scores = self.fc(x).transpose(1, 2)  # [N, C, T]: the class axis is 1
        return F.nll_loss(torch.log(torch.softmax(scores, dim=1)), y, reduction="sum")


@contextlib.contextmanager
def without_onnx_peephole():
    """torch 1.13's peephole rewrites LogSoftmax -> NegativeLogLikelihoodLoss into SoftmaxCrossEntropyLoss."""
    saved = torch._C._jit_pass_onnx_peephole
    torch._C._jit_pass_onnx_peephole = lambda *args: None
    try:
        yield
    finally:
        torch._C._jit_pass_onnx_peephole = saved


def export(model, args, path, dynamic_axes):
    torch.onnx.export(model, args, path, input_names=["x", "y"], output_names=["loss"], opset_version=17,
                      training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False,
                      dynamic_axes=dynamic_axes)
    ops = [n.op_type for n in onnx.load(path).graph.node]
    print(os.path.basename(path), ops)
    return ops


def record(model, path, x, y, prefix, out):
    """PyTorch's loss and parameter gradients, under the ONNX initializer names."""
    names = {init.name for init in onnx.load(path).graph.initializer}
    model.zero_grad()
    loss = model(x, y)
    loss.backward()
    out[prefix + "x"], out[prefix + "y"] = x.numpy(), y.numpy()
    out[prefix + "loss"] = loss.detach().numpy().astype(np.float32)
    for name, p in model.named_parameters():
        assert name in names, f"{name} is not an initializer of {path}"
        out[prefix + "grad/" + name] = p.grad.numpy()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bench", help="also write the large (uncommitted) bench model to this folder")
    args = ap.parse_args()
    out = {}

    torch.manual_seed(0)
    m1 = LogSoftmaxNll().train()
    x1 = torch.randn(16, 16, generator=torch.Generator().manual_seed(1))
    y1 = torch.randint(0, CLASSES, (16,), generator=torch.Generator().manual_seed(2))
    y1[1] = y1[5] = IGNORE
    p1 = os.path.join(HERE, "nll_log_softmax.onnx")
    with without_onnx_peephole():
        ops = export(m1, (x1, y1), p1, {"x": {0: "N"}, "y": {0: "N"}})
    assert "LogSoftmax" in ops and "NegativeLogLikelihoodLoss" in ops, ops
    record(m1, p1, x1, y1, "log_softmax/", out)

    m2 = LogOfSoftmaxNll().train()
    x2 = torch.randn(6, 4, 16, generator=torch.Generator().manual_seed(3))
    y2 = torch.randint(0, CLASSES, (6, 4), generator=torch.Generator().manual_seed(4))
    p2 = os.path.join(HERE, "nll_log_of_softmax.onnx")
    ops = export(m2, (x2, y2), p2, {"x": {0: "N"}, "y": {0: "N"}})
    assert ops[-3:] == ["Softmax", "Log", "NegativeLogLikelihoodLoss"], ops
    record(m2, p2, x2, y2, "log_of_softmax/", out)

    np.savez(os.path.join(HERE, "sce_refs.npz"), **out)
    print("wrote sce_refs.npz:", {k: v.shape for k, v in out.items()})

    if args.bench:
        os.makedirs(args.bench, exist_ok=True)
        torch.manual_seed(0)
        mb = LogSoftmaxNll(features=256, hidden=0, classes=1000, weighted=False).train()
        with without_onnx_peephole():
            export(mb, (torch.randn(8, 256), torch.zeros(8, dtype=torch.int64)),
                   os.path.join(args.bench, "nll_bench.onnx"), {"x": {0: "N"}, "y": {0: "N"}})


if __name__ == "__main__":
    main()
