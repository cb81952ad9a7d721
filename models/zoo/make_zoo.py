#!/usr/bin/env python3
"""Builds otter's model zoo: small torchvision and Hugging Face architectures with random weights,
exported by torch.onnx.export at opsets 14 and 17, with PyTorch references (tests/zoo/zoo_test.cc).

Each model NAME gets models/zoo/NAME/ with
    NAME_op14.onnx, NAME_op17.onnx   exported in training mode (TrainingMode.TRAINING; the
                                     densenet121s_eval entry: model.eval() and
                                     TrainingMode.PRESERVE, so BatchNorm records training_mode=0
                                     and is not folded), do_constant_folding=False, fixed shapes
                                     (batch 2; 4 for images), one output `logits`
    refs.npz                         the references below
Every reference is PyTorch's, computed in float64 (the module and float inputs widened) and stored
as float32: the float64 run is the exact answer for the float32 one, so a ReLU kink or a pooling
tie, where float32 is ill-conditioned, cannot make the reference itself noisy. The script prints
how far PyTorch's own float32 run is from it (columns f32 logits/grads/steps).

    <input>, labels          the batch (2 samples, 4 images); labels for cross-entropy over the last axis of
                             the logits (F.cross_entropy on the flattened logits: otter's
                             add-loss{type=ce}, otter-train's default --loss ce)
    logits, loss             one forward pass in model.train() mode
    grad/<p>                 d loss / d p for every parameter with a gradient (PyTorch's parameter
                             set; ONNX initializers are named after the parameters)
    steps/loss               f32[5] the loss before each of 5 AdamW steps on the same batch
    after/<p>, stat/<b>      parameters and BatchNorm running statistics after those 5 steps
    hp/lr, hp/weight_decay, hp/eps, hp/steps   the AdamW settings (torch.optim.AdamW)
    torch32/logits, torch32/grads, torch32/params, torch32/losses   f64[]: how far PyTorch's own
                             float32 run is from these references (worst tensor, the measures of
                             tests/zoo/zoo_test.cc): large where float32 is ill-conditioned
    mp/<input>, mp/labels    4 batches for the mixed-precision check (K=4 micro-batches)

The models are seeded (torch.manual_seed), and every float parameter gets seeded noise of 0.02 on
top of its initialisation (so that LayerNorm weights, zero biases and the like are not constant).
Dropout and stochastic depth are off: training-mode randomness would make references unreachable.

Run in the zoo's virtual environment (transformers from PyPI on Debian's torch 1.13):
    models/zoo/setup_venv.sh /tmp/otter-zoo-venv
    /tmp/otter-zoo-venv/bin/python models/zoo/make_zoo.py [--only a,b]
"""
import argparse
import copy
import os
import sys

import numpy as np
import onnx
import torch
import torch.nn.functional as F
from onnx import numpy_helper
from torch import nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import zoo_models  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
OPSETS = (14, 17)
# eps 1e-4 rather than torch's 1e-8: Adam's first steps move each parameter by about lr * sign(g),
# so a gradient that is zero in exact arithmetic (rounding noise of 1e-10) would move as much as any
# other; with eps 1e-4 such noise moves nothing and the trajectory is well-conditioned.
LR, WEIGHT_DECAY, EPS, STEPS = 1e-3, 0.01, 1e-4, 5


def ce(logits, labels):
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), labels.reshape(-1))


def widen(x, dtype):
    return x.to(dtype) if x.is_floating_point() else x


def trainable(model):
    return [(n, p) for n, p in model.named_parameters() if p.requires_grad]


def clone(model):
    """copy.deepcopy, after dropping the weights that weight_norm's hook recomputes at each forward
    (wav2vec2's positional convolution): they are not leaves, which deepcopy refuses."""
    for mod in model.modules():
        for name in ("weight",):
            if hasattr(mod, name + "_g") and name in mod.__dict__:
                del mod.__dict__[name]
    return copy.deepcopy(model)


def forward_backward(model, inputs, labels, dtype):
    m = clone(model).to(dtype).train()
    logits = m(*[widen(x, dtype) for x in inputs.values()])
    loss = ce(logits, labels)
    loss.backward()
    grads = {n: p.grad.detach().clone() for n, p in trainable(m) if p.grad is not None}
    return logits.detach(), loss.detach(), grads


def adamw_run(model, inputs, labels, dtype, eps):
    m = clone(model).to(dtype).train()
    opt = torch.optim.AdamW([p for _, p in trainable(m)], lr=LR, weight_decay=WEIGHT_DECAY, eps=eps)
    losses = []
    for _ in range(STEPS):
        opt.zero_grad()
        loss = ce(m(*[widen(x, dtype) for x in inputs.values()]), labels)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    params = {n: p.detach().clone() for n, p in trainable(m)}
    stats = {n: b.clone() for n, b in m.named_buffers() if "running_" in n}
    return np.array(losses), params, stats


def rel(a, b, floor=0.0):
    """max |a - b| / max(max |b|, floor): the error relative to the tensor's scale. A gradient that is
    zero in exact arithmetic (a bias before a training-mode BatchNorm) holds only rounding noise;
    `floor` (1e-3 of the largest gradient of the model) measures it against the model's scale."""
    a, b = a.double(), b.double()
    s = max(b.abs().max().item(), floor)
    d = (a - b).abs().max().item()
    return d / s if s > 0 else d


def export(model, inputs, path, opset, eval_mode):
    m = clone(model)
    if eval_mode:
        m.eval()
    else:
        m.train()
    mode = torch.onnx.TrainingMode.PRESERVE if eval_mode else torch.onnx.TrainingMode.TRAINING
    torch.onnx.export(m, tuple(inputs.values()), path, input_names=list(inputs), output_names=["logits"],
                      opset_version=opset, do_constant_folding=False, training=mode)
    name_initializers(path, model)


def name_initializers(path, model):
    """Names every initializer after the parameter or buffer it holds, with the module's values.

    The training-mode trace moves the running statistics; they get their initial values back. An
    initializer the exporter named otherwise (onnx::MatMul_12 for a transposed use, say) is matched
    to the parameter with the same values and renamed.
    """
    proto = onnx.load(path)
    state = {n: t for n, t in model.state_dict(keep_vars=False).items()}
    params = dict(model.named_parameters())
    names = {i.name for i in proto.graph.initializer}
    unclaimed = {n: p for n, p in params.items() if n not in names}
    renames = {}
    for init in proto.graph.initializer:
        if init.name in state:
            if "running_" in init.name:
                init.CopyFrom(numpy_helper.from_array(state[init.name].numpy(), init.name))
            continue
        value = numpy_helper.to_array(init)
        if value.dtype != np.float32 or value.size < 2:
            continue
        match = [n for n, p in unclaimed.items()
                 if tuple(p.shape) == value.shape and np.array_equal(p.detach().numpy(), value)]
        if len(match) == 1:
            renames[init.name] = match[0]
            del unclaimed[match[0]]
    for init in proto.graph.initializer:
        if init.name in renames:
            init.name = renames[init.name]
    for node in proto.graph.node:
        for i, x in enumerate(node.input):
            if x in renames:
                node.input[i] = renames[x]
    onnx.checker.check_model(proto)
    onnx.save(proto, path)


def perturb(model, seed):
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for _, p in model.named_parameters():
            p.add_(0.02 * torch.randn(p.shape, generator=g))


def build_one(name, spec, args):
    torch.manual_seed(0)
    model, inputs, labels, mp_inputs, mp_labels = spec["build"]()
    perturb(model, 1)
    out_dir = os.path.join(HERE, name)
    os.makedirs(out_dir, exist_ok=True)
    for opset in OPSETS:
        export(model, inputs, os.path.join(out_dir, f"{name}_op{opset}.onnx"), opset, spec.get("eval_export", False))
    # "ref": torch.float32 where the model's float64 copy computes something else (see zoo_models.py)
    ref_dtype = spec.get("ref", torch.float64)
    logits, loss, grads = forward_backward(model, inputs, labels, ref_dtype)
    logits32, loss32, grads32 = forward_backward(model, inputs, labels, torch.float32)
    losses, params, stats = adamw_run(model, inputs, labels, ref_dtype, EPS)
    losses32, params32, _ = adamw_run(model, inputs, labels, torch.float32, EPS)
    ref = {k: v.numpy() for k, v in inputs.items()}
    ref["labels"] = labels.numpy()
    ref["logits"] = logits.float().numpy()
    ref["loss"] = np.array(loss.item(), dtype=np.float32)
    for n, g in grads.items():
        ref["grad/" + n] = g.float().numpy()
    ref["steps/loss"] = losses.astype(np.float32)
    for n, p in params.items():
        if n in grads:
            ref["after/" + n] = p.float().numpy()
    for n, b in stats.items():
        ref["stat/" + n] = b.float().numpy()
    for k, v in dict(lr=LR, weight_decay=WEIGHT_DECAY, eps=EPS, steps=STEPS).items():
        ref["hp/" + k] = np.array(v, dtype=np.float64)
    for k, v in mp_inputs.items():
        ref["mp/" + k] = v.numpy()
    ref["mp/labels"] = mp_labels.numpy()
    gfloor = 1e-3 * max(g.abs().max().item() for g in grads.values())
    f32 = (rel(logits32, logits), max(rel(grads32[n], grads[n], gfloor) for n in grads),
           max(rel(params32[n], params[n]) for n in grads), float(np.abs(losses32 - losses).max() / abs(losses[0])))
    for k, v in zip(("logits", "grads", "params", "losses"), f32):
        ref["torch32/" + k] = np.array(v, dtype=np.float64)
    np.savez(os.path.join(out_dir, "refs.npz"), **ref)
    size = sum(os.path.getsize(os.path.join(out_dir, f)) for f in os.listdir(out_dir))
    nparams = sum(p.numel() for n, p in trainable(model) if n in grads)
    ops = sorted({n.op_type for n in onnx.load(os.path.join(out_dir, f"{name}_op17.onnx")).graph.node})
    print(f"{name:20s} {nparams:8d} params {len(grads):4d} grads {size / 1e6:6.2f} MB  loss {loss.item():.4f}  "
          f"f32 logits {f32[0]:.1e} grads {f32[1]:.1e} params {f32[2]:.1e} losses {f32[3]:.1e}", flush=True)
    if args.ops:
        print("    ops:", " ".join(ops))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", help="comma-separated model names")
    ap.add_argument("--ops", action="store_true", help="print each model's op types")
    args = ap.parse_args()
    specs = zoo_models.SPECS
    names = args.only.split(",") if args.only else list(specs)
    for n in names:
        if n not in specs:
            sys.exit(f"unknown model '{n}' (models: {', '.join(specs)})")
    for n in names:
        try:
            build_one(n, specs[n], args)
        except Exception as e:  # one model's exporter failure must not hide the others
            print(f"{n:20s} FAILED: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}", flush=True)


if __name__ == "__main__":
    main()
