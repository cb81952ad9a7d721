#!/usr/bin/env python3
"""How far float32 AdamW trajectories of the digits MLP drift from a float64 one.

Trains the digits MLP (digits/mlp.onnx's initializers) for STEPS AdamW steps on digits/train.npz
in file order (batches of 32, lr 0.01, weight decay 0.01) three ways: PyTorch in float64 (the
reference), PyTorch in float32, and otter-train (float32, --no-shuffle). Prints, per parameter,
the relative distance max|p - p64| / max|p64| of both float32 runs after the last step.

With --write, also records the float64 trajectory as digits/mlp_adamw_f64_refs.npz (read by
tests/runtime/trajectory_test.cc):

    step<i>/<param>   f64[...]  every parameter after step i (1-based) for i in RECORDED_STEPS
    torch32/step<i>/<param>  f32[...]  PyTorch's float32 parameters after those steps
    hp/<name>         f64[]     lr, weight_decay, batch, steps

Run: /usr/bin/python3 models/trajectory_f64.py [--otter-train build/tools/otter-train] [--write]
"""

import argparse
import os
import subprocess
import sys
import tempfile

import numpy as np
import onnx
import torch
import torch.nn.functional as F
from onnx import numpy_helper

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_forward_refs  # noqa: E402

HERE = make_forward_refs.HERE
STEPS = 10
BATCH = 32
LR = 0.01
WEIGHT_DECAY = 0.01
RECORDED_STEPS = (1, 5, 10)  # the float64 parameters written by --write (all would be 400 KB)


def torch_run(dtype, x, labels):
    """Parameters after each AdamW step, in `dtype`."""
    model, _ = make_forward_refs.load_from_onnx("mlp")
    model = model.to(dtype)
    model.train()
    params = dict(model.named_parameters())
    opt = torch.optim.AdamW(model.parameters(), lr=LR, weight_decay=WEIGHT_DECAY)
    xs = x.to(dtype)
    steps = []
    for step in range(STEPS):
        opt.zero_grad(set_to_none=True)
        begin = step * BATCH
        loss = F.cross_entropy(model(xs[begin:begin + BATCH]), labels[begin:begin + BATCH])
        loss.backward()
        opt.step()
        steps.append({n: p.detach().numpy().copy() for n, p in params.items()})
    return steps


def otter_run(otter_train):
    """otter-train's parameters after STEPS steps, read back from its exported model."""
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "trained.onnx")
        cmd = [otter_train, "train", os.path.join(HERE, "digits", "mlp.onnx"),
               "--data", os.path.join(HERE, "digits", "train.npz"), "--no-shuffle",
               "--batch-size", str(BATCH), "--steps", str(STEPS), "--optimizer", "adamw",
               "--lr", str(LR), "--weight-decay", str(WEIGHT_DECAY), "--device", "cpu",
               "--export", out]
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
        graph = onnx.load(out).graph
        return {i.name: numpy_helper.to_array(i).copy() for i in graph.initializer}


def rel(a, ref):
    """max |a - ref| / max |ref| (tests/runtime/training_test_util.h's rel_err)."""
    return float(np.max(np.abs(a.astype(np.float64) - ref)) / np.max(np.abs(ref)))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--otter-train", default=os.path.join(HERE, "..", "build", "tools", "otter-train"))
    ap.add_argument("--write", action="store_true", help="record digits/mlp_adamw_f64_refs.npz")
    args = ap.parse_args()
    torch.set_num_threads(1)
    data = np.load(os.path.join(HERE, "digits", "train.npz"))
    x = torch.from_numpy(data["x"])
    labels = torch.from_numpy(data["labels"])
    ref = torch_run(torch.float64, x, labels)
    t32 = torch_run(torch.float32, x, labels)
    last64, last32 = ref[-1], t32[-1]
    ours = otter_run(args.otter_train) if os.path.exists(args.otter_train) else None
    print(f"relative distance from PyTorch float64 after {STEPS} AdamW steps:")
    for name in last64:
        line = f"  {name:24s} torch fp32 {rel(last32[name], last64[name]):.3e}"
        if ours is not None:
            line += f"   otter fp32 {rel(ours[name], last64[name]):.3e}"
        print(line)
    if args.write:
        arrays = {}
        for i, params in enumerate(ref):
            if i + 1 not in RECORDED_STEPS:
                continue
            for name, p in params.items():
                arrays[f"step{i + 1}/{name}"] = p
        for i, params in enumerate(t32):
            if i + 1 in RECORDED_STEPS:
                for name, p in params.items():
                    arrays[f"torch32/step{i + 1}/{name}"] = p
        for key, value in dict(lr=LR, weight_decay=WEIGHT_DECAY, batch=BATCH, steps=STEPS).items():
            arrays[f"hp/{key}"] = np.array(value, dtype=np.float64)
        path = os.path.join(HERE, "digits", "mlp_adamw_f64_refs.npz")
        np.savez_compressed(path, **arrays)
        print(f"wrote {os.path.relpath(path, HERE)}")


if __name__ == "__main__":
    main()
