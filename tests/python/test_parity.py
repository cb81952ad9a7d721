# The Python session against otter-train: 20 steps with the same flags give bitwise equal
# parameters and optimizer state (fp32; fp16 with 4 micro-batches), and checkpoints pass between the
# two in both directions (a resumed run equals an unbroken one byte for byte).
import numpy as np
import pytest

import otter
from conftest import MLP, TRAIN, batch, load_npz, otter_train

# (otter-train flags, the same as TrainingSession options)
CONFIGS = {
    "fp32": (
        ["--batch-size", 32, "--optimizer", "adamw", "--lr", 0.01, "--schedule", "cosine", "--warmup", 3],
        dict(batch_size=32, optimizer={"type": "adamw", "lr": 0.01, "schedule": "cosine", "warmup": 3, "total": 20}),
    ),
    "fp16-accum4": (
        ["--precision", "fp16", "--accum", 4, "--batch-size", 8, "--optimizer", "momentum", "--lr", 0.05,
         "--clip-norm", 1.0, "--weight-decay", 1e-4],
        dict(precision="fp16", accum=4, batch_size=8,
             optimizer={"type": "momentum", "lr": 0.05, "clip_norm": 1.0, "weight_decay": 1e-4}),
    ),
    "recompute-frozen-bn": (
        ["--batch-size", 16, "--recompute", "layers", "--batchnorm", "frozen"],
        dict(batch_size=16, recompute={"policy": "layers"}, batchnorm="frozen"),
    ),
}
STEPS = 20


def cli_state(tmp_path, name, flags, steps, resume=None):
    """The checkpoint tensors of an otter-train run of `steps` steps (file order, CPU)."""
    out = tmp_path / name
    extra = ["--resume", resume] if resume else []
    otter_train("train", MLP, "--data", TRAIN, "--no-shuffle", "--device", "cpu", "--steps", steps, "--save", out,
                *flags, *extra)
    return load_npz(out / "state.npz"), out


def python_steps(session, digits, first, last):
    results = []
    for step in range(first, last):
        results.append(session.step(batch(digits, step, session.global_batch)))
    return results


def assert_bitwise_equal(got, want, what):
    assert sorted(got) == sorted(want), f"{what}: tensors differ: {sorted(got)} vs {sorted(want)}"
    for name in want:
        a, b = got[name], want[name]
        assert a.dtype == b.dtype and a.shape == b.shape, f"{what}: {name}: {a.dtype}{a.shape} vs {b.dtype}{b.shape}"
        if a.tobytes() != b.tobytes():
            raise AssertionError(f"{what}: {name} differs (max |d| {np.max(np.abs(a.astype(np.float64) - b))})")


def checkpointed(state):
    """state() less the gradient accumulators (checkpoints leave them out)."""
    return {k: v for k, v in state.items() if not k.endswith(".acc")}


@pytest.mark.parametrize("config", CONFIGS)
def test_twenty_steps_equal_otter_train(config, tmp_path, digits):
    flags, options = CONFIGS[config]
    want, _ = cli_state(tmp_path, "cli", flags, STEPS)
    s = otter.TrainingSession(MLP, device="cpu", **options)
    results = python_steps(s, digits, 0, STEPS)
    assert s.steps_taken == STEPS and results[-1]["step"] == STEPS
    params = s.parameters()
    assert set(params) == {"fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"}
    assert_bitwise_equal(params, {k: want[k] for k in params}, config + " parameters")
    assert_bitwise_equal(checkpointed(s.state()), want, config + " state")
    # The run trained: the loss fell, and fp16's dynamic scale is reported.
    assert results[-1]["loss"] < results[0]["loss"]
    if options.get("precision") == "fp16":
        assert results[-1]["loss_scale"] > 1


def test_micro_step_and_apply_equal_step(digits):
    _, options = CONFIGS["fp16-accum4"]
    a = otter.TrainingSession(MLP, device="cpu", **options)
    b = otter.TrainingSession(MLP, device="cpu", **options)
    for step in range(3):
        feeds = batch(digits, step, a.global_batch)
        ra = a.step(feeds)
        for k in range(b.accum):
            b.micro_step({n: v[k * b.batch_size:(k + 1) * b.batch_size] for n, v in feeds.items()})
            assert b.pending_micro_steps == k + 1
        rb = b.apply()
        assert ra == rb
    assert_bitwise_equal(b.state(), a.state(), "micro_step/apply")


def test_python_checkpoint_resumes_in_otter_train(tmp_path, digits):
    flags, options = CONFIGS["fp16-accum4"]
    unbroken, _ = cli_state(tmp_path, "unbroken", flags, STEPS)
    s = otter.TrainingSession(MLP, device="cpu", **options)
    python_steps(s, digits, 0, STEPS // 2)
    s.save(str(tmp_path / "py"), epoch=0, position=STEPS // 2)
    resumed, _ = cli_state(tmp_path, "resumed", flags, STEPS, resume=tmp_path / "py")
    assert_bitwise_equal(resumed, unbroken, "Python checkpoint resumed by otter-train")


def test_otter_train_checkpoint_resumes_in_python(tmp_path, digits):
    flags, options = CONFIGS["fp32"]
    flags = [f for f in flags if f not in ("--schedule", "cosine")]  # constant: --steps sets no total
    options = dict(options, optimizer={"type": "adamw", "lr": 0.01, "warmup": 3})
    unbroken, _ = cli_state(tmp_path, "unbroken", flags, STEPS)
    _, half = cli_state(tmp_path, "half", flags, STEPS // 2)
    s = otter.TrainingSession(MLP, device="cpu", **options)
    where = s.load(str(half))
    assert where == {"epoch": 0, "position": STEPS // 2, "step": STEPS // 2}
    python_steps(s, digits, where["step"], STEPS)
    assert_bitwise_equal(checkpointed(s.state()), unbroken, "otter-train checkpoint resumed in Python")


def test_load_rejects_another_configuration(tmp_path):
    flags, _ = CONFIGS["fp16-accum4"]
    _, ckpt = cli_state(tmp_path, "k4", flags, 1)
    s = otter.TrainingSession(MLP, device="cpu", precision="fp16", accum=2, batch_size=8)
    with pytest.raises(otter.Error, match="does not fit this session: .*K 4"):
        s.load(str(ckpt))
