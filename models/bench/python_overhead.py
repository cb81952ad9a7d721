#!/usr/bin/python3
"""Per-step overhead of the Python API over the C++ session, side by side on one session.

    PYTHONPATH=build/python OMP_NUM_THREADS=1 /usr/bin/python3 models/bench/python_overhead.py \
        [--model models/digits/mlp.onnx] [--batch-size 64] [--steps 2000] [--rounds 7]

Both loops drive the same otter.TrainingSession on the same feeds (C-contiguous numpy arrays of
the input dtypes, so Python feeds them without copying): `session.step(feeds)` called from Python,
and the same train_step looped in C++ (`session._time_steps`). Rounds alternate between the two
and the medians are compared; the difference per step is what the Python layer costs (converting
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
        t0 = time.perf_counter()
        for _ in range(a.steps):
            s.step(feeds)
        py_times.append((time.perf_counter() - t0) / a.steps)
        cpp_times.append(s._time_steps(feeds, a.steps) / a.steps)
    py, cpp = statistics.median(py_times), statistics.median(cpp_times)
    print(f"model {Path(a.model).name}, batch {a.batch_size}, {a.steps} steps x {a.rounds} rounds (medians)")
    print(f"  C++ loop (train_step)      {cpp * 1e6:8.2f} us/step")
    print(f"  Python loop (step(feeds))  {py * 1e6:8.2f} us/step")
    print(f"  Python overhead            {(py - cpp) * 1e6:8.2f} us/step ({100 * (py - cpp) / cpp:.1f}%)")


if __name__ == "__main__":
    main()
