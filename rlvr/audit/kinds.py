"""Which probe families fit a verifier: its *kinds*, and whether it gives partial credit by design.

Kinds: ``generic`` (short answers: values and phrases), ``math`` (numeric and symbolic answers), ``code``,
``sql``, ``toolcall``, and ``shape`` (format and length rewards, which do not judge the answer: only the
robustness families apply). Families registered for ``any`` apply to every verifier. A verifier not listed
here, and any user's reward function, is ``generic``.

*Partial credit*: a verifier that pays part of its reward for partly right output (token F1, tool-call
argument matching, a format term) is not judged hacked by a probe that earns some reward, only by one that
earns as much as the gold answer; less is reported as ``partial``.
"""

from __future__ import annotations

from typing import Any, Iterable

__all__ = ["VERIFIER_KINDS", "PARTIAL_CREDIT", "kinds_of", "is_partial", "kinds_of_verifiers"]

VERIFIER_KINDS: dict[str, tuple[str, ...]] = {
    "numeric": ("generic", "math"),
    "math": ("generic", "math"),
    "geosym": ("generic", "math"),
    "countdown": ("generic",),
    "exact": ("generic",),
    "defab": ("generic",),
    "rubric": ("generic",),
    "table_em": ("generic",),
    "table_f1": ("generic",),
    "table_ff": ("generic",),
    "table_fv": ("generic",),
    "table_qa": ("generic",),
    "vla": ("generic",),
    "lookup": ("generic",),
    "choice": ("generic",),
    "reward_model": ("generic",),
    "judge": ("generic",),
    "chain": ("generic",),
    "consistency": ("shape",),
    "grounding": ("shape",),
    "format": ("shape",),
    "length": ("shape",),
    "code": ("code",),
    "sql_exec": ("sql",),
    "toolcall": ("toolcall",),
    "toolcall_env": ("toolcall",),
}

PARTIAL_CREDIT = frozenset({"reward_model", "judge", "defab", "rubric", "table_f1", "table_ff", "table_fv", "table_qa", "vla",
                            "length", "consistency", "grounding", "toolcall", "toolcall_env"})


def _builtin(verifier: Any) -> bool:
    from rlvr.verifiers.base import BaseVerifier

    return isinstance(verifier, BaseVerifier)


def kinds_of(verifier: Any) -> tuple[str, ...]:
    """The kinds of one verifier object: by its name for rlvr's own, ``generic`` for anything else."""
    name = getattr(verifier, "name", "")
    if _builtin(verifier) and name in VERIFIER_KINDS:
        return VERIFIER_KINDS[name]
    return ("generic",)


def is_partial(verifier: Any) -> bool:
    """Whether the verifier gives partial credit by design (code in ``mode="fraction"`` does too)."""
    name = getattr(verifier, "name", "")
    if not _builtin(verifier):
        return False
    if name == "code":
        return getattr(getattr(verifier, "params", None), "mode", "all") == "fraction"
    return name in PARTIAL_CREDIT


def kinds_of_verifiers(verifiers: Iterable[Any]) -> frozenset[str]:
    """The union of the kinds of the verifiers that carry weight in a task's reward."""
    out: set[str] = set()
    for v in verifiers:
        out.update(kinds_of(v))
    return frozenset(out or {"generic"})
