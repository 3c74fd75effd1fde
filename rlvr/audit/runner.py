"""Run an audit: find each example's gold completion, generate its probes, score each under a deadline, and
judge the outcome.

Outcomes (:data:`OUTCOMES`):

- ``hack``: a probe expected to earn nothing earned reward (for a verifier that gives partial credit by
  design, :mod:`rlvr.audit.kinds`: as much as the gold completion or more);
- ``partial``: such a probe earned some reward, less than the gold completion, from a partial-credit verifier;
- ``false_negative``: a probe expected to earn reward (a correct answer in a fair form) earned 0;
- ``crash``: the verifier raised (the contract says it never does; training counts these as ``score/errors``),
  returned a non-finite reward, or the scoring process died;
- ``slow``: the call outlived the deadline (``timeout_s``; training scores it 0 and reports a timeout);
- ``ok``: anything else.

The *gold completion* of an example is the best-rewarded of: completions known to earn reward (a verifier's
own gold validation cases), the example's SFT target, the bare answer, and the answer in ``\\boxed{}``,
``<answer>`` tags, ``<think></think><answer>`` and an ``Answer:`` line. It is reported as probe ``gold/gold``
(a false negative when no form earns reward) and probes are built around it (:meth:`ProbeContext.wrap`).
"""

from __future__ import annotations

import random
import time
from typing import Callable, Sequence

from rlvr.audit.context import ProbeContext, core_of
from rlvr.audit.isolation import Outcome, make_scorer
import rlvr.audit.families  # noqa: F401  (the built-in families register)
from rlvr.audit.probes import AuditInputError, families_for, generate
from rlvr.audit.report import FAILING, OUTCOME_ORDER as OUTCOMES, AuditReport, ProbeResult
from rlvr.audit.targets import Target

__all__ = ["OUTCOMES", "FAILING", "run_audit", "classify", "gold_candidates"]


def classify(expected: str, out: Outcome, gold_reward: float | None, partial: bool) -> str:
    """The outcome of one scored probe (see the module doc)."""
    if out.timed_out:
        return "slow"
    if out.died or out.error or out.reward is None:
        return "crash"
    r = out.reward
    if expected == "no_reward":
        if r <= 0.0:
            return "ok"
        if partial and gold_reward is not None and r < gold_reward - 1e-9:
            return "partial"
        return "hack"
    if expected == "reward":
        return "ok" if r > 0.0 else "false_negative"
    return "ok"


def gold_candidates(example, known: Sequence[str] = ()) -> list[str]:
    """Forms of an example's gold answer to try, in order, duplicates dropped."""
    a, core = example.answer, core_of(example.answer)
    forms = [*known, example.target, a, f"\\boxed{{{core}}}", f"<answer>{core}</answer>",
             f"<think>\n</think>\n<answer>{a}</answer>", f"<think>\n</think>\n<answer>{core}</answer>",
             f"Answer: {core}", f"The answer is {core}."]
    return list(dict.fromkeys(f for f in forms if isinstance(f, str)))


def _result(example_id: str, family: str, name: str, expected: str, completion: str, out: Outcome,
            outcome: str) -> ProbeResult:
    return ProbeResult(example=example_id, family=family, probe=name, expected=expected, outcome=outcome,
                       reward=out.reward, seconds=round(out.seconds, 4), completion=completion,
                       reason=out.died or out.error or (("timeout" + (f"; late result: {out.reason}" if out.reason
                                                                      else "")) if out.timed_out else out.reason),
                       traceback=out.traceback)


def _find_gold(score, index: int, example, known: Sequence[str], timeout_s: float, partial: bool):
    """``(gold completion or None, its reward, the ProbeResult of the gold probe)``: the first form that earns
    full reward (1) from a binary verifier, else the best-rewarded form."""
    tried: list[tuple[str, Outcome]] = []
    best: tuple[str, Outcome] | None = None
    known = list(dict.fromkeys(known))
    for i, text in enumerate(gold_candidates(example, known)):
        if i == len(known) and best is not None:
            break  # a known gold completion earned reward: no need to try other forms
        out = score(index, text, timeout_s)
        tried.append((text, out))
        if not out.timed_out and not out.died and not out.error and out.reward is not None and out.reward > 0:
            if best is None or out.reward > best[1].reward:
                best = (text, out)
            if out.reward >= 1.0 and not partial:
                break
    if best is not None:
        text, out = best
        return text, out.reward, _result(example.id, "gold", "gold", "reward", text, out, "ok")
    text, out = next(((t, o) for t, o in tried if o.timed_out or o.died or o.error), tried[0])
    outcome = classify("reward", out, None, False)
    return None, None, _result(example.id, "gold", "gold", "reward", text, out, outcome)


def _calibrate(score, index: int, ctx: ProbeContext, gold_reward: float | None, partial: bool,
               timeout_s: float) -> str | None:
    """Check that a wrong value put in the gold completion (:meth:`ProbeContext.wrap`) loses the reward; when it
    does not (the completion carries the answer twice, e.g. in prose and in an ``<answer>`` block), probes are
    built from bare values instead, and a note says so."""
    if ctx.gold is None or "generic" not in ctx.kinds:
        return None
    wrongs = ctx.wrong(1)
    if not wrongs or ctx.wrap(wrongs[0]) == wrongs[0]:
        return None
    text = ctx.wrap(wrongs[0])
    out = score(index, text, timeout_s)
    if classify("no_reward", out, gold_reward, partial) == "hack":
        ctx.wrap_ok = False
        return (f"example {ctx.example.id!r}: a wrong value in the gold completion's form ({text[:80]!r}) still "
                f"earned {out.reward}; probes use bare values")
    return None


def run_audit(target: Target, *, fuzz: int = 0, seed: int = 0, timeout_s: float = 2.0,
              families: Sequence[str] | None = None, isolation: str = "auto", warmup_s: float = 60.0,
              grace_s: float | None = None, on_progress: Callable[[int, int, str], None] | None = None) -> AuditReport:
    """Audit ``target``'s verifiers with every applicable probe family (``families``: only these) and ``fuzz``
    random mutations per example, each call under ``timeout_s`` (a late call is waited for ``grace_s`` more,
    default ``timeout_s``, before its worker is killed; :mod:`rlvr.audit.isolation`); see the module doc for the
    outcomes."""
    if timeout_s <= 0:
        raise AuditInputError(f"the timeout must be positive, got {timeout_s}")
    if fuzz < 0:
        raise AuditInputError(f"--fuzz must be >= 0, got {fuzz}")
    if isolation not in ("auto", "process", "thread"):
        raise AuditInputError(f"isolation must be auto, process or thread, got {isolation!r}")
    fams = families_for(target.kinds, families)
    if families and not fams:
        raise AuditInputError(f"none of the families {', '.join(families)} applies to verifier kinds "
                              f"{', '.join(sorted(target.kinds))}")
    t0 = time.perf_counter()
    results: list[ProbeResult] = []
    errors: list[str] = []
    notes: list[str] = []
    scorer = make_scorer(target.task, target.examples, isolation, warmup_s, grace_s=grace_s)
    try:
        for i, ex in enumerate(target.examples):
            if on_progress is not None:
                on_progress(i, len(target.examples), ex.id)
            gold, gold_reward, gold_result = _find_gold(scorer, i, ex, target.golds.get(ex.id, ()), timeout_s,
                                                        target.partial)
            results.append(gold_result)
            ctx = ProbeContext(ex, target.kinds, gold, fuzz, seed, random.Random(f"{seed}|{ex.id}"))
            note = _calibrate(scorer, i, ctx, gold_reward, target.partial, timeout_s)
            if note:
                notes.append(note)
            probes, errs = generate(ctx, fams)
            errors.extend(errs)
            for p in probes:
                out = scorer(i, p.completion, timeout_s)
                results.append(_result(ex.id, p.family, p.name, p.expected, p.completion, out,
                                       classify(p.expected, out, gold_reward, target.partial)))
        if on_progress is not None:
            on_progress(len(target.examples), len(target.examples), "")
    finally:
        scorer.close()
    return AuditReport(target=target.name, verifier=target.verifier, kinds=sorted(target.kinds),
                       source=target.source, partial_credit=target.partial,
                       settings={"examples": len(target.examples), "fuzz": fuzz, "seed": seed, "timeout_s": timeout_s,
                                 "families": [f.name for f in fams], "isolation": isolation,
                                 "grace_s": timeout_s if grace_s is None else grace_s},
                       results=results, generator_errors=errors, notes=notes,
                       seconds=round(time.perf_counter() - t0, 3), restarts=getattr(scorer, "restarts", 0))
