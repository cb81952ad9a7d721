#!/usr/bin/env python3
"""PyTorch eager side of `otter-bench --vs-torch`: trains the module a benchmark model was exported
from, on the same batches, with the same optimizer, precision and thread count, and prints one JSON
object with the step times.

The module is rebuilt by export_models.py and loaded with the ONNX file's initializers, so both
frameworks start from the same weights. One optimizer step = `accum` micro-batches of `batch`
samples: per micro-batch `loss / accum` is backpropagated (through GradScaler with fp16), then
the optimizer steps once and the gradients are dropped (set_to_none), the same step as otter-train takes (README.md).

    /usr/bin/python3 models/bench/torch_bench.py --model mlp --data BATCHES.npz --batch 64 \\
        [--accum 1] [--steps 20] [--warmup 3] [--threads 2] [--optimizer adamw] [--lr 1e-3] \\
        [--precision fp32|fp16|bf16] [--device cpu|cuda]

BATCHES.npz holds the model input (named as in the ONNX graph) and `labels`, at least
batch * accum samples, cut into whole global batches of batch * accum that steps cycle through
(step s uses global batch s modulo their number), as otter-bench's own loop does.
Output fields: model, device, precision, batch, accum, threads, steps, ms_per_step (median),
ms_min, ms_max, peak_bytes (peak process RSS growth on the CPU, torch.cuda.max_memory_allocated on
CUDA), peak_rss_bytes, final_loss.
"""

import argparse
import json
import os
import resource
import statistics
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import export_models  # noqa: E402
import make_forward_refs  # noqa: E402


def make_optimizer(name, params, lr):
    if name == "sgd":
        return torch.optim.SGD(params, lr=lr)
    if name == "momentum":
        return torch.optim.SGD(params, lr=lr, momentum=0.9)
    if name == "adam":
        return torch.optim.Adam(params, lr=lr)
    if name == "adamw":
        return torch.optim.AdamW(params, lr=lr)
    sys.exit(f"torch_bench: unknown optimizer '{name}'")


def rss_bytes():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", required=True, choices=sorted(export_models.MODELS))
    p.add_argument("--data", required=True)
    p.add_argument("--batch", type=int, required=True)
    p.add_argument("--accum", type=int, default=1)
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--optimizer", default="adamw")
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--precision", default="fp32", choices=["fp32", "fp16", "bf16"])
    p.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    a = p.parse_args()
    if a.precision == "fp16" and a.device == "cpu":
        sys.exit("torch_bench.py: PyTorch's CPU autocast (torch %s) supports bf16 only; compare fp16 on cuda "
                 "or use --precision bf16 on the cpu" % torch.__version__)

    torch.set_num_threads(a.threads)
    device = torch.device(a.device)
    model, graph = make_forward_refs.load_from_onnx(a.model)
    model.to(device).train()
    data = np.load(a.data)
    input_name = graph.input[0].name
    xs = torch.from_numpy(data[input_name]).to(device)
    ys = torch.from_numpy(data["labels"]).to(device)
    per_step = a.batch * a.accum
    if xs.shape[0] < per_step:
        sys.exit(f"torch_bench: {a.data} has {xs.shape[0]} samples, one step needs {per_step}")

    opt = make_optimizer(a.optimizer, model.parameters(), a.lr)
    half = {"fp16": torch.float16, "bf16": torch.bfloat16}.get(a.precision)
    scaler = torch.cuda.amp.GradScaler(enabled=(a.precision == "fp16" and a.device == "cuda"))

    def micro_loss(x, y):
        with torch.autocast(device_type=a.device, dtype=half, enabled=half is not None):
            logits = model(x)
        return F.cross_entropy(logits.float().flatten(0, -2), y.flatten())

    def step(s):
        start = (s % (xs.shape[0] // per_step)) * per_step  # whole global batches, cycled as otter does
        total = 0.0
        for k in range(a.accum):
            lo = start + k * a.batch
            loss = micro_loss(xs[lo:lo + a.batch], ys[lo:lo + a.batch]) / a.accum
            scaler.scale(loss).backward()
            total += loss.detach()
        scaler.step(opt)
        scaler.update()
        opt.zero_grad(set_to_none=True)
        return total

    sync = torch.cuda.synchronize if a.device == "cuda" else (lambda: None)
    rss_before = rss_bytes()
    for s in range(a.warmup):
        step(s)
    sync()
    if a.device == "cuda":
        torch.cuda.reset_peak_memory_stats()
    times = []
    loss = None
    for s in range(a.warmup, a.warmup + a.steps):
        t0 = time.perf_counter()
        loss = step(s)
        sync()
        times.append((time.perf_counter() - t0) * 1e3)
    peak_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    peak = torch.cuda.max_memory_allocated() if a.device == "cuda" else max(0, peak_rss - rss_before)
    print(json.dumps({
        "framework": "torch " + torch.__version__, "model": a.model, "device": a.device,
        "precision": a.precision, "batch": a.batch, "accum": a.accum, "threads": a.threads,
        "steps": a.steps, "ms_per_step": statistics.median(times), "ms_min": min(times),
        "ms_max": max(times), "peak_bytes": peak, "peak_rss_bytes": peak_rss,
        "final_loss": float(loss),
    }))


if __name__ == "__main__":
    main()
