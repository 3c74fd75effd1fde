"""Benchmark-overlap removal: drop a training row that shares an n-gram with a local benchmark file.

L20-Edu-135M (arXiv:2606.22189, RECONSTRUCTED; docs/data.md, Benchmark overlap): "drop any training document
sharing a 13-gram (normalised) with any eval item". Normalisation is :func:`rlvr.datapipe.text.words` (NFKC,
case-folded, every non-letter, non-digit character a separator), so ``What is 2+2?`` and ``what is 2 + 2`` give the
same tokens.

Benchmark files are read once into a set of n-gram hashes (Python's 64-bit string hash; one dict entry per
distinct n-gram, which maps to the item it came from, for the evidence):

- ``.jsonl`` / ``.json`` lines: each line is an item; every string in the record (nested lists and dicts
  included: chat messages, choices) is a separate text, so no n-gram spans two fields. ``fields`` limits
  this to the named top-level fields. A malformed line is counted and skipped.
- any other file is plain text: each block of non-blank lines (paragraph) is an item.

An item shorter than ``n`` tokens has no n-gram and cannot be matched; how many there were is reported
(``too_short``) so a benchmark of one-line answers does not silently check nothing. A removed row's
evidence names the benchmark file, the item's line, and the first overlapping n-gram (normalised tokens).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Iterator, Sequence

from rlvr.core.jsonl import iter_jsonl as iter_rows
from rlvr.datapipe.text import words

__all__ = ["BenchmarkIndex", "Overlap", "DEFAULT_NGRAM"]

DEFAULT_NGRAM = 13  # L20-Edu-135M, as reconstructed (and GPT-3's contamination filter)


@dataclass(frozen=True)
class Overlap:
    benchmark: str
    benchmark_line: int
    ngram: str


@dataclass
class _FileStats:
    path: str
    items: int = 0
    too_short: int = 0
    malformed: int = 0
    ngrams: int = 0
    malformed_lines: list[int] = field(default_factory=list)


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, list):
        for v in value:
            yield from _strings(v)
    elif isinstance(value, dict):
        for v in value.values():
            yield from _strings(v)


def _paragraphs(path: Path) -> Iterator[tuple[int, list[str]]]:
    start, block = 0, []
    with path.open("r", encoding="utf-8", errors="replace") as f:
        for lineno, line in enumerate(f, start=1):
            if line.strip():
                if not block:
                    start = lineno
                block.append(line)
            elif block:
                yield start, ["".join(block)]
                block = []
    if block:
        yield start, ["".join(block)]


def _ngrams(toks: Sequence[str], n: int) -> Iterator[tuple[int, int]]:
    """``(hash, start)`` of each n-gram of ``toks``."""
    for i in range(len(toks) - n + 1):
        yield hash(" ".join(toks[i:i + n])), i


class BenchmarkIndex:
    """The n-grams of some benchmark files; :meth:`find` reports a text's first overlap."""

    def __init__(self, paths: Iterable[str | Path], n: int = DEFAULT_NGRAM, fields: Sequence[str] | None = None):
        if n < 1:
            raise ValueError(f"n-gram size must be >= 1, got {n}")
        self.n, self.fields = n, list(fields) if fields else None
        self._grams: dict[int, tuple[int, int]] = {}  # hash -> (file index, item line)
        self.files: list[_FileStats] = []
        for p in paths:
            self._add(Path(p))

    def _items(self, path: Path, stats: _FileStats) -> Iterator[tuple[int, list[str]]]:
        if path.suffix not in (".jsonl", ".json"):
            yield from _paragraphs(path)
            return
        for lineno, rec, err in iter_rows(path):
            if rec is None:
                stats.malformed += 1
                if len(stats.malformed_lines) < 10:
                    stats.malformed_lines.append(lineno)
                continue
            values = [rec.get(k) for k in self.fields] if self.fields else list(rec.values())
            yield lineno, list(_strings(values))

    def _add(self, path: Path) -> None:
        if not path.is_file():
            raise FileNotFoundError(f"benchmark file {path}: no such file")
        fi, stats = len(self.files), _FileStats(str(path))
        self.files.append(stats)
        for lineno, texts in self._items(path, stats):
            stats.items += 1
            found = False
            for text in texts:
                toks = words(text)
                for h, _ in _ngrams(toks, self.n):
                    found = True
                    if h not in self._grams:
                        self._grams[h] = (fi, lineno)
                        stats.ngrams += 1
            stats.too_short += not found

    def find(self, text: str) -> Overlap | None:
        """The first n-gram of ``text`` found in a benchmark, with where it came from; else None."""
        if not self._grams:
            return None
        toks = words(text)
        for h, i in _ngrams(toks, self.n):
            hit = self._grams.get(h)
            if hit is not None:
                return Overlap(self.files[hit[0]].path, hit[1], " ".join(toks[i:i + self.n]))
        return None

    def summary(self) -> list[dict[str, Any]]:
        return [{"path": s.path, "items": s.items, "ngrams": s.ngrams, "too_short": s.too_short,
                 "malformed": s.malformed, **({"malformed_lines": s.malformed_lines} if s.malformed else {})}
                for s in self.files]
