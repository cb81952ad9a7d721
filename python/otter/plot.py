"""Training curves from an otter step log, as one figure.

    python3 -m otter.plot LOG.jsonl [-o curve.png] [--title TEXT] [--smooth N]

LOG.jsonl is `otter-train train --log-json FILE` output (one JSON object per optimizer step: step,
loss, lr, loss_scale, skipped, ...) or a log a Python loop wrote in the same form. Records with
keys that start with "eval_" (eval_loss, eval_accuracy) are evaluation points at their step. The
figure has four panels: training loss (each step, and a moving average) with evaluation loss;
evaluation accuracy (or throughput when the log has none); learning rate; loss scale, with the
skipped steps (non-finite gradients) marked on it and on the loss panel.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from typing import Any


def read_log(path: str) -> list[dict[str, Any]]:
    """The records of a JSON-lines log, in order; fails naming the line that is not JSON."""
    records = []
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            line = line.strip()
            if not line:
                continue
            try:
                rec = json.loads(line)
            except json.JSONDecodeError as e:
                raise ValueError(f"{path}:{number}: not a JSON object ({e.msg})") from None
            if not isinstance(rec, dict):
                raise ValueError(f"{path}:{number}: not a JSON object")
            records.append(rec)
    if not records:
        raise ValueError(f"{path}: no records")
    return records


def series(records: list[dict[str, Any]], key: str) -> tuple[list[float], list[float]]:
    """(steps, values) of the records that have a numeric `key` (nulls, written for inf/nan, skipped)."""
    xs, ys = [], []
    for i, r in enumerate(records):
        v = r.get(key)
        if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v):
            xs.append(r.get("step", i + 1))
            ys.append(float(v))
    return xs, ys


def moving_average(ys: list[float], n: int) -> list[float]:
    out, total = [], 0.0
    for i, y in enumerate(ys):
        total += y
        if i >= n:
            total -= ys[i - n]
        out.append(total / min(i + 1, n))
    return out


def draw(records: list[dict[str, Any]], out: str, title: str = "", smooth: int = 0) -> None:
    """Draws the four panels into `out` (any format matplotlib writes: .png, .svg, .pdf)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    train = [r for r in records if "loss" in r]
    evals = [r for r in records if any(k.startswith("eval_") for k in r)]
    skipped = [r.get("step", 0) for r in train if r.get("skipped")]
    fig, axes = plt.subplots(2, 2, figsize=(11, 7), sharex=True)
    (ax_loss, ax_eval), (ax_lr, ax_scale) = axes

    xs, ys = series(train, "loss")
    n = smooth or max(1, len(ys) // 50)
    ax_loss.plot(xs, ys, color="tab:blue", alpha=0.25, linewidth=0.8, label="loss (each step)")
    ax_loss.plot(xs, moving_average(ys, n), color="tab:blue", linewidth=1.8, label=f"loss (mean of {n})")
    ex, ey = series(evals, "eval_loss")
    if ex:
        ax_loss.plot(ex, ey, "o-", color="tab:orange", markersize=4, label="eval loss")
    for s in skipped:
        ax_loss.axvline(s, color="tab:red", alpha=0.3, linewidth=0.8)
    if ys and min(ys + ey) > 0 and max(ys + ey) / min(ys + ey) > 50:
        ax_loss.set_yscale("log")
    ax_loss.set_title("loss")
    ax_loss.legend(loc="upper right", fontsize=8)

    ax, ay = series(evals, "eval_accuracy")
    if ax:
        ax_eval.plot(ax, [100 * a for a in ay], "o-", color="tab:green", markersize=4)
        ax_eval.set_title(f"eval accuracy (last {100 * ay[-1]:.2f}%)")
        ax_eval.set_ylabel("%")
    else:
        tx, ty = series(train, "samples_per_s")
        ax_eval.plot(tx, ty, color="tab:gray", linewidth=0.8)
        ax_eval.set_title("throughput (samples/s)" if tx else "no evaluation records")

    lx, ly = series(train, "lr")
    ax_lr.plot(lx, ly, color="tab:purple")
    ax_lr.set_title("learning rate")
    ax_lr.ticklabel_format(axis="y", style="sci", scilimits=(-3, 3))

    sx, sy = series(train, "loss_scale")
    ax_scale.plot(sx, sy, color="tab:brown", drawstyle="steps-post")
    if sy and max(sy) > 1:
        ax_scale.set_yscale("log", base=2)
    skipped_y = [y for x, y in zip(sx, sy) if x in set(skipped)]
    if skipped_y:
        ax_scale.plot([x for x in sx if x in set(skipped)], skipped_y, "x", color="tab:red", label="skipped step")
        ax_scale.legend(loc="lower right", fontsize=8)
    scaling = "off" if sy and all(y == 1 for y in sy) else f"{len(skipped)} skipped step(s)"
    ax_scale.set_title(f"loss scale ({scaling})")

    for a in (ax_lr, ax_scale):
        a.set_xlabel("optimizer step")
    for a in axes.flat:
        a.grid(True, alpha=0.3)
    fig.suptitle(title or f"{len(train)} steps")
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python3 -m otter.plot", description="Draw an otter training log.")
    p.add_argument("log", help="a --log-json file (one JSON object per step)")
    p.add_argument("-o", "--out", default="curve.png", help="image to write (default curve.png)")
    p.add_argument("--title", default="", help="figure title (default: the step count)")
    p.add_argument("--smooth", type=int, default=0, help="moving-average window (default: steps/50)")
    a = p.parse_args(argv)
    try:
        draw(read_log(a.log), a.out, a.title or a.log, a.smooth)
    except (OSError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    print(f"wrote {a.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
