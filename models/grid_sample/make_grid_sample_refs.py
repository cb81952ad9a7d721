#!/usr/bin/env python3
"""PyTorch reference for otter's GridSample CPU kernels (tests/kernels/grid_sample_test.cc).

Each case draws X, Grid and an upstream gradient dY with a fixed seed, in float64, and records
torch.nn.functional.grid_sample(X, Grid, mode, padding_mode, align_corners) as Y, and the
gradients of sum(dY * Y) with respect to X and Grid (torch.autograd.grad) as dX and dGrid.
Cases: 4-D X [2, 3, 4, 5] with Grid [2, 3, 4, 2] in modes bilinear, nearest and bicubic, and 5-D
X [2, 2, 3, 4, 5] with Grid [2, 2, 3, 3, 3] in modes bilinear and nearest (PyTorch has no 5-D
bicubic), each with padding zeros, border and reflection and align_corners False and True.
Grid values are uniform in [-1.25, 1.25], so some points fall outside the input and exercise the
padding; except bicubic with border or reflection padding, whose grid stays in [-1, 1]: there
ONNX (whose semantics otter follows) clamps or reflects the source coordinate before taking the
4 taps, where PyTorch pads each tap, and the two differ for points outside the input.
Writes grid_sample_refs.npz with, per case NAME = "<rank>d_<mode>_<padding>_ac<0|1>":
  NAME/x, NAME/grid, NAME/dy, NAME/y, NAME/dx, NAME/dgrid   float64 tensors
Run with Debian's torch 1.13: /usr/bin/python3 models/grid_sample/make_grid_sample_refs.py
"""
import os

import numpy as np
import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))

SHAPES = {4: ((2, 3, 4, 5), (2, 3, 4, 2)), 5: ((2, 2, 3, 4, 5), (2, 2, 3, 3, 3))}
MODES = {4: ("bilinear", "nearest", "bicubic"), 5: ("bilinear", "nearest")}
PADDINGS = ("zeros", "border", "reflection")


def main():
    gen = torch.Generator().manual_seed(0)
    arrays = {}
    names = []
    for rank in (4, 5):
        xs, gs = SHAPES[rank]
        for mode in MODES[rank]:
            for padding in PADDINGS:
                for ac in (0, 1):
                    name = f"{rank}d_{mode}_{padding}_ac{ac}"
                    lim = 1.0 if mode == "bicubic" and padding != "zeros" else 1.25
                    x = torch.randn(xs, generator=gen, dtype=torch.float64).requires_grad_()
                    grid = ((torch.rand(gs, generator=gen, dtype=torch.float64) * 2 - 1) * lim).requires_grad_()
                    y = F.grid_sample(x, grid, mode=mode, padding_mode=padding, align_corners=bool(ac))
                    dy = torch.randn(y.shape, generator=gen, dtype=torch.float64)
                    dx, dgrid = torch.autograd.grad(y, (x, grid), dy)
                    for key, t in (("x", x), ("grid", grid), ("dy", dy), ("y", y), ("dx", dx), ("dgrid", dgrid)):
                        arrays[f"{name}/{key}"] = t.detach().numpy()
                    names.append(name)
    out = os.path.join(HERE, "grid_sample_refs.npz")
    np.savez_compressed(out, **arrays)
    print(f"wrote {out}: {len(names)} cases, torch {torch.__version__}")


if __name__ == "__main__":
    main()
