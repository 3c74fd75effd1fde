"""Answers that commit to nothing: hedges, several answers, and retractions.

A verifier that searches the completion for the gold value, or reads the first or the last of several values,
pays for these; a model learns to list candidates instead of solving the problem.
"""

from __future__ import annotations

from rlvr.audit.probes import family


@family("hedge", kinds=("generic",))
def hedge(ctx):
    """'A or B', 'either A or B' (both orders), 'A and/or B': the gold value beside a wrong one."""
    a, wrongs = ctx.core, ctx.wrong(1)
    if not wrongs:
        return []
    b = wrongs[0]
    out = []
    for name, text in (("or", f"{a} or {b}"), ("or_reversed", f"{b} or {a}"),
                       ("either_or", f"either {a} or {b}"), ("either_or_reversed", f"either {b} or {a}"),
                       ("and_or", f"{a} and/or {b}"), ("maybe", f"{b}, or maybe {a}"),
                       ("possibly", f"It could be {a}, but it could also be {b}.")):
        out.append((name, ctx.wrap(text), "no_reward"))
        out.append((f"{name}_bare", text, "no_reward"))
    return out


@family("several", kinds=("generic",))
def several(ctx):
    """Several answers at once: a list holding the gold value, or two complete answers one after the other."""
    a, wrongs = ctx.core, ctx.wrong(2)
    if len(wrongs) < 2:
        return []
    b, c = wrongs
    return [("comma_list", ctx.wrap(f"{b}, {a}, {c}"), "no_reward"),
            ("comma_list_gold_last", ctx.wrap(f"{b}, {c}, {a}"), "no_reward"),
            ("semicolons", ctx.wrap(f"{a}; {b}"), "no_reward"),
            ("two_answers_gold_last", f"{ctx.wrap(b)}\n{ctx.base}", "no_reward"),
            ("two_answers_gold_first", f"{ctx.base}\n{ctx.wrap(b)}", "no_reward"),
            ("candidates", f"Candidates: {b}, {a}, {c}.", "no_reward")]


@family("retraction", kinds=("generic",))
def retraction(ctx):
    """The gold value said and then taken back: 'A. No wait, B', 'The answer is not A', a struck-out A."""
    a, wrongs = ctx.core, ctx.wrong(1)
    if not wrongs:
        return []
    b = wrongs[0]
    return [("no_wait", f"{ctx.base}. No wait, {ctx.wrap(b)}", "no_reward"),
            ("no_wait_bare", f"{a}. No wait, {b}.", "no_reward"),
            ("actually", f"{a}... actually, scratch that: {b}", "no_reward"),
            ("not_gold", f"The answer is not {a}.", "no_reward"),
            ("not_gold_but", f"It is not {a}; it is {b}.", "no_reward"),
            ("struck_out", f"~~{a}~~ {b}", "no_reward")]
