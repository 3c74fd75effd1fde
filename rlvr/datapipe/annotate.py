"""Annotations written by a model: NudgeRL's strategy hints and SCOPE-RL's scaffolds, for a dataset file.

NudgeRL (arXiv:2605.15726) samples each problem under a few strategy hints that "an LLM generated offline";
SCOPE-RL puts answer-hidden sub-questions with verifiable sub-answers into the prompts of problems the model
fails. Both read them from each example's meta (``rollout.contexts.source: hints``, ``rollout.scaffold.source:
scaffold``). ``rlvr data annotate`` (and :func:`annotate`) asks a model for them, row by row, and writes the rows
back with the new field:

- ``hints``: the model is asked for ``n`` short, different strategy hints that do not give the answer; the reply's
  numbered or bulleted lines (else its non-empty lines) are the hints, the first ``n`` kept. A hint that states
  the gold answer (as a whole word, case-folded) is dropped: it would leak it.
- ``scaffold``: the model is asked for a JSON list of ``{"question", "answer"}`` sub-steps; the last JSON list in
  the reply is read, items with a non-empty question and an answer kept (a number becomes its text). SCOPE-RL's
  wrapper still leaves out, at use, a sub-question that contains the final answer.

A row whose reply fails (no reply, nothing usable in it) is written unchanged, without the field, and counted
with its reason in the report: NudgeRL's generic fallback hints, or no scaffold, then apply to it. The model is
any :class:`rlvr.verifiers.judge.client.ModelParams` (an OpenAI-compatible endpoint or a local directory), with
its cache, retries and budget; ``cache_path`` (by default beside the output) keeps every reply, so a rerun after
a crash asks again only what had not arrived. RECONSTRUCTED: the papers' own prompts are not published; the
``template`` replaces ours (fields ``{prompt}``, ``{answer}``, ``{n}``).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

__all__ = ["KINDS", "annotate", "parse_hints", "parse_scaffold", "AnnotateReport"]

HINTS_TEMPLATE = """Write {n} short, different strategy hints for solving the problem below: each one a way to \
start or a method to try, in one sentence. Do not solve the problem and do not state its answer.

Problem:
{prompt}

Reply with the {n} hints only, one per line, numbered 1., 2., ..."""

SCAFFOLD_TEMPLATE = """Break the problem below into 2 to 4 sub-questions that lead to its solution, each with a \
short answer that can be checked (a number or a few words). No sub-question may contain the final answer.

Problem:
{prompt}

Final answer (for you only; do not put it in a sub-question):
{answer}

Reply with a JSON list only: [{{"question": "...", "answer": "..."}}, ...]"""

_ITEM = re.compile(r"^\s*(?:\(?\d{1,2}[.):]|[-*\u2022])\s+(.*\S)\s*$")


def _leaks(text: str, answer: str) -> bool:
    a = " ".join(str(answer).casefold().split())
    if not a:
        return False
    return re.search(r"(?<![\w.])" + re.escape(a) + r"(?![\w]|\.\d)", " ".join(text.casefold().split())) is not None


def parse_hints(reply: str, n: int, answer: str = "") -> list[str]:
    """The first ``n`` hints of ``reply`` that do not state ``answer``; raises ``ValueError`` when none is left."""
    lines = [ln for ln in reply.splitlines() if ln.strip()]
    items = [m.group(1) for m in map(_ITEM.match, lines) if m]
    hints = [h.strip() for h in (items or [ln.strip() for ln in lines])]
    kept = [h for h in hints if h and not _leaks(h, answer)]
    if not kept:
        raise ValueError("no hint in the reply" if not hints else "every hint states the answer")
    return kept[:n]


def parse_scaffold(reply: str, n: int = 0, answer: str = "") -> list[dict[str, str]]:
    """The sub-steps of the last JSON list in ``reply``; raises ``ValueError`` when there is no usable one."""
    found = None
    for m in re.finditer(r"\[", reply):
        try:
            obj, _ = json.JSONDecoder().raw_decode(reply[m.start():])
        except ValueError:
            continue
        if isinstance(obj, list) and any(isinstance(x, dict) for x in obj):
            found = obj
    if found is None:
        raise ValueError("no JSON list of {question, answer} objects in the reply")
    steps = []
    for item in found:
        if not isinstance(item, dict):
            continue
        q, a = item.get("question"), item.get("answer")
        if isinstance(q, str) and q.strip() and isinstance(a, (str, int, float)) and not isinstance(a, bool) \
                and str(a).strip():
            steps.append({"question": q.strip(), "answer": str(a).strip()})
    if not steps:
        raise ValueError("the JSON list holds no {question, answer} with both filled")
    return steps


KINDS: dict[str, tuple[str, Callable[..., Any], int]] = {  # kind -> (template, parser, default n)
    "hints": (HINTS_TEMPLATE, parse_hints, 2),
    "scaffold": (SCAFFOLD_TEMPLATE, parse_scaffold, 0),
}


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


def _check_template(template: str) -> None:
    import string

    try:
        names = {name for _, name, _, _ in string.Formatter().parse(template) if name is not None}
    except ValueError as e:
        raise ValueError(f"the annotation template is malformed: {e} (write a literal brace as {{{{ or }}}})") from None
    unknown = names - {"prompt", "answer", "n"}
    if unknown or "prompt" not in names:
        raise ValueError(f"the annotation template may use {{prompt}}, {{answer}} and {{n}} and must use {{prompt}}; "
                         f"it has {sorted(names)}")


def _prompt_text(prompt: Any) -> str:
    from rlvr.verifiers.judge.parse import prompt_text

    return prompt_text(prompt)


def annotate(rows: Sequence[dict[str, Any]], kind: str, model: dict[str, Any], n: int | None = None,
             field_name: str | None = None, template: str | None = None, prompt_field: str = "prompt",
             answer_field: str = "answer", chunk: int = 64, overwrite: bool = False,
             progress: Callable[[int, int], None] | None = None) -> tuple[list[dict[str, Any]], AnnotateReport]:
    """``rows`` with ``field_name`` (default: ``kind``) written by the model, and the report. ``model``: the
    params of :class:`~rlvr.verifiers.judge.client.ModelParams`; requests go ``chunk`` rows at a time, each
    chunk one call under the model's ``deadline_s``; ``progress(done, total)`` after each chunk."""
    from rlvr.verifiers.judge.client import ModelClient, ModelParams

    if kind not in KINDS:
        raise ValueError(f"unknown annotation {kind!r}: choose {', '.join(KINDS)}")
    default_template, parser, default_n = KINDS[kind]
    n = default_n if n is None else n
    template = template or default_template
    _check_template(template)
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
            requests = [template.format(prompt=_prompt_text(out[i][prompt_field]),
                                        answer=str(out[i].get(answer_field, "")), n=n) for i in part]
            for i, (reply, why) in zip(part, client.ask(requests)):
                if reply is not None:
                    try:
                        out[i][name] = parser(reply, n, str(out[i].get(answer_field, "")))
                        report.annotated += 1
                        continue
                    except ValueError as e:
                        why = str(e)
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
