# python3 -m otter.plot over an otter-train --log-json file (fp16, so the loss scale is drawn):
# writes a PNG of the expected size; a broken log fails with the line it cannot read.
import struct
import subprocess
import sys

from conftest import MLP, TEST, TRAIN, otter_train


def run_plot(*args):
    return subprocess.run([sys.executable, "-m", "otter.plot", *map(str, args)], capture_output=True, text=True)


def test_plot_of_an_otter_train_log(tmp_path):
    log = tmp_path / "log.jsonl"
    otter_train("train", MLP, "--data", TRAIN, "--eval-data", TEST, "--precision", "fp16", "--accum", 2,
                "--batch-size", 16, "--steps", 60, "--device", "cpu", "--log-json", log)
    png = tmp_path / "curve.png"
    r = run_plot(log, "-o", png, "--title", "digits MLP, fp16")
    assert r.returncode == 0, r.stderr
    data = png.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = struct.unpack(">II", data[16:24])
    assert (width, height) == (1210, 770)


def test_plot_of_a_log_with_eval_records(tmp_path):
    log = tmp_path / "log.jsonl"
    lines = [f'{{"step": {i}, "loss": {2.0 / i}, "lr": 0.01, "loss_scale": 1, "skipped": false}}' for i in range(1, 30)]
    lines.insert(10, '{"step": 10, "eval_loss": 0.5, "eval_accuracy": 0.9}')
    log.write_text("\n".join(lines) + "\n")
    r = run_plot(log, "-o", tmp_path / "c.png")
    assert r.returncode == 0 and (tmp_path / "c.png").stat().st_size > 10000, r.stderr


def test_bad_logs(tmp_path):
    log = tmp_path / "bad.jsonl"
    log.write_text('{"step": 1, "loss": 2}\nnot json\n')
    r = run_plot(log, "-o", tmp_path / "c.png")
    assert r.returncode == 1 and f"{log}:2: not a JSON object" in r.stderr
    r = run_plot(tmp_path / "missing.jsonl")
    assert r.returncode == 1 and "missing.jsonl" in r.stderr
