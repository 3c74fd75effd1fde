"""GeoSym enhancement operations (the builder's constructions) and the difficulty strata.

After the derivation, ``NUM_ENHANCEMENTS[difficulty]`` operations are drawn by ``ENHANCEMENTS`` (the weights
of the GeoSym builder config) and applied to the figure; each recomputes its new points exactly
(:mod:`.figure`) and every proper crossing of a new segment with the earlier ones:

- ``connect_points``: join two labelled points that no drawn segment already joins (or contains both);
- ``connect_midpoints``: M, N = midpoints of two drawn segments, ``M = (P + Q)/2``; join MN;
- ``draw_perpendicular``: the foot F of the perpendicular from a point P to a drawn segment AB, strictly
  inside it (``0 < t < 1``, ``t = (P - A)·(B - A)/|B - A|^2``); join PF;
- ``draw_diameter``: for a point P on a circle with centre O, the other end ``2O - P`` of the diameter, or
  (when that is drawn) the diameter perpendicular to OP, ends ``O ± R(90°)(P - O)``; join.

An operation that does not apply (no candidate, or no label left for a point it needs) is redrawn from
the others; ``connect_points`` almost always applies, so a figure gets its full count. The difficulty strata
are the counts: easy 3, mid 5, hard 7 (GeoSym ``num_enhancements``).
Source: GeoSym / GeoSym127K (2026), github.com/Tomie56/GeoSym127K (``scripts/tools/builder.py``).
"""

from __future__ import annotations

import random

from rlvr.tasks.geosym.figure import Figure, add, foot, mid, rot, sub
from rlvr.tasks.geosym.grammar import pick

__all__ = ["ENHANCEMENTS", "NUM_ENHANCEMENTS", "enhance"]

ENHANCEMENTS = {"connect_points": 0.3, "connect_midpoints": 0.3, "draw_perpendicular": 0.3, "draw_diameter": 0.1}
NUM_ENHANCEMENTS = {"easy": 3, "mid": 5, "hard": 7}
TRIES = 40  # random candidates tried per operation before it counts as not applicable


def _joinable(fig: Figure, a: str, b: str) -> bool:
    return a != b and not fig.has_segment(a, b) and not fig.collinear_with_segment(a, b)


def _connect_points(fig: Figure, rng: random.Random) -> bool:
    names = sorted(fig.points)
    fresh = [n for n in names if n not in fig.base]
    for _ in range(TRIES):
        a = rng.choice(fresh) if fresh and rng.random() < 0.5 else rng.choice(names)
        b = rng.choice(names)
        if _joinable(fig, a, b):
            fig.steps.append({"op": "segment", "ends": [a, b]})
            fig.segment(a, b)
            fig.say(f"Segment {a}{b} is drawn.")
            return True
    return False


def _connect_midpoints(fig: Figure, rng: random.Random) -> bool:
    if len(fig.segments) < 2 or fig.free_labels() < 2:
        return False
    for _ in range(TRIES):
        s, t = rng.sample(fig.segments, 2)
        pm, pn = mid(fig.xy(s[0]), fig.xy(s[1])), mid(fig.xy(t[0]), fig.xy(t[1]))
        if pm == pn:
            continue
        had = {fig.label_of(pm), fig.label_of(pn)}
        m, n = fig.point(pm), fig.point(pn)
        if not _joinable(fig, m, n):
            for name in (m, n):  # undo points this attempt added
                if name not in had:
                    del fig._index[fig.points.pop(name)]
            continue
        fig.steps += [{"op": "midpoint", "point": m, "of": list(s)}, {"op": "midpoint", "point": n, "of": list(t)},
                      {"op": "segment", "ends": [m, n]}]
        fig.segment(m, n)
        fig.say(f"{m} and {n} are the midpoints of {s[0]}{s[1]} and {t[0]}{t[1]}; segment {m}{n} is drawn.")
        return True
    return False


def _draw_perpendicular(fig: Figure, rng: random.Random) -> bool:
    if fig.free_labels() < 1:
        return False
    names = sorted(fig.points)
    for _ in range(TRIES):
        p, s = rng.choice(names), rng.choice(fig.segments)
        if p in s:
            continue
        f, t = foot(fig.xy(p), fig.xy(s[0]), fig.xy(s[1]))
        if t.sign() <= 0 or (t - 1).sign() >= 0 or f == fig.xy(p):
            continue
        had = fig.label_of(f)
        name = fig.point(f)
        if not _joinable(fig, p, name):
            if had is None:
                del fig._index[fig.points.pop(name)]
            continue
        fig.steps += [{"op": "foot", "point": name, "from": p, "to": list(s)}, {"op": "segment", "ends": [p, name]}]
        fig.segment(p, name)
        fig.say(f"{name} is the foot of the perpendicular from {p} to {s[0]}{s[1]}; segment {p}{name} is drawn.")
        return True
    return False


def _draw_diameter(fig: Figure, rng: random.Random) -> bool:
    if fig.free_labels() < 2:
        return False
    circles = [c for c in fig.shapes if c.is_circle]
    cands = [(c, p) for c in circles for p in sorted(fig.points) if fig.on_circle(p, c)]
    rng.shuffle(cands)
    for c, p in cands:
        o, v = fig.xy(c.center), sub(fig.xy(p), fig.xy(c.center))
        q = sub(o, v)
        had = fig.label_of(q)
        if had is None or _joinable(fig, p, had):
            name = fig.point(q)
            fig.steps += [{"op": "antipode", "point": name, "of": p, "center": c.center},
                          {"op": "segment", "ends": [p, name]}]
            fig.segment(p, name)
            fig.say(f"{p}{name} is a diameter of {c.name}.")
            return True
        ends = [add(o, rot(v, 90)), sub(o, rot(v, 90))]  # the diameter perpendicular to O -> P
        had = [fig.label_of(e) for e in ends]
        if None not in had and not _joinable(fig, *had):
            continue
        e, f = (fig.point(x) for x in ends)
        fig.steps += [{"op": "perpendicular_diameter", "points": [e, f], "center": c.center, "to": p},
                      {"op": "segment", "ends": [e, f]}]
        fig.segment(e, f)
        fig.say(f"{e}{f} is the diameter of {c.name} perpendicular to {c.center}{p}.")
        return True
    return False


APPLY = {"connect_points": _connect_points, "connect_midpoints": _connect_midpoints,
         "draw_perpendicular": _draw_perpendicular, "draw_diameter": _draw_diameter}


def enhance(fig: Figure, difficulty: str, rng: random.Random) -> None:
    """Apply ``NUM_ENHANCEMENTS[difficulty]`` operations, recording their names in ``fig.enhancements``."""
    for _ in range(NUM_ENHANCEMENTS[difficulty]):
        weights = dict(ENHANCEMENTS)
        while weights:
            op = pick(rng, weights)
            del weights[op]
            if APPLY[op](fig, rng):
                fig.enhancements.append(op)
                break
