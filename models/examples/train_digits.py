#!/usr/bin/python3
"""Trains the digits MLP (or CNN) from Python with otter's TrainingSession.

    PYTHONPATH=build/python /usr/bin/python3 models/examples/train_digits.py [--model cnn] [--epochs 20]
        [--precision fp16 --accum 4 --batch-size 8] [--log log.jsonl] [--plot curve.png]

A complete loop: the data from models/digits/*.npz, a shuffled pass per epoch with a tqdm progress
bar, evaluation after each epoch, a JSON-lines log in otter-train --log-json's form (plus eval_loss
and eval_accuracy records), and the loss curve drawn with matplotlib (otter.plot) into a PNG.
"""

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np
from tqdm import tqdm

ROOT = Path(__file__).resolve().parents[2]
try:
    import otter
    import otter.plot
except ImportError:  # not installed: the module of the build tree
    sys.path.insert(0, str(ROOT / "build/python"))
    import otter
    import otter.plot


def load(name, image):
    suffix = "_img" if image else ""
    with np.load(ROOT / f"models/digits/{name}{suffix}.npz") as z:
        return {k: z[k] for k in z.files}


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", choices=["mlp", "cnn"], default="mlp")
    p.add_argument("--epochs", type=int, default=20)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--accum", type=int, default=1)
    p.add_argument("--precision", default="fp32", choices=["fp32", "fp16", "bf16"])
    p.add_argument("--lr", type=float, default=0.01)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--log", default="digits_log.jsonl", help="JSON-lines log (otter.plot reads it)")
    p.add_argument("--plot", default="digits_curve.png", help="loss curve PNG")
    p.add_argument("--export", default="", help="write the trained model here (ONNX)")
    a = p.parse_args()

    train, test = load("train", a.model == "cnn"), load("test", a.model == "cnn")
    n = len(train["labels"])
    global_batch = a.batch_size * a.accum
    steps_per_epoch = n // global_batch
    total = a.epochs * steps_per_epoch
    session = otter.TrainingSession(
        str(ROOT / f"models/digits/{a.model}.onnx"), batch_size=a.batch_size, accum=a.accum, precision=a.precision,
        seed=a.seed, optimizer={"type": "adamw", "lr": a.lr, "schedule": "cosine", "total": total})
    print(f"training {a.model} on {n} samples: {total} steps of {global_batch}, device {session.device}")
    rng = np.random.default_rng(a.seed)
    start = time.perf_counter()
    with open(a.log, "w") as log:
        for epoch in range(a.epochs):
            order = rng.permutation(n)
            bar = tqdm(range(steps_per_epoch), desc=f"epoch {epoch + 1}/{a.epochs}", unit="step", leave=False)
            for i in bar:
                rows = order[i * global_batch:(i + 1) * global_batch]
                r = session.step({k: v[rows] for k, v in train.items()})
                log.write(json.dumps({"step": r["step"], "epoch": epoch, "loss": r["loss"], "lr": r["lr"],
                                      "loss_scale": r["loss_scale"], "skipped": r["skipped"]}) + "\n")
                bar.set_postfix(loss=f"{r['loss']:.4f}", refresh=False)
            e = session.evaluate(test)
            log.write(json.dumps({"step": session.steps_taken, "eval_loss": e["loss"],
                                  "eval_accuracy": e["accuracy"]}) + "\n")
            tqdm.write(f"epoch {epoch + 1}/{a.epochs}  eval loss {e['loss']:.4f}  eval accuracy {100 * e['accuracy']:.2f}%")
    print(f"trained {session.steps_taken} steps in {time.perf_counter() - start:.2f} s; "
          f"final eval accuracy {100 * e['accuracy']:.2f}%")
    otter.plot.draw(otter.plot.read_log(a.log), a.plot, f"digits {a.model}, {a.precision}, Python API")
    print(f"wrote {a.log} and {a.plot}")
    if a.export:
        session.export(a.export)
        print(f"wrote {a.export}")


if __name__ == "__main__":
    main()
