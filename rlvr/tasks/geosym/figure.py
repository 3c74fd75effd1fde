"""The GeoSym figure: labelled exact points, segments, shapes and the construction record.

A :class:`Figure` is built step by step by the grammar (:mod:`.grammar`, :mod:`.enhance`). Coordinates are
elements of Q(√2, √3) (:mod:`.field`), so every constructed point is exact:

- midpoint ``M = (P + Q)/2``;
- foot of the perpendicular from ``P`` to line ``AB``: ``F = A + t(B - A)``, ``t = (P - A)·(B - A) / |B - A|^2``;
- intersection of segments ``AB`` and ``CD``: with ``d1 = B - A``, ``d2 = D - C``, ``den = d1 × d2``,
  ``t = (C - A) × d2 / den`` and ``u = (C - A) × d1 / den``; they cross properly iff ``0 < t, u < 1``,
  and the point is ``A + t d1``;
- rotation by a multiple of 15°: ``R(θ)(x, y) = (x cosθ - y sinθ, x sinθ + y cosθ)`` with exact cos/sin.

Adding a segment recomputes its proper intersections with every earlier segment and labels the new
crossing points (the GeoSym builder's "new intersections recomputed symbolically"), as long as labels
remain (``MAX_POINTS``). A point equal to an existing one keeps the existing label, so nothing is
duplicated. Every step appends a sentence to ``text`` (the problem statement) and a structured record to
``steps`` (kept in the example's meta, so the construction can be checked independently).

Source: GeoSym / GeoSym127K (2026), github.com/Tomie56/GeoSym127K (``scripts/tools/builder.py``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from rlvr.tasks.geosym.field import COS, K, SIN, Pt

__all__ = ["Shape", "Figure", "MAX_POINTS", "LABELS", "add", "sub", "scale", "mid", "rot", "cross", "dot",
           "dist2", "foot", "crossing", "fmt", "shoelace"]

LABELS = "ABCDEFGHJKLMNPQRSTUVWXYZ"  # I and O left out: O names the first circle's centre
MAX_POINTS = 24


def add(p: Pt, q: Pt) -> Pt:
    return (p[0] + q[0], p[1] + q[1])


def sub(p: Pt, q: Pt) -> Pt:
    return (p[0] - q[0], p[1] - q[1])


def scale(p: Pt, k) -> Pt:
    return (p[0] * k, p[1] * k)


def mid(p: Pt, q: Pt) -> Pt:
    return scale(add(p, q), K(1, 0, 0, 0) / 2)


def rot(v: Pt, deg: int) -> Pt:
    c, s = COS(deg), SIN(deg)
    return (v[0] * c - v[1] * s, v[0] * s + v[1] * c)


def cross(u: Pt, v: Pt) -> K:
    return u[0] * v[1] - u[1] * v[0]


def dot(u: Pt, v: Pt) -> K:
    return u[0] * v[0] + u[1] * v[1]


def dist2(p: Pt, q: Pt) -> K:
    d = sub(p, q)
    return dot(d, d)


def foot(p: Pt, a: Pt, b: Pt) -> tuple[Pt, K]:
    """The foot of the perpendicular from ``p`` to line ``ab`` and its parameter ``t`` along ``ab``."""
    d = sub(b, a)
    t = dot(sub(p, a), d) / dot(d, d)
    return add(a, scale(d, t)), t


def crossing(a: Pt, b: Pt, c: Pt, d: Pt) -> Pt | None:
    """The proper crossing point of segments ``ab`` and ``cd`` (interiors only), else None."""
    (ax, ay), (bx, by), (cx, cy), (dx, dy) = (tuple(map(float, p)) for p in (a, b, c, d))
    fden = (bx - ax) * (dy - cy) - (by - ay) * (dx - cx)
    if abs(fden) > 1e-9:  # a float screen first: only near-crossings are decided exactly
        ft = ((cx - ax) * (dy - cy) - (cy - ay) * (dx - cx)) / fden
        fu = ((cx - ax) * (by - ay) - (cy - ay) * (bx - ax)) / fden
        if min(ft, fu) < -1e-7 or max(ft, fu) > 1 + 1e-7:
            return None
    d1, d2 = sub(b, a), sub(d, c)
    den = cross(d1, d2)
    if den.is_zero():
        return None
    ca = sub(c, a)
    t, u = cross(ca, d2) / den, cross(ca, d1) / den
    if t.sign() <= 0 or (t - 1).sign() >= 0 or u.sign() <= 0 or (u - 1).sign() >= 0:
        return None
    return add(a, scale(d1, t))


def _far(p: Pt, a: Pt, b: Pt) -> bool:
    """Whether ``p`` is clearly (in floats) off the line ``ab``."""
    (px, py), (ax, ay), (bx, by) = (tuple(map(float, q)) for q in (p, a, b))
    return abs((bx - ax) * (py - ay) - (by - ay) * (px - ax)) > 1e-7 * (1 + abs(bx - ax) + abs(by - ay))


def shoelace(pts: list[Pt]) -> K:
    """Signed area (positive when counter-clockwise): ``1/2 Σ (x_i y_{i+1} - x_{i+1} y_i)``."""
    s = K(0)
    for i, p in enumerate(pts):
        s = s + cross(p, pts[(i + 1) % len(pts)])
    return s / 2


def fmt(x: K) -> str:
    """A length for the problem text: ``2√3``, ``5/2``, ``√2/2``, ``1 + √3``."""
    s = str(x.sympy())
    for r in ("6", "3", "2"):
        s = s.replace(f"sqrt({r})", f"√{r}")
    return s.replace("*", "")


@dataclass
class Shape:
    """A polygon (``vertices`` in order) or a circle (``center``, squared radius ``r2``, a point ``on`` it)."""

    kind: str                       # "triangle", "square", "regular hexagon", "circle", ...
    gtype: str                      # grammar type, the key of the derivation rules
    name: str                       # as the problem text names it: "triangle ABC", "circle O"
    vertices: tuple[str, ...] = ()
    center: str | None = None
    r2: K | None = None
    on: str | None = None

    @property
    def is_circle(self) -> bool:
        return self.center is not None


@dataclass
class Figure:
    points: dict[str, Pt] = field(default_factory=dict)
    segments: list[tuple[str, str]] = field(default_factory=list)
    shapes: list[Shape] = field(default_factory=list)
    relations: list[tuple[int, int, str]] = field(default_factory=list)  # (polygon, circle, "in"|"around")
    text: list[str] = field(default_factory=list)
    steps: list[dict[str, Any]] = field(default_factory=list)
    given: list[tuple[str, str, str]] = field(default_factory=list)  # lengths written on the diagram
    base: set[str] = field(default_factory=set)                       # labels of the base shape's points
    frame: str = ""                                                   # the coordinate frame, for the CoT
    rules: list[str] = field(default_factory=list)
    enhancements: list[str] = field(default_factory=list)
    _index: dict[Pt, str] = field(default_factory=dict)
    _pending: list[str] = field(default_factory=list)

    # points ----------------------------------------------------------------------------------------
    def label_of(self, p: Pt) -> str | None:
        return self._index.get(p)

    def free_labels(self) -> int:
        return MAX_POINTS - len(self.points)

    def _next_label(self, center: bool) -> str | None:
        if len(self.points) >= MAX_POINTS:
            return None
        if center and "O" not in self.points:
            return "O"
        return next((c for c in LABELS if c not in self.points), None)

    def point(self, p: Pt, center: bool = False) -> str | None:
        """The label of ``p``, adding it under the next free label; None when no label is left."""
        have = self._index.get(p)
        if have is not None:
            return have
        name = self._next_label(center)
        if name is not None:
            self.points[name] = p
            self._index[p] = name
        return name

    def xy(self, name: str) -> Pt:
        return self.points[name]

    # segments --------------------------------------------------------------------------------------
    def has_segment(self, a: str, b: str) -> bool:
        return (a, b) in self.segments or (b, a) in self.segments

    def on_segment(self, name: str, seg: tuple[str, str]) -> bool:
        """Whether point ``name`` lies on segment ``seg`` (endpoints included)."""
        p, a, b = self.xy(name), self.xy(seg[0]), self.xy(seg[1])
        if _far(p, a, b) or not cross(sub(b, a), sub(p, a)).is_zero():
            return False
        t = dot(sub(p, a), sub(b, a))
        return t.sign() >= 0 and (t - dot(sub(b, a), sub(b, a))).sign() <= 0

    def collinear_with_segment(self, a: str, b: str) -> bool:
        """Whether ``a`` and ``b`` both lie on the line of one existing segment (joining them adds nothing)."""
        pa, pb = self.xy(a), self.xy(b)
        for s, t in self.segments:
            ps, pt = self.xy(s), self.xy(t)
            if _far(pa, ps, pt) or _far(pb, ps, pt):
                continue
            d = sub(pt, ps)
            if cross(d, sub(pa, ps)).is_zero() and cross(d, sub(pb, ps)).is_zero():
                return True
        return False

    def segment(self, a: str, b: str) -> list[str]:
        """Draw segment ``ab``; label its new crossings with earlier segments; the sentence names them."""
        if a == b or self.has_segment(a, b):
            return []
        pa, pb = self.xy(a), self.xy(b)
        found: list[tuple[str, tuple[str, str]]] = []
        for s in list(self.segments):
            if a in s or b in s:
                continue
            x = crossing(pa, pb, self.xy(s[0]), self.xy(s[1]))
            if x is None or self.label_of(x) is not None:
                continue
            name = self.point(x)
            if name is None:
                continue
            found.append((name, s))
            self.steps.append({"op": "intersection", "point": name, "lines": [[a, b], list(s)]})
        self.segments.append((a, b))
        if found:
            self._pending.append(f"Segment {a}{b} meets " + ", ".join(f"{s[0]}{s[1]} at {n}" for n, s in found) + ".")
        return [n for n, _ in found]

    def say(self, sentence: str) -> None:
        """Add a sentence to the statement, then the crossings the step's segments made."""
        self.text.append(sentence)
        self.text.extend(self._pending)
        self._pending.clear()

    def polygon(self, shape: Shape) -> int:
        """Add a polygon shape and its sides; its index in ``shapes``."""
        self.shapes.append(shape)
        v = shape.vertices
        for i in range(len(v)):
            self.segment(v[i], v[(i + 1) % len(v)])
        return len(self.shapes) - 1

    def circle(self, shape: Shape) -> int:
        self.shapes.append(shape)
        return len(self.shapes) - 1

    def circle_name(self, center: str, through: str) -> str:
        if any(s.is_circle and s.center == center for s in self.shapes):
            return f"the circle with center {center} through {through}"
        return f"circle {center}"

    def on_circle(self, name: str, c: Shape) -> bool:
        return dist2(self.xy(name), self.xy(c.center)) == c.r2

    def floats(self) -> dict[str, list[float]]:
        return {k: [float(x), float(y)] for k, (x, y) in self.points.items()}
