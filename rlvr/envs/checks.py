"""Checks on an issue-tracker / wiki state: shared by the ``toolcall_env`` verifier and the multi-turn
tool environment, so an episode's reward and the replayed trace's score come from the same rule.

``check_state(state, checks)``: each check is ``{"collection": "issues" | "pages", "where": {path: value},
"count": n (default 1)}`` and passes when exactly ``n`` records satisfy every condition; a value
``{"$contains": x}`` tests substring / list membership / a sub-dict of a list element. Values compare
strictly (:func:`values_equal`: no string/number coercion, ``True`` is not ``1``).
"""

from __future__ import annotations

from typing import Any

__all__ = ["check_state", "values_equal", "lookup_path"]


def lookup_path(obj: Any, path: str) -> tuple[bool, Any]:
    for part in path.split("."):
        if not isinstance(obj, dict) or part not in obj:
            return False, None
        obj = obj[part]
    return True, obj


def values_equal(a: Any, b: Any, casefold: bool = False) -> bool:
    """Strict JSON equality (numbers by value, no bool/number or string/number coercion)."""
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return a == b
    if isinstance(a, str) and isinstance(b, str):
        return a.strip().casefold() == b.strip().casefold() if casefold else a == b
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(values_equal(x, y, casefold) for x, y in zip(a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(values_equal(a[k], b[k], casefold) for k in a)
    return a is None and b is None


def _condition_holds(record: dict, path: str, want: Any) -> bool:
    found, got = lookup_path(record, path)
    if not found:
        return False
    if isinstance(want, dict) and set(want) == {"$contains"}:
        x = want["$contains"]
        if isinstance(got, str):
            return isinstance(x, str) and x in got
        if isinstance(got, list):
            return any(values_equal(e, x) or (isinstance(x, dict) and isinstance(e, dict)
                                              and all(k in e and values_equal(e[k], v) for k, v in x.items()))
                       for e in got)
        return False
    return values_equal(got, want)


def check_state(state: dict, checks: list[dict]) -> list[bool]:
    """Whether each check holds: exactly ``count`` (default 1) records of its collection satisfy ``where``."""
    results = []
    for check in checks:
        records = state.get(check["collection"], {}).values()
        hits = sum(all(_condition_holds(r, p, v) for p, v in check.get("where", {}).items()) for r in records)
        results.append(hits == check.get("count", 1))
    return results
