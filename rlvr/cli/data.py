"""``rlvr data clean`` (the data pipeline, :mod:`rlvr.datapipe`) and ``rlvr merge`` (weight interpolation).

:mod:`rlvr.cli.commands` mounts ``app`` as ``rlvr data`` and registers :func:`merge` as ``rlvr merge``.
Only typer and rich are imported here; the pipeline (datasketch) and the merge (torch, transformers) load
inside the commands, so ``rlvr --help`` stays fast.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, NoReturn, Optional

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from rlvr.cli.common import console, fail

__all__ = ["app", "merge", "print_report"]

app = typer.Typer(add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False,
                  help="Data pipeline: dedup, benchmark-overlap removal, label re-verification (docs/data.md).")

_LABELS = {"malformed": "malformed lines", "benchmark_overlap": "benchmark overlap", "wrong_label": "wrong labels",
           "ambiguous": "ambiguous labels", "exact_duplicate": "exact duplicates", "near_duplicate": "near duplicates"}


def _fail(msg: str, code: int = 2) -> NoReturn:
    fail(msg, code)


@app.callback()
def _data() -> None:
    """Data pipeline: dedup, benchmark-overlap removal, label re-verification (docs/data.md)."""


@app.command()
def clean(file: Annotated[Path, typer.Argument(help="input JSONL: one {prompt, answer, ...} object per line")],
          out: Annotated[Path, typer.Option("--out", "-o", help="cleaned JSONL (kept rows, unchanged, in order)")],
          report: Annotated[Optional[Path], typer.Option("--report", help="report JSON (default: OUT.report.json)")] = None,
          dedup: Annotated[bool, typer.Option("--dedup/--no-dedup", help="remove exact and near duplicates")] = True,
          near: Annotated[bool, typer.Option("--near/--no-near", help="near duplicates too (MinHash/LSH)")] = True,
          near_threshold: Annotated[float, typer.Option(help="Jaccard similarity of a near duplicate")] = 0.7,
          num_perm: Annotated[int, typer.Option(help="MinHash permutations")] = 128,
          shingle: Annotated[str, typer.Option(help="shingles: word or char n-grams")] = "word",
          shingle_size: Annotated[int, typer.Option(help="words (or characters) per shingle")] = 5,
          benchmark: Annotated[Optional[list[Path]], typer.Option("--benchmark", "-b", help="benchmark file, JSONL or text (repeatable)")] = None,
          benchmark_field: Annotated[Optional[list[str]], typer.Option(help="only these fields of JSONL benchmark items (repeatable)")] = None,
          ngram: Annotated[int, typer.Option(help="n-gram size of benchmark overlap")] = 13,
          verify: Annotated[Optional[str], typer.Option("--verify", help="re-verify labels with this verifier (a name or module:function)")] = None,
          drop_ambiguous: Annotated[bool, typer.Option(help="remove ambiguous labels too (default: flag and keep)")] = False,
          reference_field: Annotated[Optional[list[str]], typer.Option(help="fields holding a trusted answer or solution (repeatable; default gold, reference, solution, completion)")] = None,
          prompt_field: Annotated[str, typer.Option(help="field holding the prompt")] = "prompt",
          answer_field: Annotated[str, typer.Option(help="field holding the gold answer")] = "answer",
          workers: Annotated[int, typer.Option(help="verifier threads")] = 4,
          timeout: Annotated[float, typer.Option(help="seconds per batch of labels before late ones count as ambiguous")] = 60.0):
    """Clean a JSONL dataset: malformed lines, benchmark overlap, wrong labels, exact and near duplicates.

    Writes the kept rows to OUT and a report (counts, settings, and each removed or flagged row's line,
    reason and evidence) to --report; prints a summary.
    """
    from rlvr.datapipe import CleanOptions, clean_file
    from rlvr.datapipe.relabel import DEFAULT_REFERENCE_FIELDS

    report = report or out.with_name(out.name + ".report.json")
    opts = CleanOptions(dedup=dedup, near=near, near_threshold=near_threshold, num_perm=num_perm, shingle=shingle,
                        shingle_size=shingle_size, benchmarks=list(benchmark or []),
                        benchmark_fields=list(benchmark_field) if benchmark_field else None, ngram=ngram,
                        verifier=verify, drop_ambiguous=drop_ambiguous,
                        reference_fields=tuple(reference_field) if reference_field else DEFAULT_REFERENCE_FIELDS,
                        prompt_field=prompt_field, answer_field=answer_field, workers=workers, timeout_s=timeout)
    try:
        result = clean_file(file, out, opts, report)
    except (FileNotFoundError, ValueError) as e:
        _fail(str(e))
    except ImportError as e:
        _fail(f"{e} (install the optional extra: pip install 'rlvr[data]')")
    print_report(result, Console())
    console.print(f"wrote {out} and {report}")


def print_report(report: dict, con: Console, examples: int = 3) -> None:
    """The report's counts and a few removed/flagged rows per reason, as a table."""
    c = report["counts"]
    t = Table(title=f"rlvr data clean: {report['input']}: {c['lines']} lines, kept {c['kept']}")
    t.add_column("reason")
    t.add_column("rows", justify="right")
    t.add_column("examples (line: evidence)")
    for reason, label in _LABELS.items():
        if reason == "ambiguous" and not report["settings"].get("verifier"):
            continue
        rows = [e for e in report["rows"] if e["reason"] == reason][:examples]
        shown = "; ".join(f"{e['line']}: {_evidence(e)}" for e in rows)
        flagged = reason == "ambiguous" and not report["settings"].get("drop_ambiguous")
        t.add_row(label + (" (flagged, kept)" if flagged else ""), str(c[reason]), escape(shown))
    con.print(t)
    for reason, advice in (("exact_duplicate", "the same prompt under two labels: check those labels, or "
                                               "re-verify with --verify"),
                           ("near_duplicate", "a changed number can make a near duplicate another problem: check "
                                              "them, or raise --near-threshold")):
        differ = [e["line"] for e in report["rows"] if e["reason"] == reason and e["evidence"].get("answer_differs")]
        if differ:  # the row kept is the first; the removed one's label disagreed with it
            shown = ", ".join(map(str, differ[:5])) + (", ..." if len(differ) > 5 else "")
            con.print(f"[yellow]{len(differ)} {_LABELS[reason][:-1]}(s) had a different answer from the row kept "
                      f"(lines {shown}): {advice}[/yellow]")
    con.print(f"{report['rows_per_second']} lines/s", highlight=False)


def _evidence(e: dict) -> str:
    ev = e["evidence"]
    if "duplicate_of_line" in ev:
        return (f"of line {ev['duplicate_of_line']}" + (f" (J≈{ev['jaccard']})" if "jaccard" in ev else "")
                + (", another answer" if ev.get("answer_differs") else ""))
    if "ngram" in ev:
        return f"{Path(ev['benchmark']).name}:{ev['benchmark_line']} \"{ev['ngram'][:40]}\""
    if "verifier_reason" in ev:
        return f"{ev['label']!r}: {ev['verifier_reason']}"[:60]
    return str(ev.get("error", ev))[:60]


@app.command()
def annotate(file: Annotated[Path, typer.Argument(help="input JSONL: one {prompt, answer, ...} object per line")],
             out: Annotated[Path, typer.Option("--out", "-o", help="the rows with the new field, in order")],
             kind: Annotated[str, typer.Option(help="hints (NudgeRL's strategy hints) or scaffold (SCOPE-RL's "
                                                    "sub-questions with answers)")] = "hints",
             base_url: Annotated[Optional[str], typer.Option(help="an OpenAI-compatible endpoint, e.g. "
                                                                   "http://localhost:8000/v1")] = None,
             model: Annotated[Optional[str], typer.Option(help="the served model's name (with --base-url)")] = None,
             path: Annotated[Optional[Path], typer.Option(help="a local causal-LM directory, run in this process "
                                                               "(instead of --base-url)")] = None,
             n: Annotated[Optional[int], typer.Option(help="hints per row (default 2)")] = None,
             field_name: Annotated[Optional[str], typer.Option("--field", help="the field written (default: the "
                                                                                "kind)")] = None,
             template: Annotated[Optional[Path], typer.Option(help="a text file with the request ({prompt}, "
                                                                   "{answer}, {n}; default: rlvr's)")] = None,
             param: Annotated[Optional[list[str]], typer.Option("--param", help="another model setting, KEY=VALUE "
                                                                "(repeatable): temperature, max_tokens, "
                                                                "concurrency, retries, api, ...")] = None,
             cache: Annotated[Optional[Path], typer.Option(help="the reply cache (default: OUT.cache.jsonl): a "
                                                                "rerun asks only what has not arrived")] = None,
             max_requests: Annotated[Optional[int], typer.Option(help="requests to send at most")] = None,
             chunk: Annotated[int, typer.Option(help="rows per call (progress is shown per call)")] = 64,
             overwrite: Annotated[bool, typer.Option(help="annotate rows that already have the field")] = False,
             prompt_field: Annotated[str, typer.Option(help="field holding the prompt")] = "prompt",
             answer_field: Annotated[str, typer.Option(help="field holding the gold answer")] = "answer",
             report: Annotated[Optional[Path], typer.Option(help="report JSON (default: OUT.report.json)")] = None):
    """Write NudgeRL's hints or SCOPE-RL's scaffolds into a dataset with a model (an endpoint or a local
    directory): rows whose reply fails are kept without the field and counted (docs/data.md)."""
    import os

    import yaml
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from rlvr.datapipe.annotate import annotate as run

    if (base_url is None) == (path is None):
        _fail("give the model: --base-url URL --model NAME (an endpoint), or --path DIR (a local model)")
    settings: dict = {"backend": "http", "base_url": base_url, "model": model} if base_url else \
        {"backend": "hf", "path": str(path)}
    for item in param or []:
        key, eq, value = item.partition("=")
        if not eq or not key.strip():
            _fail(f"--param {item!r}: write KEY=VALUE")
        settings[key.strip()] = yaml.safe_load(value)
    settings["cache_path"] = str(cache or out.with_name(out.name + ".cache.jsonl"))
    if max_requests is not None:
        settings["max_requests"] = max_requests
    try:
        rows = _read_rows(file)
        text = template.read_text() if template is not None else None
        os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
        with Progress(TextColumn(f"annotating {kind}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                      console=console, transient=True) as bar:
            task = bar.add_task("rows", total=None)
            done, result = run(rows, kind, settings, n=n, field_name=field_name, template=text,
                               prompt_field=prompt_field, answer_field=answer_field, chunk=chunk, overwrite=overwrite,
                               progress=lambda k, total: bar.update(task, completed=k, total=total))
    except (OSError, ValueError) as e:
        _fail(str(e))
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".tmp")
    tmp.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in done))
    os.replace(tmp, out)
    report = report or out.with_name(out.name + ".report.json")
    report.write_text(json.dumps(result.as_dict(), indent=2))
    failed = sum(result.failed.values())
    console.print(f"{result.annotated} of {result.rows} rows annotated, {result.kept} already had it, {failed} "
                  f"failed" + (f" ({'; '.join(f'{k}: {v}' for k, v in result.failed.items())})" if failed else ""),
                  highlight=False, soft_wrap=True)
    console.print(f"wrote {out} and {report}")


def _read_rows(file: Path) -> list[dict]:
    if not file.is_file():
        raise ValueError(f"{file}: no such file")
    rows = []
    for line, text in enumerate(file.read_text(encoding="utf-8").splitlines(), start=1):
        if not text.strip():
            continue
        try:
            row = json.loads(text)
        except ValueError as e:
            raise ValueError(f"{file}:{line}: not JSON ({e})") from None
        if not isinstance(row, dict):
            raise ValueError(f"{file}:{line}: a row must be a JSON object")
        rows.append(row)
    if not rows:
        raise ValueError(f"{file}: no rows")
    return rows


def merge(a: Annotated[Path, typer.Argument(help="model directory A (alpha = 0), e.g. the base model")],
          b: Annotated[Path, typer.Argument(help="model directory B (alpha = 1), e.g. the SFT model")],
          out: Annotated[Path, typer.Option("--out", "-o", help="output model directory")],
          alpha: Annotated[float, typer.Option(help="weight of B: θ = (1 − α)·θ_A + α·θ_B")] = 0.5):
    """Interpolate two models' weights (L20-Edu's SFT weight interpolation): θ = (1 − α)·θ_A + α·θ_B."""
    import os

    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    from rlvr.sft.merge import MergeError, merge_models

    try:
        info = merge_models(a, b, alpha, out)
    except (MergeError, OSError) as e:
        _fail(str(e))
    Console().print_json(json.dumps(info))
