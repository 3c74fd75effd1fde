"""Files that can be trusted: fsync'ed, and checked against the sizes and CRC-32s recorded when they were written.

A folder written with :func:`seal` holds ``checksums.json``: every other file's size and CRC-32 (zlib's, about
2 GB/s on one core: the check reads each file once). :func:`damage` says what no longer matches: a missing or
truncated file, a flipped byte. The RL checkpoints (:mod:`rlvr.run.checkpoint`) and the warm-up's
(:mod:`rlvr.sft.checkpoint`) are sealed before they are renamed into place.
"""

from __future__ import annotations

import json
import os
import zlib
from pathlib import Path

__all__ = ["MANIFEST", "seal", "damage", "fsync_path"]

MANIFEST = "checksums.json"


def _crc(path: Path) -> str:
    crc = 0
    with open(path, "rb") as f:
        while chunk := f.read(1 << 24):
            crc = zlib.crc32(chunk, crc)
    return f"{crc:08x}"


def _files(folder: Path) -> list[Path]:
    return sorted(p for p in folder.rglob("*") if p.is_file() and p.name != MANIFEST)


def fsync_path(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def seal(folder: str | Path) -> None:
    """Record every file's size and CRC-32 in ``folder/checksums.json`` and flush files and folders to disk."""
    folder = Path(folder)
    found = _files(folder)
    files = {}
    for p in found:
        fsync_path(p)
        files[str(p.relative_to(folder))] = {"size": p.stat().st_size, "crc32": _crc(p)}
    (folder / MANIFEST).write_text(json.dumps({"algorithm": "crc32", "files": files}, indent=1))
    fsync_path(folder / MANIFEST)
    for d in sorted({p.parent for p in found} | {folder}, key=lambda d: -len(d.parts)):
        fsync_path(d)


def damage(folder: str | Path) -> list[str]:
    """What is wrong with a checkpoint against its ``checksums.json`` (empty: intact, or written before
    checksums were kept)."""
    folder = Path(folder)
    if not (folder / MANIFEST).is_file():
        return []
    try:
        files = json.loads((folder / MANIFEST).read_text())["files"]
    except (ValueError, KeyError, TypeError):
        return [f"{MANIFEST} is unreadable"]
    out = []
    for name, want in files.items():
        p = folder / name
        if not p.is_file():
            out.append(f"{name} is missing")
        elif p.stat().st_size != want["size"]:
            out.append(f"{name} has {p.stat().st_size:,} bytes, {want['size']:,} written")
        elif _crc(p) != want["crc32"]:
            out.append(f"{name} does not match its checksum (damaged on disk)")
    return out
