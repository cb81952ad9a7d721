#!/usr/bin/env python3
"""Compares two otter-train runs: the weights of their exported models (or checkpoints' state.npz)
and their --log-json step logs.

  compare_runs.py A.onnx B.onnx --rtol 1e-5 [--logs A.jsonl B.jsonl] [--expect-skip STEP]

Every float initializer of A must be in B with the same shape and max|a-b| <= rtol * max|b| (the
tensor's own scale; all-zero tensors must match exactly). The logs must agree step by step on the
skipped flag and the loss scale, and the losses within --loss-rtol. --expect-skip STEP: step STEP
must be skipped (non-finite gradients) in both runs. Exit 1 with one line per problem."""
import argparse
import json
import sys

import numpy as np


def weights(path):
    if path.endswith(".npz"):
        return dict(np.load(path))
    import onnx
    from onnx import numpy_helper
    m = onnx.load(path)
    return {t.name: numpy_helper.to_array(t) for t in m.graph.initializer}


def read_log(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def main():
    p = argparse.ArgumentParser()
    p.add_argument("a")
    p.add_argument("b")
    p.add_argument("--rtol", type=float, default=1e-5)
    p.add_argument("--logs", nargs=2)
    p.add_argument("--loss-rtol", type=float, default=1e-4)
    p.add_argument("--expect-skip", type=int, action="append", default=[])
    p.add_argument("--bitwise", action="store_true", help="every tensor must be equal bit for bit")
    args = p.parse_args()
    a, b = weights(args.a), weights(args.b)
    problems, worst, compared = [], (0.0, ""), 0
    for name, x in a.items():
        if not np.issubdtype(x.dtype, np.floating) and not args.bitwise:
            continue
        if name not in b:
            problems.append(f"{name}: missing from {args.b}")
            continue
        y = b[name]
        if x.shape != y.shape:
            problems.append(f"{name}: shape {x.shape} vs {y.shape}")
            continue
        compared += 1
        if args.bitwise:
            if x.tobytes() != y.tobytes():
                problems.append(f"{name}: differs (bitwise comparison)")
            continue
        scale = float(np.max(np.abs(y))) if y.size else 0.0
        diff = float(np.max(np.abs(x.astype(np.float64) - y.astype(np.float64)))) if y.size else 0.0
        rel = diff / scale if scale > 0 else (0.0 if diff == 0 else float("inf"))
        if rel > worst[0]:
            worst = (rel, name)
        if rel > args.rtol:
            problems.append(f"{name}: max|a-b| = {diff:.3g}, {rel:.3g} of max|b| (tolerance {args.rtol:g})")
    if compared == 0:
        problems.append("no tensors compared")
    if args.logs:
        la, lb = read_log(args.logs[0]), read_log(args.logs[1])
        if len(la) != len(lb) or not la:
            problems.append(f"logs: {len(la)} vs {len(lb)} steps")
        for sa, sb in zip(la, lb):
            s = sa["step"]
            if sa["skipped"] != sb["skipped"] or sa["loss_scale"] != sb["loss_scale"]:
                problems.append(f"step {s}: skipped {sa['skipped']}/{sb['skipped']}, "
                                f"scale {sa['loss_scale']}/{sb['loss_scale']}")
            if abs(sa["loss"] - sb["loss"]) > args.loss_rtol * max(abs(sb["loss"]), 1e-12):
                problems.append(f"step {s}: loss {sa['loss']!r} vs {sb['loss']!r}")
        for s in args.expect_skip:
            for name, log in (("a", la), ("b", lb)):
                if not any(e["step"] == s and e["skipped"] for e in log):
                    problems.append(f"run {name}: step {s} was not skipped")
    for line in problems:
        print("FAIL:", line)
    if problems:
        return 1
    print(f"PASS: {compared} tensors agree (largest relative difference {worst[0]:.3g} in {worst[1] or '-'})"
          + (f", {len(read_log(args.logs[0]))} logged steps agree" if args.logs else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
