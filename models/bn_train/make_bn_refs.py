#!/usr/bin/env python3
"""PyTorch reference for training BatchNorm from an eval-mode export (tests/runtime/batchnorm_train_test.cc).

A small Conv + BatchNorm model, exported as torch.onnx.export does by default (eval mode, so the
ONNX BatchNormalization nodes record training_mode=0; no constant folding, so no BatchNorm is
folded into a weight), then trained in PyTorch with model.train() for two SGD steps. Writes
  bn_cnn.onnx    the eval-mode export (opset 14)
  bn_refs.npz    x, labels (two batches of 8), and after the two steps every parameter as
                 param/NAME and every running statistic as stat/NAME (PyTorch's state_dict names)
Run with Debian's torch 1.13: /usr/bin/python3 models/bn_train/make_bn_refs.py
"""
import os

import numpy as np
import torch
from torch import nn

HERE = os.path.dirname(os.path.abspath(__file__))


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, padding=1)
        self.bn1 = nn.BatchNorm2d(4)  # after the ReLU: not folded into the conv
        self.fc1 = nn.Linear(4, 5)
        self.bn2 = nn.BatchNorm1d(5, momentum=0.3)
        self.fc2 = nn.Linear(5, 3)

    def forward(self, x):
        h = self.bn1(torch.relu(self.conv(x)))
        h = h.mean(dim=(2, 3))
        return self.fc2(torch.relu(self.bn2(self.fc1(h))))


def main():
    torch.manual_seed(0)
    net = Net()
    with torch.no_grad():  # running statistics away from their (0, 1) start
        for bn in (net.bn1, net.bn2):
            bn.running_mean.uniform_(-0.5, 0.5)
            bn.running_var.uniform_(0.5, 2.0)
    x = torch.randn(16, 3, 6, 6)
    labels = torch.randint(0, 3, (16,))
    net.eval()
    torch.onnx.export(net, x[:8], os.path.join(HERE, "bn_cnn.onnx"), input_names=["x"], output_names=["logits"],
                      opset_version=14, do_constant_folding=False)
    net.train()
    opt = torch.optim.SGD(net.parameters(), lr=0.1)
    for step in range(2):
        opt.zero_grad()
        loss = nn.functional.cross_entropy(net(x[8 * step:8 * step + 8]), labels[8 * step:8 * step + 8])
        loss.backward()
        opt.step()
    out = {"x": x.numpy(), "labels": labels.numpy()}
    for name, p in net.named_parameters():
        out["param/" + name] = p.detach().numpy()
    for name, b in net.named_buffers():
        if "running" in name:
            out["stat/" + name] = b.numpy()
    np.savez(os.path.join(HERE, "bn_refs.npz"), **out)
    print("wrote bn_cnn.onnx and bn_refs.npz:", sorted(out))


if __name__ == "__main__":
    main()
