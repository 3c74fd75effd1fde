"""Rows of a benchmark's local copy: a file or a directory, in any of the formats benchmarks ship in.

- ``.jsonl``: one JSON object a line (errors name the line);
- ``.json``: a JSON array of objects, or an object holding one (``instances``, ``data``, ``examples``,
  ``rows``, ``problems`` or ``questions``), or JSON lines under a ``.json`` name;
- ``.csv``: a header line, then rows (GPQA's release);
- ``.parquet``: needs ``pyarrow`` (the ``data`` extra);
- a directory saved with ``datasets``' ``save_to_disk`` (``load_from_disk``; a ``DatasetDict`` needs
  ``split`` unless it has one split);
- any other directory: every data file under it, in path order (``split`` keeps the files whose path names
  it, e.g. ``test``), as a downloaded repository snapshot is laid out.

Nothing is downloaded. Every row comes back with where it was read (``file:line`` or ``file row N``) and a
default id, for errors and for data without ids: the file's stem and the row's line number (JSONL, as the
``dataset`` task does) or index (other formats), the file's path under the directory when there are several.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any, Iterator

from rlvr.tasks.dataset import DataError, _jsonl_rows, _table_rows

__all__ = ["Row", "read_rows", "read_files", "SUFFIXES"]

SUFFIXES = (".jsonl", ".json", ".csv", ".parquet")
_LIST_KEYS = ("instances", "data", "examples", "rows", "problems", "questions")

Row = tuple[str, str, Any]  # (where, default id, row)


def _is_saved_dataset(path: Path) -> bool:
    return (path / "dataset_dict.json").is_file() or (path / "state.json").is_file()


def _json_rows(path: Path) -> Iterator[tuple[str, int, Any]]:
    text = path.read_bytes()
    try:
        data = json.loads(text)
    except (json.JSONDecodeError, UnicodeDecodeError):
        yield from _jsonl_rows(path)  # JSON lines under a .json name (the error, if any, names the line)
        return
    if isinstance(data, dict):
        keys = [k for k in _LIST_KEYS if isinstance(data.get(k), list)]
        if not keys:
            yield f"{path}", 0, data  # one object: the schema check says what it lacks
            return
        data = data[keys[0]]
    if not isinstance(data, list):
        raise DataError(f"{path}: expected a JSON array of objects, got {type(data).__name__}")
    for i, row in enumerate(data):
        yield f"{path} item {i}", i, row


def _csv_rows(path: Path) -> Iterator[tuple[str, int, Any]]:
    try:
        with path.open(newline="", encoding="utf-8-sig") as f:
            for i, row in enumerate(csv.DictReader(f)):
                yield f"{path} row {i}", i, dict(row)
    except UnicodeDecodeError as e:
        raise DataError(f"{path}: not UTF-8 text ({e.reason})") from None


def _file_rows(path: Path, fmt: str, split: str | None) -> Iterator[tuple[str, int, Any]]:
    fmt = fmt if fmt != "auto" else {".parquet": "parquet", ".csv": "csv", ".json": "json"}.get(path.suffix, "jsonl")
    if fmt == "json":
        return _json_rows(path)
    if fmt == "csv":
        return _csv_rows(path)
    if fmt in ("parquet", "hf"):
        return _table_rows(path, fmt, split)
    return _jsonl_rows(path)


def read_files(path: str | Path, fmt: str = "auto", split: str | None = None,
               what: str = "") -> list[tuple[str, list[Row]]]:
    """``(file, its rows)`` for each file of ``path`` (one for a file or a saved dataset; one per data file of
    a directory, in path order), so a caller can tell a directory's data files from the other files a download
    holds (summaries, statistics)."""
    path = Path(path).expanduser()
    hint = f" ({what})" if what else ""
    if not path.exists():
        raise DataError(f"{path}: no such file or directory{hint}")
    if path.is_dir() and (fmt == "hf" or (fmt == "auto" and _is_saved_dataset(path))):
        try:
            return [(str(path), [(w, f"{path.name}-{i}", r) for w, i, r in _table_rows(path, "hf", split)])]
        except DataError as e:  # (the dataset task's message names its own field)
            raise DataError(str(e).replace("task.hf_split", "task.split")) from None
    if path.is_dir():
        files = sorted(p for p in path.rglob("*") if p.is_file() and p.suffix in SUFFIXES
                       and not any(part.startswith(".") for part in p.relative_to(path).parts)
                       and p.name not in ("dataset_info.json", "state.json", "dataset_dict.json"))
        if split:
            files = [p for p in files if split in p.relative_to(path).as_posix()]
        if not files:
            raise DataError(f"{path}: neither a saved dataset (datasets.save_to_disk) nor a directory holding "
                            f"{'/'.join(SUFFIXES)} files{' named like ' + repr(split) if split else ''}{hint}")
        many = len(files) > 1
        return [(str(p), [(w, f"{p.relative_to(path).with_suffix('').as_posix()}-{i}" if many else f"{p.stem}-{i}", r)
                          for w, i, r in _file_rows(p, fmt, split)]) for p in files]
    return [(str(path), [(w, f"{path.stem}-{i}", r) for w, i, r in _file_rows(path, fmt, split)])]


def read_rows(path: str | Path, fmt: str = "auto", split: str | None = None, what: str = "") -> list[Row]:
    """Every row of ``path`` (see the module doc); ``what`` describes the expected schema in errors."""
    return [row for _, rows in read_files(path, fmt, split, what) for row in rows]
