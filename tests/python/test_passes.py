# otter.run_passes, Graph and list_passes against otter-opt: the same text dump, statistics and
# pass list; ONNX bytes in and out; pipeline errors raise otter.Error.
import json
import subprocess

import onnx
import pytest

import otter
from conftest import MLP, OTTER_OPT, SOURCE


def otter_opt(*args):
    r = subprocess.run([OTTER_OPT, *map(str, args)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    return r


def test_text_dump_equals_otter_opt():
    g = otter.run_passes(MLP, "default-train")
    assert str(g) == otter_opt(MLP, "--passes", "default-train").stdout
    assert g.pipeline == otter_opt("--passes", "default-train", "--print-pipeline").stdout.strip()
    assert repr(g).startswith("<otter.Graph ")


def test_stats_equal_otter_opt():
    g = otter.run_passes(MLP, "default-train", batch=32)
    cli = json.loads(otter_opt(MLP, "--passes", "default-train", "--batch", 32, "--stats", "--format", "json").stderr)
    assert g.stats() == cli["graph"]
    assert g.stats()["parameters"]["elements"] == 4810  # 64*64+64 + 64*10+10
    unpinned = otter.run_passes(MLP, "default-train")
    assert unpinned.stats()["unbound"] == ["N"] and unpinned.stats(batch=32)["flops"] == cli["graph"]["flops"]
    passes = g.pass_stats()
    assert [p["pass"] for p in passes] == [p["pass"] for p in cli["passes"]]


def test_bytes_in_and_onnx_out(tmp_path):
    with open(MLP, "rb") as f:
        model = f.read()
    a = otter.run_passes(model, "canonicalize")
    b = otter.run_passes(MLP, "canonicalize")
    assert str(a) == str(b)
    out = a.to_onnx()
    assert isinstance(out, bytes)
    m = onnx.load_from_string(out)  # an independent reader of the bytes
    onnx.checker.check_model(m)
    assert [i.name for i in m.graph.input] == ["x"]
    assert str(otter.run_passes(out, "canonicalize")) == str(a)
    training = otter.run_passes(MLP, "default-train", batch=32).to_onnx()
    assert "ai.otter" in {o.domain for o in onnx.load_from_string(training).opset_import}


def test_list_passes_equals_otter_opt():
    passes = otter.list_passes()
    text = otter_opt("--list-passes").stdout
    names = [line.split(":")[0] for line in text.splitlines() if line and not line.startswith(" ")]
    assert sorted(passes) == sorted(names)
    assert passes["default-train"]["pipeline"].startswith("batchnorm-mode,canonicalize,")
    opt = {o["name"]: o for o in passes["optimizer"]["options"]}
    assert opt["type"]["choices"] == ["sgd", "momentum", "adam", "adamw"]


def test_errors():
    with pytest.raises(otter.Error, match="no-such-pass"):
        otter.run_passes(MLP, "canonicalize,no-such-pass")
    with pytest.raises(otter.Error, match="missing.onnx"):
        otter.run_passes(str(SOURCE / "missing.onnx"), "canonicalize")
    with pytest.raises(otter.Error):
        otter.run_passes(b"not a model", "canonicalize")
    with pytest.raises(otter.Error, match="batch must be positive"):
        otter.run_passes(MLP, "canonicalize", batch=-1)
