"""What a judge is asked and how its reply becomes a score.

The request is ``template`` (``str.format`` fields: ``{prompt}``, ``{completion}``, ``{answer}``, ``{rubric}``)
rendered with the example: ``{prompt}`` is the prompt's text (a conversation's messages as ``role: content``
lines), ``{answer}`` the reference answer, ``{rubric}`` the example's ``meta["rubric"]`` when it has one, else
the verifier's ``rubric``. Text put into a field is never itself parsed for fields: braces in a completion are
just text.

The reply's score, in this order (the first rule that finds one decides; within a rule the *last* match counts,
as a judge that reasons first states its verdict last):

1. ``score_pattern`` when set: a regular expression whose first group is the score.
2. ``parse: number`` (the default):
   a JSON object with a ``"score"`` (or ``"rating"``) key; ``[[7]]`` or ``[7]``; ``score: 7`` / ``rating = 7.5``
   (any case, ``:`` ``=`` or ``is``); ``7/10`` or ``7 out of 10``; a reply that is a number and nothing else.
3. ``parse: verdict``: the last of yes / no, pass / fail, correct / incorrect, true / false, as 1 or 0 (so
   ``scale`` is ``[0, 1]``).

The reward is the score mapped from ``scale = [lo, hi]`` onto [0, 1] (a score outside the scale is clipped and
says so in ``info``); ``correct`` is ``reward >= threshold``. A reply with no score is an error of the judge, not
a 0 the completion earned: it is counted as one (``score/errors``) and the scoring policy decides.
"""

from __future__ import annotations

import json
import re
import string
from typing import Any

from rlvr.core.types import Example
from rlvr.models.prompts import prompt_text

__all__ = ["FIELDS", "template_fields", "render", "parse_score", "UnparsableReply"]

FIELDS = ("prompt", "completion", "answer", "rubric")


class UnparsableReply(ValueError):
    """The judge's reply holds no score."""


def template_fields(template: str) -> list[str]:
    """The field names ``template`` uses; raises ``ValueError`` for a malformed template or an unknown field."""
    names = []
    for _, name, spec, conv in string.Formatter().parse(template):
        if name is None:
            continue
        if name not in FIELDS or spec or conv:
            raise ValueError(f"template field {{{name}{'!' + conv if conv else ''}{':' + spec if spec else ''}}} is "
                             f"not one of {', '.join('{' + f + '}' for f in FIELDS)} (write a literal brace as "
                             "{{ or }})")
        names.append(name)
    return names


def render(template: str, example: Example, completion: str, rubric: str) -> str:
    meta_rubric = example.meta.get("rubric") if isinstance(example.meta, dict) else None
    values = {"prompt": prompt_text(example.prompt), "completion": completion,
              "answer": "" if example.answer is None else str(example.answer),
              "rubric": str(meta_rubric) if meta_rubric else rubric}
    return template.format_map(values)


_NUM = r"[-+]?(?:\d+(?:\.\d*)?|\.\d+)"
_RULES = [
    re.compile(r"\[\[\s*(" + _NUM + r")\s*\]\]"),
    re.compile(r"\b(?:score|rating|grade)\s*(?:[:=]|is)\s*\**\s*(" + _NUM + r")", re.I),
    re.compile(r"(" + _NUM + r")\s*(?:/|out\s+of)\s*" + _NUM, re.I),
    re.compile(r"(?<![\w.])\[\s*(" + _NUM + r")\s*\](?!\w)"),
]
_ONLY_NUM = re.compile(r"^\s*\**\s*(" + _NUM + r")\s*\**\s*\.?\s*$")
_VERDICT = re.compile(r"\b(yes|no|pass|fail|failed|passed|correct|incorrect|true|false)\b", re.I)
_POSITIVE = {"yes", "pass", "passed", "correct", "true"}


def _json_score(reply: str) -> float | None:
    """The ``score`` (or ``rating``) of the last JSON object in ``reply`` that has one."""
    found = None
    for m in re.finditer(r"\{", reply):
        try:
            obj, _ = json.JSONDecoder().raw_decode(reply[m.start():])
        except ValueError:
            continue
        if isinstance(obj, dict):
            for key in ("score", "rating"):
                v = obj.get(key)
                if isinstance(v, (int, float)) and not isinstance(v, bool):
                    found = float(v)
                    break
                if isinstance(v, str):
                    try:
                        found = float(v)
                        break
                    except ValueError:
                        pass
    return found


def parse_score(reply: str, parse: str = "number", pattern: re.Pattern | None = None) -> float:
    """The score in ``reply`` (see the module docstring); raises :class:`UnparsableReply` when there is none."""
    if pattern is not None:
        hits = list(pattern.finditer(reply))
        for m in reversed(hits):
            try:
                return float(m.group(1))
            except (TypeError, ValueError):
                continue
        raise UnparsableReply(f"no match of score_pattern {pattern.pattern!r}")
    if parse == "verdict":
        hits = _VERDICT.findall(reply)
        if not hits:
            raise UnparsableReply("no verdict (yes/no, pass/fail, correct/incorrect, true/false)")
        return 1.0 if hits[-1].lower() in _POSITIVE else 0.0
    got = _json_score(reply)
    if got is not None:
        return got
    for rule in _RULES:
        hits = rule.findall(reply)
        if hits:
            return float(hits[-1])
    m = _ONLY_NUM.match(reply)
    if m:
        return float(m.group(1))
    raise UnparsableReply("no score ('[[7]]', 'Score: 7', '7/10', a JSON score or a bare number)")
