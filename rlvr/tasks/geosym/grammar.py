"""The GeoSym type-conditional grammar: base shapes and derivation rules.

Generation (GeoSym, ``scripts/config*.json``): sample a base type by ``BASE_WEIGHTS``; then, for a number
of rounds drawn from ``ROUND_RANGE``, apply one derivation rule to the *current* shape, drawn by the rule
weights of the current shape's type (``RULES``; the weights are normalised, since the configs' do not sum
to 1). The shape a rule creates becomes the current shape ("sequential"), so the grammar is
type-conditional: a circumscribed circle is followed by circle rules, an erected hexagon by polygon rules.

Base shapes (exact coordinates in Q(√2, √3), A at the origin and AB along the positive x-axis unless said):

- ``polygon``: a regular n-gon, n in ``POLYGON_SIDES``, side s (vertices by turning 360/n degrees);
- ``circle``: centre O at the origin, radius r, diameter AB along the x-axis;
- ``special_triangle``: a right triangle (right angle at A) with legs in a ratio of ``RIGHT_RATIOS``, or an
  isosceles triangle AB = AC with apex angle ``APEX_ANGLES`` (C = L(cos θ, sin θ));
- ``special_rectangle``: ABCD with AB : BC in ``RECT_RATIOS``;
- ``parallelogram``: AB = a, AD = b, ∠DAB in ``PARALLELOGRAM_ANGLES``;
- ``trapezoid``: AB ∥ DC, right (AD ⊥ AB) or isosceles (AD = BC, base angle in ``TRAPEZOID_ANGLES``).

Rules (each adds exact points; see :mod:`.figure` for the formulas):

- ``circum_inscribe``: on a polygon, the circumscribed circle (centre equidistant from all vertices) or
  the inscribed circle (triangle: incentre ``(aA + bB + cC)/(a + b + c)`` when the sides lie in the field;
  regular polygon: its centre), touching the first side at the foot from the centre; on a circle, an
  inscribed regular n-gon (``INSCRIBED_SIDES``) with a vertex at a point ``P`` of the circle
  (``O + R(360k/n)(P - O)``) or the circumscribed square touching it at ``P``;
- ``concentric``: on a circle, a concentric circle of ``CIRCLE_RATIOS`` times the radius; on a polygon, its
  image under the dilation about its centre (diagonal crossing or centroid) by ``DILATION_RATIOS``;
- ``translation``: the shape moved by the vector of one of its sides (a circle: by the vector O -> P);
- ``side_polygon``: a regular n-gon (n in ``SIDE_POLYGON_SIDES``) erected outward on a side.

RECONSTRUCTED (the configs were read, not run): the rule weights of the types the notes do not list
(polygon, circle, special_rectangle), the integer ranges, ``POLYGON_SIDES`` (n-gons whose coordinates stay in
Q(√2, √3)), the right/isosceles split and ``DERIVATION_POINT_BUDGET``. All are tables below.
Source: GeoSym / GeoSym127K (2026), github.com/Tomie56/GeoSym127K.
"""

from __future__ import annotations

import random
from fractions import Fraction

from rlvr.tasks.geosym.field import COS, SIN, SQRT2, SQRT3, K, kpt
from rlvr.tasks.geosym.figure import Figure, Shape, add, cross, dist2, foot, fmt, rot, scale, shoelace, sub

__all__ = ["BASE_WEIGHTS", "RULES", "ROUND_RANGE", "pick", "build_base", "derive"]

BASE_WEIGHTS = {"polygon": 0.2, "circle": 0.1, "special_triangle": 0.25, "special_rectangle": 0.15,
                "parallelogram": 0.15, "trapezoid": 0.15}
RULES = {
    "special_triangle": {"circum_inscribe": 0.4, "translation": 0.35, "side_polygon": 0.4},
    "parallelogram": {"concentric": 0.25, "translation": 0.4, "side_polygon": 0.4},
    "trapezoid": {"concentric": 0.25, "translation": 0.4, "side_polygon": 0.4},
    "polygon": {"circum_inscribe": 0.4, "concentric": 0.15, "translation": 0.25, "side_polygon": 0.3},
    "special_rectangle": {"circum_inscribe": 0.35, "translation": 0.3, "side_polygon": 0.35},
    "circle": {"circum_inscribe": 0.6, "concentric": 0.25, "translation": 0.15},
}
ROUND_RANGE = (2, 4)
DERIVATION_POINT_BUDGET = 14          # points the derivation may use, leaving labels for the enhancements
POLYGON_SIDES = (3, 4, 6, 8)
INSCRIBED_SIDES = (3, 4, 6)
SIDE_POLYGON_SIDES = (3, 4, 6)
RIGHT_RATIOS = ((K(1), K(1)), (K(1), SQRT3), (K(1), SQRT2), (K(3), K(4)))
APEX_ANGLES = (30, 45, 60, 90, 120)
RECT_RATIOS = ((1, 1), (1, 2), (2, 3), (3, 4))
PARALLELOGRAM_ANGLES = (30, 45, 60)
TRAPEZOID_ANGLES = (45, 60)
CIRCLE_RATIOS = (Fraction(1, 2), Fraction(2))
DILATION_RATIOS = (Fraction(1, 2),)
NGON = {3: "equilateral triangle", 4: "square", 6: "regular hexagon", 8: "regular octagon"}


def article(noun: str) -> str:
    return ("an " if noun[0] in "aeiou" else "a ") + noun


def pick(rng: random.Random, weights: dict[str, float]) -> str:
    keys = sorted(weights)
    return rng.choices(keys, weights=[weights[k] for k in keys])[0]


def _ngon(start: tuple[K, K], second: tuple[K, K], n: int) -> list[tuple[K, K]]:
    """A regular n-gon from two consecutive vertices, turning left (counter-clockwise)."""
    pts = [start, second]
    while len(pts) < n:
        pts.append(add(pts[-1], rot(sub(pts[-1], pts[-2]), 360 // n)))
    return pts


def _nothing_new(fig: Figure, pts) -> bool:
    """Whether every point is already in the figure (the rule would redraw an existing shape)."""
    return all(fig.label_of(p) is not None for p in pts)


def _polygon(fig: Figure, pts, kind: str, gtype: str) -> Shape:
    names = tuple(fig.point(p) for p in pts)
    shape = Shape(kind, gtype, f"{kind} {''.join(names)}", names)
    fig.polygon(shape)
    return shape


# base shapes -----------------------------------------------------------------------------------------
def build_base(rng: random.Random, btype: str) -> tuple[Figure, Shape]:
    fig = Figure(frame="A at the origin and AB along the positive x-axis")
    if btype == "polygon":
        n, s = rng.choice(POLYGON_SIDES), rng.randint(2, 6)
        sh = _polygon(fig, _ngon(kpt(0, 0), kpt(s, 0), n), NGON[n], "polygon")
        fig.say(f"{''.join(sh.vertices)} is {article(NGON[n])} with side length {s}.")
        fig.given.append(("A", "B", str(s)))
    elif btype == "circle":
        r = rng.randint(2, 6)
        o, a, b = fig.point(kpt(0, 0), center=True), fig.point(kpt(-r, 0)), fig.point(kpt(r, 0))
        fig.segment(a, b)
        sh = Shape("circle", "circle", "circle O", center=o, r2=K(r * r), on=a)
        fig.circle(sh)
        fig.frame = "O at the origin and A on the negative x-axis"
        fig.say(f"circle O has radius {r}, and AB is a diameter.")
        fig.given.append((o, b, str(r)))
    elif btype == "special_triangle":
        if rng.random() < 0.5:
            u, v = rng.choice(RIGHT_RATIOS)
            k = rng.randint(1, 3)
            ab, ac = u * k, v * k
            sh = _polygon(fig, [kpt(0, 0), (ab, K(0)), (K(0), ac)], "triangle", "special_triangle")
            fig.say(f"ABC is a right triangle with the right angle at A, AB = {fmt(ab)} and AC = {fmt(ac)}.")
            fig.given += [("A", "B", fmt(ab)), ("A", "C", fmt(ac))]
        else:
            th, L = rng.choice(APEX_ANGLES), rng.randint(2, 6)
            sh = _polygon(fig, [kpt(0, 0), kpt(L, 0), (COS(th) * L, SIN(th) * L)], "triangle", "special_triangle")
            fig.say(f"ABC is an isosceles triangle with AB = AC = {L} and ∠BAC = {th}°.")
            fig.given += [("A", "B", str(L))]
    elif btype == "special_rectangle":
        p, q = rng.choice(RECT_RATIOS)
        k = rng.randint(1, 3)
        a, b = p * k, q * k
        if rng.random() < 0.5:
            a, b = b, a
        kind = "square" if a == b else "rectangle"
        sh = _polygon(fig, [kpt(0, 0), kpt(a, 0), kpt(a, b), kpt(0, b)], kind, "special_rectangle")
        fig.say(f"ABCD is a square with side length {a}." if a == b else
                        f"ABCD is a rectangle with AB = {a} and BC = {b}.")
        fig.given += [("A", "B", str(a))] + ([] if a == b else [("B", "C", str(b))])
    elif btype == "parallelogram":
        a, b, th = rng.randint(3, 7), rng.randint(2, 5), rng.choice(PARALLELOGRAM_ANGLES)
        d = (COS(th) * b, SIN(th) * b)
        sh = _polygon(fig, [kpt(0, 0), kpt(a, 0), add(kpt(a, 0), d), d], "parallelogram", "parallelogram")
        fig.say(f"ABCD is a parallelogram with AB = {a}, AD = {b} and ∠DAB = {th}°.")
        fig.given += [("A", "B", str(a)), ("A", "D", str(b))]
    elif btype == "trapezoid":
        if rng.random() < 0.5:
            a, c, h = rng.randint(4, 8), rng.randint(2, 6), rng.randint(2, 5)
            c = c if c != a else a - 1
            sh = _polygon(fig, [kpt(0, 0), kpt(a, 0), kpt(c, h), kpt(0, h)], "trapezoid", "trapezoid")
            fig.say(f"ABCD is a trapezoid with AB ∥ DC, ∠DAB = 90°, AB = {a}, DC = {c} and AD = {h}.")
            fig.given += [("A", "B", str(a)), ("D", "C", str(c)), ("A", "D", str(h))]
        else:
            th, leg = rng.choice(TRAPEZOID_ANGLES), rng.randint(2, 4)
            a = int(2 * leg * float(COS(th))) + rng.randint(2, 4)
            dx, dy = COS(th) * leg, SIN(th) * leg
            sh = _polygon(fig, [kpt(0, 0), kpt(a, 0), (K(a) - dx, dy), (dx, dy)], "trapezoid", "trapezoid")
            fig.say(f"ABCD is an isosceles trapezoid with AB ∥ DC, AB = {a}, AD = BC = {leg} "
                            f"and ∠DAB = {th}°.")
            fig.given += [("A", "B", str(a)), ("A", "D", str(leg))]
    else:
        raise ValueError(f"unknown base type {btype!r}")
    fig.base = set(fig.points)
    fig.steps.append({"op": "base", "type": btype, "shape": _record(sh)})
    return fig, sh


def _record(sh: Shape) -> dict:
    if sh.is_circle:
        return {"kind": "circle", "center": sh.center, "r2": float(sh.r2), "on": sh.on}
    return {"kind": sh.kind, "vertices": list(sh.vertices)}


# derivation rules ------------------------------------------------------------------------------------
def _equidistant_center(fig: Figure, sh: Shape):
    pts = [fig.xy(v) for v in sh.vertices]
    if len(pts) == 3:  # circumcentre: solve |X - A|^2 = |X - B|^2 = |X - C|^2 (two linear equations)
        (ax, ay), (bx, by), (cx, cy) = pts
        d = (ax * (by - cy) + bx * (cy - ay) + cx * (ay - by)) * 2
        a2, b2, c2 = ax * ax + ay * ay, bx * bx + by * by, cx * cx + cy * cy
        o = ((a2 * (by - cy) + b2 * (cy - ay) + c2 * (ay - by)) / d,
             (a2 * (cx - bx) + b2 * (ax - cx) + c2 * (bx - ax)) / d)
    else:
        o = scale((sum((p[0] for p in pts), K(0)), sum((p[1] for p in pts), K(0))), K(1) / len(pts))
    return o if len({dist2(o, p) for p in pts}) == 1 else None


def _incenter(fig: Figure, sh: Shape):
    pts = [fig.xy(v) for v in sh.vertices]
    if sh.gtype == "polygon" or sh.kind == "square":
        return _equidistant_center(fig, sh)
    if len(pts) != 3:
        return None
    sides = [dist2(pts[(i + 1) % 3], pts[(i + 2) % 3]).sqrt() for i in range(3)]  # side opposite vertex i
    if any(s is None for s in sides):
        return None
    tot = sides[0] + sides[1] + sides[2]
    return (sum((s * p[0] for s, p in zip(sides, pts)), K(0)) / tot,
            sum((s * p[1] for s, p in zip(sides, pts)), K(0)) / tot)


def _circum_inscribe(fig: Figure, sh: Shape, rng: random.Random) -> Shape | None:
    if sh.is_circle:
        o, p = fig.xy(sh.center), fig.xy(sh.on)
        v = sub(p, o)
        if rng.random() < 0.7:
            n = rng.choice(INSCRIBED_SIDES)
            pts = [add(o, rot(v, 360 * k // n)) for k in range(n)]
            if _nothing_new(fig, pts):
                return None
            new = _polygon(fig, pts, NGON[n], "polygon")
            fig.relations.append((fig.shapes.index(new), fig.shapes.index(sh), "in"))
            fig.say(f"{NGON[n].capitalize()} {''.join(new.vertices)} is inscribed in {sh.name}.")
            fig.steps.append({"op": "inscribed_polygon", "circle": sh.center, "vertices": list(new.vertices)})
        else:
            w = rot(v, 90)
            corners = [add(o, add(v, scale(w, -1))), add(o, add(v, w)), add(o, sub(w, v)), sub(sub(o, v), w)]
            if _nothing_new(fig, corners):
                return None
            new = _polygon(fig, corners, "square", "polygon")
            fig.relations.append((fig.shapes.index(new), fig.shapes.index(sh), "around"))
            fig.say(f"Square {''.join(new.vertices)} is circumscribed about {sh.name}; its side "
                            f"{new.vertices[0]}{new.vertices[1]} touches the circle at {sh.on}.")
            fig.steps.append({"op": "circumscribed_square", "circle": sh.center, "vertices": list(new.vertices)})
        return new
    inscribed = rng.random() < 0.4
    c = _incenter(fig, sh) if inscribed else None
    if c is None:
        inscribed, c = False, _equidistant_center(fig, sh)
    if c is None:
        return None
    r2 = dist2(c, foot(c, fig.xy(sh.vertices[0]), fig.xy(sh.vertices[1]))[0] if inscribed else fig.xy(sh.vertices[0]))
    if any(s.is_circle and fig.xy(s.center) == c and s.r2 == r2 for s in fig.shapes):
        return None  # that circle is already drawn
    o = fig.point(c, center=True)
    if inscribed:
        a, b = sh.vertices[0], sh.vertices[1]
        t = fig.point(foot(c, fig.xy(a), fig.xy(b))[0])
        new = Shape("circle", "circle", fig.circle_name(o, t), center=o, r2=dist2(c, fig.xy(t)), on=t)
        fig.relations.append((fig.shapes.index(sh), fig.circle(new), "around"))
        fig.say(f"The circle with center {o} is inscribed in {sh.name} and touches {a}{b} at {t}.")
        fig.steps.append({"op": "incircle", "center": o, "polygon": list(sh.vertices), "touch": t, "side": [a, b]})
    else:
        on = sh.vertices[0]
        new = Shape("circle", "circle", fig.circle_name(o, on), center=o, r2=dist2(c, fig.xy(on)), on=on)
        fig.relations.append((fig.shapes.index(sh), fig.circle(new), "in"))
        fig.say(f"The circle with center {o} is circumscribed about {sh.name}.")
        fig.steps.append({"op": "circumcircle", "center": o, "polygon": list(sh.vertices)})
    return new


def _center(fig: Figure, sh: Shape):
    pts = [fig.xy(v) for v in sh.vertices]
    if len(pts) == 4:  # diagonals AC and BD: A + t(C - A) with t = (B - A) x (D - B) / ((C - A) x (D - B))
        a, b, c, d = pts
        den = cross(sub(c, a), sub(d, b))
        if den.is_zero():
            return None, ""
        t = cross(sub(b, a), sub(d, b)) / den
        v = sh.vertices
        return add(a, scale(sub(c, a), t)), f"the intersection of diagonals {v[0]}{v[2]} and {v[1]}{v[3]}"
    n = len(pts)
    g = (sum((p[0] for p in pts), K(0)) / n, sum((p[1] for p in pts), K(0)) / n)
    return g, (f"the centroid of {sh.name}" if n == 3 else f"the center of {sh.name}")


def _concentric(fig: Figure, sh: Shape, rng: random.Random) -> Shape | None:
    if sh.is_circle:
        k = rng.choice(CIRCLE_RATIOS)
        o, p = fig.xy(sh.center), fig.xy(sh.on)
        q = fig.point(add(o, scale(sub(p, o), K(k))))
        new = Shape("circle", "circle", fig.circle_name(sh.center, q), center=sh.center, r2=sh.r2 * K(k * k), on=q)
        fig.circle(new)
        fig.say(f"A second circle with center {sh.center} has {k} times the radius of {sh.name} "
                        f"and meets ray {sh.center}{sh.on} at {q}.")
        fig.steps.append({"op": "concentric_circle", "center": sh.center, "ratio": float(k), "on": q})
        return new
    g, where = _center(fig, sh)
    if g is None:
        return None
    k = rng.choice(DILATION_RATIOS)
    gname = fig.point(g, center=True)
    pts = [add(g, scale(sub(fig.xy(v), g), K(k))) for v in sh.vertices]
    new = _polygon(fig, pts, sh.kind, sh.gtype)
    fig.say(f"{gname} is {where}; {sh.kind} {''.join(new.vertices)} is the image of "
                    f"{''.join(sh.vertices)} under the dilation about {gname} with ratio {k} "
                    f"({', '.join(f'{a}→{b}' for a, b in zip(sh.vertices, new.vertices))}).")
    fig.steps.append({"op": "dilation", "center": gname, "ratio": float(k), "from": list(sh.vertices),
                      "to": list(new.vertices)})
    return new


def _translation(fig: Figure, sh: Shape, rng: random.Random) -> Shape | None:
    if sh.is_circle:
        o, p = fig.xy(sh.center), fig.xy(sh.on)
        q = fig.point(add(p, sub(p, o)))
        new = Shape("circle", "circle", fig.circle_name(sh.on, q), center=sh.on, r2=sh.r2, on=q)
        fig.circle(new)
        fig.say(f"Translating {sh.name} by the vector {sh.center}{sh.on} gives a circle with center "
                        f"{sh.on}, which meets ray {sh.center}{sh.on} again at {q}.")
        fig.steps.append({"op": "translate_circle", "from": sh.center, "to": sh.on, "on": q})
        return new
    v = sh.vertices
    i = rng.randrange(len(v))
    a, b = v[i], v[(i + 1) % len(v)]
    d = sub(fig.xy(b), fig.xy(a))
    pts = [add(fig.xy(x), d) for x in v]
    if _nothing_new(fig, pts):
        return None
    new = _polygon(fig, pts, sh.kind, sh.gtype)
    fig.say(f"Translating {sh.name} by the vector {a}{b} gives {sh.kind} {''.join(new.vertices)} "
                    f"({', '.join(f'{x}→{y}' for x, y in zip(v, new.vertices))}).")
    fig.steps.append({"op": "translation", "vector": [a, b], "from": list(v), "to": list(new.vertices)})
    return new


def _side_polygon(fig: Figure, sh: Shape, rng: random.Random) -> Shape | None:
    v = sh.vertices
    taken = {frozenset((o.vertices[j], o.vertices[(j + 1) % len(o.vertices)]))
             for o in fig.shapes if o is not sh and not o.is_circle for j in range(len(o.vertices))}
    free = [i for i in range(len(v)) if frozenset((v[i], v[(i + 1) % len(v)])) not in taken]
    if not free:
        return None
    i, n = rng.choice(free), rng.choice(SIDE_POLYGON_SIDES)
    a, b = v[i], v[(i + 1) % len(v)]
    ccw = shoelace([fig.xy(x) for x in v]).sign() > 0
    start, second = (b, a) if ccw else (a, b)  # turning left from b->a keeps the new polygon outside
    pts = _ngon(fig.xy(start), fig.xy(second), n)
    if _nothing_new(fig, pts):
        return None
    names = [start, second] + [fig.point(p) for p in pts[2:]]
    order = [second, start] + names[2:][::-1]  # the same polygon read from the side's first vertex
    new = Shape(NGON[n], "polygon", f"{NGON[n]} {''.join(order)}", tuple(order))
    fig.polygon(new)
    fig.say(f"{NGON[n].capitalize()} {''.join(order)} is constructed on side {a}{b}, outside {sh.name}.")
    fig.steps.append({"op": "side_polygon", "side": [a, b], "n": n, "vertices": list(order)})
    return new


APPLY = {"circum_inscribe": _circum_inscribe, "concentric": _concentric, "translation": _translation,
         "side_polygon": _side_polygon}
NEW_POINTS = {"circum_inscribe": 8, "concentric": 9, "translation": 8, "side_polygon": 6}  # at most


def derive(fig: Figure, current: Shape, rng: random.Random) -> None:
    """Apply ``ROUND_RANGE`` rounds of type-conditional rules, each to the shape the last one made."""
    for _ in range(rng.randint(*ROUND_RANGE)):
        weights = dict(RULES[current.gtype])
        while weights:
            rule = pick(rng, weights)
            del weights[rule]
            if len(fig.points) + NEW_POINTS[rule] > DERIVATION_POINT_BUDGET:
                continue
            new = APPLY[rule](fig, current, rng)
            if new is not None:
                fig.rules.append(rule)
                current = new
                break
        else:
            return
