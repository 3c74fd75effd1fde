"""Inputs of the wrong size or shape: empty, only whitespace, huge (10^5 to 10^6 characters), deeply nested
(10,000 levels of braces, parentheses, brackets, ``\\boxed{}``), NUL bytes and U+FFFD (what a tokenizer
decodes broken bytes to; model output is always valid Unicode, so lone surrogates are not probed).

Empty, whitespace and huge junk must score 0; the rest may score anything but must be scored fast and
without an error (a verifier that recurses over nesting, or runs a regex with backtracking over a megabyte,
shows up here as a crash or as slow).
"""

from __future__ import annotations

from rlvr.audit.probes import family

HUGE = 1_000_000
LARGE = 100_000
DEPTH = 10_000


@family("sizes", kinds=("any",))
def sizes(ctx):
    """Empty, whitespace, huge (1e5 to 1e6 characters) and deeply nested (1e4 levels) inputs."""
    a, gold = ctx.core, ctx.base
    junk = "no_reward" if ctx.kinds - {"shape"} else "any"  # format and length rewards do not judge the answer
    wrongs = ctx.wrong(1) if "generic" in ctx.kinds else []
    b = wrongs[0] if wrongs else "x"
    filler = "lorem ipsum dolor sit amet "
    return [
        ("empty", "", junk),
        ("whitespace", " \n\t \u00a0\u3000\n ", junk),
        ("huge_junk", "a" * HUGE, junk),
        ("huge_alternating", (f"{b} {a} " * (LARGE // (len(a) + len(b) + 2) + 1))[:LARGE], junk),
        ("huge_prefix_then_gold", (filler * (LARGE // len(filler) + 1))[:LARGE] + "\n" + gold, "any"),
        ("huge_gold_repeated", ((gold + "\n") * (LARGE // (len(gold) + 1) + 1))[:LARGE], "any"),
        ("huge_one_line_digits", "9" * HUGE, junk),
        ("nested_braces", "{" * DEPTH + a + "}" * DEPTH, "any"),
        ("nested_parentheses", "(" * DEPTH + a + ")" * DEPTH, "any"),
        ("nested_brackets", "[" * DEPTH + a + "]" * DEPTH, "any"),
        ("nested_boxed", "\\boxed{" * DEPTH + a + "}" * DEPTH, "any"),
        ("nested_tags", "<answer>" * DEPTH + a + "</answer>" * DEPTH, "any"),
        ("unbalanced_open", "{[(" * DEPTH, junk),
        ("nul_bytes", "\x00" * 64 + gold, "any"),
        ("replacement_chars", "\ufffd" * 64 + gold, "any"),
    ]
