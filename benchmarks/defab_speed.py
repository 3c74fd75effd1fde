"""Speed of the DeFAb engine and answer checks.

1. Engine: time per ground rule of ``derive`` on random propositional theories of growing size (the
   closure is linear, so µs/rule should stay flat; "visits/rule", the machine-independent work, is
   flat), and of grounding + derive on random datalog taxonomies.
2. Verification over **generated** instances (every shipped KB, mixed distractors): median and 99th
   percentile time of one ``score_answer`` call for Level-1/2 and Level-3 answers (the gold, with its
   superiority pairs, and random mutations of it; "gold only" repeats the row for the golds, the
   correct answers a trained policy mostly gives), for
   - ``incremental, warm``: the per-instance cache already holds D⁻ grounded and derived (the G rollouts
     of one prompt share it) — the reward's normal case;
   - ``same, M4 text in``: as warm, but the answer arrives as M4 text and is parsed inside the check;
   - ``incremental, cold``: the first answer to an instance, grounding D⁻ included;
   - ``reground``: the reference path that grounds and derives all of D′ for every check (what every
     check cost before the incremental checker).

Times are CPU time of this process (``time.process_time``; the machine may be shared), best of 3 for
the engine rows.

Usage: python benchmarks/defab_speed.py [--quick] [--instances N] [--profile]
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import random
import statistics
import time

from rlvr.defab.engine import _Closure, _Compiled, derive, resolve_variant
from rlvr.defab.generate import generate
from rlvr.defab.ground import ground
from rlvr.defab.kb import BUILTIN_KBS
from rlvr.defab.score import _abduction_instance, _level3_instance, prepare, score_answer
from rlvr.defab.syntax import Atom, Literal, Rule, RuleKind, Superiority, Theory

KINDS = (RuleKind.STRICT, RuleKind.DEFEASIBLE, RuleKind.DEFEASIBLE, RuleKind.DEFEASIBLE, RuleKind.DEFEATER)


def random_propositional(rng: random.Random, n_rules: int) -> Theory:
    """n_rules rules over n_rules/2 atoms, bodies of 0–3 literals, ~1 superiority pair per 10 rules."""
    atoms = [Atom(f"a{i}") for i in range(max(2, n_rules // 2))]

    def lit() -> Literal:
        return Literal(rng.choice(atoms), rng.random() < 0.3)

    facts = [lit() for _ in range(max(1, n_rules // 20))]
    rules = [Rule(f"r{i}", rng.choice(KINDS), [lit() for _ in range(rng.choice((0, 1, 1, 2, 2, 3)))], lit())
             for i in range(n_rules)]
    sup = {(f"r{i}", f"r{j}") for _ in range(n_rules // 10)
           for i, j in [sorted(rng.sample(range(n_rules), 2))]}  # i < j: acyclic
    return Theory(facts, rules, [Superiority(a, b) for a, b in sup])


def taxonomy(n_classes: int, n_individuals: int, rng: random.Random) -> tuple[Theory, Literal, list[str]]:
    """A datalog taxonomy with defaults and one anomaly, plus answers of each grade for it."""
    facts, rules, sup = [], [], []
    for j in range(n_classes):
        parent = f"c{rng.randrange(j)}" if j else "animal"
        rules.append(Rule(f"isa{j}", RuleKind.STRICT, [Literal.of(f"c{j}", "X")], Literal.of(parent, "X")))
        rules.append(Rule(f"p{j}", RuleKind.DEFEASIBLE, [Literal.of(f"c{j}", "X")], Literal.of(f"prop{j}", "X")))
        rules.append(Rule(f"q{j}", RuleKind.DEFEASIBLE, [Literal.of(f"prop{j}", "X")], Literal.of(f"dep{j}", "X")))
    for i in range(n_individuals):
        facts.append(Literal.of(f"c{rng.randrange(n_classes)}", f"i{i}"))
    facts += [Literal.of("c0", "tweety"), Literal.of("special", "tweety")]
    answers = ["d: special(X) ~> ~prop0(X).", "d: c0(X) ~> ~prop0(X).", "e: special(X) => ~prop0(X).\ne > p0.",
               "d: special(X), c0(X) ~> ~prop0(X).", "d: c1(X) ~> ~prop0(X).", "d: ~> ~prop0(tweety)."]
    return Theory(facts, rules, sup), Literal.of("prop0", "tweety"), answers


def bench_engine(sizes: list[int]) -> None:
    print("engine: derive on a pre-grounded random propositional theory (standard logic)")
    print(f"{'ground rules':>12} {'seconds':>9} {'µs/rule':>8} {'visits/rule':>11}")
    for n in sizes:
        g = ground(random_propositional(random.Random(n), n), "exhaustive")  # propositional: itself
        best = min(_timed(lambda: derive(g)) for _ in range(3))
        print(f"{len(g):>12} {best:>9.4f} {best / len(g) * 1e6:>8.2f} {_visits(g) / len(g):>11.2f}")
    print("grounding + derive on datalog taxonomies (classes, individuals)")
    print(f"{'ground rules':>12} {'ground s':>9} {'derive s':>9} {'µs/rule':>8}")
    for classes, people in ((10, 20), (30, 100), (100, 300), (200, 1000)):
        t, _, _ = taxonomy(classes, people, random.Random(classes))
        tg = _timed(lambda: ground(t))
        g = ground(t)
        td = min(_timed(lambda: derive(g)) for _ in range(3))
        print(f"{len(g):>12} {tg:>9.4f} {td:>9.4f} {(tg + td) / len(g) * 1e6:>8.2f}")


def _clear_caches() -> None:
    for cache in (prepare, _abduction_instance, _level3_instance):
        cache.cache_clear()


def _answers(inst, rng: random.Random) -> list[tuple]:
    """The gold (with Γ) and 5 mutations: other predicate, other constant, body changed or dropped."""
    g, gamma = inst.gold, inst.gold_superiority
    preds = sorted(inst.theory.predicates())
    consts = sorted(inst.theory.constants())
    out = [(g, gamma)]
    for _ in range(5):
        if isinstance(g, Literal):
            out.append((Literal.of(rng.choice(preds), rng.choice(consts + list(g.args))), ()))
            continue
        body = rng.choice([[Literal.of(rng.choice(preds), "X")], [*g.body, Literal.of(rng.choice(preds), "X")],
                           [Literal.of(g.body[0].predicate, rng.choice(consts))], g.body])
        head = g.head if rng.random() < 0.5 else Literal.of(rng.choice(preds), "X", negated=g.head.negated)
        out.append((Rule(g.label, g.kind, body, head), gamma if rng.random() < 0.5 else ()))
    return out


def _time_checks(cases: list, mode: str) -> list[tuple[bool, float]]:
    """(is the gold, seconds) per check; the gold is the first answer of each case."""
    times = []
    for inst, answers in cases:
        if mode == "cold":
            _clear_caches()
            h, gamma = answers[0]
            t = _timed(lambda: score_answer(inst.theory, inst.target, h, inst.level, superiority=gamma))
            times.append((True, t))
            continue
        score_answer(inst.theory, inst.target, *answers[0][:1], inst.level)  # warm the per-instance cache
        for k, (h, gamma) in enumerate(answers):
            if mode == "text":  # the M4 answer text, decoded as part of the check
                text = "\n".join([f"{h}." if isinstance(h, Literal) else str(h), *map(str, gamma)])
                times.append((k == 0, _timed(lambda: score_answer(inst.theory, inst.target, text, inst.level))))
                continue
            times.append((k == 0, _timed(lambda: score_answer(inst.theory, inst.target, h, inst.level,
                                                              superiority=gamma, reground=mode == "reground"))))
    return times


def bench_checks(n_per_kb: int, reps: int, profile: bool) -> None:
    rng = random.Random(0)
    groups = {"level 1/2": [], "level 3": []}
    for level in (1, 2, 3):
        for kb in BUILTIN_KBS:
            for inst in generate(level, n_per_kb, 100, kb=kb, strategy="mixed"):
                groups["level 3" if level == 3 else "level 1/2"].append((inst, _answers(inst, rng)))
    for name, cases in groups.items():
        sizes = [len(prepare(i.theory).ground) for i, _ in cases]
        print(f"checks, {name}: {len(cases)} generated instances, {min(sizes)}–{max(sizes)} ground rules "
              f"(median {statistics.median(sizes):.0f}), {len(cases[0][1])} answers each")
        for mode in ("warm", "text", "cold", "reground"):
            times = [t for _ in range(reps if mode != "cold" else 1) for t in _time_checks(cases, mode)]
            _report({"warm": "incremental, warm", "text": "  same, M4 text in", "cold": "incremental, cold",
                     "reground": "reground"}[mode], [t for _, t in times])
            if mode != "cold":  # cold times the gold only
                _report("  gold only", [t for gold, t in times if gold])
        if profile:
            _clear_caches()
            _time_checks(cases, "warm")
            prof = cProfile.Profile()
            prof.runcall(lambda: [_time_checks(cases, "warm") for _ in range(reps)])
            pstats.Stats(prof).sort_stats("tottime").print_stats(12)


def _visits(g) -> int:
    """Machine-independent work of one closure: body occurrences scanned per tag set, plus superiority
    pairs and literals. Flat per rule when the algorithm is linear; the µs/rule drift at large sizes is
    then the memory hierarchy (bigger dicts and lists fall out of cache), not extra work."""
    c = _Compiled(g, resolve_variant("standard"))
    s = _Closure(c)
    s.run()
    tagged = sum(len(c.occ[q]) for flags in (s.pd, s.md, s.pp, s.mp) for q, f in enumerate(flags) if f)
    return tagged + sum(map(len, c.beats)) + len(c.literals)


def _timed(fn) -> float:
    """CPU seconds of this process: the machine is shared, so wall time would count other jobs."""
    t0 = time.process_time()
    fn()
    return time.process_time() - t0


def _report(label: str, times: list[float]) -> None:
    times = sorted(times)
    p99 = times[min(len(times) - 1, int(0.99 * len(times)))]
    print(f"  {label:<18} n={len(times):>5}  median {statistics.median(times) * 1e6:8.1f} µs   "
          f"p99 {p99 * 1e6:8.1f} µs")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="smaller theories and fewer instances")
    ap.add_argument("--instances", type=int, default=None, help="instances per KB and level (default 10, quick 3)")
    ap.add_argument("--profile", action="store_true", help="cProfile the warm incremental checks")
    args = ap.parse_args()
    bench_engine([1_000, 3_000, 10_000] if args.quick else [1_000, 3_000, 10_000, 30_000, 100_000])
    bench_checks(args.instances or (3 if args.quick else 10), 1 if args.quick else 3, args.profile)


if __name__ == "__main__":
    main()
