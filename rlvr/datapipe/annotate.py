"""Annotations written by a model: NudgeRL's strategy hints and SCOPE-RL's scaffolds, for a dataset file.

NudgeRL (arXiv:2605.15726) samples each problem under a few strategy hints that "an LLM generated offline";
SCOPE-RL puts answer-hidden sub-questions with verifiable sub-answers into the prompts of problems the model
fails. Both read them from each example's meta (``rollout.contexts.source: hints``, ``rollout.scaffold.source:
scaffold``). ``rlvr data annotate`` (and :func:`annotate`) asks a model for them, row by row, and writes the rows
back with the new field:

what is asked and how the reply is read are :mod:`rlvr.rollout.annotations`' (shared with the runs that write
them as they go, ``rollout.contexts.model`` and ``rollout.scaffold.model``).

A row whose reply fails (no reply, nothing usable in it) is written unchanged, without the field, and counted
with its reason in the report: NudgeRL's generic fallback hints, or no scaffold, then apply to it. The model is
any :class:`rlvr.models.ask.client.ModelParams` (an OpenAI-compatible endpoint or a local directory), with
its cache, retries and budget; ``cache_path`` (by default beside the output) keeps every reply, so a rerun after
a crash asks again only what had not arrived. RECONSTRUCTED: the papers' own prompts are not published; the
``template`` replaces ours (fields ``{prompt}``, ``{answer}``, ``{n}``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

from rlvr.rollout.annotations import KINDS, ask_annotations, check_template, parse_hints, parse_scaffold

__all__ = ["KINDS", "annotate", "parse_hints", "parse_scaffold", "AnnotateReport"]


@dataclass
class AnnotateReport:
    rows: int = 0
    annotated: int = 0
    kept: int = 0  # rows that already had the field (``overwrite`` off)
    failed: dict[str, int] = field(default_factory=dict)  # reason -> rows
    examples: list[dict[str, Any]] = field(default_factory=list)  # the first failures, with their row number
    stats: dict[str, int] = field(default_factory=dict)  # the model client's counts

    def as_dict(self) -> dict[str, Any]:
        return {"rows": self.rows, "annotated": self.annotated, "kept": self.kept,
                "failed": sum(self.failed.values()), "reasons": self.failed, "examples": self.examples,
                "model": self.stats}


def annotate(rows: Sequence[dict[str, Any]], kind: str, model: dict[str, Any], n: int | None = None,
             field_name: str | None = None, template: str | None = None, prompt_field: str = "prompt",
             answer_field: str = "answer", chunk: int = 64, overwrite: bool = False,
             progress: Callable[[int, int], None] | None = None) -> tuple[list[dict[str, Any]], AnnotateReport]:
    """``rows`` with ``field_name`` (default: ``kind``) written by the model, and the report. ``model``: the
    params of :class:`~rlvr.models.ask.client.ModelParams`; requests go ``chunk`` rows at a time, each
    chunk one call under the model's ``deadline_s``; ``progress(done, total)`` after each chunk."""
    from rlvr.models.ask.client import ModelClient, ModelParams

    if kind not in KINDS:
        raise ValueError(f"unknown annotation {kind!r}: choose {', '.join(KINDS)}")
    default_template, _, default_n = KINDS[kind]
    n = default_n if n is None else n
    template = template or default_template
    check_template(template)
    name = field_name or kind
    client = ModelClient(ModelParams.model_validate({"deadline_s": 600.0, "request_timeout_s": 120.0,
                                                     "max_tokens": 512, **model}), "rlvr-annotate")
    out = [dict(r) for r in rows]
    report = AnnotateReport(rows=len(out))
    todo = []
    for i, r in enumerate(out):
        if prompt_field not in r:
            raise ValueError(f"row {i + 1} has no {prompt_field!r} field")
        if name in r and not overwrite:
            report.kept += 1
        else:
            todo.append(i)
    try:
        for start in range(0, len(todo), chunk):
            part = todo[start:start + chunk]
            items = [(out[i][prompt_field], str(out[i].get(answer_field, ""))) for i in part]
            for i, (value, why) in zip(part, ask_annotations(client, kind, items, n, template)):
                if value is not None:
                    out[i][name] = value
                    report.annotated += 1
                    continue
                reason = str(why).split(" (")[0][:120]
                report.failed[reason] = report.failed.get(reason, 0) + 1
                if len(report.examples) < 5:
                    report.examples.append({"row": i + 1, "reason": str(why)[:300]})
            if progress is not None:
                progress(min(start + chunk, len(todo)), len(todo))
    finally:
        client.close()
        report.stats = dict(client.stats)
    return out, report
