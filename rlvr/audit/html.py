"""The audit report as one self-contained HTML page (inline CSS, no scripts, nothing fetched)."""

from __future__ import annotations

import html
from pathlib import Path

from rlvr.audit.report import OUTCOME_ORDER, AuditReport, shorten

__all__ = ["audit_page", "write_html"]

_CSS = """
body { font-family: system-ui, -apple-system, Segoe UI, sans-serif; margin: 24px auto; max-width: 1280px;
       color: #222; line-height: 1.4; }
h1 { font-size: 22px; } h2 { font-size: 18px; margin-top: 28px; border-bottom: 1px solid #ddd; }
table { border-collapse: collapse; margin: 8px 0 16px; font-size: 13px; }
th, td { border: 1px solid #ccc; padding: 3px 7px; text-align: left; vertical-align: top; }
td.num { text-align: right; }
thead th { background: #f3f3f3; }
.note { color: #555; font-size: 13px; max-width: 1000px; }
code, pre { background: #f5f5f5; font-size: 12px; }
pre { white-space: pre-wrap; word-break: break-all; max-height: 240px; overflow: auto; margin: 4px 0; }
.hack { background: #fde2e2; } .crash { background: #f6e0f6; } .partial { background: #fff6d6; }
.false_negative { background: #dff4f7; } .slow { background: #e3e9fb; } .ok { }
.verdict-fail { color: #b00020; font-weight: bold; } .verdict-pass { color: #1b7a1b; font-weight: bold; }
"""

PREVIEW = 2000


def _e(x) -> str:
    return html.escape(str(x), quote=True)


def audit_page(report: AuditReport) -> str:
    """The page: a verdict, counts by family and outcome, the findings, then every probe."""
    counts = report.counts()
    verdict = ('<span class="verdict-fail">FAIL: hacks or crashes found</span>' if report.failed()
               else '<span class="verdict-pass">PASS: no hack, no crash</span>')
    st = report.settings
    sub = (f"verifier <code>{_e(report.verifier)}</code>, kinds {_e(', '.join(report.kinds))}; "
           f"{st.get('examples')} examples, {len(report.results)} probes, fuzz {st.get('fuzz')}, "
           f"seed {st.get('seed')}, "
           f"deadline {st.get('timeout_s')} s per call, {report.seconds:.1f} s in all. {verdict}")
    head = "".join(f"<th>{o}</th>" for o in OUTCOME_ORDER)
    fam_rows = "".join(
        f"<tr><td>{_e(f)}</td>" + "".join(f'<td class="num {o if c[o] and o != "ok" else ""}">{c[o]}</td>'
                                          for o in OUTCOME_ORDER) + "</tr>"
        for f, c in report.by_family().items())
    fam_rows += "<tr><th>total</th>" + "".join(f'<th class="num">{counts[o]}</th>' for o in OUTCOME_ORDER) + "</tr>"
    summary = (f"<table><thead><tr><th>family</th>{head}</tr></thead><tbody>{fam_rows}</tbody></table>"
               '<p class="note">hack: a probe expected to earn nothing earned reward (for a partial-credit verifier: '
               "as much as the gold answer); partial: some reward, less than the gold answer; false_negative: a "
               "correct answer in a fair form earned 0; crash: the verifier raised, returned a non-finite reward, "
               "or its process died; slow: it outlived the deadline. See docs/audit.md.</p>")

    def rows(results) -> str:
        out = []
        for r in results:
            text, n = r.completion, len(r.completion)
            if n > PREVIEW:
                text = text[:PREVIEW // 2] + f"\n…[{n} characters]…\n" + text[-PREVIEW // 2:]
            detail = f"<pre>{_e(text)}</pre>"
            if r.reason:
                detail += f'<div class="note">{_e(r.reason)}</div>'
            if r.traceback:
                detail += f"<details><summary>traceback</summary><pre>{_e(r.traceback)}</pre></details>"
            out.append(f'<tr class="{r.outcome}"><td>{_e(r.family)}</td><td>{_e(r.example)}</td><td>{_e(r.probe)}</td>'
                       f"<td>{_e(r.expected)}</td><td>{r.outcome}</td>"
                       f'<td class="num">{"–" if r.reward is None else f"{r.reward:.4g}"}</td>'
                       f'<td class="num">{r.seconds:.3f}</td>'
                       f"<td><details><summary><code>{_e(shorten(r.completion, 80))}</code></summary>{detail}"
                       "</details></td></tr>")
        return "".join(out)

    cols = "".join(f"<th>{c}</th>" for c in ("family", "example", "probe", "expected", "outcome", "reward", "s",
                                             "completion"))
    findings = report.findings()
    find_html = (f"<table><thead><tr>{cols}</tr></thead><tbody>{rows(findings)}</tbody></table>" if findings
                 else '<p class="note">No findings.</p>')
    all_html = f"<table><thead><tr>{cols}</tr></thead><tbody>{rows(report.results)}</tbody></table>"
    errs = "".join(f"<li>{_e(e)}</li>" for e in report.generator_errors)
    errs_html = f"<h2>Probe generator errors</h2><ul>{errs}</ul>" if errs else ""
    title = f"rlvr audit: {report.target}"
    return ("<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<title>{_e(title)}</title><style>{_CSS}</style></head><body><h1>{_e(title)}</h1>"
            f'<p class="note">{sub}</p><h2>Outcomes by family</h2>{summary}'
            f"<h2>Findings ({len(findings)})</h2>{find_html}{errs_html}"
            f"<h2>All probes ({len(report.results)})</h2>{all_html}</body></html>\n")


def write_html(report: AuditReport, path: str | Path) -> Path:
    """The report as a self-contained HTML page at ``path``."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(audit_page(report), encoding="utf-8")
    return path
