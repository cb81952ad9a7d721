#!/usr/bin/env python3
"""Records PyTorch LoRA references for the GPT (gpt/gpt.onnx), as gpt/gpt_lora_refs.npz.

The module is rebuilt with the ONNX file's initializers (make_forward_refs.load_from_onnx). Each
target nn.Linear (TARGETS: q, v and fc of both blocks) gets low-rank adapters with the formula of
otter's lora pass (passes/lora.h):

    y = x W^T + b + (alpha / r) * (x A^T) B^T,    A: [r, in], B: [out, r], W frozen

A and B are drawn here (seeded; B nonzero so that the gradients into A are not trivially zero)
and written to gpt/lora_init.npz under otter's names (`<W>.lora_A`, `<W>.lora_B`), which
`otter-train --init` reads. Every base parameter is frozen (requires_grad False).

gpt/lora_train.npz holds the data: 40 seeded random sequences `tokens` i64[40,16] and `labels`
i64[40,16]. The loss is F.cross_entropy over the flattened logits (otter's add-loss{type=ce}).

Arrays in gpt/gpt_lora_refs.npz:

    hp/rank, hp/alpha, hp/lr, hp/weight_decay, hp/batch, hp/steps   f64[] the settings below
    loss, grad/<W>.lora_A, grad/<W>.lora_B   f32: one pass on the first BATCH samples
    loss64, grad64/...                        the same in float64 (module and adapters widened)
    train/loss                                f64[STEPS] loss of each AdamW step (lr, weight decay
                                              below; global batch BATCH in file order, no shuffle)
    train/<W>.lora_A, train/<W>.lora_B        f32 adapters after STEPS steps
    merged/<W>                                f32 W + (alpha/r) B A after training, for each target
    merged/logits                             f32[BATCH,16,64] the merged model (plain nn.Linear
                                              weights, no adapters) on the first BATCH samples

It also writes the README's fine-tuning task, counting: gpt/count_train.npz (512 sequences) and
gpt/count_test.npz (128): tokens x_i = (s + k*i) mod 64 for i = 0..15 with seeded s in [0, 64) and
step k in {1, 2, 3}, labels x_{i+1} (the next number; the first position cannot know k).

Run: /usr/bin/python3 models/make_lora_refs.py
Check an exported merged model: /usr/bin/python3 models/make_lora_refs.py --check-export OUT.onnx
(onnx.checker, the merged weights within 1e-6 and every other initializer bitwise, and the
logits of the module loaded with the file's initializers against merged/logits within 1e-5).
"""

import argparse
import os
import sys

import numpy as np
import onnx
import torch
import torch.nn as nn
import torch.nn.functional as F
from onnx import numpy_helper

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_forward_refs  # noqa: E402

HERE = make_forward_refs.HERE
TARGETS = [f"blocks.{b}.{m}.weight" for b in (0, 1) for m in ("attn.q", "attn.v", "fc")]
RANK, ALPHA = 4, 8.0
LR, WEIGHT_DECAY = 0.01, 0.01
BATCH, STEPS, SAMPLES = 4, 10, 40
SEED = 4321


class LoraLinear(nn.Module):
    def __init__(self, base, a, b, scale):
        super().__init__()
        self.base, self.scale = base, scale
        self.lora_A = nn.Parameter(a.clone())
        self.lora_B = nn.Parameter(b.clone())

    def forward(self, x):
        return self.base(x) + self.scale * ((x @ self.lora_A.t()) @ self.lora_B.t())


def initial_adapters():
    """{<W>.lora_A, <W>.lora_B}: A Kaiming-uniform (bound 1/sqrt(in)), B ~ N(0, 0.05^2)."""
    model, _ = make_forward_refs.load_from_onnx("gpt")
    weights = dict(model.named_parameters())
    rng = np.random.RandomState(SEED)
    out = {}
    for w in TARGETS:
        fan_out, fan_in = weights[w].shape
        bound = 1.0 / np.sqrt(fan_in)
        out[w + ".lora_A"] = rng.uniform(-bound, bound, (RANK, fan_in)).astype(np.float32)
        out[w + ".lora_B"] = (0.05 * rng.standard_normal((fan_out, RANK))).astype(np.float32)
    return out


def lora_model(init, dtype=torch.float32):
    """The GPT with adapters on TARGETS (base frozen), and {adapter name: parameter}."""
    model, _ = make_forward_refs.load_from_onnx("gpt")
    model = model.to(dtype)
    for p in model.parameters():
        p.requires_grad_(False)
    adapters = {}
    for w in TARGETS:
        path = w[:-len(".weight")].split(".")
        parent = model
        for part in path[:-1]:
            parent = getattr(parent, part)
        lin = getattr(parent, path[-1])
        a = torch.from_numpy(init[w + ".lora_A"]).to(dtype)
        b = torch.from_numpy(init[w + ".lora_B"]).to(dtype)
        wrapped = LoraLinear(lin, a, b, ALPHA / RANK)
        setattr(parent, path[-1], wrapped)
        adapters[w + ".lora_A"] = wrapped.lora_A
        adapters[w + ".lora_B"] = wrapped.lora_B
    model.train()
    return model, adapters


def ce(logits, labels):
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), labels.reshape(-1))


def data():
    g = torch.Generator().manual_seed(SEED)
    tokens = torch.randint(0, 64, (SAMPLES, 16), generator=g)
    labels = torch.randint(0, 64, (SAMPLES, 16), generator=g)
    return tokens, labels


def counting(n, seed):
    rng = np.random.RandomState(seed)
    start = rng.randint(0, 64, (n, 1))
    step = rng.randint(1, 4, (n, 1))
    i = np.arange(17)[None, :]
    seq = (start + step * i) % 64
    return {"tokens": seq[:, :16].astype(np.int64), "labels": seq[:, 1:].astype(np.int64)}


def gradients(init, tokens, labels, dtype, prefix):
    model, adapters = lora_model(init, dtype)
    loss = ce(model(tokens[:BATCH]), labels[:BATCH])
    loss.backward()
    out = {("loss" if prefix == "grad" else "loss64"): loss.detach().numpy()}
    for name, p in adapters.items():
        out[f"{prefix}/{name}"] = p.grad.numpy().copy()
    return out


def train(init, tokens, labels):
    model, adapters = lora_model(init)
    opt = torch.optim.AdamW(list(adapters.values()), lr=LR, weight_decay=WEIGHT_DECAY)
    losses = []
    for step in range(STEPS):
        begin = step * BATCH
        opt.zero_grad(set_to_none=True)
        loss = ce(model(tokens[begin:begin + BATCH]), labels[begin:begin + BATCH])
        loss.backward()
        opt.step()
        losses.append(loss.item())
    out = {"train/loss": np.array(losses, dtype=np.float64)}
    for name, p in adapters.items():
        out[f"train/{name}"] = p.detach().numpy().copy()
    # The merged model: plain Linear weights W + (alpha/r) B A, no adapters.
    merged, _ = make_forward_refs.load_from_onnx("gpt")
    state = merged.state_dict()
    for w in TARGETS:
        a, b = adapters[w + ".lora_A"].detach(), adapters[w + ".lora_B"].detach()
        state[w] = state[w] + (ALPHA / RANK) * (b @ a)
        out[f"merged/{w}"] = state[w].numpy().copy()
    merged.load_state_dict(state)
    merged.train()
    with torch.no_grad():
        out["merged/logits"] = merged(tokens[:BATCH]).numpy()
    print(f"train: loss {losses[0]:.4f} -> {losses[-1]:.4f} in {STEPS} AdamW steps")
    return out


def check_export(path):
    """Checks an ONNX file that otter exported with the adapters of a run like train() merged."""
    refs = np.load(os.path.join(HERE, "gpt", "gpt_lora_refs.npz"))
    model = onnx.load(path)
    onnx.checker.check_model(model, full_check=True)
    base = {i.name: numpy_helper.to_array(i) for i in onnx.load(os.path.join(HERE, "gpt", "gpt.onnx")).graph.initializer}
    got = {i.name: numpy_helper.to_array(i) for i in model.graph.initializer}
    if set(got) != set(base):
        sys.exit(f"{path}: initializers differ from gpt.onnx: {sorted(set(got) ^ set(base))}")
    for name, arr in got.items():
        if name in TARGETS:
            err = np.abs(arr - refs[f"merged/{name}"]).max()
            if err > 1e-6:
                sys.exit(f"{path}: merged weight {name} differs from PyTorch's by {err:.3g}")
        elif not np.array_equal(arr, base[name]):
            sys.exit(f"{path}: {name} is not the base model's")
    module, _ = make_forward_refs.load_from_onnx("gpt")
    module.load_state_dict({k: torch.from_numpy(v.copy()) for k, v in got.items()}, strict=False)
    tokens, _ = data()
    with torch.no_grad():
        logits = module(tokens[:BATCH]).numpy()
    err = np.abs(logits - refs["merged/logits"]).max()
    if err > 1e-5:
        sys.exit(f"{path}: logits differ from PyTorch's merged model by {err:.3g}")
    print(f"{path}: onnx.checker passed; merged weights and logits match (max logits error {err:.3g})")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--check-export", metavar="OUT.onnx")
    args = parser.parse_args()
    torch.set_num_threads(1)
    if args.check_export:
        check_export(args.check_export)
        return
    torch.manual_seed(0)
    init = initial_adapters()
    tokens, labels = data()
    np.savez_compressed(os.path.join(HERE, "gpt", "lora_init.npz"), **init)
    np.savez_compressed(os.path.join(HERE, "gpt", "lora_train.npz"), tokens=tokens.numpy(), labels=labels.numpy())
    np.savez_compressed(os.path.join(HERE, "gpt", "count_train.npz"), **counting(512, SEED + 1))
    np.savez_compressed(os.path.join(HERE, "gpt", "count_test.npz"), **counting(128, SEED + 2))
    arrays = {"hp/rank": RANK, "hp/alpha": ALPHA, "hp/lr": LR, "hp/weight_decay": WEIGHT_DECAY,
              "hp/batch": BATCH, "hp/steps": STEPS}
    arrays = {k: np.array(v, dtype=np.float64) for k, v in arrays.items()}
    arrays.update(gradients(init, tokens, labels, torch.float32, "grad"))
    arrays.update(gradients(init, tokens, labels, torch.float64, "grad64"))
    arrays.update(train(init, tokens, labels))
    path = os.path.join(HERE, "gpt", "gpt_lora_refs.npz")
    np.savez_compressed(path, **arrays)
    print(f"{os.path.relpath(path, HERE)}: {len(arrays)} arrays; adapters of {len(TARGETS)} weights at rank {RANK}")


if __name__ == "__main__":
    main()
