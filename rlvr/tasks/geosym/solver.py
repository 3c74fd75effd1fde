"""The GeoSym analytic solver (SymGT): questions over a figure and their exact symbolic answers.

Question kinds, drawn by ``QUESTION_WEIGHTS`` among those the figure supports, always about at least one
constructed (non-base) point or derived shape when there is one:

- ``length``: ``PQ = sqrt((x_P - x_Q)^2 + (y_P - y_Q)^2)``; the square is exact in Q(√2, √3) and the root is
  taken in the field when it exists, else by SymPy (``sqrtdenest``, ``simplify``);
- ``area``: of a derived polygon or of a triangle whose sides are drawn, by the shoelace formula
  ``|Σ (x_i y_{i+1} - x_{i+1} y_i)| / 2``;
- ``circle``: radius ``sqrt(r^2)``, area ``pi r^2`` or circumference ``2 pi r``, with ``r^2 = |OP|^2`` for a
  point P of the circle;
- ``angle``: ``∠PQR`` between drawn segments in degrees, decided exactly: ``cos^2 ∠ = (u·v)^2 / (|u|^2|v|^2)``
  (in the field) is compared with ``cos^2`` of every multiple of 15°, with the sign of ``u·v``; only such
  angles are asked;
- ``shaded``: the region between a circle and a polygon inscribed in it (``pi r^2 - A``) or circumscribed
  about it (``A - pi r^2``), shaded in the diagram; without such a pair, a shaded drawn triangle.

Answers are SymPy expressions, fully simplified (``simplify``), written with ``str`` (``2*sqrt(3)``,
``25*pi/4``), without units. The chain of thought (the SFT target) states the coordinates the solver used,
the formula and the answer in ``\\boxed{}``.

RECONSTRUCTED: ``QUESTION_WEIGHTS`` and the question templates (GeoSym asks areas, lengths and angles).
Source: GeoSym / GeoSym127K (2026), github.com/Tomie56/GeoSym127K (``scripts/tools/gt.py``).
"""

from __future__ import annotations

import itertools
import random
from dataclasses import dataclass, field
from typing import Any

from rlvr.tasks.geosym.field import COS, K
from rlvr.tasks.geosym.figure import Figure, Shape, dist2, dot, shoelace, sub
from rlvr.tasks.geosym.grammar import pick

__all__ = ["QUESTION_WEIGHTS", "Question", "ask", "tidy", "joined_pairs", "visible_triangles"]

QUESTION_WEIGHTS = {"length": 0.3, "area": 0.3, "circle": 0.15, "angle": 0.15, "shaded": 0.1}
CIRCLE_QUANTITIES = ("radius", "area", "circumference")
SIMPLE_HEIGHT = 200   # answers whose exact value has coefficients up to this are preferred
SAMPLE = 60           # candidates (point pairs, triangles) compared for that


@dataclass(frozen=True)
class Question:
    kind: str
    text: str
    answer: str
    cot: str
    target: dict[str, Any]
    shaded: dict[str, Any] | None = field(default=None)


def tidy(expr):
    """The fully simplified form of ``expr`` (``simplify``, kept only when it is no longer)."""
    import sympy

    s = sympy.simplify(expr)
    return s if sympy.count_ops(s) <= sympy.count_ops(expr) else expr


def _s(x: K) -> str:
    return str(x.sympy())


def _coords(fig: Figure, names) -> str:
    return ", ".join(f"{n} = ({_s(fig.xy(n)[0])}, {_s(fig.xy(n)[1])})" for n in dict.fromkeys(names))


def joined_pairs(fig: Figure) -> set[frozenset[str]]:
    """Pairs of labelled points that lie on one drawn segment (so the segment between them is drawn)."""
    out: set[frozenset[str]] = set()
    for seg in fig.segments:
        on = [n for n in fig.points if fig.on_segment(n, seg)]
        out.update(frozenset(p) for p in itertools.combinations(on, 2))
    return out


def visible_triangles(fig: Figure, joined) -> list[tuple[str, str, str]]:
    out = []
    for a, b, c in itertools.combinations(sorted(fig.points), 3):
        if {frozenset((a, b)), frozenset((b, c)), frozenset((a, c))} <= joined:
            if not shoelace([fig.xy(a), fig.xy(b), fig.xy(c)]).is_zero():
                out.append((a, b, c))
    return out


def _fresh(fig: Figure, names) -> bool:
    return any(n not in fig.base for n in names)


def _choose(rng: random.Random, cands: list, value):
    """A random candidate whose ``value`` (in the field) is simple, else the simplest of a sample."""
    cands = list(cands)
    rng.shuffle(cands)
    scored = [(value(c).height(), c) for c in cands[:SAMPLE]]
    nice = [c for h, c in scored if h <= SIMPLE_HEIGHT]
    return nice[0] if nice else min(scored, key=lambda t: t[0])[1]


def _tri_area(fig: Figure, t) -> K:
    return shoelace([fig.xy(n) for n in t])


def _box(ans: str) -> str:
    return f"The answer is \\boxed{{{ans}}}."


def _length(fig: Figure, rng: random.Random, joined) -> Question | None:
    given = {frozenset((a, b)) for a, b, _ in fig.given}
    pairs = [p for p in itertools.combinations(sorted(fig.points), 2) if frozenset(p) not in given]
    fresh = [p for p in pairs if _fresh(fig, p)]
    if not pairs:
        return None
    a, b = _choose(rng, fresh or pairs, lambda p: dist2(fig.xy(p[0]), fig.xy(p[1])))
    d2 = dist2(fig.xy(a), fig.xy(b))
    root = d2.sqrt()
    import sympy

    ans = root.sympy() if root is not None else tidy(sympy.sqrt(d2.sympy()))
    drawn = frozenset((a, b)) in joined
    text = f"Find the length of segment {a}{b}." if drawn else f"Find the distance between {a} and {b}."
    cot = (f"Coordinates ({fig.frame}): {_coords(fig, (a, b))}.\n"
           f"{a}{b}^2 = ({_s(fig.xy(a)[0] - fig.xy(b)[0])})^2 + ({_s(fig.xy(a)[1] - fig.xy(b)[1])})^2 = {_s(d2)}, "
           f"so {a}{b} = {ans}.\n{_box(ans)}")
    return Question("length", text, str(ans), cot, {"points": [a, b]})


def _polygon_area(fig: Figure, names) -> tuple[Any, str]:
    area = abs(shoelace([fig.xy(n) for n in names]))
    ans = tidy(area.sympy())
    cot = (f"Coordinates ({fig.frame}): {_coords(fig, names)}.\n"
           f"By the shoelace formula, the area of {''.join(names)} is |Σ(x_i y_(i+1) - x_(i+1) y_i)|/2 = {ans}.")
    return ans, cot


def _area(fig: Figure, rng: random.Random, joined) -> Question | None:
    derived = [s for s in fig.shapes[1:] if not s.is_circle]
    tris = [t for t in visible_triangles(fig, joined) if _fresh(fig, t)]
    if derived and (not tris or rng.random() < 0.4):
        sh = rng.choice(derived)
        names, what = sh.vertices, sh.name
    elif tris:
        names = _choose(rng, tris, lambda t: _tri_area(fig, t))
        what = f"triangle {''.join(names)}"
    else:
        return None
    ans, cot = _polygon_area(fig, names)
    return Question("area", f"Find the area of {what}.", str(ans), f"{cot}\n{_box(ans)}", {"polygon": list(names)})


def _circle_values(fig: Figure, c: Shape):
    import sympy

    r2 = c.r2.sympy()
    r = c.r2.sqrt()
    r = r.sympy() if r is not None else sympy.sqrt(r2)
    return r2, r, (f"Center {_coords(fig, [c.center])} and {_coords(fig, [c.on])} lies on {c.name}, "
                   f"so r^2 = {c.center}{c.on}^2 = {r2}")


def _circle(fig: Figure, rng: random.Random, joined) -> Question | None:
    import sympy

    circles = [s for s in fig.shapes if s.is_circle]
    if not circles:
        return None
    c = rng.choice(circles)
    q = rng.choice(CIRCLE_QUANTITIES)
    r2, r, why = _circle_values(fig, c)
    ans = tidy({"radius": r, "area": sympy.pi * r2, "circumference": 2 * sympy.pi * r}[q])
    formula = {"radius": "r", "area": "pi*r^2", "circumference": "2*pi*r"}[q]
    cot = f"{why} ({fig.frame}).\nThe {q} is {formula} = {ans}.\n{_box(ans)}"
    return Question("circle", f"Find the {q} of {c.name}.", str(ans), cot,
                    {"circle": {"center": c.center, "on": c.on}, "quantity": q})


def exact_angle(fig: Figure, p: str, q: str, r: str) -> int | None:
    """∠PQR in degrees when it is a multiple of 15 strictly between 0 and 180, else None."""
    u, v = sub(fig.xy(p), fig.xy(q)), sub(fig.xy(r), fig.xy(q))
    d = dot(u, v)
    c2 = d * d / (dot(u, u) * dot(v, v))
    for deg in range(15, 180, 15):
        cd = COS(deg)
        if cd * cd == c2 and cd.sign() == d.sign():
            return deg
    return None


def _angle(fig: Figure, rng: random.Random, joined) -> Question | None:
    cands = []
    for q in sorted(fig.points):
        arms = sorted(n for n in fig.points if frozenset((n, q)) in joined)
        for p, r in itertools.combinations(arms, 2):
            if _fresh(fig, (p, q, r)):
                cands.append((p, q, r))
    rng.shuffle(cands)
    for p, q, r in cands[:60]:
        deg = exact_angle(fig, p, q, r)
        if deg is not None:
            u, v = sub(fig.xy(p), fig.xy(q)), sub(fig.xy(r), fig.xy(q))
            cot = (f"Coordinates ({fig.frame}): {_coords(fig, (p, q, r))}.\n"
                   f"{q}{p} = ({_s(u[0])}, {_s(u[1])}) and {q}{r} = ({_s(v[0])}, {_s(v[1])}); "
                   f"cos∠{p}{q}{r} = {q}{p}·{q}{r}/(|{q}{p}||{q}{r}|), so ∠{p}{q}{r} = {deg}°.\n{_box(str(deg))}")
            return Question("angle", f"Find the measure of ∠{p}{q}{r} in degrees.", str(deg), cot,
                            {"angle": [p, q, r]})
    return None


def _shaded(fig: Figure, rng: random.Random, joined) -> Question | None:
    import sympy

    if fig.relations:
        i, j, how = rng.choice(fig.relations)
        poly, c = fig.shapes[i], fig.shapes[j]
        area, pcot = _polygon_area(fig, poly.vertices)
        r2, _, why = _circle_values(fig, c)
        circ = sympy.pi * r2
        ans = tidy(circ - area if how == "in" else area - circ)
        inside, outside = (c.name, poly.name) if how == "in" else (poly.name, c.name)
        region = {"outer": _region(fig, c if how == "in" else poly), "inner": _region(fig, poly if how == "in" else c)}
        cot = f"{why}; the circle's area is pi*r^2 = {circ}.\n{pcot}\n" + \
              f"The shaded area is {'pi*r^2 - ' + str(area) if how == 'in' else str(area) + ' - pi*r^2'} = {ans}.\n{_box(ans)}"
        return Question("shaded", f"The shaded region lies inside {inside} and outside {outside}. "
                        "Find the area of the shaded region.", str(ans), cot,
                        {"outer": region["outer"], "inner": region["inner"]}, region)
    tris = [t for t in visible_triangles(fig, joined) if _fresh(fig, t)]
    if not tris:
        return None
    names = _choose(rng, tris, lambda t: _tri_area(fig, t))
    ans, cot = _polygon_area(fig, names)
    region = {"outer": {"polygon": list(names)}, "inner": None}
    return Question("shaded", f"Triangle {''.join(names)} is shaded. Find the area of the shaded region.",
                    str(ans), f"{cot}\n{_box(ans)}", region, region)


def _region(fig: Figure, sh: Shape) -> dict[str, Any]:
    if sh.is_circle:
        return {"circle": {"center": sh.center, "on": sh.on}}
    return {"polygon": list(sh.vertices)}


KINDS = {"length": _length, "area": _area, "circle": _circle, "angle": _angle, "shaded": _shaded}


def ask(fig: Figure, rng: random.Random) -> Question:
    """One question about ``fig`` with its exact answer, the kind drawn by ``QUESTION_WEIGHTS``."""
    joined = joined_pairs(fig)
    weights = dict(QUESTION_WEIGHTS)
    while weights:
        kind = pick(rng, weights)
        del weights[kind]
        q = KINDS[kind](fig, rng, joined)
        if q is not None:
            return q
    raise ValueError("no question applies to this figure")
