"""PyTorch references for otter's unrolling of RNN, GRU and LSTM (passes/recurrent.h).

Exports three small recurrent modules with torch.onnx.export (opset 14) and records PyTorch's outputs
in float64 (the module runs in float64, the file holds float32): a bidirectional GRU (PyTorch's GRU
is ONNX's linear_before_reset=1) over batch-first input, a 2-layer bidirectional LSTM with given
initial states, and a bidirectional ReLU RNN. tests/passes/recurrent_test.cc runs each export and
compares. Run with Debian's torch: /usr/bin/python3 models/rnn/make_rnn_refs.py
"""
import os

import numpy as np
import torch
from torch import nn

HERE = os.path.dirname(os.path.abspath(__file__))


class Gru(nn.Module):
    def __init__(self):
        super().__init__()
        self.rnn = nn.GRU(4, 3, bidirectional=True, batch_first=True)

    def forward(self, x):
        y, h = self.rnn(x)
        return y, h


class Lstm(nn.Module):
    def __init__(self):
        super().__init__()
        self.rnn = nn.LSTM(4, 3, num_layers=2, bidirectional=True)

    def forward(self, x, h0, c0):
        y, (h, c) = self.rnn(x, (h0, c0))
        return y, h, c


class Rnn(nn.Module):
    def __init__(self):
        super().__init__()
        self.rnn = nn.RNN(4, 3, nonlinearity="relu", bidirectional=True)

    def forward(self, x):
        y, h = self.rnn(x)
        return y, h


def export(name, module, inputs, input_names, output_names):
    path = os.path.join(HERE, name + ".onnx")
    torch.onnx.export(module, tuple(inputs), path, opset_version=14, input_names=input_names,
                      output_names=output_names)
    with torch.no_grad():
        outs = module.double()(*[t.double() for t in inputs])
    module.float()
    arrays = {n: t.numpy().astype(np.float32) for n, t in zip(input_names, inputs)}
    arrays.update({n: t.numpy().astype(np.float32) for n, t in zip(output_names, outs)})
    np.savez(os.path.join(HERE, name + "_ref.npz"), **arrays)


def main():
    torch.manual_seed(0)
    t, n = 5, 2
    export("gru_bidirectional", Gru().eval(), [torch.randn(n, t, 4)], ["x"], ["y", "h"])
    export("lstm_2layer_bidirectional", Lstm().eval(),
           [torch.randn(t, n, 4), torch.randn(4, n, 3), torch.randn(4, n, 3)], ["x", "h0", "c0"],
           ["y", "h", "c"])
    export("rnn_relu_bidirectional", Rnn().eval(), [torch.randn(t, n, 4)], ["x"], ["y", "h"])


if __name__ == "__main__":
    main()
