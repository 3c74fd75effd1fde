"""The run's PNG plot: reward, held-out accuracy, completion length, KL and entropy over steps.

The KL panel shows KL to the reference model; without one (``kl.coef: 0``) it shows the KL between the
policy before and after each step's updates (``kl_old``), which needs old log-probs (``epochs x minibatches > 1``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

__all__ = ["plot_run", "eval_series", "accuracy_label"]

PANELS = [("reward", "reward"), ("eval/accuracy", "held-out accuracy"), ("completion_length", "completion length"),
          ("kl", "KL to reference"), ("entropy", "entropy")]


def accuracy_label(temperature: float, samples: int) -> str:
    return "greedy" if temperature == 0 else f"avg@{samples}, T={temperature:g}"


def eval_series(metrics: list[dict[str, Any]], before: dict[str, Any] | None, after: dict[str, Any] | None,
                steps: int, label: str) -> dict[str, list[tuple[int, float]]]:
    """Held-out accuracy curves: before RL (step 0), the in-training evals, and after RL (step ``steps``)."""
    series = {}
    for key, name in (("accuracy", label), ("greedy_accuracy", "greedy")):
        pts = {0: before[key]} if before and key in before else {}
        pts.update({m["step"]: m[f"eval/{key}"] for m in metrics if f"eval/{key}" in m})
        if after and key in after:
            pts[steps] = after[key]
        series[name] = sorted(pts.items())
    return series


def plot_run(metrics: list[dict[str, Any]], path: str | Path,
             eval_series: dict[str, list[tuple[int, float]]] | None = None) -> Path:
    """Write a PNG with one panel per metric; ``eval_series`` are labelled held-out accuracy curves."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = list(PANELS)
    if not any(m.get("kl") for m in metrics) and any("kl_old" in m for m in metrics):
        # no reference model (kl.coef = 0): show how far each step moved the policy instead of a flat zero
        panels[3] = ("kl_old", "KL to pre-update policy")
    fig, axes = plt.subplots(1, len(panels), figsize=(4 * len(panels), 3.2))
    for ax, (key, title) in zip(axes, panels):
        if key == "eval/accuracy":
            for label, pts in (eval_series or {}).items():
                if pts:
                    xs, ys = zip(*sorted(pts))
                    ax.plot(xs, ys, marker="o", lw=1.5, label=label)
            ax.set_ylim(0, 1)
            ax.legend(fontsize=8)
        else:
            pts = [(m["step"], m[key]) for m in metrics if isinstance(m.get(key), (int, float))]
            if pts:
                xs, ys = zip(*pts)
                ax.plot(xs, ys, lw=1.5)
        ax.set_title(title)
        ax.set_xlabel("step")
        ax.grid(alpha=0.3)
    fig.tight_layout()
    path = Path(path)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
