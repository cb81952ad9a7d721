#!/usr/bin/env python3
"""Records torch.optim trajectories of the digits MLP, as digits/mlp_train_refs.npz.

The module is rebuilt and loaded with the initializers of digits/mlp.onnx (make_forward_refs's
loader), then trained for STEPS optimizer steps in float32 on digits/train.npz in file order: step
i takes samples [i*B, (i+1)*B) with B = GLOBAL_BATCH, as K micro-batches of B/K in order. Each
micro-batch's mean cross-entropy is divided by K before backward() and the optimizer steps once
(PyTorch's documented accumulation recipe); clipping, where asked, is clip_grad_norm_ on the
accumulated gradient before the step; schedules are a LambdaLR stepped after each optimizer step.

Arrays, per configuration <c> (see CONFIGS):

    <c>/loss                 f64[STEPS]  mean of the K micro-batch losses of each step
    <c>/lr                   f64[STEPS]  learning rate each step used
    <c>/step<i>/<param>      f32[...]    every parameter after step i (1-based), named as in the ONNX file
    <c>/hp/<name>            f64[]       the hyperparameters: lr, batch (micro-batch b), accum (K),
                                         momentum, beta1, beta2, eps, weight_decay, clip_norm,
                                         warmup, total (0 where unused)

The optimizer type of each configuration is the prefix of its name (sgd, adam, adamw).

Run: /usr/bin/python3 models/make_train_refs.py
"""

import math
import os
import sys

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_forward_refs  # noqa: E402

HERE = make_forward_refs.HERE
STEPS = 10
GLOBAL_BATCH = 32

# name -> (optimizer class, constructor arguments, K, clip norm, schedule (kind, warmup, total))
CONFIGS = {
    "sgd_momentum": (torch.optim.SGD, dict(lr=0.05, momentum=0.9), 1, 0.0, None),
    "adam": (torch.optim.Adam, dict(lr=0.01), 1, 0.0, None),
    "adamw": (torch.optim.AdamW, dict(lr=0.01, weight_decay=0.01), 1, 0.0, None),
    "adamw_clip": (torch.optim.AdamW, dict(lr=0.01, weight_decay=0.01), 1, 0.5, None),
    "adamw_accum2": (torch.optim.AdamW, dict(lr=0.01, weight_decay=0.01), 2, 0.0, None),
    "adamw_accum4": (torch.optim.AdamW, dict(lr=0.01, weight_decay=0.01), 4, 0.0, None),
    "adamw_warmup_linear": (torch.optim.AdamW, dict(lr=0.01, weight_decay=0.01), 1, 0.0, ("linear", 3, STEPS)),
    "adamw_cosine": (torch.optim.AdamW, dict(lr=0.01, weight_decay=0.01), 1, 0.0, ("cosine", 2, STEPS)),
}


def lr_factor(kind, warmup, total):
    """otter's schedules as a LambdaLR factor of the completed optimizer steps s."""
    def f(s):
        if s < warmup:
            return (s + 1) / warmup
        t = min(1.0, (s - warmup) / (total - warmup))
        return 1.0 - t if kind == "linear" else 0.5 * (1.0 + math.cos(math.pi * t))
    return f


def run(name, opt_cls, opt_args, k, clip, schedule, x, labels):
    model, _ = make_forward_refs.load_from_onnx("mlp")
    model.train()
    params = dict(model.named_parameters())
    opt = opt_cls(model.parameters(), **opt_args)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lr_factor(*schedule)) if schedule else None
    micro = GLOBAL_BATCH // k
    out = {}
    losses, lrs, clipped = [], [], 0
    for step in range(STEPS):
        lrs.append(opt.param_groups[0]["lr"])
        opt.zero_grad(set_to_none=True)
        step_losses = []
        for i in range(k):
            begin = step * GLOBAL_BATCH + i * micro
            loss = F.cross_entropy(model(x[begin:begin + micro]), labels[begin:begin + micro])
            (loss / k).backward()
            step_losses.append(loss.item())
        if clip:
            norm = torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
            clipped += int(norm.item() > clip)
        opt.step()
        if sched:
            sched.step()
        losses.append(float(np.mean(step_losses)))
        for pname, p in params.items():
            out[f"{name}/step{step + 1}/{pname}"] = p.detach().numpy().copy()
    out[f"{name}/loss"] = np.array(losses, dtype=np.float64)
    out[f"{name}/lr"] = np.array(lrs, dtype=np.float64)
    hp = dict(lr=opt_args["lr"], batch=micro, accum=k, momentum=opt_args.get("momentum", 0.0),
              beta1=0.9, beta2=0.999, eps=1e-8, weight_decay=opt_args.get("weight_decay", 0.0),
              clip_norm=clip, warmup=schedule[1] if schedule else 0, total=schedule[2] if schedule else 0)
    for key, value in hp.items():
        out[f"{name}/hp/{key}"] = np.array(value, dtype=np.float64)
    note = f", clipped {clipped}/{STEPS} steps" if clip else ""
    print(f"{name}: loss {losses[0]:.4f} -> {losses[-1]:.4f}{note}")
    return out


def main():
    torch.set_num_threads(1)
    data = np.load(os.path.join(HERE, "digits", "train.npz"))
    x = torch.from_numpy(data["x"])
    labels = torch.from_numpy(data["labels"])
    arrays = {}
    for name, (opt_cls, opt_args, k, clip, schedule) in CONFIGS.items():
        arrays.update(run(name, opt_cls, opt_args, k, clip, schedule, x, labels))
    path = os.path.join(HERE, "digits", "mlp_train_refs.npz")
    np.savez_compressed(path, **arrays)
    print(f"{os.path.relpath(path, HERE)}: {len(CONFIGS)} configurations, {STEPS} steps each")


if __name__ == "__main__":
    main()
