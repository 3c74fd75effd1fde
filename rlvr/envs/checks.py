"""Checks on an issue-tracker / wiki state: shared by the ``toolcall_env`` verifier and the multi-turn
tool environment, so an episode's reward and the replayed trace's score come from the same rule.

``check_state(state, checks)``: each check is ``{"collection": "issues" | "pages", "where": {path: value},
"count": n (default 1)}`` and passes when exactly ``n`` records satisfy every condition; a value
``{"$contains": x}`` tests substring / list membership / a sub-dict of a list element. Values compare
strictly (:func:`values_equal`: no string/number coercion, ``True`` is not ``1``).

``side_effects(initial, final, checks, gold=None)``: the records a trace changed that the task did not ask
to change (docs/verifiers.md, Tool calls: sprays, schemas and side effects). Checks describe the state the
task wants, and say
nothing of the rest, so an agent that also closed, edited or created other records passed every check. A
record of ``issues`` / ``pages`` that the trace modified is *expected* when the gold trace (``gold``, its
final state) modified it too, or when a check with ``count >= 1`` targets it: the check's ``key`` / ``id``
conditions when it has them, else all of its conditions, hold on the final record. Every other modified
record is a side effect. A record both the trace and the gold modified is one too when the trace changed a
field the gold left alone, or grew a list (comments, labels) more than the gold did (a duplicated comment),
ids aside. Created records are counted: beyond ``max(records the gold created, created records a check
targets)`` in a collection, each is a side effect (so a spray of 31 wrong issues around the right one makes
31).
"""

from __future__ import annotations

from typing import Any

__all__ = ["check_state", "values_equal", "lookup_path", "side_effects", "RECORD_COLLECTIONS"]

RECORD_COLLECTIONS = ("issues", "pages")
_IDENTITY = ("key", "id")


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


def _targets(record: dict, check: dict) -> bool:
    where = check.get("where", {})
    ident = {p: v for p, v in where.items() if p in _IDENTITY}
    return all(_condition_holds(record, p, v) for p, v in (ident or where).items())


def _changes(before: dict, after: dict) -> tuple[set, set]:
    """(keys modified or deleted, keys created) of one collection."""
    changed = {k for k, r in before.items() if after.get(k) != r}
    return changed, set(after) - set(before)


def _without_ids(x: Any) -> Any:
    """Ids come from a global counter, so they depend on the order of unrelated calls: not compared."""
    if isinstance(x, dict):
        return {k: _without_ids(v) for k, v in x.items() if k != "id"}
    if isinstance(x, list):
        return [_without_ids(v) for v in x]
    return x


def _extra_change(init: Any, pred: Any, gold: Any) -> bool:
    """In a record both traces changed: a field the trace changed and the gold left alone, or a list (comments,
    labels) that grew more than the gold's did. Scalars both changed are the checks' business."""
    if isinstance(init, dict) and isinstance(pred, dict) and isinstance(gold, dict):
        return any(_extra_change(init.get(k), pred.get(k), gold.get(k)) for k in {*init, *pred, *gold})
    if pred == init:
        return False
    if gold == init:
        return True
    if isinstance(init, list) and isinstance(pred, list) and isinstance(gold, list):
        return len(pred) - len(init) > len(gold) - len(init)
    return False


def side_effects(initial: dict, final: dict, checks: list[dict], gold: dict | None = None) -> list[str]:
    """``"collection/key"`` of every unexpected change from ``initial`` to ``final`` (module docstring)."""
    out = []
    positive = [c for c in checks if c.get("count", 1) >= 1]
    for coll in RECORD_COLLECTIONS:
        before, after = initial.get(coll, {}) or {}, final.get(coll, {}) or {}
        modified, created = _changes(before, after)
        gold_modified, gold_created = _changes(before, (gold or {}).get(coll, {}) or {}) if gold else (set(), set())
        checked = [c for c in positive if c.get("collection") == coll]

        def targeted(key: str) -> bool:
            return key in after and any(_targets(after[key], c) for c in checked)

        out += [f"{coll}/{k}" for k in sorted(modified - gold_modified) if not targeted(k)]
        out += [f"{coll}/{k} (more than the gold changed)" for k in sorted(modified & gold_modified)
                if k in after and k in (gold or {}).get(coll, {})
                and _extra_change(_without_ids(before[k]), _without_ids(after[k]), _without_ids(gold[coll][k]))]
        targeted_new = {k for k in created if targeted(k)}
        allowed = max(len(gold_created), len(targeted_new))
        untargeted = sorted(created - targeted_new, key=lambda k: (len(k), k))
        extra = len(created) - allowed
        out += [f"{coll}/{k} (created)" for k in untargeted[len(untargeted) - extra:]] if extra > 0 else []
    return out
