"""The perturbed copies of a database behind ``sql_exec``'s test-suite accuracy (Zhong, Yu & Klein 2020,
arXiv:2010.02840; the rules are in :mod:`rlvr.verifiers.sql`'s docstring)."""

from __future__ import annotations

import atexit
import hashlib
import os
import random
import shutil
import sqlite3
import tempfile
import threading
from pathlib import Path

__all__ = ["db_variants"]

_VARIANTS: dict[tuple, list[str]] = {}  # (path, size, mtime, n) -> the copies' paths, built once
_VARIANTS_LOCK = threading.Lock()
_VARIANT_DIR: list[str] = []  # the temporary folder of every copy, removed at exit

def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _user_tables(conn: sqlite3.Connection) -> list[str]:
    rows = conn.execute("SELECT name, sql FROM sqlite_master WHERE type = 'table'").fetchall()
    return [n for n, sql in rows
            if not n.startswith("sqlite_") and not (sql or "").upper().startswith("CREATE VIRTUAL")]


def _key_columns(conn: sqlite3.Connection, table: str) -> set[str]:
    """Columns in the primary key, a foreign key (either end is found from this table's side and the parents'
    referenced columns elsewhere) or a unique index of ``table``."""
    q = _quote(table)
    keys = {r[1] for r in conn.execute(f"PRAGMA table_info({q})") if r[5]}
    keys |= {r[3] for r in conn.execute(f"PRAGMA foreign_key_list({q})")}
    for idx in conn.execute(f"PRAGMA index_list({q})").fetchall():
        if idx[2]:  # unique
            keys |= {r[2] for r in conn.execute(f"PRAGMA index_info({_quote(idx[1])})")}
    return {k for k in keys if k}


def _referenced_columns(conn: sqlite3.Connection, tables: list[str]) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for t in tables:
        for r in conn.execute(f"PRAGMA foreign_key_list({_quote(t)})"):
            out.setdefault(r[2], set()).add(r[4] or "")
    return out


def _keep(ids: list, seed: str, index: int) -> set:
    """The rows variant ``index`` keeps: each row gets one seeded coin (shared by the variants), variant 0 keeps
    the heads and variant 1 the tails, so every row of the database is missing from one of the two and a row
    the gold result owes to one database row cannot be written into the query unnoticed; later variants keep
    a fresh ~60%. Never empty."""
    coins = random.Random(seed)
    if index < 2:
        keep = {i for i in ids if (coins.random() < 0.5) == (index == 0)}
    else:
        fresh = random.Random(f"{seed}/{index}")
        keep = {i for i in ids if fresh.random() < 0.6}
    return keep or {ids[index % len(ids)]}


def _perturb(conn: sqlite3.Connection, seed: str, index: int, shuffle: str) -> None:
    """Delete the rows variant ``index`` does not keep (:func:`_keep`; tables of one row stay whole), then the
    rows whose foreign keys dangle, and permute the values of each non-key column among the remaining rows:
    ``shuffle`` "numeric" (columns holding numbers), "all" or "none"."""
    rng = random.Random(f"{seed}/shuffle/{index}")
    tables = _user_tables(conn)
    for t in tables:
        try:
            ids = [r[0] for r in conn.execute(f"SELECT rowid FROM {_quote(t)} ORDER BY rowid")]
        except sqlite3.Error:  # WITHOUT ROWID: left whole
            continue
        if len(ids) < 2:
            continue
        keep = _keep(ids, f"{seed}/{t}", index)
        conn.executemany(f"DELETE FROM {_quote(t)} WHERE rowid = ?", [(i,) for i in ids if i not in keep])
    for _ in range(20):  # cascade: a deleted parent takes its children with it
        dangling = [(t, rid) for t, rid, *_ in conn.execute("PRAGMA foreign_key_check") if rid is not None]
        if not dangling:
            break
        for t, rid in dangling:
            conn.execute(f"DELETE FROM {_quote(t)} WHERE rowid = ?", (rid,))
    if shuffle == "none":
        return
    referenced = _referenced_columns(conn, tables)
    for t in tables:
        keys = _key_columns(conn, t) | referenced.get(t, set())
        for col in [r[1] for r in conn.execute(f"PRAGMA table_info({_quote(t)})") if r[1] not in keys]:
            try:
                pairs = conn.execute(f"SELECT rowid, {_quote(col)} FROM {_quote(t)} ORDER BY rowid").fetchall()
            except sqlite3.Error:
                break
            values = [v for _, v in pairs]
            if shuffle == "numeric" and not any(isinstance(v, (int, float)) for v in values):
                continue
            rng.shuffle(values)
            conn.execute("SAVEPOINT shuffle")
            try:
                conn.executemany(f"UPDATE {_quote(t)} SET {_quote(col)} = ? WHERE rowid = ?",
                                 [(v, rid) for v, (rid, _) in zip(values, pairs)])
                conn.execute("RELEASE shuffle")
            except sqlite3.Error:  # a CHECK constraint or trigger refused: this column stays
                conn.execute("ROLLBACK TO shuffle")
                conn.execute("RELEASE shuffle")


def _build_variant(src: Path, dst: Path, seed: str, index: int) -> None:
    source = sqlite3.connect(f"{src.resolve().as_uri()}?mode=ro", uri=True)
    mem = sqlite3.connect(":memory:", isolation_level=None)
    try:
        source.backup(mem)
        mem.execute("PRAGMA foreign_keys = OFF")
        mem.execute("PRAGMA recursive_triggers = OFF")
        _perturb(mem, seed, index, shuffle=("none", "numeric")[index] if index < 2 else "all")
        out = sqlite3.connect(dst)
        try:
            mem.backup(out)
        finally:
            out.close()
    finally:
        source.close()
        mem.close()


def db_variants(db_path: str, n: int, max_bytes: int = 64_000_000) -> list[str]:
    """Paths of ``n`` perturbed copies of a database (module docstring), built once per file version and
    removed at exit; [] when ``n`` is 0, the file is larger than ``max_bytes`` or a copy cannot be built."""
    if n <= 0:
        return []
    path = Path(db_path).resolve()
    st = path.stat()
    if st.st_size > max_bytes:
        return []
    key = (str(path), st.st_size, st.st_mtime_ns, n)
    with _VARIANTS_LOCK:
        if key in _VARIANTS:
            return _VARIANTS[key]
        if not _VARIANT_DIR:
            _VARIANT_DIR.append(tempfile.mkdtemp(prefix="rlvr-sql-variants-"))
            atexit.register(shutil.rmtree, _VARIANT_DIR[0], True)
        digest = hashlib.sha256()
        with open(path, "rb") as f:  # the seed is the content's: the same database gets the same variants
            for block in iter(lambda: f.read(1 << 20), b""):
                digest.update(block)
        stem = f"{digest.hexdigest()[:16]}-{n}"
        out = []
        try:
            for i in range(n):
                dst = Path(_VARIANT_DIR[0]) / f"{stem}-{i}.sqlite"
                if not dst.exists():
                    tmp = dst.with_suffix(".tmp")
                    _build_variant(path, tmp, stem, i)
                    os.replace(tmp, dst)
                out.append(str(dst))
        except (sqlite3.Error, OSError):
            out = []
        _VARIANTS[key] = out
        return out
