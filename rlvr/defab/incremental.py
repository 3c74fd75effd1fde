"""Fast, exact checks of hypotheses against one challenge theory: ground D⁻ once, then per hypothesis
ground only what the question needs and run the closure only on the part that can change.

Every DeFAb check asks about D′ = D⁻ ∪ {h} ∪ Γ for many h and one D⁻ (the G rollouts of a prompt, the
body subsets of minimality). :class:`Prepared` grounds D⁻ once (full grounding) and keeps its body
domains N(D⁻) (the literals that do not fail, :mod:`rlvr.defab.ground`); a check then answers from
three facts, each exact:

1. **Locality.** The tags of q depend only on the rules for q and ~q, the facts on q's atom, and the
   tags of those rules' bodies (the proof conditions of :mod:`rlvr.defab.engine` mention nothing else).
   So the closure of the *cone* of a query set (atoms reachable downwards through rule bodies) gives the
   same tags on the cone as the closure of all of D′.
2. **What fails.** Let K be the signed predicates reachable upwards from h's head (h a fact, strict or
   defeasible rule; K = ∅ for a defeater, which supports nothing) through the supporting rules of D⁻.
   Every literal that does not fail in D′ is in N(D⁻) or has its predicate in K (proof: the others are
   supported in D′ only by rules of D⁻ whose bodies avoid K, so together with N(D⁻) they are
   self-supported in D⁻, hence in its greatest fixpoint N(D⁻)). The cone is therefore grounded top-down
   from the query atoms, keeping rule instances whose body literals are in N(D⁻) or K-predicated: the
   dropped instances have a failing body literal (−Δ, −∂), so dropping them changes no conclusion, as
   in the full grounding; instances with failing K-literals are kept, which is harmless (exhaustive and
   full grounding agree). Nothing of D⁻ is re-grounded; instances are memoised per (K, atom).
3. **What can change** (Level 3 conservativity). Let A be the atoms of h's instances' heads closed
   upwards through rule instances kept by the same criterion. An atom outside A has a cone free of h,
   equal to its cone in D⁻ up to instances with failing bodies, so its tags are those of D⁻; only the
   protected expectations on A need the closure.

**New constants.** A hypothesis may bring constants C⁺ that D⁻ lacks (a Level-1 fact about an individual
whose only fact was removed). Variables then range over C ∪ C⁺, and N(D⁻) over C ∪ C⁺ is read off
N(D⁻) over C: renaming every constant of C⁺ to one constant c of C maps D⁻'s instances to instances and
its self-supported sets to self-supported sets (D⁻ mentions no constant of C⁺), so a literal that does
not fail in D⁻ over C ∪ C⁺ still does not fail over C after the renaming, for every choice of c. Hence
a literal over C is kept iff it is in N(D⁻), and a literal mentioning C⁺ (outside K) only if each of its
|C| renamings is (a Level-1 fact about a new individual then grounds little beyond what it implies);
both prunings are exact (this needs C ≠ ∅). Point 3 compares with D⁻ over C, so
:meth:`Prepared.affected` returns ``None`` for such hypotheses, and callers use the reference path (re-ground D′, derive all of it).
Tests compare the two paths on random theories, generated instances and mutated hypotheses
(``tests/defab/test_incremental.py``).
"""

from __future__ import annotations

import gc
from itertools import product
from typing import Iterable, NamedTuple, Optional, Union

from rlvr.defab.engine import Conclusions, _Closure, _Compiled, derive, resolve_variant
from rlvr.defab.ground import _extend, _LitCache, _matches, _pattern, ground_with_domains
from rlvr.defab.syntax import Atom, Literal, Rule, RuleKind, Superiority, Theory, is_variable

__all__ = ["Prepared"]

Hypothesis = Union[Literal, Rule]


class _Instance(NamedTuple):
    """A ground rule instance: what the closure reads of a :class:`Rule`, cheaper to build."""

    label: str
    kind: RuleKind
    body: tuple
    head: Literal


class _Cone(NamedTuple):
    """What the closure reads of a ground theory."""

    facts: list
    rules: list
    superiority: list


class _Context:
    """Body domains of D′ for pruning (every tuple inside K; outside K, N(D⁻) and the tuples with C⁺
    whose renamings into C are all in N(D⁻)) and the memoised instances for one (K, C⁺)."""

    __slots__ = ("base", "open", "new", "old", "consts", "down", "up")

    def __init__(self, base, open_keys: frozenset, new: frozenset, old: list[str], consts: list[str]):
        self.base, self.open, self.new, self.old, self.consts = base, open_keys, new, old, consts
        self.down: dict = {}
        self.up: dict = {}

    def size(self, key) -> int:
        return len(self.consts) ** key[2] if key in self.open else self.base.size(key)

    def lookup(self, key, positions: tuple, vals: tuple):
        if key in self.open:
            return self._all(key[2], positions, vals)
        new = self.new
        if new and any(v in new for v in vals):
            return [t for t in self._all(key[2], positions, vals) if self._renamings_hold(key, t)]
        known = self.base.lookup(key, positions, vals)
        if not new or len(positions) == key[2]:
            return known
        return [*known, *(t for t in self._all(key[2], positions, vals)
                          if any(a in new for a in t) and self._renamings_hold(key, t))]

    def _renamings_hold(self, key, args: tuple) -> bool:
        """Every renaming of C⁺ to one constant of C gives a tuple of N(D⁻) (module docstring)."""
        values, new = self.base.values.get(key, ()), self.new
        return all(tuple(c if a in new else a for a in args) in values for c in self.old)

    def _all(self, arity: int, positions: tuple, vals: tuple) -> list:
        if len(positions) == arity:
            return [vals]
        free = [i for i in range(arity) if i not in positions]
        out = []
        for combo in product(self.consts, repeat=len(free)):
            args = [None] * arity
            for i, v in zip(positions, vals):
                args[i] = v
            for i, v in zip(free, combo):
                args[i] = v
            out.append(tuple(args))
        return out


def _plan(rule: Rule) -> tuple:
    """(body patterns, unsafe head variables, body variables, each pattern's argument positions) of a
    rule, computed once per rule."""
    pats = [_pattern(b) for b in rule.body]
    body_vars = tuple(dict.fromkeys(a for _, args, isvar in pats for a, v in zip(args, isvar) if v))
    unsafe = tuple(dict.fromkeys(a for a in rule.head.atom.args if is_variable(a) and a not in body_vars))
    return pats, unsafe, body_vars, [tuple(range(len(args))) for _, args, _ in pats]


def _unify(pattern: tuple, args: tuple) -> Optional[dict]:
    """The substitution making the argument pattern equal to the ground ``args``, or None."""
    theta: dict = {}
    for p, a in zip(pattern, args):
        if p[:1] == "?" or p[:1].isupper():
            if theta.setdefault(p, a) != a:
                return None
        elif p != a:
            return None
    return theta


class Prepared:
    """D⁻ grounded once, with memoised top-down instances; answers +∂ questions about D⁻ ∪ {h} ∪ Γ."""

    def __init__(self, theory: Theory, variant: str = "standard"):
        self.theory = theory
        self.logic = resolve_variant(variant)
        self.ground, self.doms = ground_with_domains(theory)
        self.base: Conclusions = derive(self.ground, self.logic)
        self.consts = sorted(theory.constants())
        self._const_set = frozenset(self.consts)
        self._cache = _LitCache()  # every ground literal of a cone is interned here: dict hits by identity
        self._facts: dict[Atom, list[Literal]] = {}
        for f in theory.facts:
            f = self._intern(f)
            self._facts.setdefault(f.atom, []).append(f)
        self._by_head: dict[tuple, list[Rule]] = {}  # (predicate, arity) of the head atom -> rules
        self._by_body: dict[tuple, list[tuple[Rule, Literal]]] = {}
        succ: dict[tuple, set] = {}  # signed predicate -> heads of supporting rules using it
        for r in theory.rules:
            self._by_head.setdefault((r.head.predicate, len(r.head.args)), []).append(r)
            for b in dict.fromkeys(r.body):
                self._by_body.setdefault((b.predicate, len(b.args)), []).append((r, b))
                if r.kind is not RuleKind.DEFEATER:
                    succ.setdefault(b.key, set()).add(r.head.key)
        self._succ = succ
        self._sup = [(s.superior, s.inferior) for s in theory.superiority]
        self._reach: dict[tuple, frozenset] = {}
        self._contexts: dict[tuple, _Context] = {}
        self._plans: dict = {}  # rule -> _plan(rule)
        self._context_of: dict = {}  # h -> its context (h is hashed once per answer, its K and C⁺ not at all)
        self._last: tuple = (None, {})  # (h, its instances by head atom) from the latest ``affected``

    # -- grounding ---------------------------------------------------------------------------------

    def _open_keys(self, h: Hypothesis) -> frozenset:
        """K: signed predicates that may stop failing once h is added (module docstring, point 2)."""
        if isinstance(h, Rule) and h.kind is RuleKind.DEFEATER:
            return frozenset()
        start = h.key if isinstance(h, Literal) else h.head.key
        k = self._reach.get(start)
        if k is None:
            seen, stack = {start}, [start]
            while stack:
                for nxt in self._succ.get(stack.pop(), ()):
                    if nxt not in seen:
                        seen.add(nxt)
                        stack.append(nxt)
            k = self._reach[start] = frozenset(seen)
        return k

    def _intern(self, lit: Literal) -> Literal:
        """The shared object for a ground literal (equal atoms are then identical: no ``__eq__`` calls)."""
        return self._cache.literal(lit, {})

    def _context(self, h: Hypothesis) -> Optional[_Context]:
        """The domains and memos for h's K and new constants; None when D⁻ has no constant but h does."""
        known = self._context_of
        ctx = known.get(h, known)
        if ctx is known:
            if len(known) >= 4096:
                known.clear()
            ctx = known[h] = self._new_context(h)
        return ctx

    def _new_context(self, h: Hypothesis) -> Optional[_Context]:
        k = self._open_keys(h)
        lits = (h,) if isinstance(h, Literal) else (*h.body, h.head)
        new = frozenset(a for lit in lits for a in lit.args if not is_variable(a) and a not in self._const_set)
        if new and not self.consts:
            return None
        ctx = self._contexts.get((k, new))
        if ctx is None:
            if len(self._contexts) >= 64:  # bound the memory that answers with made-up constants can claim
                self._contexts.clear()
            ctx = self._contexts[(k, new)] = _Context(self.doms, k, new, self.consts, sorted(self._const_set | new))
        return ctx

    def _instances(self, rule: Rule, theta: dict, doms: _Context) -> list[_Instance]:
        """Instances of ``rule`` extending ``theta`` whose body literals may hold (module docstring)."""
        lit = self._cache.literal
        plan = self._plans.get(rule)
        if plan is None:
            if len(self._plans) >= 4096:  # answers add their rules here: bound what they can claim
                self._plans.clear()
            plan = self._plans[rule] = _plan(rule)
        pats, unsafe, body_vars, every = plan
        if not unsafe and all(v in theta for v in body_vars):  # no join left: test each body literal
            for (key, args, _), positions in zip(pats, every):
                if not doms.lookup(key, positions, tuple(map(theta.get, args, args))):
                    return []
            return [_Instance(rule.label, rule.kind, tuple(lit(b, theta) for b in rule.body), lit(rule.head, theta))]
        out = []
        for th in _matches(pats, doms, theta):
            for full in (_extend(th, unsafe, doms.consts) if unsafe else (th,)):
                out.append(_Instance(rule.label, rule.kind, tuple(lit(b, full) for b in rule.body),
                                     lit(rule.head, full)))
        return out

    def _hyp_instances(self, h: Rule, atom: Optional[Atom], doms: _Context) -> list[Rule]:
        """Instances of h with head atom ``atom`` (every instance when ``atom`` is None)."""
        if atom is None:
            return self._instances(h, {}, doms)
        if h.head.predicate != atom.predicate or len(h.head.args) != len(atom.args):
            return []
        theta = _unify(h.head.args, atom.args)
        return [] if theta is None else self._instances(h, theta, doms)

    def _down_rules(self, atom: Atom, memo: dict, doms: _Context) -> list[Rule]:
        """Instances of D⁻'s rules whose head is on ``atom`` (memoised per K)."""
        out = memo.get(atom)
        if out is None:
            out = []
            for r in self._by_head.get((atom.predicate, len(atom.args)), ()):
                theta = _unify(r.head.args, atom.args)
                if theta is not None:
                    out.extend(self._instances(r, theta, doms))
            memo[atom] = out
        return out

    def _up_atoms(self, atom: Atom, memo: dict, doms: _Context) -> list[Atom]:
        """Head atoms of D⁻'s rule instances with a body literal on ``atom`` (memoised per K)."""
        out = memo.get(atom)
        if out is None:
            heads = {}
            for r, b in self._by_body.get((atom.predicate, len(atom.args)), ()):
                theta = _unify(b.args, atom.args)
                if theta is not None:
                    heads.update((inst.head.atom, None) for inst in self._instances(r, theta, doms))
            out = memo[atom] = list(heads)
        return out

    # -- the check ---------------------------------------------------------------------------------

    def affected(self, h: Hypothesis) -> Optional[set]:
        """A: the atoms whose tags h can change (module docstring, point 3); None for new constants."""
        doms = self._context(h)
        if doms is None or doms.new:
            return None
        if isinstance(h, Literal):
            start = [h.atom]
        else:
            by_atom: dict = {}
            for r in self._hyp_instances(h, None, doms):
                by_atom.setdefault(r.head.atom, []).append(r)
            self._last = (h, by_atom)  # the check that follows (``tags`` for the same h) reuses them
            start = list(by_atom)
        memo = doms.up
        seen = set(start)
        stack = list(seen)
        while stack:
            for nxt in self._up_atoms(stack.pop(), memo, doms):
                if nxt not in seen:
                    seen.add(nxt)
                    stack.append(nxt)
        return seen

    def tags(self, h: Hypothesis, gamma: Iterable[Superiority], queries: Iterable[Literal]) -> Optional[set]:
        """The queries that D⁻ ∪ {h} ∪ Γ proves +∂ (None only when D⁻ has no constant and h has one)."""
        doms = self._context(h)
        if doms is None:
            return None
        asked = [(q, self._intern(q)) for q in queries]
        was = gc.isenabled()
        gc.disable()  # instances and the closure are many small acyclic objects (see ground.gc_paused)
        try:
            rules, facts = self._cone(h, [q.atom for _, q in asked], doms)
            c = _Compiled(_Cone(facts, rules, self._sup + [(s.superior, s.inferior) for s in gamma]), self.logic)
            s = _Closure(c)
            s.run()
        finally:
            if was:
                gc.enable()
        atoms, pp = c.atoms, s.pp
        return {q for q, lit in asked if lit.atom in atoms and pp[2 * atoms[lit.atom] + lit.negated]}

    def _cone(self, h: Hypothesis, start: list, doms: _Context) -> tuple[list, list]:
        """Rule instances and facts of D′ on the atoms reachable downwards from ``start`` (point 1)."""
        memo, fact_index = doms.down, self._facts
        hyp_facts, by_atom, hkey = (), None, None
        if isinstance(h, Rule):
            last, instances = self._last
            if last is h:
                by_atom = instances
            else:
                hkey = (h.head.predicate, len(h.head.args))
        else:
            fact = self._intern(h)
            hyp_facts = {fact.atom: [fact]}
        seen = set(start)
        stack = list(seen)
        rules: list = []
        facts: list = []
        while stack:
            a = stack.pop()
            found = memo.get(a)
            if found is None:
                found = self._down_rules(a, memo, doms)
            if by_atom is not None:
                extra = by_atom.get(a)
            elif hkey is not None and hkey == (a.predicate, len(a.args)):
                extra = self._hyp_instances(h, a, doms)
            else:
                extra = hyp_facts.get(a) if hyp_facts else None
                if extra:
                    facts.extend(extra)
                    extra = None
            if extra:
                found = found + extra
            known = fact_index.get(a)
            if known:
                facts.extend(known)
            for r in found:
                rules.append(r)
                for b in r.body:
                    b = b.atom
                    if b not in seen:
                        seen.add(b)
                        stack.append(b)
        return rules, facts
