"""Exact arithmetic in the number field K = Q(sqrt 2, sqrt 3), where every GeoSym coordinate lives.

An element is ``(a + b*sqrt2 + c*sqrt3 + d*sqrt6) / q`` with integers ``a, b, c, d`` and ``q > 0`` in lowest terms.
Sums, products and quotients stay in K, so every point the grammar builds (rotations by multiples of 15 and
45 degrees, midpoints, feet of perpendiculars, line intersections, circumcentres, homotheties) has exact
coordinates and equality is a tuple comparison. That makes intersections and duplicate points decidable
exactly and cheaply; SymPy is only needed for the final answers (square roots of elements of K, pi).

Division uses the conjugates: write ``y = p + q*sqrt3`` with ``p, q`` in Q(sqrt2); then
``y * (p - q*sqrt3) = p^2 - 3q^2 = e + f*sqrt2`` and ``(e + f*sqrt2)(e - f*sqrt2) = e^2 - 2f^2`` is rational, so

    1/y = (p - q*sqrt3) * (e - f*sqrt2) / (e^2 - 2f^2).

The sign of a non-zero element is that of its float value unless the value is tiny, when it is decided
with 60-digit mpmath arithmetic (elements here have small heights, so this never misjudges).
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Union

__all__ = ["K", "ZERO", "ONE", "SQRT2", "SQRT3", "COS", "SIN", "Pt", "kpt"]

_R2, _R3, _R6 = math.sqrt(2.0), math.sqrt(3.0), math.sqrt(6.0)
Num = Union["K", int, Fraction]


class K:
    """An element ``(a + b√2 + c√3 + d√6) / q`` of Q(√2, √3): integers, ``q > 0``, in lowest terms.

    Immutable and hashable; one shared integer denominator keeps the arithmetic fast (no Fractions)."""

    __slots__ = ("n", "q", "_f")

    def __init__(self, a: Num = 0, b: Num = 0, c: Num = 0, d: Num = 0):
        fr = [Fraction(x) for x in (a, b, c, d)]
        q = math.lcm(*(x.denominator for x in fr))
        self._set(tuple(int(x * q) for x in fr), q)

    def _set(self, n: tuple[int, int, int, int], q: int) -> None:
        if q < 0:
            n, q = tuple(-x for x in n), -q
        g = math.gcd(q, *n)
        if g > 1:
            n, q = tuple(x // g for x in n), q // g
        object.__setattr__(self, "n", n)
        object.__setattr__(self, "q", q)
        object.__setattr__(self, "_f", None)

    @staticmethod
    def raw(n: tuple[int, int, int, int], q: int) -> "K":
        k = K.__new__(K)
        k._set(n, q)
        return k

    def __setattr__(self, name, value):  # pragma: no cover - immutability guard
        raise AttributeError("K is immutable")

    @property
    def c(self) -> tuple[Fraction, Fraction, Fraction, Fraction]:
        """The rational coefficients of 1, √2, √3, √6."""
        return tuple(Fraction(x, self.q) for x in self.n)

    @staticmethod
    def of(x: Num) -> "K":
        return x if isinstance(x, K) else K(x)

    def __add__(self, o: Num) -> "K":
        o = K.of(o)
        p, q = self.q, o.q
        return K.raw(tuple(x * q + y * p for x, y in zip(self.n, o.n)), p * q)

    __radd__ = __add__

    def __neg__(self) -> "K":
        return K.raw(tuple(-x for x in self.n), self.q)

    def __sub__(self, o: Num) -> "K":
        return self + (-K.of(o))

    def __rsub__(self, o: Num) -> "K":
        return K.of(o) - self

    def __mul__(self, o: Num) -> "K":
        o = K.of(o)
        a, b, c, d = self.n
        e, f, g, h = o.n
        # basis products: √2√2=2, √3√3=3, √6√6=6, √2√3=√6, √2√6=2√3, √3√6=3√2
        return K.raw((a * e + 2 * b * f + 3 * c * g + 6 * d * h,
                      a * f + b * e + 3 * c * h + 3 * d * g,
                      a * g + c * e + 2 * b * h + 2 * d * f,
                      a * h + d * e + b * g + c * f), self.q * o.q)

    __rmul__ = __mul__

    def conj2(self) -> "K":  # √2 -> -√2
        a, b, c, d = self.n
        return K.raw((a, -b, c, -d), self.q)

    def conj3(self) -> "K":  # √3 -> -√3
        a, b, c, d = self.n
        return K.raw((a, b, -c, -d), self.q)

    def inverse(self) -> "K":
        if self.is_zero():
            raise ZeroDivisionError("division by zero in Q(sqrt2, sqrt3)")
        n1 = self * self.conj3()          # in Q(√2)
        n2 = n1 * n1.conj2()              # rational: n2.n[0] / n2.q
        num = self.conj3() * n1.conj2()
        return K.raw(tuple(x * n2.q for x in num.n), num.q * n2.n[0])

    def __truediv__(self, o: Num) -> "K":
        return self * K.of(o).inverse()

    def __rtruediv__(self, o: Num) -> "K":
        return K.of(o) * self.inverse()

    def __eq__(self, o: object) -> bool:
        if isinstance(o, (int, Fraction)):
            o = K(o)
        return isinstance(o, K) and self.n == o.n and self.q == o.q

    def __hash__(self) -> int:
        return hash((self.n, self.q))

    def is_zero(self) -> bool:
        return not any(self.n)

    def __float__(self) -> float:
        if self._f is None:
            a, b, c, d = self.n
            try:
                v = (a + b * _R2 + c * _R3 + d * _R6) / self.q
            except OverflowError:
                v = float(self.c[0]) + float(self.c[1]) * _R2 + float(self.c[2]) * _R3 + float(self.c[3]) * _R6
            object.__setattr__(self, "_f", v)
        return self._f

    def sign(self) -> int:
        if self.is_zero():
            return 0
        v = float(self)
        if abs(v) > 1e-9:
            return 1 if v > 0 else -1
        import mpmath

        with mpmath.workdps(60):
            a, b, c, d = (mpmath.mpf(x) for x in self.n)
            exact = a + b * mpmath.sqrt(2) + c * mpmath.sqrt(3) + d * mpmath.sqrt(6)
        return 1 if exact > 0 else -1

    def __lt__(self, o: Num) -> bool:
        return (self - o).sign() < 0

    def __gt__(self, o: Num) -> bool:
        return (self - o).sign() > 0

    def __le__(self, o: Num) -> bool:
        return (self - o).sign() <= 0

    def __ge__(self, o: Num) -> bool:
        return (self - o).sign() >= 0

    def __abs__(self) -> "K":
        return -self if self.sign() < 0 else self

    def sympy(self):
        """The element as a SymPy expression."""
        import sympy

        a, b, c, d = (sympy.Rational(x.numerator, x.denominator) for x in self.c)
        return a + b * sympy.sqrt(2) + c * sympy.sqrt(3) + d * sympy.sqrt(6)

    @staticmethod
    def from_sympy(expr) -> "K | None":
        """The element of K equal to a SymPy expression, or None when it is not visibly one."""
        import sympy

        basis = {sympy.Integer(1): 0, sympy.sqrt(2): 1, sympy.sqrt(3): 2, sympy.sqrt(6): 3}
        coeffs = [Fraction(0)] * 4
        for term in sympy.Add.make_args(sympy.expand(expr)):
            coeff, rest = term.as_coeff_Mul()
            if not coeff.is_Rational or rest not in basis:
                return None
            coeffs[basis[rest]] += Fraction(int(coeff.p), int(coeff.q))
        return K(*coeffs)

    def sqrt(self) -> "K | None":
        """The non-negative square root in K, or None when it is not in K."""
        if self.sign() < 0:
            return None
        import sympy

        root = K.from_sympy(sympy.sqrtdenest(sympy.sqrt(self.sympy())))
        return root if root is not None and root * root == self and root.sign() >= 0 else None

    def height(self) -> int:
        """The largest numerator or denominator of the four coefficients (how "nice" the number is)."""
        return max(max(abs(x.numerator), x.denominator) for x in self.c)

    def __repr__(self) -> str:
        return f"K({', '.join(str(x) for x in self.c)})"


ZERO, ONE, SQRT2, SQRT3 = K(0), K(1), K(0, 1), K(0, 0, 1)
_H, _Q = Fraction(1, 2), Fraction(1, 4)
# cos and sin of every multiple of 15 degrees, exactly (cos 15 = (√6 + √2)/4, cos 30 = √3/2, cos 45 = √2/2)
_C = {0: K(1), 15: K(0, _Q, 0, _Q), 30: K(0, 0, _H), 45: K(0, _H), 60: K(_H), 75: K(0, -_Q, 0, _Q), 90: K(0)}


def COS(deg: int) -> K:
    """cos(deg°) exactly, for deg a multiple of 15."""
    if deg % 15:
        raise ValueError(f"{deg} is not a multiple of 15 degrees")
    d = deg % 360
    if d > 180:
        d = 360 - d
    return _C[d] if d <= 90 else -_C[180 - d]


def SIN(deg: int) -> K:
    """sin(deg°) exactly, for deg a multiple of 15."""
    return COS(90 - deg)


Pt = tuple[K, K]


def kpt(x: Num, y: Num) -> Pt:
    return (K.of(x), K.of(y))
