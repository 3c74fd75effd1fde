"""Scoring one answer to a DeFAb instance: ``score_answer(theory, target, answer, level) -> Verdict``.

The entry point a task verifier calls once per rollout. ``answer`` is a decoded hypothesis (a fact
:class:`~rlvr.defab.syntax.Literal` or a :class:`~rlvr.defab.syntax.Rule`) or text in the M4 format of
:mod:`rlvr.defab.parser` (one fact or rule, then optional ``h > r.`` lines); decoding the other
renderings (M1–M3) is the task's job. Wrong answers never raise: they score 0 with a reason. A broken
*instance* raises :class:`~rlvr.defab.checks.InstanceError`, because that is a generator bug.

- Level 1 (fact completion) and Level 2 (rule abduction) score 1[h ∈ H*] with H* = {h : D⁻ ∪ {h} ⊢∂ q,
  h minimal} (DeFAb §4) decided by verification rather than by string match against a list, so every
  member of H* counts; plus decision 4 of :mod:`rlvr.defab.checks` (no restating q, instance vocabulary).
- Level 3 (defeater abduction) is graded 0 / 0.25 / 0.5 / 0.75 / 1 (:func:`~rlvr.defab.checks.graded_score`)
  with conservativity over every protected expectation (decision 3); full credit also needs a general
  rule (no ground head, no body on the head's atom) that is minimal (decision 7), so a fact about the
  anomaly's individual as the body scores what the bare restatement ``~> ~anomaly`` scores; and a rule no
  more general than the evidence: conservativity also covers probe individuals of D⁻'s classes unlike the
  anomaly's individual (decision 8), so ``animal(X) ~> ~flies(X)`` for one penguin is not conservative.
- Bodies are sets (decision 5): a repeated body literal is dropped before any check.

Per-instance work (grounding and deriving D⁻, validating the instance, the protected expectations) is
cached, so scoring the G rollouts of one prompt grounds D⁻ once; each check then grounds and derives only
the part of D′ = D⁻ ∪ {h} ∪ Γ its answer depends on (:mod:`rlvr.defab.incremental`). ``reground=True``
selects the reference path instead: build D′, ground it and derive all of it for every check. The two
give identical verdicts (tested); the reference is kept as the definition and for tests.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache
from typing import Iterable, Optional, Union

from rlvr.defab.checks import (InstanceError, LanguageBias, Probes, add_hypothesis, body_subsets, classify_strength,
                               distinct_body, generality_probes, graded_score, is_defeasible_anomaly, is_minimal,
                               novelty, protected_expectations, revision_distance, well_formedness)
from rlvr.defab.engine import derive
from rlvr.defab.ground import ground
from rlvr.defab.incremental import Prepared
from rlvr.defab.parser import parse_statements
from rlvr.defab.syntax import Literal, Rule, RuleKind, Superiority, Theory, TheoryError, _check_superiority, is_variable

__all__ = ["Verdict", "decode_answer", "score_answer", "score_abduction", "score_level3", "prepare"]

Hypothesis = Union[Literal, Rule]


@dataclass(frozen=True)
class Verdict:
    """A score in [0, 1], a one-line reason, and the individual check results (JSON-friendly)."""

    score: float
    reason: str
    details: dict = field(default_factory=dict)


def decode_answer(text: str) -> tuple[Hypothesis, tuple[Superiority, ...]]:
    """One fact or rule plus any superiority lines, in the M4 text format; raises on anything else."""
    items = parse_statements(text)
    hyps = [x for x in items if not isinstance(x, Superiority)]
    if len(hyps) != 1:
        raise ValueError(f"expected exactly one fact or rule, found {len(hyps)}")
    return hyps[0], tuple(x for x in items if isinstance(x, Superiority))


def score_answer(theory: Theory, target: Literal, answer: Union[str, Hypothesis], level: int, *,
                 superiority: Iterable[Superiority] = (), bias: Optional[LanguageBias] = None,
                 variant: str = "standard", reground: bool = False) -> Verdict:
    """Score an answer; ``target`` is q at Levels 1–2 and the anomaly (the wrongly derived ~α) at Level 3.

    ``reground=True`` re-grounds and derives all of D′ for every check (the slow reference path)."""
    gamma = tuple(superiority)
    if isinstance(answer, str):
        try:
            answer, extra = decode_answer(answer)
        except (TheoryError, ValueError) as e:
            return Verdict(0.0, f"decode failure: {e}")
        gamma += extra
    if level in (1, 2):
        if gamma:
            return Verdict(0.0, "superiority pairs are not part of a Level-1/2 answer")
        return score_abduction(theory, target, answer, level, variant=variant, reground=reground)
    if level == 3:
        return score_level3(theory, target, answer, gamma, bias=bias, variant=variant, reground=reground)
    raise ValueError(f"level must be 1, 2 or 3, got {level!r}")


class _Reject(Exception):
    """An answer that fails before any derivation (its message is the reason)."""


def _relabel(theory: Theory, rule: Rule, gamma: tuple) -> Rule:
    """Decision 6d: rename a colliding label unless Γ refers to it (then Γ is ambiguous)."""
    if rule.label not in theory.labels:
        return rule
    if any(rule.label in (s.superior, s.inferior) for s in gamma):
        raise _Reject(f"hypothesis label {rule.label!r} is already a rule of the theory, so the superiority "
                      "pairs are ambiguous")
    return rule.with_label(theory.fresh_label("h"))


def _as_set(h: Hypothesis) -> Hypothesis:
    """h with each body literal once (decision 5: a body is a set), so repeats change no check."""
    if isinstance(h, Rule) and len(h.body) > 1:
        body = distinct_body(h)
        if len(body) < len(h.body):
            return h.with_body(body)
    return h


@lru_cache(maxsize=256)
def prepare(theory: Theory, variant: str = "standard") -> Prepared:
    """The per-instance cache: D⁻ grounded and derived once (:class:`~rlvr.defab.incremental.Prepared`)."""
    return Prepared(theory, variant)


def _proves(theory: Theory, h: Hypothesis, gamma: tuple, q: Literal, variant: str, reground: bool) -> bool:
    """D⁻ ∪ {h} ∪ Γ ⊢∂ q, incrementally unless ``reground`` (or h brings a new constant)."""
    if not reground:
        got = prepare(theory, variant).tags(h, gamma, (q,))
        if got is not None:
            return q in got
    return derive(add_hypothesis(theory, h, gamma), variant).proves(q)


@lru_cache(maxsize=512)
def _abduction_instance(theory: Theory, target: Literal, variant: str) -> tuple[frozenset, frozenset, frozenset]:
    """Validate a Level-1/2 instance (D⁻ must not already derive q); return its predicates, constants and
    facts (as sets: membership is tested once per answer)."""
    if prepare(theory, variant).base.proves(target):
        raise InstanceError(f"the challenge theory already derives the target {target}")
    consts = theory.constants() | {a for a in target.args if not is_variable(a)}
    return theory.predicates() | {target.predicate}, consts, frozenset(theory.facts)


def _abduction_shape(h: Hypothesis, target: Literal, level: int, preds: frozenset, consts: frozenset) -> str:
    """Why ``h`` cannot be a Level-1/2 answer before any derivation, or ''."""
    if isinstance(h, Literal):
        if level != 1:
            return "a Level-2 answer must be a defeasible rule (=>)"
        if h == target:
            return f"the answer restates the target {target} (decision 4)"
        if not h.is_ground:
            return "a fact must be ground"
        lits: tuple = (h,)
    else:
        if level == 1:
            return "a Level-1 answer must be a fact"
        if h.kind is not RuleKind.DEFEASIBLE:
            return "a Level-2 answer must be a defeasible rule (=>)"
        if not h.body and h.head == target:
            return f"the answer restates the target {target} (decision 4)"
        unsafe = h.unsafe_variables
        if unsafe:
            return f"head variable {unsafe[0]} does not occur in the body"
        lits = (*h.body, h.head)
    for lit in lits:  # the common case, all in the vocabulary, without building sets
        atom = lit.atom
        if atom.predicate not in preds:
            return _outside(lits, preds, consts)
        for a in atom.args:
            if a not in consts and not is_variable(a):
                return _outside(lits, preds, consts)
    return ""


def _outside(lits: tuple, preds: frozenset, consts: frozenset) -> str:
    new_preds = sorted({x.predicate for x in lits} - preds)
    new_consts = sorted({a for x in lits for a in x.args if not is_variable(a)} - consts)
    return f"outside the instance's vocabulary: {', '.join(new_preds + new_consts)} (decision 4)"


def score_abduction(theory: Theory, target: Literal, hypothesis: Hypothesis, level: int, *,
                    variant: str = "standard", reground: bool = False) -> Verdict:
    """Levels 1–2: 1.0 iff h is in H* (derives q, minimal, not a restatement, in the vocabulary)."""
    preds, consts, facts = _abduction_instance(theory, target, variant)
    problem = _abduction_shape(hypothesis, target, level, preds, consts)
    if problem:
        return Verdict(0.0, problem)
    h = _as_set(_relabel(theory, hypothesis, ())) if isinstance(hypothesis, Rule) else hypothesis
    if isinstance(h, Literal) and h in facts:
        return Verdict(0.0, f"{h} is already a fact of the theory")
    if not _proves(theory, h, (), target, variant, reground):  # valid_derivation
        return Verdict(0.0, f"the theory with {h} does not derive {target}", {"valid_derivation": False})
    if isinstance(h, Rule):
        for smaller in body_subsets(h):
            if _proves(theory, smaller, (), target, variant, reground):
                return Verdict(0.0, f"not minimal: {smaller} also derives {target}",
                               {"valid_derivation": True, "minimal": False})
    return Verdict(1.0, f"derives {target} and is minimal", {"valid_derivation": True, "minimal": True})


@lru_cache(maxsize=512)
def _level3_instance(theory: Theory, anomaly: Literal, variant: str) -> tuple[frozenset, dict, LanguageBias]:
    """Validate a Level-3 instance (a defeasible anomaly); return its protected expectations, the same
    grouped by atom, and the default language bias."""
    prep = prepare(theory, variant)
    if not is_defeasible_anomaly(prep.base, anomaly):
        raise InstanceError(f"{anomaly} is not a defeasible anomaly of the challenge theory "
                            "(it must be derived with +∂ but not +Δ)")
    protected = protected_expectations(prep.ground, anomaly, variant=variant, base=prep.base)
    by_atom: dict = {}
    for p in protected:
        by_atom.setdefault(p.atom, []).append(p)
    return protected, by_atom, LanguageBias.for_instance(theory, anomaly)


def _revise(theory: Theory, hypothesis: Hypothesis, gamma: tuple) -> Rule:
    """h relabelled if needed; rejects facts, strict rules and invalid Γ exactly as building D′ would."""
    if isinstance(hypothesis, Literal) or hypothesis.kind is RuleKind.STRICT:
        raise _Reject("a Level-3 answer must be a defeater (~>) or a defeasible exception (=>), not a "
                      f"{'fact' if isinstance(hypothesis, Literal) else 'strict rule'} (decision 6b)")
    h = _as_set(_relabel(theory, hypothesis, gamma))
    if gamma:  # the superiority validation of Theory(...) on D′, without building D′
        try:
            _check_superiority(tuple(dict.fromkeys((*theory.superiority, *gamma))), {**theory._by_label, h.label: h})
        except TheoryError as e:
            raise _Reject(f"invalid revision: {e}") from None
    return h


def _outcome(theory: Theory, h: Rule, gamma: tuple, anomaly: Literal, protected: frozenset, by_atom: dict,
             variant: str, reground: bool) -> tuple[bool, bool, frozenset]:
    """(D′ ⊢∂ anomaly, D′ ⊢∂ α, protected expectations D′ loses)."""
    alpha = anomaly.complement()
    if not reground:
        prep = prepare(theory, variant)
        affected = prep.affected(h)
        if affected is not None:  # only expectations on affected atoms can change (they held in D⁻)
            at_risk = [p for a in affected for p in by_atom.get(a, ())]
            got = prep.tags(h, gamma, [anomaly, alpha, *at_risk])
            return anomaly in got, alpha in got, frozenset(p for p in at_risk if p not in got)
    conc = derive(ground(add_hypothesis(theory, h, gamma), range_restricted=False), variant)  # unsafe h: flagged
    return anomaly in conc.defeasible, alpha in conc.defeasible, frozenset(protected - conc.defeasible)


@lru_cache(maxsize=512)
def _probes(theory: Theory, anomaly: Literal, variant: str) -> Optional[Probes]:
    return generality_probes(theory, anomaly, variant=variant, derived=lambda t: prepare(t, variant).base)


def _probe_losses(theory: Theory, anomaly: Literal, h: Rule, gamma: tuple, variant: str,
                  reground: bool) -> frozenset:
    """Decision 8: the expectations about probe individuals unlike the anomaly's that D⁺ ∪ {h} ∪ Γ loses."""
    probes = _probes(theory, anomaly, variant)
    if probes is None or not probes.protected:
        return frozenset()
    if not reground:
        prep = prepare(probes.theory, variant)
        affected = prep.affected(h)
        if affected is not None:
            at_risk = [p for a in affected for p in probes.by_atom.get(a, ())]
            if not at_risk:
                return frozenset()
            got = prep.tags(h, gamma, at_risk)
            return frozenset(p for p in at_risk if p not in got)
    conc = derive(ground(add_hypothesis(probes.theory, h, gamma), range_restricted=False), variant)
    return frozenset(probes.protected - conc.defeasible)


def score_level3(theory: Theory, anomaly: Literal, hypothesis: Hypothesis, superiority: Iterable[Superiority] = (),
                 *, bias: Optional[LanguageBias] = None, variant: str = "standard",
                 reground: bool = False) -> Verdict:
    """Level 3: the graded score of D′ = D⁻ ∪ {h} ∪ Γ for the anomaly (the wrongly derived literal)."""
    protected, by_atom, default_bias = _level3_instance(theory, anomaly, variant)
    gamma = tuple(superiority)
    try:
        h = _revise(theory, hypothesis, gamma)
    except _Reject as e:
        return Verdict(0.0, str(e))
    derived, observed, lost = _outcome(theory, h, gamma, anomaly, protected, by_atom, variant, reground)
    if derived:  # anomaly_resolved is false
        return Verdict(0.0, f"{anomaly} is still derived", {"resolved": False})
    bias = bias or default_bias
    problems = well_formedness(h, gamma, theory, bias)
    lost_probes = frozenset() if problems else _probe_losses(theory, anomaly, h, gamma, variant, reground)
    conservative = not lost and not lost_probes  # conservativity, over D⁻ and the probes (decision 8)
    st = classify_strength(False, observed, conservative)

    def achieves(smaller: Rule) -> bool:  # decision 7b
        if well_formedness(smaller, gamma, theory, bias):
            return False
        derived_s, _, lost_s = _outcome(theory, smaller, gamma, anomaly, protected, by_atom, variant, reground)
        if derived_s or not conservative:
            return not derived_s
        return not lost_s and not _probe_losses(theory, anomaly, smaller, gamma, variant, reground)

    minimal = None if problems else is_minimal(h, achieves)
    score = graded_score(True, not problems, conservative, st, minimal is not False)
    details = {"resolved": True, "well_formed": not problems, "violations": problems,
               "conservative": conservative, "lost": sorted(map(str, lost)),
               "lost_probes": sorted(map(str, lost_probes)), "strength": st.value,
               "minimal": minimal, "novelty": novelty(h, theory),
               "revision_distance": revision_distance(1 + len(gamma), lost)}
    return Verdict(score, _level3_reason(score, problems, lost, st, minimal, lost_probes), details)


def _achieves(outcome: tuple, conservative: bool) -> bool:
    """Decision 7b: a body subset (itself a resolution in the language bias) witnesses non-minimality when
    it resolves the anomaly and, if h is conservative, is conservative too (a literal needed to keep an
    expectation is not redundant)."""
    derived, _, lost = outcome
    return not derived and not (conservative and lost)


def _level3_reason(score: float, problems: list, lost: frozenset, st, minimal, lost_probes=frozenset()) -> str:
    if problems:
        return "resolved, but not well-formed: " + "; ".join(problems)
    if not lost and lost_probes:
        shown = ", ".join(sorted(map(str, lost_probes))[:5]) + (", ..." if len(lost_probes) > 5 else "")
        return (f"resolved ({st.value}) but over-general: its body also holds of individuals unlike the "
                f"anomaly's, whose expectations it loses: {shown} (decision 8)")
    if not lost:
        if minimal is False:
            return (f"resolved and conservative ({st.value}), but not minimal: a proper subset of the body "
                    "also resolves it conservatively (decision 7b)")
        return f"resolved and conservative ({st.value})"
    shown = ", ".join(sorted(map(str, lost))[:5]) + (", ..." if len(lost) > 5 else "")
    return f"resolved ({st.value}) but loses {len(lost)} expectation(s): {shown}"
