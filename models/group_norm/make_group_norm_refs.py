#!/usr/bin/env python3
"""PyTorch reference for otter's GroupNormalization CPU kernel (tests/kernels/group_norm_test.cc).

Each case draws X, scale and bias with a fixed seed and records PyTorch's
torch.nn.functional.group_norm(X, num_groups, weight, bias, eps) as Y. ONNX opset 21 takes scale
and bias per channel [C], as PyTorch does; opset 18 takes them per group [num_groups], so those
cases store the per-group vectors and give PyTorch each group's value repeated over the group's
C / num_groups channels. Writes group_norm_refs.npz with, per case NAME:
  NAME/x, NAME/scale, NAME/bias, NAME/y   the tensors (scale and bias as the ONNX node takes them)
  NAME/attrs                              int64 [num_groups, opset]
  NAME/epsilon                            float64 [1] (the float32 value of the node's attribute)
Run with Debian's torch 1.13: /usr/bin/python3 models/group_norm/make_group_norm_refs.py
"""
import os

import numpy as np
import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))

# name, X shape, num_groups, opset, dtype, epsilon
CASES = [
    ("opset21_f32_4d", (2, 6, 3, 4), 3, 21, torch.float32, 1e-5),
    ("opset21_f64_3d", (3, 4, 5), 2, 21, torch.float64, 1e-3),
    ("opset21_f32_rank2", (4, 6), 3, 21, torch.float32, 1e-5),
    ("opset21_f32_groups_eq_channels", (2, 4, 7), 4, 21, torch.float32, 1e-5),
    ("opset21_f32_one_group", (2, 5, 3, 3), 1, 21, torch.float32, 1e-5),
    ("opset18_f32_5d", (2, 6, 2, 3, 2), 2, 18, torch.float32, 1e-5),
    ("opset18_f64_4d", (2, 8, 3, 2), 4, 18, torch.float64, 1e-2),
]


def main():
    gen = torch.Generator().manual_seed(0)
    arrays = {}
    for name, shape, groups, opset, dtype, eps in CASES:
        c = shape[1]
        eps = float(np.float32(eps))  # an ONNX float attribute: PyTorch gets the same value
        # An offset and a spread per sample and channel, so the groups' statistics differ.
        x = torch.randn(shape, generator=gen, dtype=torch.float64) * 2.0 + 0.5
        x = x.to(dtype)
        n_affine = c if opset >= 21 else groups
        scale = (torch.rand(n_affine, generator=gen, dtype=torch.float64) * 1.5 + 0.25).to(dtype)
        bias = (torch.randn(n_affine, generator=gen, dtype=torch.float64) * 0.5).to(dtype)
        weight, b = (scale, bias) if opset >= 21 else (scale.repeat_interleave(c // groups),
                                                       bias.repeat_interleave(c // groups))
        y = F.group_norm(x, groups, weight, b, eps)
        for key, t in (("x", x), ("scale", scale), ("bias", bias), ("y", y)):
            arrays[f"{name}/{key}"] = t.numpy()
        arrays[f"{name}/attrs"] = np.array([groups, opset], dtype=np.int64)
        arrays[f"{name}/epsilon"] = np.array([eps], dtype=np.float64)
    out = os.path.join(HERE, "group_norm_refs.npz")
    np.savez(out, **arrays)
    print(f"wrote {out}: {len(CASES)} cases, torch {torch.__version__}")


if __name__ == "__main__":
    main()
