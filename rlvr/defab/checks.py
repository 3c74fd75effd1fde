"""The polynomial-time checks of DeFAb (Cooper & Velasquez, arXiv 2606.18557, §3–§5), and the decisions the
definitions leave open (both in docs/verifiers.md: DeFAb checks and the graded reward; DeFAb decision 1 to 8).

Notation. D⁻ is the challenge theory, h the hypothesis, Γ optional superiority pairs naming h, and
D′ = D⁻ ∪ {h} ∪ Γ. Exp(D) = {q : D ⊢∂ q}. Following the authors' data, the **anomaly** is the literal
D⁻ wrongly derives (the paper's ~α); its complement α is the observation. Every check grounds with the
default full-grounding semantics and takes ``variant`` ("standard" or "defab", see
:mod:`rlvr.defab.engine`); "derives" means +∂, and a literal left undecided by a loop is not derived.

Decisions (each is tested in ``tests/defab/test_decisions.py``; decision 8 on generated instances in
``tests/defab/test_level3_generality.py``):

1. Grounding: the semantics is the full grounding; the relevance-restricted grounder exists only as the
   named option ``grounding="relevant"`` (docs/verifiers.md, DeFAb decision 1; see :mod:`rlvr.defab.ground`).
2. A conservative, well-formed resolution scores 1.0 whether weak or strong; 0.75 is only for a strong
   resolution that is not conservative (:func:`graded_score`). Why: the intended gold defeaters are weak
   and the authors' code gives them 1.0; reading the tiers as 0.75 would cap every gold answer.
3. Conservativity protects Exp(D⁻) ∩ Exp(D⁻ without the ground rules whose head is the anomaly), minus the anomaly
   (:func:`protected_expectations`). Why: the literal Exp(D⁻) ∖ {anomaly} contains downstream consequences of the
   wrong literal that every correct resolution must lose, so the gold would score 0.5. Never a hand-picked list,
   and the observation α is never added as a fact (with α as a fact any irrelevant hypothesis "resolves";
   docs/verifiers.md, DeFAb pitfall: the observation is never a fact).
4. Level 1/2: a hypothesis that restates the target (the fact q, or an empty-body rule for q) scores 0,
   and hypotheses must use the instance's predicates and constants (:mod:`rlvr.defab.score`). Why: "h is
   in the gold set" would otherwise pay for answering the question with itself.
5. Minimality tries every proper subset of the body, the empty one included whenever the smaller rule is
   still range-restricted (:func:`body_subsets`); so ``bird(tweety) => flies(tweety)`` is not minimal
   when ``=> flies(tweety)`` also works. The authors' code only drops one atom at a time. A body is a
   set: a repeated literal is one antecedent, so it neither makes a rule non-minimal nor counts twice
   towards the language bias's body length. Minimality decides Level-1/2 gold membership and, by
   decision 7, full credit at Level 3.
6. Smaller choices:
   a. superiority between non-ground rules holds between every pair of their instances (labels carry
      it), as in the authors' engine; "same variable binding" is undefined for rules whose variables
      differ;
   b. a fact or strict rule offered at Level 3 scores 0 (it is the Level-3 analogue of restating the
      answer: the fact ~anomaly would otherwise earn 0.25); an empty-body rule is outside the default
      language bias for the same reason;
   c. Γ pairs count in the revision distance: each pair is an element of D′ not in D⁻;
   d. a hypothesis label that collides with a rule of D⁻ is renamed when Γ does not mention it (a label
      is not content); when Γ mentions it, Γ is ambiguous and the answer scores 0;
   e. contradictory facts ``p.`` and ``~p.`` are accepted and give +Δ and +∂ for both, as the proof
      conditions say (the logic only promises consistency for +∂ when +Δ is consistent);
   f. superiority may name strict rules in a theory (Antoniou et al. define ≻ over all rules; it matters
      in the standard variant when a strict rule fires on defeasible premises), but a Γ pair must be
      ``h > r`` with r a defeasible rule or defeater of D⁻, else the answer is not well-formed;
   g. naming: ``anomaly`` is the wrongly derived literal ~α, as in the authors' data.
7. Level 3 generality and minimality. Without them ``x: penguin(tweety) ~> ~flies(tweety).`` (any fact
   about the anomaly's individual as the body) resolves every instance conservatively and scored 1.0,
   while the bare ``~> ~flies(tweety)`` scored 0.25 (decision 6b): the body is a fact, so the rule is
   applicable exactly when the bare one is; it is the observation restated with a decoration.
   a. Generality (part of the default language bias, :attr:`LanguageBias.general`). Level 3 asks for
      a revision of a default, an exception "for a specific subclass" (DeFAb §1); every resolution of
      the paper (``stab_wounds(X, N), ... ~> ~single_perp(X)``, ``disordered(X), protein(X) ~> ...``)
      and every gold of :mod:`rlvr.defab.generate` (``c(X) ~> ~p(X)``) is a rule over a variable. So a
      Level-3 head must contain a variable (unless it has no arguments: propositional theories), and
      the body must not mention the head's own atom: ``p(X) ~> ~p(X)`` fires exactly where the
      conclusion it attacks holds, and resolves by a loop rather than by a condition. A ground head
      can only ever change the one observed literal; like the empty body it restates the observation,
      so it is outside L and scores what the bare answer scores, 0.25 if it resolves.
   b. Minimality counts at Level 3. The paper requires every hypothesis to "pass polynomial-time checks
      for valid derivation, conservativity, and minimality" (abstract; its error class E3 is the
      minimality violation), while its graded formula leaves minimality out. Here a conservative,
      well-formed resolution earns 1.0 only if no proper body subset (decision 5) is a resolution that
      achieves as much: within L (the Defeater Abduction Problem draws resolutions from L's candidate
      spaces, so the empty body is no witness while L asks for one antecedent), resolving the anomaly,
      and keeping every protected expectation when h does (a literal needed for conservativity is not
      redundant). An over-specified resolution earns 0.75, "substantial credit": padding the gold with
      a fact of the individual (``penguin(X), penguin(tweety) ~> ~flies(X)``) buys nothing.
   The golds are general and minimal, so they keep 1.0 (tested on generated instances of every KB).
8. Level 3: an answer more general than the evidence is not conservative (:func:`generality_probes`).
   Conservativity (decision 3) can only protect expectations about the individuals D⁻ happens to contain.
   A generated instance holds a few individuals, so ``animal(X) ~> ~flies(X)`` lost nothing on 18-22 of
   40 instances per knowledge base (no other flying animal was there) and earned full credit, though it
   says every animal is an exception when one penguin was observed. So conservativity also covers
   *probe individuals*: one fresh individual per class of D⁻ (a unary predicate of a fact or a strict
   rule), a member of that class and nothing more. A probe is *like the anomaly's individual* when it is
   strictly (+Δ) a member of every class the individual is stated to belong to (its unary facts in D⁻):
   the probe of the individual's own class, or of a class below it; a revision may change what holds of
   those. Every other probe (a bird that is not a penguin, a mammal, the animal class itself; for an
   individual stated to be a penguin and injured, a penguin that is not injured) keeps the expectations
   D⁻ ∪ {probes} gives it: a revision
   whose body is true of such a probe and blocks one of them (``bird(X)``, ``animal(X)``, ``lays_eggs(X)``
   for flies) is a resolution that is not conservative (0.5 weak, 0.75 strong), and the probe losses are
   reported as ``lost_probes``. The probes are a check, never part of D′; the instance's own golds (the
   removed exception, on the individual's class) lose nothing on them. A theory whose anomaly is not a
   unary literal about an individual with a unary fact (a propositional theory) has no probes. A body
   that correlates with the exception within the theory's vocabulary (``swims(X) ~> ~flies(X)`` where
   only penguins swim and fly) is not over-general by this test: no class of D⁻ shows it wrong.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from itertools import combinations
from typing import Callable, Iterable, Optional, Union

from rlvr.defab.engine import Conclusions, derive
from rlvr.defab.ground import GroundTheory, ground
from rlvr.defab.syntax import Literal, Rule, RuleKind, Superiority, Theory, is_variable

__all__ = ["InstanceError", "derives", "expectations", "criticality", "add_hypothesis", "valid_derivation",
           "is_defeasible_anomaly", "anomaly_resolved", "protected_expectations", "conservativity",
           "body_subsets", "distinct_body", "is_minimal", "LanguageBias", "well_formedness", "novelty",
           "revision_distance", "Strength", "strength", "classify_strength", "graded_score", "Probes",
           "generality_probes"]

Hypothesis = Union[Literal, Rule]


class InstanceError(ValueError):
    """The instance itself is broken (a generator bug), as opposed to a wrong answer."""


def derives(theory: Theory, literal: Literal, *, variant: str = "standard", definite: bool = False,
            grounding: str = "full") -> bool:
    """D ⊢∂ q (or D ⊢Δ q with ``definite=True``)."""
    if not literal.is_ground:
        raise ValueError(f"query {literal} is not ground")
    c = derive(theory, variant, grounding=grounding)
    return literal in (c.definite if definite else c.defeasible)


def expectations(theory: Theory, *, variant: str = "standard", grounding: str = "full") -> frozenset:
    """Exp(D) = {q : D ⊢∂ q} (DeFAb Definition 11)."""
    return derive(theory, variant, grounding=grounding).defeasible


def criticality(theory: Theory, literal: Literal, *, variant: str = "standard") -> frozenset:
    """Crit*(D, q) = {e ∈ F ∪ R : D ∖ {e} ⊬∂ q}; removing a rule also removes its superiority pairs.

    |D| derivations, O(|D|²) in all (DeFAb §3). When D itself does not derive q, every element is
    critical by this definition; callers building instances should check D ⊢∂ q first.
    """
    return frozenset(e for e in theory.elements() if not derives(theory.remove(e), literal, variant=variant))


def add_hypothesis(theory: Theory, hypothesis: Hypothesis, superiority: Iterable[Superiority] = ()) -> Theory:
    """D′ = D ∪ {h} ∪ Γ. Never adds the observation as a fact (decision 3; docs/verifiers.md, DeFAb pitfall: the
    observation is never a fact).

    Raises :class:`~rlvr.defab.syntax.TheoryError` when h's label is taken or Γ is invalid or cyclic.
    """
    return theory.add(hypothesis, *superiority)


def valid_derivation(theory: Theory, hypothesis: Hypothesis, target: Literal, *, variant: str = "standard") -> bool:
    """Level 1/2: D⁻ ∪ {h} ⊢∂ q."""
    return derives(add_hypothesis(theory, hypothesis), target, variant=variant)


def is_defeasible_anomaly(theory: Union[Theory, Conclusions], anomaly: Literal, *, variant: str = "standard") -> bool:
    """Level-3 instance check: D⁻ ⊢∂ anomaly but not D⁻ ⊢Δ anomaly (a strict conclusion cannot be revised)."""
    c = theory if isinstance(theory, Conclusions) else derive(theory, variant)
    return anomaly in c.defeasible and anomaly not in c.definite


def anomaly_resolved(revised: Union[Theory, Conclusions], anomaly: Literal, *, variant: str = "standard") -> bool:
    """Level 3: not D′ ⊢∂ anomaly (undecided counts as resolved: it is no longer derived)."""
    c = revised if isinstance(revised, Conclusions) else derive(revised, variant)
    return anomaly not in c.defeasible


def protected_expectations(theory: Union[Theory, GroundTheory], anomaly: Literal, *, variant: str = "standard",
                           base: Optional[Conclusions] = None) -> frozenset:
    """The expectations a resolution must keep (decision 3): those of D⁻ that do not depend on the anomaly.

    Exp(D⁻) ∩ Exp(D⁻ with every ground rule whose head is the anomaly removed), minus the anomaly.
    Removal is per ground instance: removing the non-ground rule would also drop its other instances.
    ``base`` may pass the already computed conclusions of D⁻ (of the same grounding and variant).
    """
    gt = ground(theory) if isinstance(theory, Theory) else theory
    reduced = GroundTheory(gt.facts, [r for r in gt.rules if r.head != anomaly], gt.superiority, gt.constants)
    base = base if base is not None else derive(gt, variant)
    return (base.defeasible & derive(reduced, variant).defeasible) - {anomaly}


@dataclass(frozen=True)
class Probes:
    """Decision 8: D⁻ plus one probe individual per class (``theory``), the probes like the anomaly's
    individual (``exempt``), and the expectations about the other probes a resolution must keep
    (``protected``), grouped by atom (``by_atom``)."""

    theory: Theory
    constants: frozenset
    exempt: frozenset
    protected: frozenset
    by_atom: dict


def _probe_name(cls: str, taken: frozenset) -> str:
    name, i = f"probe_{cls}", 1
    while name in taken:
        i += 1
        name = f"probe_{cls}_{i}"
    return name


def generality_probes(theory: Theory, anomaly: Literal, *, variant: str = "standard",
                      derived: Optional[Callable[[Theory], Conclusions]] = None) -> Optional[Probes]:
    """The probe individuals of decision 8 for a Level-3 instance, or None when it has none (module
    docstring): classes are the unary predicates of D⁻'s facts and strict rules, other than the anomaly's.
    ``derived`` may supply the conclusions of the probe theory (a cache's), else they are derived here."""
    if len(anomaly.args) != 1 or is_variable(anomaly.args[0]):
        return None
    ind = anomaly.args[0]
    own = {f.predicate for f in theory.facts if f.args == (ind,) and not f.negated}
    if not own:
        return None
    lits = [*theory.facts, *(lit for r in theory.rules if r.kind is RuleKind.STRICT for lit in (*r.body, r.head))]
    classes = sorted({lit.predicate for lit in lits if len(lit.args) == 1 and not lit.negated}
                     - {anomaly.predicate})
    taken = theory.constants()
    names = {}
    for cls in classes:
        names[cls] = _probe_name(cls, taken)
        taken = taken | {names[cls]}
    plus = theory.add(*(Literal.of(cls, name) for cls, name in names.items()))
    conc = derived(plus) if derived is not None else derive(plus, variant)
    exempt = frozenset(name for name in names.values()
                       if all(Literal.of(c, name) in conc.definite for c in own))
    watched = frozenset(names.values()) - exempt
    protected = frozenset(q for q in conc.defeasible if any(a in watched for a in q.args))
    by_atom: dict = {}
    for q in protected:
        by_atom.setdefault(q.atom, []).append(q)
    return Probes(plus, frozenset(names.values()), exempt, protected, by_atom)


def conservativity(protected: frozenset, revised: Union[Theory, Conclusions], *,
                   variant: str = "standard") -> tuple[bool, frozenset]:
    """(conservative, lost): every protected expectation is still derived by D′ (AGM minimal change)."""
    c = revised if isinstance(revised, Conclusions) else derive(revised, variant)
    lost = frozenset(protected - c.defeasible)
    return not lost, lost


def body_subsets(rule: Rule) -> list[Rule]:
    """Every rule with a proper subset of the body that is still range-restricted (decision 5).

    The empty body is included when the head is ground or otherwise covered; body order is kept. The
    body is a set: a repeated literal is one antecedent, so dropping a copy is not a smaller rule.
    """
    body = distinct_body(rule)
    head_vars = [a for a in rule.head.atom.args if is_variable(a)]
    out = []
    for k in range(len(body)):
        for keep in combinations(body, k):
            terms = {a for b in keep for a in b.atom.args}  # a constant never equals a variable
            if all(v in terms for v in head_vars):  # range-restricted; the parts are already validated
                out.append(Rule._trusted(rule.label, rule.kind, keep, rule.head))
    return out


def distinct_body(rule: Rule) -> tuple:
    """The body as a set (first occurrences, in order): antecedents are conjoined, so repeats add nothing."""
    return rule.body if len(rule.body) < 2 else tuple(dict.fromkeys(rule.body))


def is_minimal(hypothesis: Hypothesis, succeeds: Callable[[Rule], bool]) -> bool:
    """No proper body subset also succeeds (restores q at Level 1/2, resolves the anomaly at Level 3).

    A fact is minimal: its only proper subset is the empty hypothesis, which the instance rules out.
    """
    if isinstance(hypothesis, Literal):
        return True
    return not any(succeeds(smaller) for smaller in body_subsets(hypothesis))


@dataclass(frozen=True)
class LanguageBias:
    """DeFAb's L = (allowed body predicates, allowed head predicates, ar_max, depth), plus rule kinds.

    ``None`` allows any predicate. Terms are flat (no function symbols), so the nesting depth is always
    0 and needs no parameter. ``min_body=1`` rules out unconditional exceptions such as
    ``~> ~flies(tweety)``, which restate the observation (decision 6b); ``general=True`` rules out their
    decorated forms, a ground head or a body on the head's own atom (decision 7a);
    ``allow_constants=False`` forbids constants anywhere. Head variables must always be range-restricted.
    Body length counts distinct literals (a body is a set).
    """

    body_predicates: Optional[frozenset] = None
    head_predicates: Optional[frozenset] = None
    max_body: int = 3
    min_body: int = 1
    kinds: frozenset = frozenset({RuleKind.DEFEATER, RuleKind.DEFEASIBLE})
    allow_constants: bool = True
    general: bool = True

    @classmethod
    def for_instance(cls, theory: Theory, anomaly: Literal, **kw) -> "LanguageBias":
        """The default: bodies over D⁻'s predicates, heads on the anomaly's predicate."""
        return cls(body_predicates=theory.predicates(), head_predicates=frozenset({anomaly.predicate}), **kw)


def well_formedness(rule: Rule, superiority: Iterable[Superiority], theory: Theory,
                    bias: LanguageBias) -> list[str]:
    """The violations of the language bias by h and Γ (an empty list means well-formed)."""
    problems = []
    if rule.kind not in bias.kinds:
        problems.append(f"a {rule.kind.name.lower()} rule is not an allowed kind")
    if bias.head_predicates is not None and rule.head.predicate not in bias.head_predicates:
        problems.append(f"head predicate {rule.head.predicate!r} is not allowed")
    if bias.body_predicates is not None:
        bad = sorted({b.predicate for b in rule.body} - bias.body_predicates)
        if bad:
            problems.append(f"body predicates {bad} are not allowed")
    n_body = len(distinct_body(rule))
    if not bias.min_body <= n_body <= bias.max_body:
        problems.append(f"body length {n_body} is outside [{bias.min_body}, {bias.max_body}]")
    if rule.unsafe_variables:
        problems.append(f"head variable {rule.unsafe_variables[0]} does not occur in the body")
    if not bias.allow_constants and any(not is_variable(a) for lit in (*rule.body, rule.head) for a in lit.args):
        problems.append("constants are not allowed")
    if bias.general and rule.body:  # an empty body is already reported above (decision 6b)
        problems += _generality(rule)
    for s in superiority:
        other = s.inferior if s.superior == rule.label else None
        if other is None:
            problems.append(f"superiority {s} must put the hypothesis {rule.label} above an existing rule")
        elif other not in theory.labels or theory.rule(other).kind is RuleKind.STRICT:
            problems.append(f"superiority {s} must name a defeasible rule or defeater of the theory")
    return problems


def _generality(rule: Rule) -> list[str]:
    """Decision 7a: a rule about a class, not the one observation restated behind a vacuous condition."""
    problems = []
    if rule.head.args and rule.head.is_ground:  # a propositional head has no individual to generalise
        problems.append(f"the head {rule.head} is ground: a rule about one individual restates the observation "
                        "(decision 7a)")
    if any(b.atom == rule.head.atom for b in rule.body):
        problems.append(f"the body mentions the head's own atom {rule.head.atom}: the rule is circular "
                        "(decision 7a)")
    return problems


def novelty(rule: Hypothesis, theory: Theory) -> float:
    """Nov(h, D⁻): the fraction of h's distinct predicates that do not occur in D⁻ (negation ignored)."""
    lits = [rule] if isinstance(rule, Literal) else [*rule.body, rule.head]
    preds = {lit.predicate for lit in lits}
    return len(preds - theory.predicates()) / len(preds)


def revision_distance(added: int, lost: Iterable) -> int:
    """d_rev = |elements added| + |protected expectations lost|; Γ pairs count as added (decision 6c)."""
    return added + len(set(lost))


class Strength(str, enum.Enum):
    """How a Level-3 answer resolves the anomaly (DeFAb §5; docs/verifiers.md, DeFAb checks and the graded reward)."""

    UNRESOLVED = "unresolved"  # D′ still derives the anomaly
    WEAK = "weak"  # D′ derives neither the anomaly nor the observation α
    STRONG = "strong"  # D′ derives α, but loses a protected expectation
    RESTRUCTURING = "restructuring"  # D′ derives α and keeps every protected expectation


def strength(revised: Conclusions, anomaly: Literal, conservative: bool) -> Strength:
    """Classify by outcome. Deriving α needs a supporting rule that wins, which in practice is an exception
    ``=>`` with Γ (a defeater supports nothing); the outcome is what the paper's definitions compare."""
    return classify_strength(anomaly in revised.defeasible, anomaly.complement() in revised.defeasible,
                             conservative)


def classify_strength(anomaly_derived: bool, observation_derived: bool, conservative: bool) -> Strength:
    """:func:`strength` from the two +∂ answers it needs (D′ ⊢∂ anomaly, D′ ⊢∂ α)."""
    if anomaly_derived:
        return Strength.UNRESOLVED
    if observation_derived:
        return Strength.RESTRUCTURING if conservative else Strength.STRONG
    return Strength.WEAK


def graded_score(resolved: bool, well_formed: bool, conservative: bool, strength: Strength,
                 minimal: bool = True) -> float:
    """The graded Level-3 reward (docs/verifiers.md, DeFAb checks and the graded reward; decisions 2 and 7b):

    0 unresolved (or undecodable); 0.25 resolved but outside the language bias; 1.0 conservative and
    minimal; 0.75 conservative but not minimal, or strong but not conservative; 0.5 weak and not
    conservative.
    """
    if not resolved:
        return 0.0
    if not well_formed:
        return 0.25
    if conservative:
        return 1.0 if minimal else 0.75
    return 0.75 if strength in (Strength.STRONG, Strength.RESTRUCTURING) else 0.5
