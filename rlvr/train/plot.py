"""The run's PNG plot: reward, held-out accuracy, completion length, KL and entropy over steps."""

from __future__ import annotations

from pathlib import Path
from typing import Any

__all__ = ["plot_run"]

PANELS = [("reward", "reward"), ("eval/accuracy", "held-out accuracy"), ("completion_length", "completion length"),
          ("kl", "KL to reference"), ("entropy", "entropy")]


def plot_run(metrics: list[dict[str, Any]], path: str | Path, eval_points: list[tuple[int, float]] = ()) -> Path:
    """Write a PNG with one panel per metric; ``eval_points`` adds held-out accuracy at given steps."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(PANELS), figsize=(4 * len(PANELS), 3.2))
    for ax, (key, title) in zip(axes, PANELS):
        pts = [(m["step"], m[key]) for m in metrics if isinstance(m.get(key), (int, float))]
        if key == "eval/accuracy":
            pts = sorted(set(pts) | set(eval_points))
        if pts:
            xs, ys = zip(*pts)
            ax.plot(xs, ys, marker="o" if key == "eval/accuracy" else None, lw=1.5)
        ax.set_title(title)
        ax.set_xlabel("step")
        ax.grid(alpha=0.3)
    fig.tight_layout()
    path = Path(path)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
