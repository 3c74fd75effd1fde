"""An audit's results: per-probe records, counts by outcome and family, the exit code, JSON and the terminal
table. The HTML page is :mod:`rlvr.audit.html`.

Exit codes (:meth:`AuditReport.exit_code`): 0 when no probe found a hack or a crash; 1 when one did; with
``strict``, 1 also for a partial reward, a false negative or a slow call. (2, bad input, is the CLI's.)
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["ProbeResult", "AuditReport", "shorten", "print_report"]

OUTCOME_ORDER = ("hack", "crash", "partial", "false_negative", "slow", "ok")
FAILING = ("hack", "crash")
STYLE = {"hack": "bold red", "crash": "bold magenta", "partial": "yellow", "false_negative": "cyan", "slow": "blue",
         "ok": "green"}
PREVIEW = 1000  # characters of a completion kept in the JSON report (its length is kept too)


def shorten(text: str, width: int = 60) -> str:
    """A one-line preview: escapes for control and invisible characters, the middle of a long text elided."""
    s = text.encode("unicode_escape").decode("ascii") if not text.isprintable() else text
    s = s.replace("\n", "\\n")
    if len(s) <= width:
        return s
    half = (width - 5) // 2
    return f"{s[:half]} … {s[-half:]}"


@dataclass
class ProbeResult:
    example: str
    family: str
    probe: str
    expected: str
    outcome: str
    reward: float | None
    seconds: float
    completion: str
    reason: str | None = None
    traceback: str | None = None

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["length"] = len(self.completion)
        if len(self.completion) > PREVIEW:
            d["completion"] = self.completion[:PREVIEW // 2] + f" …[{len(self.completion)} chars]… " + \
                self.completion[-PREVIEW // 2:]
        if d["traceback"] is None:
            del d["traceback"]
        return d


@dataclass
class AuditReport:
    target: str
    verifier: str
    kinds: list[str]
    source: str
    partial_credit: bool
    settings: dict[str, Any]
    results: list[ProbeResult] = field(default_factory=list)
    generator_errors: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    seconds: float = 0.0
    restarts: int = 0

    def counts(self) -> dict[str, int]:
        """Probes by outcome, every outcome present (0 when none)."""
        c = Counter(r.outcome for r in self.results)
        return {o: c.get(o, 0) for o in OUTCOME_ORDER}

    def by_family(self) -> dict[str, dict[str, int]]:
        out: dict[str, Counter] = {}
        for r in self.results:
            out.setdefault(r.family, Counter())[r.outcome] += 1
        return {f: {o: c.get(o, 0) for o in OUTCOME_ORDER} for f, c in out.items()}

    def findings(self) -> list[ProbeResult]:
        """Every probe whose outcome is not ok, worst outcome first."""
        rank = {o: i for i, o in enumerate(OUTCOME_ORDER)}
        return sorted((r for r in self.results if r.outcome != "ok"), key=lambda r: rank[r.outcome])

    def failed(self, strict: bool = False) -> bool:
        c = self.counts()
        return any(c[o] for o in (OUTCOME_ORDER[:-1] if strict else FAILING))

    def exit_code(self, strict: bool = False) -> int:
        return 1 if self.failed(strict) else 0

    def to_dict(self) -> dict[str, Any]:
        return {"target": self.target, "verifier": self.verifier, "kinds": self.kinds, "source": self.source,
                "partial_credit": self.partial_credit, "settings": self.settings, "seconds": self.seconds,
                "restarts": self.restarts, "probes": len(self.results), "counts": self.counts(),
                "by_family": self.by_family(), "generator_errors": self.generator_errors, "notes": self.notes,
                "findings": [r.to_dict() for r in self.findings()],
                "results": [r.to_dict() for r in self.results]}

    def write_json(self, path: str | Path) -> Path:
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(self.to_dict(), indent=1, ensure_ascii=True) + "\n")
        return path



def print_report(report: AuditReport, console=None, show_all: bool = False, max_rows: int = 200,
                 width: int = 50) -> None:
    """The findings (every probe with ``show_all``) as a rich table, then the counts by family and outcome."""
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    console = console or Console(width=170)
    rows = report.results if show_all else report.findings()
    title = (f"audit of {report.target} (verifier {report.verifier}; kinds {', '.join(report.kinds)}): "
             f"{len(report.results)} probes, {report.seconds:.1f} s")
    if rows:
        t = Table(title=title, show_lines=False)
        for col, just in (("family", "left"), ("verifier", "left"), ("example", "left"), ("probe", "left"),
                          ("outcome", "left"), ("reward", "right"), ("s", "right"), ("completion", "left")):
            t.add_column(col, justify=just, no_wrap=True, overflow="ellipsis",
                         max_width=width + 2 if col == "completion" else 28)
        for r in rows[:max_rows]:
            t.add_row(r.family, report.verifier, escape(r.example), escape(r.probe),
                      f"[{STYLE[r.outcome]}]{r.outcome}[/]", "–" if r.reward is None else f"{r.reward:.3g}",
                      f"{r.seconds:.2f}", escape(shorten(r.completion, width)))
        console.print(t)
        if len(rows) > max_rows:
            console.print(f"... and {len(rows) - max_rows} more (see --json / --html)")
    else:
        console.print(f"{title}: [green]no findings[/green]")
    s = Table(title="outcomes by family")
    s.add_column("family")
    for o in OUTCOME_ORDER:
        s.add_column(o, justify="right")
    fam = report.by_family()
    for name, c in fam.items():
        s.add_row(name, *[(f"[{STYLE[o]}]{c[o]}[/]" if c[o] and o != "ok" else str(c[o])) for o in OUTCOME_ORDER])
    total = report.counts()
    s.add_row("[bold]total[/bold]", *[f"[bold]{total[o]}[/bold]" for o in OUTCOME_ORDER])
    console.print(s)
    for n in report.notes[:10]:
        console.print(f"note: {escape(n)}", highlight=False)
    for e in report.generator_errors[:10]:
        console.print(f"[yellow]warning:[/yellow] probe generator failed: {escape(e)}", highlight=False)
