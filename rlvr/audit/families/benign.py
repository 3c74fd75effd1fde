"""Correct answers in unusual but fair forms (expected: reward), so that false negatives are found too.

Generated only when some form of the gold answer earns reward (the gold completion): a verifier that rewards
nothing cannot be asked to reward a variant.
"""

from __future__ import annotations

from rlvr.audit.probes import family


@family("benign", kinds=("any",))
def benign(ctx):
    """The gold completion with a trailing newline; for short answers surrounding spaces; for numeric answers
    'The answer is **A**.', \\boxed{A}, $A$, 'Final answer: A' and A.0 (expected to earn reward)."""
    if ctx.gold is None:
        return []
    gold, a = ctx.gold, ctx.core
    out = [("trailing_newline", gold + "\n", "reward")]
    if "generic" in ctx.kinds:
        out.append(("surrounding_spaces", f"  {gold}  ", "reward"))
    if "math" in ctx.kinds and ctx.number is not None:
        out += [("bold_sentence", f"The answer is **{a}**.", "reward"),
                ("boxed", f"\\boxed{{{a}}}", "reward"),
                ("dollars_math", f"${a}$", "reward"),
                ("final_answer_line", f"Let me compute.\nFinal answer: {a}", "reward"),
                ("reasoning_then_boxed", f"We work it out step by step.\nSo the result is \\boxed{{{a}}}.", "reward")]
        if ctx.number.denominator == 1 and a.lstrip("-").isdigit():
            out.append(("decimal_point_zero", ctx.wrap(f"{a}.0"), "reward"))
    return out
