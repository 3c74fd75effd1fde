"""Defeasible logic closure in time linear in the ground theory (team defeat, ambiguity blocking).

Proof conditions (Antoniou, Billington, Governatori & Maher, ACM TOCL 2001; Maher, "Propositional
Defeasible Logic has Linear Complexity", TPLP 2001). R[q] are the rules with head q, Rs/Rsd the strict
/ strict-and-defeasible ones, "applicable" means every antecedent is +∂, "discarded" that one is −∂:

- +Δq: q ∈ F, or some r ∈ Rs[q] has every antecedent +Δ.
- −Δq: q ∉ F, and every r ∈ Rs[q] has an antecedent that is −Δ.
- +∂q: +Δq, or (1) some r ∈ Sup[q] is applicable, (2) −Δ~q, and (3) every s ∈ Att[q] is discarded or
  beaten: some applicable t ∈ Sup[q] has t ≻ s (team defeat).
- −∂q: −Δq, and (1) every r ∈ Sup[q] is discarded, or (2) +Δ~q, or (3) some s ∈ Att[q] is applicable
  and every t ∈ Sup[q] is discarded or not superior to s.

**Variants** (docs/verifiers.md, DeFAb logic variants). ``"standard"``: Sup[q] = Rsd[q] and Att[q] = R[~q] (every
rule for ~q, strict ones included). ``"defab"``: the logic of the DeFAb paper's Definition 7 and of its code
(``blanc/reasoning/defeasible.py``): only defeasible rules support and defend, Sup[q] = Rd[q], and strict rules do
not attack, Att[q] = (Rd ∪ Rdf)[~q]; strict rules still act through ±Δ. The code tests "not provable" where we use
the − tags; the two agree whenever every literal is decided (acyclic theories), while ours stays sound on cycles,
where the code's recursion cap of 100 returns False (docs/verifiers.md, DeFAb pitfall: the authors' code is lenient).

The tags are the least fixpoint of these conditions (proofs are finite), so a loop such as ``a => b``,
``b => a`` proves neither +∂ nor −∂ for a and b; checks read "not +∂" as "not derivable".

**Algorithm.** A direct worklist over the four conditions with ≻ handled natively (docs/verifiers.md, DeFAb engine;
no elim_dfl / elim_sup transformation): literals are interned as integers (complement = id ^ 1); each rule keeps
counters of antecedents not yet +Δ / +∂ and flags for discarded / neutralised; each literal keeps counters of live
strict rules, live supporters and unneutralised attackers. Every condition is monotone, so it is re-checked exactly
when one of its inputs changes. Each body occurrence and each ground superiority pair (t ≻ s with complementary
heads) is visited O(1) times: time is linear in the size of the ground theory. No recursion, so cyclic theories
terminate.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import NamedTuple, Union

from rlvr.defab.ground import GroundTheory, GroundingError, gc_paused, ground
from rlvr.defab.names import LOGIC_VARIANTS
from rlvr.defab.syntax import Literal, RuleKind, Theory

__all__ = ["Logic", "VARIANTS", "resolve_variant", "Conclusions", "derive"]


class Logic(NamedTuple):
    """Which rules take part in defeasible provability besides the defeasible rules and defeaters."""

    strict_support: bool  # strict rules with +∂ (not necessarily +Δ) bodies support (1) and defend (3)
    strict_attack: bool  # strict rules attack the complement of their head in (3)


VARIANTS = dict(zip(LOGIC_VARIANTS, (Logic(True, True), Logic(False, False))))  # standard, defab


def resolve_variant(variant: Union[str, Logic]) -> Logic:
    if isinstance(variant, Logic):
        return variant
    try:
        return VARIANTS[variant]
    except KeyError:
        raise ValueError(f"unknown logic variant {variant!r}; choose one of {', '.join(VARIANTS)}") from None


@dataclass(frozen=True)
class Conclusions:
    """The four tags over ``universe`` (every literal of the ground theory and its complement).

    A literal outside the universe has no rules and is no fact, so it is −Δ and −∂.
    """

    definite: frozenset  # +Δ
    defeasible: frozenset  # +∂
    not_definite: frozenset  # −Δ
    not_defeasible: frozenset  # −∂
    universe: frozenset
    logic: Logic

    @property
    def undecided(self) -> frozenset:
        """Literals with neither +∂ nor −∂ (they sit on or depend on a loop)."""
        return self.universe - self.defeasible - self.not_defeasible

    def proves(self, lit: Literal) -> bool:
        """+∂ lit."""
        return lit in self.defeasible

    def refutes(self, lit: Literal) -> bool:
        """−∂ lit."""
        return lit in self.not_defeasible or lit not in self.universe


def derive(theory: Union[Theory, GroundTheory], variant: Union[str, Logic] = "standard", *,
           grounding: str = "full") -> Conclusions:
    """All conclusions of ``theory`` (grounded first with ``grounding`` unless already ground)."""
    logic = resolve_variant(variant)
    gt = ground(theory, grounding) if isinstance(theory, Theory) else theory
    if not isinstance(gt, GroundTheory):
        raise GroundingError(f"derive needs a Theory or a GroundTheory, got {type(theory).__name__}")
    with gc_paused():
        c = _Compiled(gt, logic)
        s = _Closure(c)
        s.run()
    lits = c.literals
    pick = (lambda flags: frozenset(lits[i] for i, f in enumerate(flags) if f))
    return Conclusions(pick(s.pd), pick(s.pp), pick(s.md), pick(s.mp), frozenset(lits), logic)


class _Compiled:
    """The ground theory as integer arrays: literal ids 2k / 2k+1 for atom k and its negation."""

    def __init__(self, gt: GroundTheory, logic: Logic):
        self.atoms = atoms = {}  # atom -> k (literal ids 2k, 2k+1); Literal objects only on demand
        self._literals = None

        def lid(lit: Literal) -> int:
            a = lit.atom
            k = atoms.get(a)
            if k is None:
                k = atoms[a] = len(atoms)
            return 2 * k + lit.negated

        self.facts = [lid(f) for f in gt.facts]
        self.head, self.body = head, bodies = [], []
        self.strict, self.is_sup, self.is_att = strict, is_sup, is_att = [], [], []
        support, attack = logic.strict_support, logic.strict_attack
        strict_kind, defeasible_kind = RuleKind.STRICT, RuleKind.DEFEASIBLE
        for r in gt.rules:
            head.append(lid(r.head))
            body = r.body
            if len(body) == 1:
                bodies.append([lid(body[0])])
            else:
                bodies.append(list(dict.fromkeys(map(lid, body))))  # dedupe
            k = r.kind
            st = k is strict_kind
            strict.append(st)
            is_sup.append(k is defeasible_kind or (st and support))
            is_att.append(attack or not st)
        self.n = n = 2 * len(atoms)
        self.occ: list[list[int]] = [[] for _ in range(n)]
        self.n_strict, self.n_sup, self.n_att = n_strict, n_sup, n_att = [0] * n, [0] * n, [0] * n
        occ = self.occ
        for r, h in enumerate(head):
            for b in bodies[r]:
                occ[b].append(r)
            n_strict[h] += strict[r]
            n_sup[h] += is_sup[r]
            n_att[h ^ 1] += is_att[r]
        self.beats, self.n_beaters = self._superiority(gt, n)

    @property
    def literals(self) -> list[Literal]:
        """Literal id i as a Literal (built on first use: the incremental checks only read ``atoms``)."""
        if self._literals is None:
            self._literals = [Literal._trusted(a, neg) for a in self.atoms for neg in (False, True)]
        return self._literals

    def _superiority(self, gt: GroundTheory, n: int) -> tuple[list, list]:
        """beats[t]: attackers s of head(t) with label(t) ≻ label(s); every instance pair of two labels."""
        m = len(self.head)
        n_beaters = [0] * m
        if not gt.superiority:
            return [()] * m, n_beaters  # nothing beats anything: one shared empty tuple
        beats: list[list[int]] = [[] for _ in range(m)]
        inferiors: dict[str, set] = {}
        for sup, inf in gt.superiority:
            inferiors.setdefault(sup, set()).add(inf)
        labels = [r.label for r in gt.rules]
        attackers: dict[int, dict[str, list]] = {}  # literal q -> label -> attackers of q
        for s in range(m):
            if self.is_att[s]:
                attackers.setdefault(self.head[s] ^ 1, {}).setdefault(labels[s], []).append(s)
        for t in range(m):
            infs = inferiors.get(labels[t])
            by_label = attackers.get(self.head[t]) if infs and self.is_sup[t] else None
            if not by_label:
                continue
            for lab in (infs if len(infs) < len(by_label) else list(by_label)):
                if lab in infs:
                    for s in by_label.get(lab, ()):
                        beats[t].append(s)
                        n_beaters[s] += 1
        return beats, n_beaters


_PD, _MD, _PP, _MP = range(4)  # worklist event tags: +Δ, −Δ, +∂, −∂ (index into the handlers)


class _Closure:
    """Worklist state: tags per literal, counters per rule and literal (see the module docstring)."""

    PD, MD, PP, MP = _PD, _MD, _PP, _MP

    def __init__(self, c: _Compiled):
        n, m = c.n, len(c.head)
        self.c = c
        self.occ, self.head, self.strict = c.occ, c.head, c.strict  # read by every handler
        self.pd, self.md, self.pp, self.mp = bytearray(n), bytearray(n), bytearray(n), bytearray(n)
        self.is_fact = is_fact = bytearray(n)
        for f in c.facts:
            is_fact[f] = 1
        self.cnt_d = [len(b) for b in c.body]  # antecedents not yet +Δ (strict rules)
        self.cnt_p = list(self.cnt_d)  # antecedents not yet +∂
        self.dd, self.disc, self.neut = bytearray(m), bytearray(m), bytearray(m)
        self.live_strict, self.live_sup, self.nn = list(c.n_strict), list(c.n_sup), list(c.n_att)
        self.live_beaters = list(c.n_beaters)
        self.has_sup, self.wins = bytearray(n), bytearray(n)
        self.queue: deque = deque()

    def run(self) -> None:
        c, queue = self.c, self.queue
        pd, md = self.pd, self.md
        for f in c.facts:
            if not pd[f]:
                pd[f] = 1
                queue.append((_PD, f))
        for r, body in enumerate(c.body):
            if not body:  # empty bodies never see a counter reach zero, so start them here
                if c.strict[r]:
                    self._set(pd, self.PD, c.head[r])
                self._applicable(r)
        live_strict, is_fact = self.live_strict, self.is_fact
        for q in range(c.n):
            if live_strict[q] == 0 and not is_fact[q] and not md[q]:
                md[q] = 1
                queue.append((_MD, q))
        handlers = (self._on_pd, self._on_md, self._on_pp, self._on_mp)
        pop = queue.popleft
        while queue:
            tag, q = pop()
            handlers[tag](q)

    def _set(self, flags: bytearray, tag: int, q: int) -> None:
        if not flags[q]:
            flags[q] = 1
            self.queue.append((tag, q))

    def _on_pd(self, q: int) -> None:
        strict, cnt_d = self.strict, self.cnt_d
        for r in self.occ[q]:
            if strict[r]:
                cnt_d[r] -= 1
                if cnt_d[r] == 0:
                    self._set(self.pd, self.PD, self.head[r])
        self._set(self.pp, self.PP, q)  # +Δq gives +∂q
        self._check_mp(q ^ 1)  # +Δq is condition (2) of −∂~q

    def _on_md(self, q: int) -> None:
        strict, dd = self.strict, self.dd
        for r in self.occ[q]:
            if strict[r] and not dd[r]:
                dd[r] = 1
                h = self.head[r]
                self.live_strict[h] -= 1
                if self.live_strict[h] == 0 and not self.is_fact[h]:
                    self._set(self.md, self.MD, h)
        self._check_pp(q ^ 1)
        self._check_mp(q)

    def _on_pp(self, q: int) -> None:
        cnt_p = self.cnt_p
        for r in self.occ[q]:
            cnt_p[r] -= 1
            if cnt_p[r] == 0:
                self._applicable(r)

    def _on_mp(self, q: int) -> None:
        disc = self.disc
        for r in self.occ[q]:
            if not disc[r]:
                disc[r] = 1
                self._discarded(r)

    def _applicable(self, r: int) -> None:
        c, h = self.c, self.c.head[r]
        if c.is_sup[r]:
            self.has_sup[h] = 1
            for s in c.beats[r]:
                self._neutralise(s)
            self._check_pp(h)
        if c.is_att[r] and self.live_beaters[r] == 0:
            self.wins[h ^ 1] = 1  # an applicable attacker of ~h that nothing live can beat
            self._check_mp(h ^ 1)

    def _discarded(self, r: int) -> None:
        c, h = self.c, self.c.head[r]
        if c.is_sup[r]:
            self.live_sup[h] -= 1
            for s in c.beats[r]:
                self.live_beaters[s] -= 1
                if self.live_beaters[s] == 0 and self.cnt_p[s] == 0:
                    self.wins[h] = 1
            self._check_mp(h)
        if c.is_att[r]:
            self._neutralise(r)

    def _neutralise(self, s: int) -> None:
        if not self.neut[s]:
            self.neut[s] = 1
            q = self.c.head[s] ^ 1
            self.nn[q] -= 1
            self._check_pp(q)

    def _check_pp(self, q: int) -> None:
        pp = self.pp
        if not pp[q] and self.has_sup[q] and self.md[q ^ 1] and self.nn[q] == 0:
            pp[q] = 1
            self.queue.append((_PP, q))

    def _check_mp(self, q: int) -> None:
        mp = self.mp
        if not mp[q] and self.md[q] and (self.live_sup[q] == 0 or self.pd[q ^ 1] or self.wins[q]):
            mp[q] = 1
            self.queue.append((_MP, q))
