"""Self-contained HTML pages: inline CSS and inline SVG, no scripts, nothing fetched when opened."""

from __future__ import annotations

import html
import math
from typing import Any, Sequence

__all__ = ["page", "table", "section", "fmt", "fmt_ci"]

_CSS = """
body { font-family: system-ui, -apple-system, Segoe UI, sans-serif; margin: 24px auto; max-width: 1180px;
       color: #222; line-height: 1.4; }
h1 { font-size: 22px; } h2 { font-size: 18px; margin-top: 28px; border-bottom: 1px solid #ddd; }
table { border-collapse: collapse; margin: 8px 0 16px; font-size: 13px; }
th, td { border: 1px solid #ccc; padding: 4px 8px; text-align: right; }
th:first-child, td:first-child { text-align: left; }
thead th { background: #f3f3f3; }
.charts { display: flex; flex-wrap: wrap; gap: 12px; }
.note { color: #555; font-size: 13px; max-width: 980px; }
.sig { font-weight: bold; }
code { background: #f5f5f5; padding: 1px 3px; }
"""


def fmt(v: Any, digits: int = 3) -> str:
    if v is None:
        return "–"
    if isinstance(v, float):
        if math.isnan(v):
            return "–"
        return f"{v:,.0f}" if abs(v) >= 10000 else f"{v:.{digits}f}"
    return html.escape(str(v))


def fmt_ci(ci: Sequence[float] | None, digits: int = 3) -> str:
    if not ci or any(c is None or (isinstance(c, float) and math.isnan(c)) for c in ci):
        return "–"
    return f"[{ci[0]:.{digits}f}, {ci[1]:.{digits}f}]"


def table(headers: Sequence[str], rows: Sequence[Sequence[str]], table_id: str, caption: str = "",
          row_class: str = "row") -> str:
    """An HTML table; cells are already-escaped HTML strings."""
    head = "".join(f"<th>{html.escape(h)}</th>" for h in headers)
    body = "".join(f'<tr class="{row_class}">' + "".join(f"<td>{c}</td>" for c in r) + "</tr>" for r in rows)
    cap = f"<caption>{html.escape(caption)}</caption>" if caption else ""
    return f'<table id="{table_id}">{cap}<thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'


def section(title: str, body: str, section_id: str) -> str:
    return f'<section id="{section_id}"><h2>{html.escape(title)}</h2>{body}</section>'


def page(title: str, sections: Sequence[str], subtitle: str = "") -> str:
    sub = f'<p class="note">{subtitle}</p>' if subtitle else ""
    return ("<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<title>{html.escape(title)}</title><style>{_CSS}</style></head><body>"
            f"<h1>{html.escape(title)}</h1>{sub}" + "".join(sections) + "</body></html>\n")
