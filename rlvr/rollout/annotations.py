"""What a model is asked for NudgeRL's strategy hints and SCOPE-RL's scaffolds, and how its reply is read: used
during a run (``rollout.contexts.model``, ``rollout.scaffold.model``: :class:`ModelAnnotations`) and offline
(``rlvr data annotate``, :mod:`rlvr.datapipe.annotate`).

- ``hints``: ``n`` short, different strategy hints that do not give the answer; the reply's numbered or
  bulleted lines (else its non-empty lines) are the hints, the first ``n`` kept. A hint that states the gold
  answer (as a whole word, case-folded) is dropped: it would leak it.
- ``scaffold``: a JSON list of ``{"question", "answer"}`` sub-steps; the last JSON list in the reply is read,
  items with a non-empty question and an answer kept (a number becomes its text). SCOPE-RL's wrapper still leaves
  out, at use, a sub-question that contains the final answer.

RECONSTRUCTED: the papers' own requests are not published; a ``template`` replaces ours (fields ``{prompt}``,
``{answer}``, ``{n}``).
"""

from __future__ import annotations

import json
import re
import string
from typing import Annotated, Any, Callable, Sequence

from pydantic import AfterValidator

from rlvr.core.types import Example
from rlvr.models.prompts import prompt_text

__all__ = ["KINDS", "HINTS_TEMPLATE", "SCAFFOLD_TEMPLATE", "parse_hints", "parse_scaffold", "check_template",
           "ModelAnnotations", "ModelSettings", "ask_annotations", "check_model"]


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


def check_template(template: str) -> None:
    """Raise ``ValueError`` unless ``template`` uses {prompt} and only {prompt}, {answer} and {n}."""
    try:
        names = {name for _, name, _, _ in string.Formatter().parse(template) if name is not None}
    except ValueError as e:
        raise ValueError(f"the annotation template is malformed: {e} (write a literal brace as {{{{ or }}}})") from None
    unknown = names - {"prompt", "answer", "n"}
    if unknown or "prompt" not in names:
        raise ValueError(f"the annotation template may use {{prompt}}, {{answer}} and {{n}} and must use {{prompt}}; "
                         f"it has {sorted(names)}")


def check_model(params: dict[str, Any] | None) -> dict[str, Any] | None:
    """A config's ``model:`` params, validated now (the fields of :class:`rlvr.models.ask.ModelParams`)."""
    if params is not None:
        from rlvr.models.ask import ModelParams

        ModelParams.model_validate(params)
    return params


def ask_annotations(client: Any, kind: str, items: Sequence[tuple[Any, str]], n: int, template: str | None = None
                    ) -> list[tuple[Any, str | None]]:
    """``(annotation, None)`` or ``(None, why)`` for each ``(prompt, gold answer)`` of ``items``, asked of ``client``
    (a :class:`rlvr.models.ask.ModelClient`) in one call and read by ``kind``'s parser."""
    template, parser = template or KINDS[kind][0], KINDS[kind][1]
    requests = [template.format(prompt=prompt_text(prompt), answer=answer, n=n) for prompt, answer in items]
    out: list[tuple[Any, str | None]] = []
    for (_, answer), (reply, why) in zip(items, client.ask(requests)):
        if reply is not None:
            try:
                out.append((parser(reply, n, answer), None))
                continue
            except ValueError as e:
                why = str(e)
        out.append((None, str(why)))
    return out


ModelSettings = Annotated[dict[str, Any] | None, AfterValidator(check_model)]  # a config's model: field, checked


class ModelAnnotations:
    """Hints or scaffolds asked of a model during a run, once per example: :meth:`ensure` asks for the examples
    not asked yet (one call, the model's deadline and cache), :meth:`get` returns what was written (None: the
    reply failed, and the example keeps what it would have had without a model). Checkpoint state: what was
    written, so a resumed run uses the same hints without asking again."""

    def __init__(self, kind: str, model: dict[str, Any], n: int, template: str | None = None):
        from rlvr.models.ask import ModelClient, ModelParams

        self.kind, self.n, self.template = kind, n, template or KINDS[kind][0]
        check_template(self.template)
        self.client = ModelClient(ModelParams.model_validate(model), f"rlvr-{kind}")
        self.written: dict[str, Any] = {}  # example id -> the parsed annotation, or None when it failed
        self.failures: dict[str, str] = {}  # example id -> why (this process)

    def ensure(self, examples: Sequence[Example]) -> None:
        todo = list({e.id: e for e in examples if e.id not in self.written}.values())
        if not todo:
            return
        got = ask_annotations(self.client, self.kind, [(e.prompt, str(e.answer or "")) for e in todo], self.n,
                              self.template)
        for ex, (value, why) in zip(todo, got):
            self.written[ex.id] = value
            if value is None:
                self.failures[ex.id] = str(why)

    def get(self, example_id: str) -> Any:
        return self.written.get(example_id)

    def metrics(self) -> dict[str, float]:
        done = len(self.written)
        return {f"{self.kind}/written": float(sum(v is not None for v in self.written.values())),
                f"{self.kind}/failed": float(done - sum(v is not None for v in self.written.values()))} if done else {}

    def state_dict(self) -> dict[str, Any]:
        return {"written": dict(self.written)}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.written = dict(state.get("written", {}))

    def close(self) -> None:
        self.client.close()
