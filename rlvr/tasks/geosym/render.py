"""The GeoSym diagram renderer (Pillow): the figure at a chosen resolution, labelled and shaded.

The figure's float bounding box (every point, and every circle's extent ``center ± r``) is mapped onto the
image by one uniform scale and a translation, y pointing up, leaving a margin on each side:

    m = max(0.08 min(W, H), 2 f),   s = min((W - 2m) / w_box, (H - 2m) / h_box),
    x_px = (W - s w_box)/2 + s (x - x_min),   y_px = H - (H - s h_box)/2 - s (y - y_min),

with f the label font size, so every point lies inside the image whatever its coordinates and labels fit
around it. Drawn: the shaded region (outer shape filled, inner shape cleared), circles, segments, a dot
per point, point labels pushed away from the figure's centre, and the given lengths beside their
segments (DejaVu Sans, which has the radical sign). GeoSym renders at 1600x1200 and matches shaded pixel regions back to symbolic regions; here the
shaded region comes from the question (:mod:`.solver`), so no matching is needed.
Source: GeoSym / GeoSym127K (2026), github.com/Tomie56/GeoSym127K.
"""

from __future__ import annotations

import math
from typing import Any

from rlvr.tasks.geosym.figure import Figure

__all__ = ["project", "render", "BACKGROUND", "INK"]

BACKGROUND, INK, SHADE, GIVEN = (255, 255, 255), (20, 20, 20), (170, 200, 240), (30, 70, 200)


def _font_size(width: int, height: int) -> int:
    return max(9, round(min(width, height) / 28))


def _circles(fig: Figure) -> list[tuple[float, float, float]]:
    return [(float(fig.xy(c.center)[0]), float(fig.xy(c.center)[1]), math.sqrt(float(c.r2)))
            for c in fig.shapes if c.is_circle]


def _transform(fig: Figure, width: int, height: int):
    xs = [float(p[0]) for p in fig.points.values()]
    ys = [float(p[1]) for p in fig.points.values()]
    for cx, cy, r in _circles(fig):
        xs += [cx - r, cx + r]
        ys += [cy - r, cy + r]
    x0, x1, y0, y1 = min(xs), max(xs), min(ys), max(ys)
    bw, bh = max(x1 - x0, 1e-9), max(y1 - y0, 1e-9)
    m = max(0.08 * min(width, height), 2.0 * _font_size(width, height))
    s = min((width - 2 * m) / bw, (height - 2 * m) / bh)
    ox, oy = (width - s * bw) / 2, (height - s * bh) / 2

    def to_px(x: float, y: float) -> tuple[float, float]:
        return ox + s * (x - x0), height - oy - s * (y - y0)

    return to_px, s


def project(fig: Figure, width: int, height: int) -> dict[str, tuple[float, float]]:
    """Pixel position of every labelled point in a ``width x height`` rendering."""
    to_px, _ = _transform(fig, width, height)
    return {n: to_px(float(p[0]), float(p[1])) for n, p in fig.points.items()}


def _shade(draw, fig: Figure, region: dict[str, Any] | None, to_px, s: float, color) -> None:
    if not region:
        return
    if "polygon" in region:
        draw.polygon([to_px(*map(float, fig.xy(n))) for n in region["polygon"]], fill=color)
    else:
        c = region["circle"]
        o, p = fig.xy(c["center"]), fig.xy(c["on"])
        r = math.dist(tuple(map(float, o)), tuple(map(float, p))) * s
        cx, cy = to_px(float(o[0]), float(o[1]))
        draw.ellipse((cx - r, cy - r, cx + r, cy + r), fill=color)


_DIRS = [k * math.pi / 4 for k in (1, 3, 5, 7, 0, 2, 4, 6)]


def _seg_dist(p, a, b) -> float:
    (px, py), (ax, ay), (bx, by) = p, a, b
    dx, dy = bx - ax, by - ay
    t = max(0.0, min(1.0, ((px - ax) * dx + (py - ay) * dy) / ((dx * dx + dy * dy) or 1.0)))
    return math.hypot(px - ax - t * dx, py - ay - t * dy)


def _free_spot(spots, pix, lines, own: str | None):
    """The candidate label position farthest from the other points and from the drawn segments."""
    def room(s):
        near_pt = min((math.dist(s, q) for n, q in pix.items() if n != own), default=1e9)
        near_ln = min((_seg_dist(s, a, b) for a, b in lines), default=1e9)
        return min(near_pt, 1.5 * near_ln)
    return max(spots, key=room)


def _font_paths() -> list[str]:
    import importlib.util
    import os

    paths = ["/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf"]
    spec = importlib.util.find_spec("matplotlib")  # its bundled DejaVu Sans, without importing matplotlib
    if spec is not None and spec.origin:
        paths.insert(0, os.path.join(os.path.dirname(spec.origin), "mpl-data", "fonts", "ttf", "DejaVuSans.ttf"))
    return paths


def _font(size: int):
    """A font of ``size`` pixels and whether it has the radical sign: DejaVu Sans, else Pillow's own."""
    from PIL import ImageFont

    for path in _font_paths():
        try:
            return ImageFont.truetype(path, size), True
        except OSError:
            continue
    try:
        return ImageFont.load_default(size=size), False
    except TypeError:  # Pillow < 10.1: the fixed bitmap font
        return ImageFont.load_default(), False


def _clamp_text(draw, xy, text: str, font, width: int, height: int) -> tuple[float, float]:
    left, top, right, bottom = draw.textbbox((0, 0), text, font=font)
    w, h = right - left, bottom - top
    x = min(max(xy[0] - w / 2, 1), width - w - 1)
    y = min(max(xy[1] - h / 2, 1), height - h - 1)
    return x - left, y - top


def render(fig: Figure, width: int = 1600, height: int = 1200, shaded: dict[str, Any] | None = None):
    """The diagram of ``fig`` as an RGB PIL image of exactly ``width x height`` pixels."""
    from PIL import Image, ImageDraw

    img = Image.new("RGB", (width, height), BACKGROUND)
    draw = ImageDraw.Draw(img)
    to_px, s = _transform(fig, width, height)
    fs = _font_size(width, height)
    lw = max(1, round(min(width, height) / 300))
    font, has_root = _font(fs)
    if shaded:
        _shade(draw, fig, shaded.get("outer"), to_px, s, SHADE)
        _shade(draw, fig, shaded.get("inner"), to_px, s, BACKGROUND)
    for cx, cy, r in _circles(fig):
        px, py = to_px(cx, cy)
        rp = r * s
        draw.ellipse((px - rp, py - rp, px + rp, py + rp), outline=INK, width=lw)
    for a, b in fig.segments:
        draw.line([to_px(*map(float, fig.xy(a))), to_px(*map(float, fig.xy(b)))], fill=INK, width=lw)
    pix = project(fig, width, height)
    lines = [(pix[a], pix[b]) for a, b in fig.segments]
    dot = max(2, lw + 1)
    for name, (x, y) in pix.items():
        draw.ellipse((x - dot, y - dot, x + dot, y + dot), fill=INK)
        at = _free_spot([(x + math.cos(a) * fs * 0.9, y - math.sin(a) * fs * 0.9) for a in _DIRS], pix, lines, name)
        draw.text(_clamp_text(draw, at, name, font, width, height), name, fill=INK, font=font)
    for a, b, text in fig.given:
        (xa, ya), (xb, yb) = pix[a], pix[b]
        nx, ny = -(yb - ya), xb - xa
        norm = math.hypot(nx, ny) or 1.0
        spots = [(xa + t * (xb - xa) + sg * nx / norm * fs * 0.8, ya + t * (yb - ya) + sg * ny / norm * fs * 0.8)
                 for t in (0.5, 0.35, 0.65, 0.25, 0.75) for sg in (1, -1)]
        at = _free_spot(spots, pix, lines, None)
        text = text if has_root else text.replace("√", "sqrt")
        draw.text(_clamp_text(draw, at, text, font, width, height), text, fill=GIVEN, font=font)
    return img
