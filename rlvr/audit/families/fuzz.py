"""Seeded random mutations of the gold completion (``--fuzz N`` per example).

Each mutation is drawn with ``random.Random(f"{seed}|{example id}|{i}")``, so a run is reproducible:
insertion of an invisible or look-alike character, truncation, duplication of a span, deletion or swap of
characters, a digit of the answer changed. Fuzz is conservative: a mutation is expected to earn no reward only
when it clearly changes a numeric answer (a digit of the value replaced, or the value cut short to a different
number); every other mutation need only be scored without an error and in time.
"""

from __future__ import annotations

import random

from rlvr.audit.context import number_of
from rlvr.audit.probes import family

INVISIBLES = ("\u200b", "\u200c", "\u200d", "\u2060", "\ufeff", "\u00ad", "\u202e", "\u2066")
LOOKALIKES = {"-": "\u2212", "0": "O", "1": "l", "5": "S", "o": "о", "a": "а", "e": "е", ".": "\u2024", ",": "\u201a",
              " ": "\u00a0", "2": "\u01bb", "8": "\u0222"}
OPS = ("insert_invisible", "insert_lookalike", "truncate", "duplicate", "delete", "swap", "change_digit")


def _span(text: str, core: str) -> tuple[int, int] | None:
    i = text.rfind(core)
    return (i, i + len(core)) if i >= 0 and core else None


def mutate(text: str, core: str, rng: random.Random, numeric: bool) -> tuple[str, str, bool]:
    """One mutation of ``text``: ``(op name, mutated text, clearly changes the numeric answer)``."""
    op = rng.choice(OPS)
    n = len(text)
    span = _span(text, core)
    if op == "change_digit" and numeric and span:
        digits = [i for i in range(*span) if text[i].isdigit()]
        if digits:
            i = rng.choice(digits)
            d = rng.choice([c for c in "0123456789" if c != text[i]])
            new = text[:i] + d + text[i + 1:]
            return op, new, _changes(core, new[span[0]:span[1]])
        op = "truncate"
    if op == "truncate":
        if numeric and span and span[1] - span[0] > 1 and rng.random() < 0.5:
            cut = rng.randrange(span[0] + 1, span[1])  # inside the answer: the value cut short
            return op, text[:cut], _changes(core, text[span[0]:cut])
        cut = rng.randrange(0, n) if n else 0
        return op, text[:cut], False
    if op == "insert_invisible":
        i = rng.randrange(0, n + 1)
        return op, text[:i] + rng.choice(INVISIBLES) + text[i:], False
    if op == "insert_lookalike":
        spots = [i for i, ch in enumerate(text) if ch in LOOKALIKES]
        if spots:
            i = rng.choice(spots)
            return op, text[:i] + LOOKALIKES[text[i]] + text[i + 1:], False
        return op, text + rng.choice(INVISIBLES), False
    if op == "duplicate" and n:
        i = rng.randrange(0, n)
        j = rng.randrange(i, min(n, i + 64)) + 1
        return op, text[:j] + text[i:j] * rng.randint(1, 50) + text[j:], False
    if op == "delete" and n:
        i = rng.randrange(0, n)
        return op, text[:i] + text[i + 1:], False
    if op == "swap" and n > 1:
        i = rng.randrange(0, n - 1)
        return op, text[:i] + text[i + 1] + text[i] + text[i + 2:], False
    return "append_invisible", text + rng.choice(INVISIBLES), False


def _changes(core: str, new_core: str) -> bool:
    """Both plain numbers and different values (``12`` -> ``13`` or ``1``; not ``0.50`` -> ``0.5``)."""
    a, b = number_of(core), number_of(new_core)
    return a is not None and b is not None and a != b


@family("fuzz", kinds=("any",))
def fuzz(ctx):
    """Seeded random mutations of the gold completion (--fuzz N per example): invisible and look-alike
    insertions, truncations, duplications, deletions, swaps, changed digits."""
    if ctx.fuzz <= 0:
        return []
    numeric = "math" in ctx.kinds and ctx.number is not None
    out = []
    for i in range(ctx.fuzz):
        rng = random.Random(f"{ctx.seed}|{ctx.example.id}|{i}")
        op, text, changed = mutate(ctx.base, ctx.core, rng, numeric)
        out.append((f"{i}_{op}", text, "no_reward" if changed else "any"))
    return out
