# Shared fixtures of the Python API tests: where the sources and the built tools are, the digits
# data, and otter-train runs to compare against. ctest sets PYTHONPATH (build/python),
# OTTER_BUILD_DIR and OTTER_SOURCE_DIR (python/CMakeLists.txt).
import os
import subprocess
from pathlib import Path

import numpy as np
import pytest

SOURCE = Path(os.environ.get("OTTER_SOURCE_DIR", Path(__file__).resolve().parents[2]))
BUILD = Path(os.environ.get("OTTER_BUILD_DIR", SOURCE / "build"))
MLP = str(SOURCE / "models/digits/mlp.onnx")
CNN = str(SOURCE / "models/digits/cnn.onnx")
TRAIN = str(SOURCE / "models/digits/train.npz")
TEST = str(SOURCE / "models/digits/test.npz")
OTTER_TRAIN = str(BUILD / "tools/otter-train")
OTTER_OPT = str(BUILD / "tools/otter-opt")


def otter_train(*args, check=True):
    """Runs otter-train; returns the CompletedProcess (stdout and stderr as text)."""
    r = subprocess.run([OTTER_TRAIN, *map(str, args)], capture_output=True, text=True)
    if check and r.returncode != 0:
        raise AssertionError(f"otter-train {' '.join(map(str, args))} failed:\n{r.stdout}{r.stderr}")
    return r


def load_npz(path):
    with np.load(path) as z:
        return {k: z[k] for k in z.files}


@pytest.fixture(scope="session")
def digits():
    """The digits training data as otter-train reads it: {'x': f32[1347,64], 'labels': i64[1347]}."""
    return load_npz(TRAIN)


def batch(data, step, global_batch):
    """Rows of optimizer step `step` (0-based) in file order: otter-train --no-shuffle's batches."""
    n = len(data["labels"]) // global_batch  # steps per epoch (the last partial batch is dropped)
    first = (step % n) * global_batch
    return {k: v[first:first + global_batch] for k, v in data.items()}
