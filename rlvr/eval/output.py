"""An eval result as a table on screen and as JSON on disk."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from rich.table import Table

__all__ = ["eval_table", "write_eval", "eval_path", "ordered_metrics", "json_safe", "METRIC_ORDER"]

METRIC_ORDER = ["accuracy", "greedy_accuracy", "robust_accuracy", "mean_reward", "mean_length"]


def ordered_metrics(result: dict[str, Any]) -> list[str]:
    """The metric keys of an eval result in display order."""
    pass_keys = sorted((k for k in result if k.startswith("pass@")), key=lambda k: int(k[5:]))
    maj_keys = [k for k in result if k.startswith("maj@")]
    return [k for k in METRIC_ORDER[:3] if k in result] + pass_keys + maj_keys + \
        [k for k in METRIC_ORDER[3:] if k in result] + sorted(k for k in result if k.startswith("component/"))


def _label(key: str, result: dict[str, Any]) -> str:
    n = result.get("samples", 1)
    if key == "accuracy":
        return f"accuracy (avg@{n})" if n > 1 else "accuracy (greedy)" if result.get("temperature") == 0 else "accuracy"
    return key.replace("_", " ")


def _fmt(v: float) -> str:
    return "nan" if isinstance(v, float) and math.isnan(v) else f"{v:.3f}" if abs(v) < 1000 else f"{v:.0f}"


def eval_table(result: dict[str, Any], title: str | None = None) -> Table:
    """One row per metric with its 95% bootstrap interval over prompts."""
    t = Table(title=title or f"{result.get('task', 'eval')}: {result['num_examples']} prompts x "
                              f"{result['samples']} samples, T={result['temperature']:g}")
    t.add_column("metric")
    t.add_column("value", justify="right")
    t.add_column("95% CI (bootstrap over prompts)", justify="right")
    ci = result.get("ci95", {})
    for key in ordered_metrics(result):
        lo_hi = ci.get(key)
        t.add_row(_label(key, result), _fmt(result[key]),
                  f"[{_fmt(lo_hi[0])}, {_fmt(lo_hi[1])}]" if lo_hi else "")
    return t


def write_eval(result: dict[str, Any], path: str | Path) -> Path:
    """Write the whole result (per-prompt records included) as JSON; NaN becomes null."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    result = json_safe(result)
    records = result.pop("per_prompt", None)
    text = json.dumps(result, indent=1)
    if records is not None:  # one line per prompt: readable and diffable, not one line per sample
        text = text[:-2] + ',\n "per_prompt": [\n  ' + ",\n  ".join(json.dumps(r) for r in records) + "\n ]\n}"
    path.write_text(text + "\n")
    return path


def json_safe(v: Any) -> Any:
    """``v`` with non-finite floats as None (strict JSON)."""
    if isinstance(v, float) and not math.isfinite(v):
        return None
    if isinstance(v, dict):
        return {k: json_safe(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [json_safe(x) for x in v]
    return v


def eval_path(run_dir: str | Path, step: int) -> Path:
    """Where a run keeps the full eval result at ``step`` (0: before RL)."""
    return Path(run_dir) / "eval" / f"step_{step:06d}.json"


PROTOCOL_KEYS = ("task", "split", "num_examples", "samples", "temperature", "top_p", "max_new_tokens",
                 "chat_template", "verifiers", "task_config")


def protocol_differences(a: dict[str, Any], b: dict[str, Any]) -> list[str]:
    """How two eval results' protocols differ (``key: A vs B``), the seed left out; empty when they were made
    the same way (a result without a protocol differs in everything it cannot show)."""
    pa, pb = a.get("protocol") or {}, b.get("protocol") or {}
    return [f"{k}: {pa.get(k)!r} vs {pb.get(k)!r}" for k in PROTOCOL_KEYS if pa.get(k) != pb.get(k)]


def _is_rate(key: str) -> bool:
    """A share of prompts (accuracy, pass@k, maj@n): printed in percent; anything else as it is."""
    return key in ("accuracy", "greedy_accuracy", "robust_accuracy") or key.startswith(("pass@", "maj@", "avg@"))


def export_table(rows: list[tuple[str, dict[str, Any]]], fmt: str = "markdown",
                 metrics: list[str] | None = None, digits: int = 1) -> str:
    """Results side by side as a table a paper can use: one row per ``(name, eval result)``, one column per
    metric with its 95% interval, rates in percent (``fmt``: ``markdown``, ``latex`` or ``csv``)."""
    if fmt not in ("markdown", "latex", "csv"):
        raise ValueError(f"table format {fmt!r}: use markdown, latex or csv")
    keys = metrics or ordered_metrics(rows[0][1])

    def cell(res: dict[str, Any], k: str) -> str:
        if k not in res or not isinstance(res[k], (int, float)):
            return ""
        scale = 100 if _is_rate(k) else 1
        v, ci = scale * res[k], [scale * x for x in (res.get("ci95") or {}).get(k) or ()] or None
        d = digits if scale == 100 else digits + 2
        if fmt == "csv":
            return f"{v:.{d}f}" + (f",{ci[0]:.{d}f},{ci[1]:.{d}f}" if ci else ",,")
        return f"{v:.{d}f}" + (f" [{ci[0]:.{d}f}, {ci[1]:.{d}f}]" if ci else "")

    if fmt == "csv":
        head = ",".join(["name"] + [f"{k},{k} lo,{k} hi" for k in keys])
        return "\n".join([head] + [",".join([name] + [cell(r, k) for k in keys]) for name, r in rows]) + "\n"
    if fmt == "latex":
        lines = ["\\begin{tabular}{l" + "r" * len(keys) + "}", "\\toprule",
                 " & ".join(["method"] + [k.replace("_", "\\_") for k in keys]) + " \\\\", "\\midrule"]
        lines += [" & ".join([name.replace("_", "\\_")] + [cell(r, k) for k in keys]) + " \\\\" for name, r in rows]
        return "\n".join(lines + ["\\bottomrule", "\\end{tabular}"]) + "\n"
    lines = ["| " + " | ".join(["method"] + keys) + " |", "|" + "---|" * (len(keys) + 1)]
    lines += ["| " + " | ".join([name] + [cell(r, k) for k in keys]) + " |" for name, r in rows]
    return "\n".join(lines) + "\n"
