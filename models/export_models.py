#!/usr/bin/env python3
"""Defines otter's reference models in PyTorch and exports them to ONNX with PyTorch's exporter.

    digits/mlp.onnx       x: f32[N,64]      -> logits: f32[N,10]
    digits/cnn.onnx       x: f32[N,1,8,8]   -> logits: f32[N,10]     (BatchNorm, training mode)
    gpt/gpt.onnx          tokens: i64[N,16] -> logits: f32[N,16,64]  (2-layer causal transformer)
    resnet18/resnet18.onnx  x: f32[N,3,32,32] -> logits: f32[N,10]   (torchvision, not committed)
    bench/gpt_large.onnx  tokens: i64[N,128] -> logits: f32[N,128,256] (4 layers, width 256, not committed)

Every model is exported at opset 17 in training mode (BatchNormalization uses batch statistics
and has training_mode=1), without constant folding (initializers keep their PyTorch names) and with
a symbolic batch dimension "N". Weights are PyTorch's default initialisation after
torch.manual_seed(SEED); the reference scripts read them back from the ONNX initializers.

Run: /usr/bin/python3 models/export_models.py [--only mlp,cnn,gpt,resnet18]
(default: mlp, cnn and gpt; resnet18 (45 MB) and gpt_large (13 MB) are only made on request).
"""

import argparse
import math
import os
import sys
import warnings

import numpy as np
import onnx
import torch
import torch.nn as nn
import torch.nn.functional as F
from onnx import numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))
SEED = 0
OPSET = 17

# The ONNX ops otter implements; an export that uses anything else is a bug in this file.
OTTER_OPS = set("""
    Add Sub Mul Div Pow Sqrt Reciprocal Exp Log Neg Abs Erf Tanh Sigmoid Relu LeakyRelu Gelu
    Softplus Clip Min Max Where Equal Less Greater Not And Cast MatMul Gemm Conv MaxPool
    AveragePool GlobalAveragePool BatchNormalization LayerNormalization Softmax LogSoftmax Dropout
    SoftmaxCrossEntropyLoss NegativeLogLikelihoodLoss Reshape Transpose Flatten Squeeze Unsqueeze
    Concat Split Slice Gather Expand Shape Size ConstantOfShape Constant Range Trilu Identity Tile
    Pad ReduceSum ReduceMean ReduceMax
""".split())


class DigitsMLP(nn.Module):
    """64 pixels -> 64 hidden units -> ReLU -> 10 classes."""

    def __init__(self, hidden=64):
        super().__init__()
        self.fc1 = nn.Linear(64, hidden)
        self.fc2 = nn.Linear(hidden, 10)

    def forward(self, x):
        return self.fc2(F.relu(self.fc1(x)))


class DigitsCNN(nn.Module):
    """Conv-BN-ReLU-MaxPool, Conv-ReLU, global average pool, linear classifier on 1x8x8 images."""

    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 8, kernel_size=3, padding=1)
        self.bn1 = nn.BatchNorm2d(8)
        self.conv2 = nn.Conv2d(8, 16, kernel_size=3, padding=1)
        self.fc = nn.Linear(16, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.bn1(self.conv1(x))), 2)  # [N,8,4,4]
        x = F.relu(self.conv2(x))                               # [N,16,4,4]
        x = F.adaptive_avg_pool2d(x, 1).flatten(1)              # [N,16]
        return self.fc(x)


class CausalSelfAttention(nn.Module):
    def __init__(self, width, heads, context):
        super().__init__()
        self.heads, self.head_dim, self.context = heads, width // heads, context
        self.q = nn.Linear(width, width)
        self.k = nn.Linear(width, width)
        self.v = nn.Linear(width, width)
        self.proj = nn.Linear(width, width)
        # A boolean buffer: exported as a bool initializer, so no trainer mistakes it for a weight.
        self.register_buffer("causal", torch.tril(torch.ones(context, context, dtype=torch.bool)))

    def forward(self, x):
        n = x.shape[0]  # symbolic in the export; the other sizes are the model's constants
        t, h, d = self.context, self.heads, self.head_dim

        def split_heads(y):  # [N,T,C] -> [N,H,T,D]
            return y.reshape(n, t, h, d).transpose(1, 2)

        q, k, v = split_heads(self.q(x)), split_heads(self.k(x)), split_heads(self.v(x))
        scores = torch.matmul(q, k.transpose(-2, -1)) * (1.0 / math.sqrt(d))  # [N,H,T,T]
        scores = scores.masked_fill(~self.causal, float("-inf"))
        y = torch.matmul(torch.softmax(scores, dim=-1), v)                   # [N,H,T,D]
        return self.proj(y.transpose(1, 2).reshape(n, t, h * d))


class Block(nn.Module):
    def __init__(self, width, heads, context):
        super().__init__()
        self.ln1 = nn.LayerNorm(width)
        self.attn = CausalSelfAttention(width, heads, context)
        self.ln2 = nn.LayerNorm(width)
        self.fc = nn.Linear(width, 4 * width)
        self.fc_out = nn.Linear(4 * width, width)

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        return x + self.fc_out(F.gelu(self.fc(self.ln2(x))))


class TinyGPT(nn.Module):
    """GPT-style decoder: token + learned position embeddings, pre-LN blocks, LM head; no dropout.

    Takes exactly `context` tokens per sequence.
    """

    def __init__(self, vocab=64, context=16, width=32, heads=2, layers=2):
        super().__init__()
        self.tok_emb = nn.Embedding(vocab, width)
        self.pos_emb = nn.Embedding(context, width)
        self.register_buffer("positions", torch.arange(context, dtype=torch.int64))
        self.blocks = nn.ModuleList(Block(width, heads, context) for _ in range(layers))
        self.ln_f = nn.LayerNorm(width)
        self.head = nn.Linear(width, vocab, bias=False)

    def forward(self, tokens):
        x = self.tok_emb(tokens) + self.pos_emb(self.positions)
        for block in self.blocks:
            x = block(x)
        return self.head(self.ln_f(x))


def resnet18():
    import torchvision
    return torchvision.models.resnet18(weights=None, num_classes=10)


# name -> (constructor, ONNX path, input name, example input maker, output rank)
MODELS = {
    "mlp": (DigitsMLP, "digits/mlp.onnx", "x", lambda n: torch.rand(n, 64), 2),
    "cnn": (DigitsCNN, "digits/cnn.onnx", "x", lambda n: torch.rand(n, 1, 8, 8), 2),
    "gpt": (TinyGPT, "gpt/gpt.onnx", "tokens", lambda n: torch.randint(0, 64, (n, 16)), 3),
    "resnet18": (resnet18, "resnet18/resnet18.onnx", "x", lambda n: torch.rand(n, 3, 32, 32), 2),
    # The benchmarks' larger GPT: width 256, 4 layers, context 128 (13 MB, not committed).
    "gpt_large": (lambda: TinyGPT(vocab=256, context=128, width=256, heads=4, layers=4),
                  "bench/gpt_large.onnx", "tokens", lambda n: torch.randint(0, 256, (n, 128)), 3),
}
DEFAULT_MODELS = ["mlp", "cnn", "gpt"]


def build(name):
    """The module with its seeded initial weights (the same on every call)."""
    torch.manual_seed(SEED)
    return MODELS[name][0]()


def example_input(name, batch=4):
    generator_state = torch.get_rng_state()
    torch.manual_seed(SEED + 1)
    x = MODELS[name][3](batch)
    torch.set_rng_state(generator_state)
    return x


def onnx_path(name):
    return os.path.join(HERE, MODELS[name][1])


def export(name):
    model = build(name)
    _, _, input_name, _, _ = MODELS[name]
    initial_state = {k: v.clone() for k, v in model.state_dict().items()}
    path = onnx_path(name)
    # BatchNorm's num_batches_tracked counter only matters with momentum=None; the exporter drops
    # its increment and says so once per BatchNorm.
    warnings.filterwarnings("ignore", message=".*Removing mutation from node aten::add_.*")
    torch.onnx.export(
        model, (example_input(name),), path,
        opset_version=OPSET,
        training=torch.onnx.TrainingMode.TRAINING,
        do_constant_folding=False,
        input_names=[input_name],
        output_names=["logits"],
        dynamic_axes={input_name: {0: "N"}, "logits": {0: "N"}},
    )
    restore_running_stats(path, initial_state)
    return path


def restore_running_stats(path, state):
    """Writes the seeded BatchNorm running statistics back into the exported initializers.

    The exporter traces the model once in training mode, and that pass moves each BatchNorm's
    running_mean/running_var before they are saved. Only those initializers are replaced; every
    other one must already equal the module's initial state.
    """
    model = onnx.load(path)
    changed = False
    for init in model.graph.initializer:
        if init.name not in state:
            continue
        expected = state[init.name].numpy()
        if np.array_equal(numpy_helper.to_array(init), expected):
            continue
        if not init.name.endswith((".running_mean", ".running_var")):
            sys.exit(f"{path}: initializer {init.name} differs from the seeded module state")
        init.CopyFrom(numpy_helper.from_array(expected, init.name))
        changed = True
    if changed:
        onnx.save(model, path)


def describe(path):
    model = onnx.load(path)
    onnx.checker.check_model(model)
    g = model.graph

    def shape(v):
        dims = [d.dim_param or str(d.dim_value) for d in v.type.tensor_type.shape.dim]
        elem = onnx.TensorProto.DataType.Name(v.type.tensor_type.elem_type).lower()
        return f"{v.name}: {elem}[{','.join(dims)}]"

    ops = sorted({n.op_type for n in g.node})
    params = sum(int(torch.tensor(list(i.dims)).prod()) for i in g.initializer)
    print(f"{os.path.relpath(path, HERE)}: opset {model.opset_import[0].version}, "
          f"{len(g.node)} nodes, {len(g.initializer)} initializers ({params} values)")
    print("  inputs: ", ", ".join(shape(v) for v in g.input))
    print("  outputs:", ", ".join(shape(v) for v in g.output))
    print("  ops:    ", " ".join(ops))
    unsupported = sorted(set(ops) - OTTER_OPS)
    if unsupported:
        sys.exit(f"{path}: ops outside otter's op set: {' '.join(unsupported)}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default=",".join(DEFAULT_MODELS),
                        help=f"comma-separated subset of {','.join(MODELS)}")
    args = parser.parse_args()
    names = args.only.split(",")
    for name in names:
        if name not in MODELS:
            parser.error(f"unknown model '{name}' (known: {', '.join(MODELS)})")
    for name in names:
        os.makedirs(os.path.dirname(onnx_path(name)), exist_ok=True)
        describe(export(name))


if __name__ == "__main__":
    main()
