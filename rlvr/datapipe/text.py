"""Text normalisation shared by the pipeline's stages, and the text of a data row.

Three normalisations, each documented in docs/data.md:

- :func:`exact_key` (exact duplicates): Unicode NFKC, case-folded, runs of whitespace collapsed to one space,
  stripped. Punctuation and digits are kept, so ``2+3`` and ``2-3`` stay different.
- :func:`words` (near duplicates and benchmark n-grams): NFKC, case-folded, every character that is not a
  letter or digit becomes a space, then split on whitespace. ``\\frac{1}{2}`` becomes ``frac 1 2``; this is
  the usual decontamination normalisation (GPT-3's 13-gram filter lower-cases and drops punctuation too).
- the row's text is its prompt: a string, or the ``content`` of each chat message joined with newlines.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from typing import Any

__all__ = ["exact_key", "words", "row_text", "shingles"]

_SPACE = re.compile(r"\s+")
_NON_WORD = re.compile(r"[^\w]|_")


def _fold(text: str) -> str:
    return unicodedata.normalize("NFKC", text).casefold()


def exact_key(text: str) -> bytes:
    """A 16-byte digest of the exact-duplicate normal form of ``text``."""
    norm = _SPACE.sub(" ", _fold(text)).strip()
    return hashlib.blake2b(norm.encode("utf-8"), digest_size=16).digest()


def words(text: str) -> list[str]:
    """Lower-cased letter/digit tokens of ``text`` (punctuation and symbols are separators)."""
    return _NON_WORD.sub(" ", _fold(text)).split()


def shingles(text: str, kind: str = "word", size: int = 5) -> set[str]:
    """The shingle set of ``text``: word ``size``-grams of :func:`words`, or character ``size``-grams of the
    space-joined words. A text shorter than one shingle is one shingle (itself); an empty text has none."""
    toks = words(text)
    if kind == "char":
        s = " ".join(toks)
        if not s:
            return set()
        return {s[i:i + size] for i in range(max(1, len(s) - size + 1))}
    if kind != "word":
        raise ValueError(f"shingle kind must be 'word' or 'char', got {kind!r}")
    if not toks:
        return set()
    return {" ".join(toks[i:i + size]) for i in range(max(1, len(toks) - size + 1))}


def row_text(value: Any) -> str | None:
    """The text of a prompt field: a string, or chat messages (``content`` joined by newlines); else None."""
    if isinstance(value, str):
        return value
    if isinstance(value, list) and value:
        parts = [m.get("content") if isinstance(m, dict) else m for m in value]
        if all(isinstance(p, str) for p in parts):
            return "\n".join(parts)
    return None
