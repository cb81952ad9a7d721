# Type stubs of the otter package (the classes and functions live in the extension otter._otter).
from os import PathLike
from typing import Any, Literal, Mapping, Sequence, TypedDict

import numpy as np
import numpy.typing as npt

__version__: str
__all__ = ["Error", "Graph", "TrainingSession", "list_passes", "run_passes", "__version__"]

class Error(ValueError):
    """An otter error: a bad feed, option, model, pipeline or checkpoint; the message names it."""

# Typing helpers (names with a leading underscore exist only in this stub).

class _StepResult(TypedDict):
    loss: float
    lr: float
    loss_scale: float
    skipped: bool
    step: int

class _EvalResult(TypedDict, total=False):
    loss: float
    accuracy: float
    samples: int

class _LoaderPosition(TypedDict):
    epoch: int
    position: int
    step: int

class _OptimizerOptions(TypedDict, total=False):
    type: Literal["sgd", "momentum", "adam", "adamw"]
    lr: float
    beta1: float
    beta2: float
    eps: float
    weight_decay: float
    momentum: float
    nesterov: bool
    clip_norm: float
    schedule: Literal["constant", "linear-warmup", "cosine"]
    warmup: int
    total: int
    min_lr: float

_Feeds = Mapping[str, npt.ArrayLike]

class TrainingSession:
    """Trains an ONNX model with the options of `otter-train train`; None keeps the C++ default."""

    def __init__(
        self,
        model_path: str,
        *,
        loss: str | None = ...,
        output: str | None = ...,
        labels: str | None = ...,
        precision: Literal["fp32", "fp16", "bf16"] | None = ...,
        loss_scale: Literal["dynamic", "off"] | float | None = ...,
        init_scale: float | None = ...,
        scale_interval: int | None = ...,
        accum: int | None = ...,
        optimizer: Literal["sgd", "momentum", "adam", "adamw"] | _OptimizerOptions | None = ...,
        freeze: str | Sequence[str] | None = ...,
        recompute: Literal["none", "cheap", "layers"] | Mapping[str, str | int] | None = ...,
        batchnorm: Literal["train", "frozen"] | None = ...,
        batch_size: int | None = ...,
        eval_batch_size: int | None = ...,
        seed: int | None = ...,
        device: Literal["auto", "cpu", "cuda"] | None = ...,
    ) -> None: ...
    def step(self, feeds: _Feeds) -> _StepResult: ...
    def micro_step(self, feeds: _Feeds) -> None: ...
    def apply(self) -> _StepResult: ...
    def evaluate(self, feeds: _Feeds) -> _EvalResult: ...
    def save(self, dir: str, epoch: int = 0, position: int = 0) -> None: ...
    def load(self, dir: str) -> _LoaderPosition: ...
    def export(self, path: str) -> None: ...
    def parameters(self) -> dict[str, np.ndarray]:
        """Copies of the trained parameters (not views)."""
    def state(self) -> dict[str, np.ndarray]: ...
    def set_parameters(self, values: Mapping[str, npt.ArrayLike]) -> None: ...
    @property
    def pipeline(self) -> str: ...
    @property
    def batch_size(self) -> int: ...
    @property
    def accum(self) -> int: ...
    @property
    def global_batch(self) -> int: ...
    @property
    def steps_taken(self) -> int: ...
    @property
    def pending_micro_steps(self) -> int: ...
    @property
    def device(self) -> str: ...
    @property
    def inputs(self) -> dict[str, str]: ...

class Graph:
    """A graph after run_passes(); str() is its text dump."""

    def to_onnx(self) -> bytes: ...
    def stats(self, batch: int = 0) -> dict[str, Any]: ...
    def pass_stats(self) -> list[dict[str, Any]]: ...
    @property
    def pipeline(self) -> str: ...

def run_passes(model: str | PathLike[str] | bytes, pipeline: str, batch: int = 0) -> Graph: ...
def list_passes() -> dict[str, dict[str, Any]]: ...
