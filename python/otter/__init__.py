"""otter: train ONNX models from Python over otter's C++ runtime.

    import numpy as np, otter
    s = otter.TrainingSession("models/digits/mlp.onnx", batch_size=32,
                              optimizer={"type": "adamw", "lr": 0.01})
    r = s.step({"x": x_batch, "labels": y_batch})   # {'loss', 'lr', 'loss_scale', 'skipped', 'step'}

TrainingSession takes the options of `otter-train train`; run_passes() runs any pass pipeline
(as otter-opt does); `python3 -m otter.plot LOG.jsonl -o curve.png` draws a training log.
Errors from otter (a bad feed, option or model) raise otter.Error, a ValueError.
"""

__version__ = "0.1.0"

from ._otter import Error, Graph, TrainingSession, list_passes, run_passes  # noqa: E402

__all__ = ["Error", "Graph", "TrainingSession", "list_passes", "run_passes", "__version__"]
