"""Exact and near-duplicate removal, streaming, keeping the first occurrence.

**Exact duplicates:** rows whose prompt has the same normal form (:func:`rlvr.datapipe.text.exact_key`:
NFKC, case-folded, whitespace collapsed) as an earlier kept row. Memory: one 16-byte digest per kept row.

**Near duplicates** (L20-Edu-135M's MinHash/LSH dedup, arXiv:2606.22189, RECONSTRUCTED parameters;
docs/data.md, Near duplicates) through the ``datasketch`` library: each prompt becomes a set of shingles (word
5-grams by default, as reconstructed; character n-grams optional, better for very short prompts), a MinHash of
``num_perm = 128`` permutations (likewise) and an LSH index of ``b`` bands of ``r`` rows (``b * r <= 128``). The
reconstruction's example is 16 x 8 (collision threshold ``(1/16)^(1/8) ≈ 0.71``); here ``b, r`` come from
datasketch's optimiser for the Jaccard ``threshold`` (default 0.7, that example's ≈ 0.71 rounded) with false
negatives weighted 0.9 and false positives 0.1 — for 0.7 that is 20 x 6, which finds a pair at Jaccard 0.7 with
probability 0.92 and at 0.8 with 0.998 (16 x 8: 0.62 and 0.95). A candidate from LSH is only a candidate: a row is
a near duplicate when the MinHash estimate of its Jaccard similarity with a kept row is at least ``threshold``, so
the extra candidates cost time, not precision.

Rows are compared with the rows kept so far (greedy, in file order): a row is removed as a duplicate of the kept
row it is most similar to (the earliest of equals), and a removed row is never a reference, so in a chain A ~ B ~ C
where A and C differ, B goes and C stays. L20-Edu clusters candidates across sources and keeps the row from the
higher-quality source; one file has one source, so the first occurrence is kept. Memory per kept row: its MinHash
(``num_perm`` 4-byte values) and datasketch's in-memory LSH tables (one key per band, about 6 KB per row at 20
bands): about 7 KB, so 20k rows take about 140 MB and a million about 7 GB; the text itself is not kept. (A compact
band index of our own would take about a quarter.)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from rlvr.datapipe.text import exact_key, shingles

__all__ = ["ExactDedup", "NearDedup", "DEFAULT_NUM_PERM", "DEFAULT_THRESHOLD", "DEFAULT_SHINGLE_SIZE"]

DEFAULT_NUM_PERM = 128  # L20-Edu-135M, as reconstructed (docs/data.md, Near duplicates)
DEFAULT_THRESHOLD = 0.7  # the reconstruction's 16 bands x 8 rows -> (1/16)^(1/8) ≈ 0.71
DEFAULT_SHINGLE_SIZE = 5  # 5-gram word shingles, as reconstructed
_LSH_WEIGHTS = (0.1, 0.9)  # (false positive, false negative): favour recall, candidates are re-checked


class ExactDedup:
    """``check(key, text)``: the key of the earlier kept row with the same normal form, else None (and
    the row is kept from then on)."""

    def __init__(self) -> None:
        self._seen: dict[bytes, Any] = {}

    def check(self, key: Any, text: str) -> Any | None:
        digest = exact_key(text)
        first = self._seen.get(digest)
        if first is None:
            self._seen[digest] = key
        return first

    def __len__(self) -> int:
        return len(self._seen)


@dataclass(frozen=True)
class NearMatch:
    duplicate_of: Any
    jaccard: float  # MinHash estimate


class NearDedup:
    """MinHash + LSH near-duplicate detection against the rows kept so far (see the module docstring)."""

    def __init__(self, threshold: float = DEFAULT_THRESHOLD, num_perm: int = DEFAULT_NUM_PERM,
                 shingle: str = "word", shingle_size: int = DEFAULT_SHINGLE_SIZE, seed: int = 1,
                 lsh_params: tuple[int, int] | None = None) -> None:
        from datasketch import MinHash, MinHashLSH

        if not 0.0 < threshold <= 1.0:
            raise ValueError(f"near-duplicate threshold must be in (0, 1], got {threshold}")
        if shingle not in ("word", "char") or shingle_size < 1:
            raise ValueError(f"shingles must be 'word' or 'char' of size >= 1, got {shingle!r} {shingle_size}")
        self.threshold, self.num_perm = threshold, num_perm
        self.shingle, self.shingle_size = shingle, shingle_size
        self._MinHash = MinHash
        self._template = MinHash(num_perm=num_perm, seed=seed)  # permutations generated once, shared
        self._lsh = MinHashLSH(threshold=threshold, num_perm=num_perm, weights=_LSH_WEIGHTS, params=lsh_params)
        self.bands, self.rows = self._lsh.b, self._lsh.r
        self._hashes: dict[Any, np.ndarray] = {}
        self._next = 0

    def minhash(self, text: str):
        m = self._MinHash(num_perm=self.num_perm, permutations=self._template.permutations,
                          scheme=self._template.scheme)
        sh = shingles(text, self.shingle, self.shingle_size)
        if sh:
            m.update_batch([s.encode("utf-8") for s in sh])
        return m

    def check(self, key: Any, text: str) -> NearMatch | None:
        """The kept row ``text`` nearly duplicates (with the Jaccard estimate), else None; a row that is
        not a duplicate is kept (indexed) under ``key``."""
        m = self.minhash(text)
        if m.is_empty():
            return None  # no shingles (an empty prompt): nothing to compare; exact dedup still sees it
        best: NearMatch | None = None
        for cand in self._lsh.query(m):
            j = float(np.count_nonzero(self._hashes[cand] == m.hashvalues)) / self.num_perm
            if j >= self.threshold and (best is None or j > best.jaccard or
                                        (j == best.jaccard and cand[0] < best.duplicate_of[0])):
                best = NearMatch(cand, j)
        if best is not None:
            return NearMatch(best.duplicate_of[1], best.jaccard)
        idx = (self._next, key)  # insertion order first, so ties go to the earliest kept row
        self._next += 1
        self._lsh.insert(idx, m, check_duplication=False)
        self._hashes[idx] = m.hashvalues.astype(np.uint32)  # affine32 values: half the memory
        return None

    def settings(self) -> dict[str, Any]:
        return {"threshold": self.threshold, "num_perm": self.num_perm, "shingle": self.shingle,
                "shingle_size": self.shingle_size, "lsh_bands": self.bands, "lsh_rows": self.rows}
