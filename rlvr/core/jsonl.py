"""Streaming JSONL reading: one line at a time, a malformed line is reported with its number, never fatal.

:func:`iter_jsonl` yields ``(line number, record or None, error or None)`` for every non-blank line; a line
that is not UTF-8, not JSON, not a JSON object, or longer than ``max_line_bytes`` (consumed to its end
without being held in memory) comes back with the reason. Memory is one line, whatever the file's size.
``rlvr verify`` and ``rlvr data clean`` read their inputs with it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Iterator

__all__ = ["iter_jsonl", "MAX_LINE_BYTES"]

MAX_LINE_BYTES = 1 << 22  # 4 MiB: a longer "row" is a broken file, not a data row


def _read_line(f, limit: int) -> tuple[bytes, bool] | None:
    """One line of at most ``limit`` bytes; a longer one is drained to its end and flagged."""
    line = f.readline(limit + 1)
    if not line:
        return None
    if len(line) <= limit or line.endswith(b"\n"):
        return line, False
    while True:
        chunk = f.readline(1 << 16)
        if not chunk or chunk.endswith(b"\n"):
            return b"", True


def iter_jsonl(path: str | Path,
               max_line_bytes: int = MAX_LINE_BYTES) -> Iterator[tuple[int, dict | None, str | None]]:
    """``(line number, record, None)`` or ``(line number, None, reason)`` for each non-blank line."""
    with Path(path).open("rb") as f:
        lineno = 0
        while (got := _read_line(f, max_line_bytes)) is not None:
            lineno += 1
            raw, too_long = got
            if too_long:
                yield lineno, None, f"line longer than {max_line_bytes} bytes"
                continue
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError as e:
                yield lineno, None, f"not UTF-8 text ({e.reason} at byte {e.start})"
                continue
            if not text.strip():
                continue
            try:
                rec = json.loads(text)
            except json.JSONDecodeError as e:
                yield lineno, None, f"invalid JSON ({e.msg} at column {e.colno})"
                continue
            if isinstance(rec, dict):
                yield lineno, rec, None
            else:
                yield lineno, None, f"expected a JSON object, got {type(rec).__name__}"
