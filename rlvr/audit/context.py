"""What a probe generator knows about one example: the gold answer, its bare value, a gold completion that the
verifier rewards, wrong values of the same kind, and a seeded random generator."""

from __future__ import annotations

import json
import random
import re
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from rlvr.core.types import Example
from rlvr.verifiers.numeric import parse_number

__all__ = ["ProbeContext", "core_of", "format_number", "number_of"]

# wrappers peeled off a gold answer to reach its value: \boxed{v}, <answer>v</answer>, <output>v</output>, "Answer: v"
_WRAPPERS = (re.compile(r"^\\boxed\{(.*)\}$", re.S), re.compile(r"^<answer>(.*)</answer>$", re.S),
             re.compile(r"^<output>(.*)</output>$", re.S),
             re.compile(r"^(?:final\s+)?answer\s*[:：]\s*(.*)$", re.S | re.I))
_DIGITS = re.compile(r"(?<![A-Za-z_\d])\d+(?![A-Za-z_\d])")  # a number standing alone, not a label like "h1"
_GSM8K = re.compile(r"(?:^|\n)####\s*([^\n]+?)\s*$")
_TEXT_DISTRACTORS = ("Big Ben", "unknown", "London", "blue whale", "nothing")


def core_of(answer: str) -> str:
    """The bare value of a gold answer: wrappers (``\\boxed{}``, ``<answer>``, ``<output>``, ``Answer:``) and a
    trailing period of a sentence removed, the value after GSM8K's ``####`` taken from a worked solution.
    ``"Answer: jaws is a shark."`` -> ``"jaws is a shark"``."""
    s = answer.strip()
    m = _GSM8K.search(s)
    if m:  # a worked solution ending in GSM8K's "#### 72": the value is after the marker
        s = m.group(1).strip()
    for _ in range(4):
        for rx in _WRAPPERS:
            m = rx.match(s)
            if m and m.group(1).strip():
                s = m.group(1).strip()
                break
        else:
            break
    if s.startswith("{"):  # a JSON answer {"answer": v} with one plain value: the value
        try:
            obj = json.loads(s)
        except ValueError:
            obj = None
        if isinstance(obj, dict) and len(obj) == 1 and isinstance(obj.get("answer"), (str, int, float)) \
                and not isinstance(obj.get("answer"), bool) and str(obj["answer"]).strip() and str(obj["answer"]) in s:
            return str(obj["answer"])
    if s.endswith(".") and number_of(s) is None and len(s) > 1:
        s = s[:-1].rstrip()
    return s or answer


def number_of(s: str) -> Fraction | None:
    """The value of a plain number (``12``, ``-0.5``, ``1/2``, ``1,234``), else None."""
    return parse_number(s) if isinstance(s, str) and s.strip() else None


def format_number(v: Fraction, like: str = "") -> str:
    """``v`` written as ``like`` writes its number: an integer, a fraction ``a/b``, or a decimal."""
    if v.denominator == 1:
        return str(v.numerator)
    if "/" in like:
        return f"{v.numerator}/{v.denominator}"
    d = v.denominator
    while d % 2 == 0:
        d //= 2
    while d % 5 == 0:
        d //= 5
    if d == 1:  # a terminating decimal
        digits = 0
        while (v * 10**digits).denominator != 1:
            digits += 1
        return f"{float(v):.{digits}f}" if digits <= 15 else f"{v.numerator}/{v.denominator}"
    return f"{v.numerator}/{v.denominator}"


@dataclass
class ProbeContext:
    """One example as generators see it.

    ``answer``: the gold answer; ``core``: its bare value (:func:`core_of`); ``gold``: a completion the verifier
    rewards (the best of a few standard forms, found before probing), None when none was rewarded; ``kinds``:
    the verifier kinds of the audit; ``fuzz``: mutations per example asked for; ``rng``: seeded per example.
    """

    example: Example
    kinds: frozenset[str]
    gold: str | None = None
    fuzz: int = 0
    seed: int = 0
    rng: random.Random = field(default_factory=random.Random)
    wrap_ok: bool = True  # False when a wrong value put in the gold completion is still rewarded (see wrap)

    @property
    def answer(self) -> str:
        return self.example.answer

    @property
    def core(self) -> str:
        return core_of(self.example.answer)

    @property
    def number(self) -> Fraction | None:
        """The gold value when it is a plain number, else None."""
        return number_of(self.core)

    @property
    def meta(self) -> dict[str, Any]:
        return self.example.meta

    @property
    def base(self) -> str:
        """The gold completion, or the gold answer when no form of it was rewarded."""
        return self.gold if self.gold is not None else self.answer

    def wrap(self, value: str) -> str:
        """The gold completion with its (last) gold value replaced by ``value``: a probe in the form the
        verifier reads (``\\boxed{5}`` -> ``\\boxed{value}``); ``value`` itself when the value is not in it, or
        when the runner found that the gold completion carries the answer twice (``wrap_ok`` False: a wrong value
        put in it was still rewarded, so probes built that way would keep the right answer)."""
        if not self.wrap_ok:
            return value
        for base in (self.base, self.answer):
            i = base.rfind(self.core)
            if i >= 0:
                return base[:i] + value + base[i + len(self.core):]
        return value

    def wrong(self, n: int = 1) -> list[str]:
        """``n`` wrong values of the gold's kind that neither contain nor are contained in the gold value:
        numbers near a numeric gold; the gold text with its last stand-alone number changed (``"12 goals"`` ->
        ``"13 goals"``; not a label such as ``h1``); other letters for a multiple-choice letter; else short
        unrelated phrases."""
        core, out = self.core, []
        v = self.number
        digits = list(_DIGITS.finditer(core))
        if v is not None or digits:
            step = 1
            while len(out) < n and step < 1000:
                if v is not None:
                    cand = format_number(v + step, core)
                else:
                    m = digits[-1]
                    cand = core[:m.start()] + str(int(m.group()) + step) + core[m.end():]
                if core not in cand and cand not in core and cand not in out:
                    out.append(cand)
                step += 1
            return out
        if len(core) == 1 and core.isalpha():  # a multiple-choice letter: other letters
            return [c for c in ("ABCDE" if core.isupper() else "abcde") if c != core][:n]
        if "math" in self.kinds:
            cands = ("7", "13", "19", "23", "29", "31")
        else:
            cands = _TEXT_DISTRACTORS
        low = core.casefold()
        for c in cands:
            if c.casefold() not in low and low not in c.casefold():
                out.append(c)
            if len(out) == n:
                break
        return out
