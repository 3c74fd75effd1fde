"""Rubric rewards with checkable criteria, and POW3R's policy-aware criterion weights.

A rubric is ``meta["rubric"]``: a list of criteria ``{"id", "kind", "value", "weight": 1, "category":
"default", "required": false, "tolerance": 0}``. Each criterion is a predicate with score ``s_c`` in {0, 1}:

- ``regex``: ``re.search(value, completion)`` (``flags`` "i", "m", "s" allowed), bounded (docs/verifiers.md,
  Rubric: bounded regex criteria): patterns of at most ``MAX_PATTERN_CHARS`` characters, refused when
  shaped for catastrophic backtracking ((a+)+, (a*)*, (a|a)*, (a|ab)*, (a?)*: :func:`check_pattern`, at
  rubric load); matched with the ``regex`` package under a timeout (``REGEX_TIMEOUT_S`` per criterion,
  ``RUBRIC_BUDGET_S`` for all regex criteria of a completion; a timeout scores 0) on at most
  ``MAX_REGEX_CHARS`` characters (a longer completion fails every regex criterion); without the package,
  ``re`` on at most ``FALLBACK_REGEX_CHARS``;
- ``contains`` / ``not_contains``: case-insensitive substring present / absent;
- ``numeric``: the completion's answer (last ``<answer>`` block, else the whole text; then its last number)
  equals ``value`` within ``|a - b| <= tolerance`` (exact Fractions when ``tolerance`` is 0);
- ``judge``: a model decides whether the completion meets ``value`` (a criterion in words, e.g. "explains why
  the sum is even"), as POW3R's criteria are judged. It needs a judge (``judge:`` in the verifier's or the
  ``rubric`` task's params: :mod:`rlvr.verifiers.judge`, preset ``criterion``, a yes/no verdict): every judged
  criterion of a step's completions is asked in one batched call, and a completion whose judgement failed is
  a verifier error (counted, not a 0 it earned).

``rubric`` (the human-weighted reward, also POW3R's evaluation reward)::

    R = sum_c h_c s_c / sum_c h_c          h_c = the criterion's weight
    strict = 1 iff every required criterion holds (components["strict"]; reported, and with
             required_gate=True R = 0 when it is 0)

POW3R (Tyagi et al. 2026, "Not Every Rubric Teaches Equally: Policy-Aware Rubric Rewards for RLVR",
arXiv:2605.20164; RECONSTRUCTED, no code released). Confirmed: human weights and category balance are kept,
criterion weights adapt during training to rollout-level contrast. Guessed, and parameterised: the contrast
statistic, the power law with ``gamma = 1`` and ``eps = 0.05``, and the optional EMA state. For a prompt with G
rollouts (:class:`PolicyAwareRubric`)::

    contrast_c = std_i s_{i,c}  (population std; "mad": mean |s_{i,c} - mean_i s_{i,c}|)
                 0 for criteria every rollout passes (saturated) or fails (unreachable)
                 with ema_decay = b > 0: contrast_c <- b * state_c + (1 - b) * contrast_c, kept per criterion id
    raw_c      = h_c * (eps + contrast_c) ** gamma
    w_c        = raw_c * (sum_{c' in k(c)} h_c') / (sum_{c' in k(c)} raw_c')   # category totals unchanged
                 (a category whose raw weights are all 0 keeps its human weights)
    training R_i = sum_c w_c s_{i,c} / sum_c w_c ;  evaluation R_i = sum_c h_c s_{i,c} / sum_c h_c

The EMA state also records each criterion's pass-rate EMA (how often the policy already satisfies it);
``state_dict`` / ``load_state_dict`` checkpoint it. Training uses POW3R through the ``rubric`` task
(``weighting: pow3r``, :mod:`rlvr.tasks.rubric_task`): its ``Task.score_group`` hook passes each prompt's group
to :meth:`PolicyAwareRubric.rewards_from_rows` with the criterion scores ``score`` already computed.
"""

from __future__ import annotations

import math
import re
import time
from collections import defaultdict
from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache
from typing import Any, Literal, Sequence

try:  # a dependency of transformers, so present wherever rlvr is installed; re is the guarded fallback
    import regex as _regex
except ImportError:  # pragma: no cover - exercised by monkeypatching in the tests
    _regex = None

from pydantic import Field

from rlvr.core.types import Example, Score
from rlvr.registry import Params
from rlvr.verifiers.base import VERIFIERS, BaseVerifier
from rlvr.verifiers.format import extract_tag
from rlvr.verifiers.numeric import extract_answer, parse_number
from rlvr.verifiers.judge import CriterionJudge
from rlvr.verifiers.regex_risk import pattern_risk

__all__ = ["Criterion", "parse_rubric", "criterion_score", "check_pattern", "RubricVerifier", "RubricParams",
           "PolicyAwareRubric", "pow3r_weights"]

_FLAGS = {"i": re.IGNORECASE, "m": re.MULTILINE, "s": re.DOTALL}
MAX_RUBRIC_CHARS = 100_000
MAX_PATTERN_CHARS = 1_000      # longest regex criterion accepted
MAX_REGEX_CHARS = 20_000       # longest text a regex criterion reads; longer texts fail every regex criterion
FALLBACK_REGEX_CHARS = 2_000   # the same without the ``regex`` package (no timeout there)
REGEX_TIMEOUT_S = 0.1          # one regex criterion on one completion (regex overshoots: ~2x, measured)
RUBRIC_BUDGET_S = 0.5          # all regex criteria of one completion together
KINDS = ("regex", "contains", "not_contains", "numeric", "judge")


@dataclass(frozen=True)
class Criterion:
    id: str
    kind: Literal["regex", "contains", "not_contains", "numeric", "judge"]
    value: Any
    weight: float = 1.0
    category: str = "default"
    required: bool = False
    tolerance: float = 0.0
    flags: str = ""


@lru_cache(maxsize=1024)
def check_pattern(pattern: str, flags: str = "") -> Any:
    """The compiled matcher of a regex criterion, refusing what cannot be bounded (docs/verifiers.md, Rubric:
    bounded regex criteria): not a string, longer than ``MAX_PATTERN_CHARS``, invalid, or shaped for
    catastrophic backtracking (nested quantifiers, overlapping alternatives or empty-matching bodies under a
    quantifier). Raises ``ValueError``."""
    if not isinstance(pattern, str):
        raise ValueError(f"a regex criterion needs a string pattern, got {type(pattern).__name__}")
    if len(pattern) > MAX_PATTERN_CHARS:
        raise ValueError(f"regex longer than {MAX_PATTERN_CHARS} characters")
    bad = set(flags) - set(_FLAGS)
    if bad:
        raise ValueError(f"unknown regex flags {sorted(bad)} (allowed: i, m, s)")
    bits = sum(_FLAGS[f] for f in set(flags))
    try:
        compiled = re.compile(pattern, bits)
    except re.error as e:
        raise ValueError(f"invalid regex {pattern[:80]!r}: {e}") from None
    why = pattern_risk(pattern, bits)
    if why:
        raise ValueError(f"regex {pattern[:80]!r} risks catastrophic backtracking: {why}")
    if _regex is not None:
        try:
            rbits = sum({"i": _regex.IGNORECASE, "m": _regex.MULTILINE, "s": _regex.DOTALL}[f] for f in set(flags))
            return _regex.compile(pattern, rbits)
        except Exception:  # noqa: BLE001 - a pattern only re accepts: re on the shorter, guarded text
            pass
    return compiled


def _regex_search(text: str, c: "Criterion", deadline: float | None) -> tuple[float, bool]:
    """(s_c, timed out) of a regex criterion, bounded in time: at most ``MAX_REGEX_CHARS`` of text (a longer
    text fails the criterion: a match past a cut could flip a negative lookahead, so the cut is not read),
    and with the ``regex`` package a timeout of ``REGEX_TIMEOUT_S``, less what the completion's other regex
    criteria already used of ``RUBRIC_BUDGET_S`` (a timeout fails the criterion)."""
    matcher = check_pattern(c.value, c.flags)
    if _regex is None or not isinstance(matcher, _regex.Pattern):
        return (0.0, False) if len(text) > FALLBACK_REGEX_CHARS else (float(matcher.search(text) is not None), False)
    if len(text) > MAX_REGEX_CHARS:
        return 0.0, False
    timeout = REGEX_TIMEOUT_S if deadline is None else min(REGEX_TIMEOUT_S, deadline - time.monotonic())
    if timeout <= 0:
        return 0.0, True
    try:
        return float(matcher.search(text, timeout=timeout) is not None), False
    except TimeoutError:
        return 0.0, True


def parse_rubric(items: Sequence[dict]) -> list[Criterion]:
    """Criteria from ``meta["rubric"]`` dicts; raises ``ValueError`` on an invalid rubric."""
    crits = [Criterion(**{"id": str(i), **item}) for i, item in enumerate(items)]
    if not crits or len({c.id for c in crits}) != len(crits):
        raise ValueError("a rubric needs at least one criterion and unique ids")
    for c in crits:
        if c.kind not in KINDS or c.weight < 0:
            raise ValueError(f"criterion {c.id!r}: unknown kind {c.kind!r} or negative weight")
        if c.kind == "regex":
            check_pattern(c.value, c.flags)
        if c.kind == "judge" and not (isinstance(c.value, str) and c.value.strip()):
            raise ValueError(f"criterion {c.id!r}: a judged criterion needs its statement as a non-empty string")
    if sum(c.weight for c in crits) <= 0:
        raise ValueError("rubric weights sum to 0")
    return crits


def _numeric_ok(text: str, c: Criterion) -> bool:
    span = extract_tag(text, "answer")
    cand = extract_answer(span if span is not None else text)
    got = parse_number(cand) if cand is not None else None
    want = parse_number(str(c.value))
    if got is None or want is None:
        return False
    return got == want if c.tolerance == 0 else abs(got - want) <= Fraction(c.tolerance)


def criterion_score(text: str, c: Criterion, deadline: float | None = None) -> float:
    """``s_c`` in {0, 1} for one completion; regex criteria are bounded (:func:`_regex_search`), and stop at
    ``deadline`` (a ``time.monotonic()`` value) when one is given."""
    if c.kind == "regex":
        return _regex_search(text, c, deadline)[0]
    if c.kind in ("contains", "not_contains"):
        found = str(c.value).casefold() in text.casefold()
        return float(found == (c.kind == "contains"))
    if c.kind == "judge":
        raise ValueError(f"criterion {c.id!r} is judged by a model: score it through RubricVerifier with a judge")
    return float(_numeric_ok(text, c))


def _score_row(text: str, crits: Sequence[Criterion]) -> tuple[list[float], list[str]]:
    """Every criterion's score for one completion under one deadline, and the ids of regex criteria that
    timed out (they score 0)."""
    deadline = time.monotonic() + RUBRIC_BUDGET_S
    row, timeouts = [], []
    for c in crits:
        if c.kind == "regex":
            score, timed_out = _regex_search(text, c, deadline)
            if timed_out:
                timeouts.append(c.id)
        elif c.kind == "judge":
            score = 0.0  # (the judge's verdict replaces it: RubricVerifier.score_batch)
        else:
            score = criterion_score(text, c)
        row.append(score)
    return row, timeouts


def _weighted(scores: Sequence[float], weights: Sequence[float]) -> float:
    total = sum(weights)
    return sum(w * s for w, s in zip(weights, scores)) / total if total > 0 else 0.0


class RubricVerifier(BaseVerifier):
    """Human-weighted rubric reward ``sum h_c s_c / sum h_c`` over checkable criteria; ``judge`` (a verifier
    that scores batches, :mod:`rlvr.verifiers.judge`) decides the ``judge`` criteria."""

    name = "rubric"

    def __init__(self, required_gate: bool = False, judge: Any = None):
        self.required_gate, self.judge = required_gate, judge

    @property
    def batched(self) -> bool:
        return self.judge is not None

    def _finish(self, crits: Sequence[Criterion], s: Sequence[float], timeouts: Sequence[str]) -> Score:
        strict = float(all(si == 1.0 for si, c in zip(s, crits) if c.required))
        r = _weighted(s, [c.weight for c in crits])
        r = 0.0 if self.required_gate and not strict else r
        comps = {f"crit/{c.id}": si for c, si in zip(crits, s)}
        info: dict[str, Any] = {} if r >= 1.0 else {
            "reason": "failed: " + ", ".join(c.id for c, si in zip(crits, s) if si < 1)}
        if timeouts:
            info["regex_timeouts"] = list(timeouts)
        return Score(r, {**comps, "strict": strict, "correct": float(all(si == 1.0 for si in s))}, info)

    def score(self, example: Example, text: str) -> Score:
        if len(text) > MAX_RUBRIC_CHARS:
            return Score(0.0, {"correct": 0.0, "strict": 0.0}, {"reason": "completion too long"})
        crits = parse_rubric(example.meta.get("rubric") or [])
        if any(c.kind == "judge" for c in crits):
            return self.score_batch([example], [text])[0]
        return self._finish(crits, *_score_row(text, crits))

    def score_batch(self, examples: Sequence[Example], texts: Sequence[str]) -> list[Score]:
        """Every completion's rule criteria, then all their judged criteria in one call to the judge."""
        from dataclasses import replace

        out: list[Score | None] = [None] * len(texts)
        rows: dict[int, tuple[list[Criterion], list[float], list[str]]] = {}
        asks: list[tuple[int, int, Example, str]] = []
        for i, (ex, text) in enumerate(zip(examples, texts)):
            try:
                if len(text) > MAX_RUBRIC_CHARS:
                    out[i] = Score(0.0, {"correct": 0.0, "strict": 0.0}, {"reason": "completion too long"})
                    continue
                crits = parse_rubric(ex.meta.get("rubric") or [])
                s, timeouts = _score_row(text, crits)
            except Exception as e:  # noqa: BLE001 (the contract: never raise; counted as a verifier error)
                out[i] = Score(0.0, {"correct": 0.0}, {"reason": f"verifier error: {type(e).__name__}: {e}"})
                continue
            rows[i] = (crits, s, timeouts)
            asks += [(i, j, replace(ex, meta={**ex.meta, "rubric": str(c.value)}), text)
                     for j, c in enumerate(crits) if c.kind == "judge"]
        verdicts: list[Score] = []
        if asks and self.judge is None:
            verdicts = [Score(0.0, {"correct": 0.0}, {"reason": "verifier error: rubric: a criterion of kind judge "
                                                                "needs a judge (judge: in the rubric's params)"})
                        for _ in asks]
        elif asks:
            try:
                verdicts = list(self.judge.score_batch([a[2] for a in asks], [a[3] for a in asks]))
            except Exception as e:  # noqa: BLE001
                verdicts = [Score(0.0, {"correct": 0.0}, {"reason": f"verifier error: judge: {e}"}) for _ in asks]
        failed: dict[int, str] = {}
        for (i, j, _, _), v in zip(asks, verdicts):
            why = str(v.info.get("reason", ""))
            if why.startswith("verifier error"):
                failed.setdefault(i, f"{why} (criterion {rows[i][0][j].id!r})")
            else:
                rows[i][1][j] = float(v.components.get("correct", v.reward >= 1.0))
        for i, (crits, s, timeouts) in rows.items():
            out[i] = (Score(0.0, {"correct": 0.0}, {"reason": failed[i]}) if i in failed
                      else self._finish(crits, s, timeouts))
        return out  # type: ignore[return-value]

    def validation_cases(self):
        rubric = [{"id": "answer", "kind": "numeric", "value": "42", "weight": 2, "required": True},
                  {"id": "units", "kind": "contains", "value": "metres"},
                  {"id": "shows_work", "kind": "regex", "value": r"\d+\s*[*x]\s*\d+"},
                  {"id": "no_hedge", "kind": "not_contains", "value": "maybe"}]
        ex = Example("rubric-1", "q", "6 * 7 = 42 metres", meta={"rubric": rubric})
        return [(ex, "6 * 7 = 42 metres\n<answer>42</answer>", 1.0), (ex, "maybe 41?", 0.0)]


class RubricParams(Params):
    required_gate: bool = Field(False, description="score 0 unless every required criterion holds")
    judge: CriterionJudge = Field(None, description="the judge of kind: judge criteria (params of the judge "
                                                    "verifier; preset criterion by default)")


@VERIFIERS.register("rubric", RubricParams)
def _rubric(p: RubricParams) -> RubricVerifier:
    """Rubric reward: human-weighted mean of regex / contains / numeric / judged criteria (meta['rubric'])."""
    from rlvr.verifiers.judge import build_judge

    return RubricVerifier(p.required_gate, build_judge(p.judge, "criterion"))


def _contrast(column: Sequence[float], kind: str) -> float:
    mean = sum(column) / len(column)
    if kind == "mad":
        return sum(abs(x - mean) for x in column) / len(column)
    return math.sqrt(sum((x - mean) ** 2 for x in column) / len(column))


def pow3r_weights(human: Sequence[float], categories: Sequence[str], contrast: Sequence[float], eps: float = 0.05,
                  gamma: float = 1.0) -> list[float]:
    """POW3R criterion weights: ``h_c (eps + contrast_c)^gamma``, renormalised to each category's human total."""
    raw = [h * (eps + k) ** gamma for h, k in zip(human, contrast)]
    h_tot, r_tot = defaultdict(float), defaultdict(float)
    for h, r, cat in zip(human, raw, categories):
        h_tot[cat] += h
        r_tot[cat] += r
    return [r * h_tot[cat] / r_tot[cat] if r_tot[cat] > 0 else h for h, r, cat in zip(human, raw, categories)]


class PolicyAwareRubric:
    """POW3R training rewards for a group of rollouts, with optional EMA state per criterion id."""

    def __init__(self, eps: float = 0.05, gamma: float = 1.0, contrast: str = "std", ema_decay: float = 0.0):
        if contrast not in ("std", "mad") or not 0.0 <= ema_decay < 1.0 or eps < 0 or gamma < 0:
            raise ValueError("need contrast in {std, mad}, 0 <= ema_decay < 1, eps >= 0, gamma >= 0")
        self.eps, self.gamma, self.contrast, self.ema_decay = eps, gamma, contrast, ema_decay
        self.contrast_ema: dict[str, float] = {}
        self.pass_rate_ema: dict[str, float] = {}

    def _update(self, key: str, contrast: float, pass_rate: float) -> float:
        b = self.ema_decay
        self.pass_rate_ema[key] = b * self.pass_rate_ema.get(key, pass_rate) + (1 - b) * pass_rate
        if b == 0.0:
            return contrast
        self.contrast_ema[key] = b * self.contrast_ema.get(key, contrast) + (1 - b) * contrast
        return self.contrast_ema[key]

    def weights(self, crits: Sequence[Criterion], scores: Sequence[Sequence[float]], prefix: str = "") -> list[float]:
        """Adapted weights for one group (``scores[i][c]``: rollout i, criterion c); updates the EMA state."""
        if not scores:
            raise ValueError("a POW3R group needs at least one rollout")
        cols = [[row[c] for row in scores] for c in range(len(crits))]
        contrast = [self._update(prefix + cr.id, _contrast(col, self.contrast), sum(col) / len(col))
                    for cr, col in zip(crits, cols)]
        return pow3r_weights([c.weight for c in crits], [c.category for c in crits], contrast, self.eps, self.gamma)

    def group_rewards(self, example: Example, texts: Sequence[str]) -> list[Score]:
        """Training rewards for the G completions of one prompt; components carry the evaluation reward.

        A completion longer than ``MAX_RUBRIC_CHARS`` fails every criterion, as :class:`RubricVerifier` scores it.
        """
        crits = parse_rubric(example.meta.get("rubric") or [])
        rows = [_score_row(t, crits)[0] if len(t) <= MAX_RUBRIC_CHARS else [0.0] * len(crits) for t in texts]
        return self.rewards_from_rows(example, crits, rows)

    def rewards_from_rows(self, example: Example, crits: Sequence[Criterion],
                          scores: Sequence[Sequence[float]]) -> list[Score]:
        """Training rewards from criterion scores already computed (``scores[i][c]``); updates the EMA state."""
        w = self.weights(crits, scores, prefix=f"{example.id}/")
        human = [c.weight for c in crits]
        out = []
        for row in scores:
            strict = float(all(s == 1.0 for s, c in zip(row, crits) if c.required))
            comps = {"eval_reward": _weighted(row, human), "strict": strict, "correct": float(min(row) == 1.0),
                     **{f"crit/{c.id}": s for c, s in zip(crits, row)}}
            out.append(Score(_weighted(row, w), comps, {"weights": dict(zip((c.id for c in crits), w))}))
        return out

    def state_dict(self) -> dict:
        return {"contrast_ema": dict(self.contrast_ema), "pass_rate_ema": dict(self.pass_rate_ema)}

    def load_state_dict(self, state: dict) -> None:
        self.contrast_ema = dict(state.get("contrast_ema", {}))
        self.pass_rate_ema = dict(state.get("pass_rate_ema", {}))
