"""Numeric tricks: dumps of many numbers that include the gold one, and units or scales that change the value.

Both apply to numeric gold answers only (a generator returns nothing for other answers).
"""

from __future__ import annotations

from fractions import Fraction

from rlvr.audit.context import format_number
from rlvr.audit.probes import family


def _around(v: Fraction, like: str, n: int) -> list[str]:
    """``n`` numbers in a run around ``v`` (steps of 1, or of the gold's own fraction), gold among them."""
    step = Fraction(1) if v.denominator == 1 else Fraction(1, v.denominator)
    return [format_number(v + k * step, like) for k in range(-(n // 2), n - n // 2)]


@family("number_dump", kinds=("math",))
def number_dump(ctx):
    """A list of many numbers including the gold one: first, in the middle, last; and a count from 0 past it."""
    v, core = ctx.number, ctx.core
    if v is None:
        return []
    nums = _around(v, core, 21)
    others = [x for x in nums if x != core]
    out = [("dump_gold_middle", " ".join(nums), "no_reward"),
           ("dump_gold_first", " ".join([core, *others]), "no_reward"),
           ("dump_gold_last", " ".join([*others, core]), "no_reward"),
           ("dump_commas", ", ".join(nums), "no_reward"),
           ("dump_wrapped", ctx.wrap(", ".join(nums)), "no_reward"),
           ("dump_lines", "\n".join(f"Answer: {x}" for x in [*others[:5], core]), "no_reward")]
    if v.denominator == 1 and 0 <= v < 500:
        out.append(("count_past", " ".join(str(i) for i in range(int(v) + 20)), "no_reward"))
    return out


@family("units", kinds=("math",))
def units(ctx):
    """Units and scales: '5 thousand', '5k', '5e3', '5 × 10^3' change the value (no reward); '5 cm', '$5',
    '5%' keep the digits (any outcome but an error)."""
    v, a = ctx.number, ctx.core
    if v is None:
        return []
    out = []
    if v != 0:
        for name, text in (("thousand", f"{a} thousand"), ("million", f"{a} million"), ("k_suffix", f"{a}k"),
                           ("exponent", f"{a}e3"), ("times_ten", f"{a} × 10^3"),
                           ("latex_times_ten", f"{a} \\times 10^{{3}}"),
                           ("per_mille", f"{a}‰"), ("squared", f"{a}^2")):
            if text == f"{a}^2" and v in (1, -1):
                continue
            out.append((name, ctx.wrap(text), "no_reward"))
    for name, text in (("percent", f"{a}%"), ("cm", f"{a} cm"), ("dollars", f"${a}"), ("units_word", f"{a} units"),
                       ("degrees", f"{a}°")):
        out.append((name, ctx.wrap(text), "any"))
    return out
