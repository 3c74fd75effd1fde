"""``clean_file``: one streaming pass over a JSONL file through the pipeline's stages, and its report.

Stages, per row, in this order (a row removed by one stage is not seen by the later ones):

1. **malformed**: not UTF-8, not JSON, not an object, over-long, or no usable prompt/answer: reported with
   its line and reason, never fatal;
2. **benchmark overlap** (:mod:`.decontam`): shares an n-gram with a benchmark file;
3. **label re-verification** (:mod:`.relabel`, with ``verifier``): ``wrong_label`` rows are removed,
   ``ambiguous`` ones are flagged and kept (removed with ``drop_ambiguous``);
4. **exact duplicates**, then 5. **near duplicates** (:mod:`.dedup`) of the rows kept so far.

Labels are checked before dedup so that a duplicate is only removed in favour of a row that is itself
kept. Rows are read ``batch_size`` at a time (the verifier scores a batch at once) and written in input
order; memory is one batch of rows plus the dedup indexes (a digest and a MinHash per kept row) and the
benchmark n-grams, whatever the file's size. The report (:func:`clean_file`'s return value, also written
as JSON) has the counts, the settings, and one entry per removed or flagged row: line, id, reason,
evidence.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

from rlvr.datapipe.dedup import DEFAULT_NUM_PERM, DEFAULT_SHINGLE_SIZE, DEFAULT_THRESHOLD, ExactDedup, NearDedup
from rlvr.datapipe.decontam import DEFAULT_NGRAM, BenchmarkIndex
from rlvr.core.jsonl import iter_jsonl as iter_rows
from rlvr.datapipe.relabel import DEFAULT_REFERENCE_FIELDS, Relabeler
from rlvr.datapipe.text import row_text

__all__ = ["CleanOptions", "clean_file", "REASONS"]

REASONS = ("malformed", "benchmark_overlap", "wrong_label", "ambiguous", "exact_duplicate", "near_duplicate")


@dataclass
class CleanOptions:
    dedup: bool = True
    near: bool = True
    near_threshold: float = DEFAULT_THRESHOLD
    num_perm: int = DEFAULT_NUM_PERM
    shingle: str = "word"
    shingle_size: int = DEFAULT_SHINGLE_SIZE
    benchmarks: Sequence[str | Path] = ()
    benchmark_fields: Sequence[str] | None = None
    ngram: int = DEFAULT_NGRAM
    verifier: str | None = None
    verifier_params: dict[str, Any] = field(default_factory=dict)
    drop_ambiguous: bool = False
    reference_fields: Sequence[str] = DEFAULT_REFERENCE_FIELDS
    prompt_field: str = "prompt"
    answer_field: str = "answer"
    id_field: str = "id"
    workers: int = 4
    timeout_s: float = 60.0
    batch_size: int = 256


class _Run:
    def __init__(self, opts: CleanOptions):
        self.opts = opts
        self.counts: Counter = Counter()
        self.entries: list[dict[str, Any]] = []
        self.exact = ExactDedup() if opts.dedup else None
        self.near = NearDedup(opts.near_threshold, opts.num_perm, opts.shingle, opts.shingle_size) \
            if opts.dedup and opts.near else None
        self.bench = BenchmarkIndex(opts.benchmarks, opts.ngram, opts.benchmark_fields) if opts.benchmarks else None
        self.relabel = Relabeler(opts.verifier, opts.verifier_params, opts.workers, opts.timeout_s,
                                 opts.reference_fields) if opts.verifier else None

    def note(self, line: int, rec: dict | None, reason: str, evidence: dict[str, Any], removed: bool = True) -> None:
        self.counts[reason] += 1
        entry = {"line": line, "reason": reason, "action": "removed" if removed else "flagged", "evidence": evidence}
        if rec is not None and self.opts.id_field in rec:
            entry["id"] = rec[self.opts.id_field]
        self.entries.append(entry)

    def parse(self, rec: dict) -> tuple[str, str] | str:
        o = self.opts
        text = row_text(rec.get(o.prompt_field))
        if text is None:
            return f"missing or unusable {o.prompt_field!r} (a string or a list of chat messages)"
        answer = rec.get(o.answer_field)
        if self.relabel is not None:
            if answer is None or isinstance(answer, bool) or not isinstance(answer, (str, int, float)):
                return f"missing or unusable {o.answer_field!r} (a string or number)"
            answer = str(answer)
        return text, answer if isinstance(answer, str) else json.dumps(answer)

    def process(self, batch: list[tuple[int, dict, str, str]], out) -> None:
        live = []
        for line, rec, text, answer in batch:
            hit = self.bench.find(text) if self.bench is not None else None
            if hit is not None:
                self.note(line, rec, "benchmark_overlap", {"benchmark": hit.benchmark,
                                                           "benchmark_line": hit.benchmark_line, "ngram": hit.ngram})
            else:
                live.append((line, rec, text, answer))
        if self.relabel is not None and live:
            verdicts = self.relabel.judge([(text, answer, rec) for _, rec, text, answer in live])
            kept = []
            for item, v in zip(live, verdicts):
                ev = {"label": item[3], "verifier": self.relabel.name, "mode": v.mode, "verifier_reason": v.reason,
                      **({"reference_field": v.reference_field} if v.reference_field else {})}
                if v.status == "wrong_label":
                    self.note(item[0], item[1], "wrong_label", ev)
                    continue
                if v.status == "ambiguous":
                    self.note(item[0], item[1], "ambiguous", ev, removed=self.opts.drop_ambiguous)
                    if self.opts.drop_ambiguous:
                        continue
                kept.append(item)
            live = kept
        for line, rec, text, answer in live:
            if self.dedup(line, rec, text, answer):
                out.write(json.dumps(rec, ensure_ascii=False) + "\n")
                self.counts["kept"] += 1

    def dedup(self, line: int, rec: dict, text: str, answer: str) -> bool:
        """True when the row is kept."""
        if self.exact is not None:
            first = self.exact.check((line, hash(answer)), text)
            if first is not None:
                self.note(line, rec, "exact_duplicate", {"duplicate_of_line": first[0],
                                                         "answer_differs": first[1] != hash(answer)})
                return False
        if self.near is not None:
            m = self.near.check((line, hash(answer)), text)
            if m is not None:
                self.note(line, rec, "near_duplicate", {"duplicate_of_line": m.duplicate_of[0],
                                                        "jaccard": round(m.jaccard, 4),
                                                        "answer_differs": m.duplicate_of[1] != hash(answer)})
                return False
        return True

    def settings(self) -> dict[str, Any]:
        o = self.opts
        return {"dedup": o.dedup, "near": self.near.settings() if self.near else None,
                "benchmarks": self.bench.summary() if self.bench else [], "ngram": o.ngram if self.bench else None,
                "verifier": o.verifier, "drop_ambiguous": o.drop_ambiguous,
                "reference_fields": list(o.reference_fields) if o.verifier else None,
                "prompt_field": o.prompt_field, "answer_field": o.answer_field}


def clean_file(path: str | Path, out_path: str | Path, opts: CleanOptions | None = None,
               report_path: str | Path | None = None,
               on_progress: Callable[[int], None] | None = None) -> dict[str, Any]:
    """Clean ``path`` into ``out_path`` (JSONL, input order, rows unchanged); return the report."""
    path, out_path, opts = Path(path), Path(out_path), opts or CleanOptions()
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no such file")
    if out_path.resolve() == path.resolve():
        raise ValueError(f"--out {out_path} is the input file; write the cleaned rows elsewhere")
    t0 = time.perf_counter()
    run = _Run(opts)
    batch: list[tuple[int, dict, str, str]] = []
    lines = 0
    try:
        with out_path.open("w", encoding="utf-8") as out:
            for line, rec, err in iter_rows(path):
                lines += 1
                parsed = run.parse(rec) if rec is not None else err
                if isinstance(parsed, str):
                    run.note(line, rec, "malformed", {"error": parsed})
                    continue
                batch.append((line, rec, *parsed))
                if len(batch) >= opts.batch_size:
                    run.process(batch, out)
                    batch = []
                    if on_progress is not None:
                        on_progress(lines)
            run.process(batch, out)
    finally:
        if run.relabel is not None:
            run.relabel.close()
    seconds = time.perf_counter() - t0
    counts = {"lines": lines, "kept": run.counts["kept"], **{r: run.counts[r] for r in REASONS}}
    counts["removed"] = sum(1 for e in run.entries if e["action"] == "removed")
    report = {"input": str(path), "output": str(out_path), "counts": counts, "settings": run.settings(),
              "seconds": round(seconds, 3), "rows_per_second": round(lines / seconds, 1) if seconds > 0 else None,
              "verifier_warnings": run.relabel.errors[:5] if run.relabel is not None else [],
              "rows": run.entries}
    if report_path is not None:
        Path(report_path).write_text(json.dumps(report, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    return report
