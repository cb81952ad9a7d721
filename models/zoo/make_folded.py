#!/usr/bin/env python3
"""Writes tests/tools/Inputs/folded_conv_bn.onnx and folded_data.npz (tests/tools/export-warnings.test).

A Conv -> BatchNorm -> ReLU -> Linear model exported as torch.onnx.export does by default: eval
mode (TrainingMode.EVAL) with constant folding, so the exporter folds the BatchNorm into the Conv,
whose weight and bias become `onnx::Conv_<n>` initializers; otter warns at import.
Run with Debian's torch 1.13: /usr/bin/python3 models/zoo/make_folded.py
"""
import os

import numpy as np
import torch
from torch import nn

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "tools", "Inputs")


def main():
    torch.manual_seed(0)
    m = nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4), nn.ReLU(), nn.Flatten(), nn.Linear(4 * 4 * 4, 3)).eval()
    x = torch.randn(4, 3, 6, 6)
    torch.onnx.export(m, x, os.path.join(OUT, "folded_conv_bn.onnx"), input_names=["x"], output_names=["logits"],
                      opset_version=14, dynamic_axes={"x": {0: "N"}, "logits": {0: "N"}})
    np.savez(os.path.join(OUT, "folded_data.npz"), x=x.numpy(), labels=np.array([0, 1, 2, 0], dtype=np.int64))


if __name__ == "__main__":
    main()
