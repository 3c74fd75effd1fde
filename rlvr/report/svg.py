"""Inline SVG charts for self-contained HTML reports (no scripts, no network, no matplotlib).

``line_chart`` draws labelled lines with optional shaded bands (e.g. the spread over seeds);
``interval_chart`` draws one point with its confidence interval per method.
"""

from __future__ import annotations

import html
import math
from dataclasses import dataclass
from typing import Sequence

__all__ = ["Series", "line_chart", "interval_chart", "nice_ticks", "PALETTE"]

PALETTE = ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#7f7f7f"]


@dataclass
class Series:
    label: str
    xs: Sequence[float]
    ys: Sequence[float]
    lo: Sequence[float] | None = None  # band, same length as xs
    hi: Sequence[float] | None = None
    color: str = ""
    markers: bool = False


def nice_ticks(lo: float, hi: float, n: int = 5) -> list[float]:
    """About ``n`` round tick values covering [lo, hi]."""
    if not (math.isfinite(lo) and math.isfinite(hi)):
        return [0.0, 1.0]
    if hi <= lo:
        hi = lo + (abs(lo) or 1.0)
    raw = (hi - lo) / max(1, n)
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw)
    start = math.floor(lo / step) * step
    ticks, t = [], start
    while t <= hi + step * 1e-9:
        ticks.append(round(t, 12))
        t += step
    if ticks[-1] < hi:
        ticks.append(round(t, 12))
    return ticks


def _fmt(v: float) -> str:
    if v == 0:
        return "0"
    if abs(v) >= 1000:
        return f"{v:,.0f}"
    return f"{v:.3g}"


def _finite(vals) -> list[float]:
    return [float(v) for v in vals if v is not None and math.isfinite(float(v))]


class _Frame:
    def __init__(self, width: int, height: int, xr: tuple[float, float], yr: tuple[float, float]):
        self.w, self.h = width, height
        self.left, self.right, self.top, self.bottom = 56, 12, 30, 40
        self.xt, self.yt = nice_ticks(*xr), nice_ticks(*yr)
        self.x0, self.x1 = self.xt[0], self.xt[-1]
        self.y0, self.y1 = self.yt[0], self.yt[-1]

    def x(self, v: float) -> float:
        span = (self.x1 - self.x0) or 1.0
        return self.left + (v - self.x0) / span * (self.w - self.left - self.right)

    def y(self, v: float) -> float:
        span = (self.y1 - self.y0) or 1.0
        return self.h - self.bottom - (v - self.y0) / span * (self.h - self.top - self.bottom)

    def axes(self, title: str, xlabel: str, ylabel: str) -> list[str]:
        out = [f'<text class="title" x="{self.w / 2:.1f}" y="18" text-anchor="middle" font-size="14" '
               f'font-weight="bold">{html.escape(title)}</text>']
        for t in self.yt:
            y = self.y(t)
            out.append(f'<line x1="{self.left}" x2="{self.w - self.right}" y1="{y:.1f}" y2="{y:.1f}" '
                       f'stroke="#e5e5e5"/><text x="{self.left - 6}" y="{y + 4:.1f}" text-anchor="end" '
                       f'font-size="11">{_fmt(t)}</text>')
        for t in self.xt:
            x = self.x(t)
            out.append(f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{self.top}" y2="{self.h - self.bottom}" '
                       f'stroke="#f0f0f0"/><text x="{x:.1f}" y="{self.h - self.bottom + 15}" text-anchor="middle" '
                       f'font-size="11">{_fmt(t)}</text>')
        out.append(f'<rect x="{self.left}" y="{self.top}" width="{self.w - self.left - self.right}" '
                   f'height="{self.h - self.top - self.bottom}" fill="none" stroke="#999"/>')
        out.append(f'<text x="{(self.left + self.w - self.right) / 2:.1f}" y="{self.h - 6}" text-anchor="middle" '
                   f'font-size="12">{html.escape(xlabel)}</text>')
        out.append(f'<text x="14" y="{(self.top + self.h - self.bottom) / 2:.1f}" text-anchor="middle" '
                   f'font-size="12" transform="rotate(-90 14 {(self.top + self.h - self.bottom) / 2:.1f})">'
                   f'{html.escape(ylabel)}</text>')
        return out


def _legend(labels: list[tuple[str, str]], x: float, y: float) -> list[str]:
    out = []
    for i, (label, color) in enumerate(labels):
        yy = y + 14 * i
        out.append(f'<g class="legend-item"><rect x="{x:.1f}" y="{yy - 8:.1f}" width="12" height="3" '
                   f'fill="{color}"/><text x="{x + 16:.1f}" y="{yy - 3:.1f}" font-size="11">'
                   f'{html.escape(label)}</text></g>')
    return out


def line_chart(series: Sequence[Series], title: str, xlabel: str = "step", ylabel: str = "",
               ylim: tuple[float, float] | None = None, width: int = 520, height: int = 300,
               chart_id: str = "") -> str:
    """An SVG line chart; each series may carry a shaded band ``lo..hi``."""
    xs = _finite(v for s in series for v in s.xs)
    ys = _finite(v for s in series for band in (s.ys, s.lo or [], s.hi or []) for v in band)
    if ylim is None:
        ylim = (min(ys), max(ys)) if ys else (0.0, 1.0)
    f = _Frame(width, height, (min(xs), max(xs)) if xs else (0.0, 1.0), ylim)
    body = f.axes(title, xlabel, ylabel)
    legend = []
    for i, s in enumerate(series):
        color = s.color or PALETTE[i % len(PALETTE)]
        pts = [(x, y) for x, y in zip(s.xs, s.ys) if y is not None and math.isfinite(y)]
        if not pts:
            continue
        legend.append((s.label, color))
        if s.lo is not None and s.hi is not None:
            band = [(x, lo, hi) for x, lo, hi in zip(s.xs, s.lo, s.hi)
                    if lo is not None and hi is not None and math.isfinite(lo) and math.isfinite(hi)]
            if band:
                upper = " ".join(f"{f.x(x):.1f},{f.y(hi):.1f}" for x, _, hi in band)
                lower = " ".join(f"{f.x(x):.1f},{f.y(lo):.1f}" for x, lo, _ in reversed(band))
                body.append(f'<polygon class="band" data-series="{html.escape(s.label)}" points="{upper} {lower}" '
                            f'fill="{color}" fill-opacity="0.18" stroke="none"/>')
        d = " ".join(f"{'M' if j == 0 else 'L'}{f.x(x):.1f},{f.y(y):.1f}" for j, (x, y) in enumerate(pts))
        body.append(f'<path class="line" data-series="{html.escape(s.label)}" d="{d}" fill="none" '
                    f'stroke="{color}" stroke-width="1.8"/>')
        if s.markers or len(pts) == 1:
            body += [f'<circle cx="{f.x(x):.1f}" cy="{f.y(y):.1f}" r="3" fill="{color}"/>' for x, y in pts]
    body += _legend(legend, f.left + 8, f.top + 14)
    ident = f' id="{html.escape(chart_id)}"' if chart_id else ""
    return (f'<svg class="chart"{ident} xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
            f'viewBox="0 0 {width} {height}" role="img" aria-label="{html.escape(title)}">'
            + "".join(body) + "</svg>")


def interval_chart(labels: Sequence[str], values: Sequence[float], intervals: Sequence[tuple[float, float]],
                   title: str, ylabel: str = "", width: int = 520, height: int = 300, chart_id: str = "") -> str:
    """One point with its interval per label (methods on the x axis)."""
    ys = _finite([*values, *(v for iv in intervals for v in iv)])
    f = _Frame(width, height, (0.0, 1.0), (min(ys), max(ys)) if ys else (0.0, 1.0))
    f.xt, f.x0, f.x1 = [], -0.5, len(labels) - 0.5
    body = f.axes(title, "", ylabel)
    for i, (label, v, (lo, hi)) in enumerate(zip(labels, values, intervals)):
        color, x = PALETTE[i % len(PALETTE)], f.x(i)
        if math.isfinite(lo) and math.isfinite(hi):
            body.append(f'<line class="interval" x1="{x:.1f}" x2="{x:.1f}" y1="{f.y(lo):.1f}" y2="{f.y(hi):.1f}" '
                        f'stroke="{color}" stroke-width="2"/>')
        if math.isfinite(v):
            body.append(f'<circle class="point" cx="{x:.1f}" cy="{f.y(v):.1f}" r="4" fill="{color}"/>')
        body.append(f'<text x="{x:.1f}" y="{height - f.bottom + 15}" text-anchor="middle" font-size="11">'
                    f'{html.escape(label)}</text>')
    ident = f' id="{html.escape(chart_id)}"' if chart_id else ""
    return (f'<svg class="chart"{ident} xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
            f'viewBox="0 0 {width} {height}" role="img" aria-label="{html.escape(title)}">'
            + "".join(body) + "</svg>")
