#!/usr/bin/python3
"""Per-step overhead of the Python API over the C++ session, side by side on one session.

    PYTHONPATH=build/python OMP_NUM_THREADS=1 /usr/bin/python3 models/bench/python_overhead.py \
        [--model models/digits/mlp.onnx] [--batch-size 64] [--steps 2000] [--rounds 7]

Both loops drive the same otter.TrainingSession on the same feeds (C-contiguous numpy arrays of
the input dtypes, so Python feeds them without copying): `session.step(feeds)` called from Python,
and the same train_step looped in C++ (`session._time_steps`). Rounds alternate between the two
and the medians (and the best rounds) are compared; times are the thread's CPU time (both loops run
on the calling thread with OMP_NUM_THREADS=1), which other processes on a shared machine disturb
less than wall time; the difference per step is what the Python layer costs (converting
the feed dict, checking it, releasing the GIL, building the result dict).
"""

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
try:
    import otter
except ImportError:
    sys.path.insert(0, str(ROOT / "build/python"))
    import otter


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default=str(ROOT / "models/digits/mlp.onnx"))
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--steps", type=int, default=2000)
    p.add_argument("--rounds", type=int, default=7)
    a = p.parse_args()
    s = otter.TrainingSession(a.model, batch_size=a.batch_size, device="cpu", optimizer={"type": "sgd", "lr": 1e-3})
    rng = np.random.default_rng(0)
    feeds = {}
    for name, t in s.inputs.items():
        shape = [int(d) for d in t[t.index("[") + 1:-1].split(",") if d]
        if t.startswith("i64"):
            feeds[name] = rng.integers(0, 10, size=shape, dtype=np.int64)
        else:
            feeds[name] = rng.standard_normal(shape).astype(np.float32)
    for _ in range(200):  # warm-up
        s.step(feeds)
    py_times, cpp_times = [], []
    for _ in range(a.rounds):
        t0 = time.thread_time()
        for _ in range(a.steps):
            s.step(feeds)
        py_times.append((time.thread_time() - t0) / a.steps)
        cpp_times.append(s._time_steps(feeds, a.steps) / a.steps)
    print(f"model {Path(a.model).name}, batch {a.batch_size}, {a.steps} steps x {a.rounds} rounds (thread CPU time)")
    print("                             median us/step   best round us/step")
    rows = [("C++ loop (train_step)", cpp_times), ("Python loop (step(feeds))", py_times)]
    for label, times in rows:
        print(f"  {label:26s} {statistics.median(times) * 1e6:10.2f} {min(times) * 1e6:16.2f}")
    med = (statistics.median(py_times) - statistics.median(cpp_times)) * 1e6
    best = (min(py_times) - min(cpp_times)) * 1e6
    print(f"  {'Python overhead':26s} {med:10.2f} {best:16.2f}")


if __name__ == "__main__":
    main()
