"""Label re-verification: does each row's gold answer pass its own verifier? (RECONSTRUCTED.)

Zhu & Kang 2026 ("Noisy data is destructive to RLVR", arXiv:2603.16140; docs/data.md, Label re-verification) audit
labels before training: labels that are really equivalent to the truth are kept, truly wrong ones cost 8-10 points.
Their pipeline compares a label with a trusted gold (normalise, symbolic/numeric equivalence, multi-answer
membership, adjudication of the rest) and gives each row a status: ``clean``, ``wrong_label`` (their "noisy") or
``ambiguous``. Here the verifier (any registered name, e.g. ``math`` or ``numeric``, or ``module:function``) does
steps 1-2 of that pipeline as docs/data.md numbers them; rlvr adds step 3; step 4 (an LLM judge or solver majority)
is left to the user, which is what ``ambiguous`` is for.

Two modes, per row:

- **with a reference** (the first of ``reference_fields`` present in the row: by default ``gold``,
  ``reference``, ``solution``, ``completion``, i.e. a trusted answer or a worked solution): the label is
  scored as a completion against the reference as gold. Passing: clean. Failing: if the reference lists
  several answers (``-2 or 2``, ``±2``, ``1; 3``) and the label equals one of them, clean (step 3,
  membership); if the label lists several and one of them equals the reference, ambiguous; else wrong.
- **self-check** (no reference): the label is scored as a completion against itself. A label its own
  verifier cannot accept (no extractable answer, not a number for ``numeric``) is wrong; a label listing
  several answers is ambiguous (a single-answer verifier cannot say whether all are wanted).

In both modes a verifier that raises or times out, or answers "undecidable", "too complex", "too large",
"worker crashed/unavailable", makes the row ambiguous rather than wrong: the verifier, not the label,
failed to decide. The verdict carries the verifier's reason as evidence.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Sequence

from rlvr.core.types import Example, Score

__all__ = ["Relabeler", "Verdict", "members", "DEFAULT_REFERENCE_FIELDS"]

DEFAULT_REFERENCE_FIELDS = ("gold", "reference", "solution", "completion")
_UNDECIDED = ("timeout", "undecidable", "unparsable", "too complex", "too large", "worker crashed",
              "worker unavailable")
_SPLIT = re.compile(r"\s+or\s+|\s*;\s*|,\s+(?![^()\[\]{}]*[)\]}])")
_PM = re.compile(r"^(?:\\pm|±|\+-|\+/-)\s*(.+)$")


def members(answer: str) -> list[str]:
    """The answers a label lists: ``"-2 or 2"`` -> ``["-2", "2"]``, ``"\\pm 3"`` -> ``["3", "-3"]``,
    ``"x=1; x=2"`` -> two; a single answer (intervals ``(1, 2)`` and ``1,234`` included) -> ``[answer]``."""
    text = answer.strip().strip("$").strip()
    if text.startswith("\\{") and text.endswith("\\}"):
        text = text[2:-2]
    parts = [p.strip() for p in _SPLIT.split(text) if p and p.strip()]
    out: list[str] = []
    for p in parts:
        m = _PM.match(p)
        out.extend([m.group(1), f"-{m.group(1)}"] if m else [p])
    return out if len(out) > 1 else [answer]


@dataclass(frozen=True)
class Verdict:
    status: str  # clean | wrong_label | ambiguous
    reason: str
    mode: str  # reference | self
    reference_field: str | None = None


def _passed(s: Score) -> bool:
    return s.components.get("correct", float(s.reward >= 1.0)) >= 1.0


def _reason(s: Score) -> tuple[str, str]:
    """``(kind, text)``: kind ``error`` (the verifier raised), ``rejects`` (it returned an ``error`` about
    its input on purpose, e.g. "gold answer 'x' is not a number"), ``undecided`` or ``verdict``."""
    for k, v in s.info.items():
        if (k == "reason" or k.endswith(".reason")) and str(v).startswith("verifier error"):
            return "error", str(v)
    for k, v in s.info.items():
        if k.endswith("error"):
            return "rejects", f"the verifier rejects its input: {v}"
    for k, v in s.info.items():
        if k == "reason" or k.endswith(".reason"):
            return ("undecided" if any(str(v).startswith(u) for u in _UNDECIDED) else "verdict"), str(v)
    return "verdict", "passed" if _passed(s) else "failed"


class Relabeler:
    """Scores labels in batches with one verifier on a :class:`rlvr.tasks.scoring.Scorer` (with its
    deadline); ``judge(rows)`` returns one :class:`Verdict` per ``(prompt, label, row)``."""

    def __init__(self, verifier: str, verifier_params: dict[str, Any] | None = None, workers: int = 4,
                 timeout_s: float = 60.0, reference_fields: Sequence[str] = DEFAULT_REFERENCE_FIELDS):
        from rlvr.tasks.base import Task, WeightedVerifier
        from rlvr.tasks.scoring import Scorer
        from rlvr.verifiers import build_verifier, from_callable

        v = from_callable(verifier) if ":" in verifier else build_verifier(verifier, verifier_params)
        self.name, self.reference_fields = verifier, tuple(reference_fields)
        self.errors: list[str] = []
        self._scorer = Scorer(Task(f"relabel-{verifier}", {}, [WeightedVerifier(v)]), workers, timeout_s,
                              warn=self.errors.append)

    def _reference(self, row: dict) -> tuple[str, str] | None:
        for f in self.reference_fields:
            v = row.get(f)
            if isinstance(v, (str, int, float)) and not isinstance(v, bool) and str(v).strip():
                return f, str(v)
        return None

    def judge(self, items: Sequence[tuple[Any, str, dict]]) -> list[Verdict]:
        """``items``: ``(prompt, label text, row)``; one verdict each, in order."""
        plans, pairs = [], []  # per item: (mode, field, label, slices); pairs: (prompt, completion, gold)
        for prompt, label, row in items:
            ref = self._reference(row)
            mode, field_, gold = ("self", None, label) if ref is None else ("reference", ref[0], ref[1])
            label_m = members(label) if mode == "reference" else []
            gold_m = members(gold) if mode == "reference" else []
            checks = [(prompt, label, gold)]
            checks += [(prompt, m, gold) for m in label_m] if len(label_m) > 1 else []
            checks += [(prompt, label, m) for m in gold_m] if len(gold_m) > 1 else []
            n_label = len(label_m) if len(label_m) > 1 else 0
            plans.append((mode, field_, label, len(pairs), n_label, len(checks) - 1 - n_label))
            pairs += checks
        scores = self._score(pairs) if pairs else []
        out = []
        for mode, field_, label, at, n_label, n_gold in plans:
            whole = scores[at]
            label_s = scores[at + 1:at + 1 + n_label]
            gold_s = scores[at + 1 + n_label:at + 1 + n_label + n_gold]
            out.append(self._verdict(mode, field_, label, whole, label_s, gold_s))
        return out

    def _score(self, pairs: list[tuple[Any, str, str]]) -> list[Score]:
        examples = [Example(f"relabel-{i}", p, g) for i, (p, _, g) in enumerate(pairs)]
        scores, _ = self._scorer.score_many(examples, [c for _, c, _ in pairs])
        return scores

    @staticmethod
    def _verdict(mode: str, field_: str | None, label: str, whole: Score, label_s: list[Score],
                 gold_s: list[Score]) -> Verdict:
        kind, reason = _reason(whole)
        if mode == "self" and len(members(label)) > 1:
            return Verdict("ambiguous", f"the label lists several answers ({reason})", mode, field_)
        if _passed(whole):
            return Verdict("clean", reason, mode, field_)
        if any(_passed(s) for s in gold_s):
            return Verdict("clean", "the label is one of the reference's answers", mode, field_)
        if any(_passed(s) for s in label_s):
            return Verdict("ambiguous", "the label lists several answers; one matches the reference", mode, field_)
        undecided = kind in ("error", "undecided") or any(_reason(s)[0] in ("error", "undecided") for s in gold_s)
        # the reference is the gold in reference mode: a verifier rejecting it, or finding no answer in it,
        # says nothing about the label; in self mode the label is the gold, so the label fails
        unusable_reference = mode == "reference" and (kind == "rejects" or reason.startswith("gold has no answer"))
        if undecided or unusable_reference:
            return Verdict("ambiguous", reason, mode, field_)
        return Verdict("wrong_label", reason, mode, field_)

    def close(self) -> None:
        self._scorer.close()
