# The session's other calls: evaluate against otter-train eval of the exported model, parameters()
# as copies, set_parameters (with the fp16 half copies, against numpy's rounding), the module's
# metadata and docstrings.
import re

import numpy as np
import pytest

import otter
from conftest import MLP, TEST, batch, load_npz, otter_train


def test_version_and_docs():
    assert re.fullmatch(r"\d+\.\d+\.\d+", otter.__version__)
    assert issubclass(otter.Error, ValueError)
    doc = otter.TrainingSession.__init__.__doc__
    # The defaults in the docstring come from the C++ option structs.
    assert "batch_size=32" in doc and "optimizer='adamw'" in doc and "lr=0.001" in doc
    assert "COPIES" in otter.TrainingSession.parameters.__doc__


def test_evaluate_and_export_agree_with_otter_train(tmp_path, digits):
    s = otter.TrainingSession(MLP, device="cpu", optimizer={"lr": 0.01})
    for step in range(30):
        s.step(batch(digits, step, s.global_batch))
    e = s.evaluate(load_npz(TEST))
    assert e["samples"] == 450 and 0.5 < e["accuracy"] <= 1
    s.export(str(tmp_path / "trained.onnx"))
    out = otter_train("eval", tmp_path / "trained.onnx", "--data", TEST, "--device", "cpu").stdout
    assert out.startswith(f"loss {e['loss']:.4f}  accuracy {100 * e['accuracy']:.2f}%  (450 samples)"), out


def test_parameters_are_copies(digits):
    s = otter.TrainingSession(MLP, device="cpu", optimizer={"type": "sgd", "lr": 0.1})
    p0 = s.parameters()
    p0["fc1.weight"][:] = 0  # writing a copy changes nothing
    s.step(batch(digits, 0, s.global_batch))
    p1 = s.parameters()
    assert not np.any(p1["fc1.weight"] == 0)
    assert not np.shares_memory(p1["fc1.weight"], s.parameters()["fc1.weight"])
    assert p1["fc1.weight"].dtype == np.float32 and p1["fc1.weight"].shape == (64, 64)


@pytest.mark.parametrize("precision", ["fp32", "fp16"])
def test_set_parameters(precision, digits):
    s = otter.TrainingSession(MLP, device="cpu", precision=precision, optimizer={"type": "sgd", "lr": 0.1})
    rng = np.random.default_rng(0)
    new = {k: rng.standard_normal(v.shape).astype(np.float32) * 0.1 for k, v in s.parameters().items()}
    s.set_parameters(new)
    for k, v in s.parameters().items():
        assert np.array_equal(v, new[k])
    if precision == "fp16":
        # The half copies the micro-step reads follow, rounded as numpy rounds to float16.
        halves = {k: v for k, v in s.state().items() if v.dtype == np.float16}
        assert halves, "fp16 training keeps half copies of the weights"
        for name, h in halves.items():
            master = next(p for p in new if name.startswith(p + "."))
            assert np.array_equal(h, new[master].astype(np.float16)), name
    # A session given the parameters of another trains on from them as that one does (plain SGD
    # keeps no other state).
    t = otter.TrainingSession(MLP, device="cpu", precision=precision, optimizer={"type": "sgd", "lr": 0.1})
    t.set_parameters(s.parameters())
    feeds = batch(digits, 0, s.global_batch)
    assert s.step(feeds)["loss"] == t.step(feeds)["loss"]
    for k, v in s.parameters().items():
        assert np.array_equal(v, t.parameters()[k])


def test_set_parameters_errors():
    s = otter.TrainingSession(MLP, device="cpu")
    before = s.parameters()
    w = before["fc1.weight"]
    with pytest.raises(otter.Error, match="'fc9.weight' is not a trained parameter"):
        s.set_parameters({"fc1.weight": w * 2, "fc9.weight": w})
    with pytest.raises(otter.Error, match=r"'fc1.weight' is f32\[64,63\], the parameter is f32\[64,64\]"):
        s.set_parameters({"fc1.weight": w[:, :63].copy()})
    with pytest.raises(otter.Error, match=r"is f64\[64,64\]"):
        s.set_parameters({"fc1.weight": w.astype(np.float64)})
    for k, v in s.parameters().items():  # nothing changed
        assert np.array_equal(v, before[k])


def test_properties():
    s = otter.TrainingSession(MLP, device="cpu", accum=4, batch_size=8)
    assert (s.batch_size, s.accum, s.global_batch, s.steps_taken) == (8, 4, 32, 0)
    assert s.inputs == {"x": "f32[8,64]", "labels": "i64[8]"}
    assert s.device == "cpu" or s.device.startswith("cpu")
    assert "grad-accumulation{steps=4}" in s.pipeline
