"""Text2SQL execution match on a read-only SQLite database.

Example keys: ``meta["db_path"]`` (an SQLite file; relative paths resolve against the ``db_root`` param) and
optionally ``meta["gold_sql"]`` (default: ``answer``). The predicted query is the last fenced ```` ```sql ````
block, else the last fenced block, else the last ``<answer>`` block, else the whole completion.

Reward (``sql_exec``; execution accuracy as in Spider / BIRD and the Text2SQL RL papers listed in
docs/verifiers.md, Text2SQL: execution match)::

    r = 1                  if pred and gold both run and their results are equal: as multisets of rows,
                           or as ordered lists when the gold query has ORDER BY at its top level
      = executable_reward  if pred ran but its result differs (default 0; CogniSQL-style partial credit)
      = 0                  otherwise (parse error, not a single SELECT/WITH statement, denied, time limit)

Safety: every query runs on a fresh connection opened with the URI ``mode=ro`` (a missing file is an error,
never created), an authorizer that allows only reads, SELECT, functions and recursive CTEs (no writes,
ATTACH, PRAGMA, transactions or DDL), one statement per query, ``SQLITE_LIMIT_LENGTH`` on values (no
``randomblob(1e9)``), a wall-clock limit enforced by a progress handler (a query that runs forever is
interrupted after ``time_limit_s``), and at most ``max_rows`` result rows. Rows compare with Python
equality (``1 == 1.0``); ``float_decimals`` rounds floats first. Column order matters and column names do
not. Known false positives of single-DB execution match (empty-vs-empty, coincidental values) remain;
``empty_match=False`` scores empty-vs-empty as 0 and ``info["empty"]`` flags it either way.
"""

from __future__ import annotations

import atexit
import os
import re
import shutil
import sqlite3
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

from pydantic import Field

from rlvr.core.types import Example, Score
from rlvr.registry import Params
from rlvr.verifiers.base import VERIFIERS, BaseVerifier
from rlvr.verifiers.format import extract_tag

__all__ = ["SQLVerifier", "SQLParams", "SQLError", "run_readonly_query", "extract_sql", "has_top_level_order_by",
           "results_match"]

_ALLOWED_ACTIONS = {sqlite3.SQLITE_SELECT, sqlite3.SQLITE_READ, sqlite3.SQLITE_FUNCTION,
                    getattr(sqlite3, "SQLITE_RECURSIVE", 33)}
_FENCE = re.compile(r"```[ \t]*(\w*)[ \t]*\n(.*?)```", re.DOTALL)
_LEADING_COMMENTS = re.compile(r"^(?:\s+|--[^\n]*(?:\n|$)|/\*.*?\*/)*", re.DOTALL)
_STRINGS = re.compile(r"'(?:[^']|'')*'|\"(?:[^\"]|\"\")*\"|`[^`]*`|\[[^\]]*\]|--[^\n]*|/\*.*?\*/", re.DOTALL)


class SQLError(ValueError):
    """A query that may not or could not run."""


def _authorizer(action: int, *_: Any) -> int:
    return sqlite3.SQLITE_OK if action in _ALLOWED_ACTIONS else sqlite3.SQLITE_DENY


def _check_query(sql: str, max_chars: int) -> str:
    sql = sql.strip().rstrip(";").strip()
    if not sql:
        raise SQLError("empty query")
    if len(sql) > max_chars or "\x00" in sql:
        raise SQLError(f"query longer than {max_chars} characters or contains NUL")
    body = _LEADING_COMMENTS.sub("", sql, count=1)
    if not re.match(r"(?i)(select|with)\b", body):
        raise SQLError("only a single SELECT (or WITH ... SELECT) query is allowed")
    return sql


def _connect(db_path: str, max_value_bytes: int) -> sqlite3.Connection:
    path = Path(db_path).resolve()
    if not path.is_file():
        raise SQLError(f"database {db_path!r} does not exist")
    conn = sqlite3.connect(f"{path.as_uri()}?mode=ro", uri=True, isolation_level=None, check_same_thread=False)
    conn.set_authorizer(_authorizer)
    conn.setlimit(sqlite3.SQLITE_LIMIT_ATTACHED, 0)
    conn.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, max_value_bytes)
    conn.setlimit(sqlite3.SQLITE_LIMIT_LIKE_PATTERN_LENGTH, 1000)  # bounds pathological LIKE / GLOB patterns
    return conn


def run_readonly_query(db_path: str, sql: str, time_limit_s: float = 2.0, max_rows: int = 100_000,
                       max_chars: int = 20_000, max_value_bytes: int = 1_000_000) -> list[tuple]:
    """Rows of one read-only SELECT; raises :class:`SQLError` for anything refused, failing or too slow."""
    sql = _check_query(sql, max_chars)
    conn = _connect(db_path, max_value_bytes)
    deadline = time.monotonic() + time_limit_s
    conn.set_progress_handler(lambda: int(time.monotonic() > deadline), 1000)
    try:
        cur = conn.execute(sql)
        rows: list[tuple] = []
        while batch := cur.fetchmany(1000):
            rows.extend(batch)
            if len(rows) > max_rows:
                raise SQLError(f"more than {max_rows} rows")
        return rows
    except sqlite3.Error as e:
        if time.monotonic() > deadline:
            raise SQLError(f"time limit of {time_limit_s}s exceeded") from None
        raise SQLError(f"{type(e).__name__}: {e}") from None
    finally:
        conn.close()


def extract_sql(text: str) -> str | None:
    """The last ```sql block, else the last fenced block, else the last <answer> block, else the text."""
    fences = _FENCE.findall(text)
    sql_fences = [body for lang, body in fences if lang.lower() == "sql"]
    if sql_fences or fences:
        return (sql_fences or [body for _, body in fences])[-1].strip()
    tagged = extract_tag(text, "answer")
    if tagged is not None:
        return tagged
    return text.strip() or None


def has_top_level_order_by(sql: str) -> bool:
    """True when ORDER BY appears outside parentheses (string literals and comments ignored)."""
    bare, depth = _STRINGS.sub(" ", sql), 0
    for m in re.finditer(r"\(|\)|\border\s+by\b", bare, re.IGNORECASE):
        tok = m.group(0)
        if tok == "(":
            depth += 1
        elif tok == ")":
            depth = max(0, depth - 1)
        elif depth == 0:
            return True
    return False


def _norm_row(row: tuple, float_decimals: int | None) -> tuple:
    if float_decimals is None:
        return row
    return tuple(round(v, float_decimals) if isinstance(v, float) else v for v in row)


def results_match(pred: list[tuple], gold: list[tuple], ordered: bool, float_decimals: int | None = None) -> bool:
    """Equal as ordered lists (``ordered``) or as multisets of rows."""
    p = [_norm_row(r, float_decimals) for r in pred]
    g = [_norm_row(r, float_decimals) for r in gold]
    return p == g if ordered else Counter(p) == Counter(g)


_DEMO_DIR: list[str] = []


def _demo_db() -> str:
    """A tiny database for :meth:`SQLVerifier.validation_cases`, created once per process."""
    if not _DEMO_DIR:
        _DEMO_DIR.append(tempfile.mkdtemp(prefix="rlvr-sql-"))
        atexit.register(shutil.rmtree, _DEMO_DIR[0], True)
    path = os.path.join(_DEMO_DIR[0], "demo.sqlite")
    if not os.path.exists(path):
        with sqlite3.connect(path) as conn:
            conn.execute("CREATE TABLE city(name TEXT, country TEXT, population INTEGER)")
            conn.executemany("INSERT INTO city VALUES (?, ?, ?)", [("Paris", "FR", 2100000), ("Lyon", "FR", 520000),
                                                                   ("Berlin", "DE", 3600000)])
        conn.close()
    return path


class SQLVerifier(BaseVerifier):
    """Execution match of predicted vs gold SQL on a read-only SQLite database."""

    name = "sql_exec"

    def __init__(self, db_root: str | None = None, time_limit_s: float = 2.0, max_rows: int = 100_000,
                 executable_reward: float = 0.0, float_decimals: int | None = None, empty_match: bool = True,
                 max_chars: int = 20_000):
        self.db_root, self.time_limit_s, self.max_rows = db_root, time_limit_s, max_rows
        self.executable_reward, self.float_decimals, self.empty_match = executable_reward, float_decimals, empty_match
        self.max_chars = max_chars
        self._gold_cache: dict[tuple[str, str], list[tuple]] = {}

    def _run(self, db: str, sql: str) -> list[tuple]:
        return run_readonly_query(db, sql, self.time_limit_s, self.max_rows, self.max_chars)

    def _gold_rows(self, db: str, sql: str) -> list[tuple]:
        key = (db, sql)
        if key not in self._gold_cache:
            if len(self._gold_cache) >= 256:
                self._gold_cache.pop(next(iter(self._gold_cache)))
            self._gold_cache[key] = self._run(db, sql)
        return self._gold_cache[key]

    def score(self, example: Example, text: str) -> Score:
        db = example.meta.get("db_path")
        if not db:
            return Score(0.0, {"correct": 0.0, "executed": 0.0}, {"reason": "example has no meta['db_path']"})
        db = os.path.join(self.db_root, db) if self.db_root and not os.path.isabs(db) else db
        gold_sql = example.meta.get("gold_sql", example.answer)
        try:
            gold = self._gold_rows(db, gold_sql)
        except SQLError as e:
            return Score(0.0, {"correct": 0.0, "executed": 0.0}, {"error": f"gold query failed: {e}"})
        pred_sql = extract_sql(text[-4 * self.max_chars:])
        try:
            pred = self._run(db, pred_sql or "")
        except SQLError as e:
            return Score(0.0, {"correct": 0.0, "executed": 0.0}, {"reason": str(e), "sql": (pred_sql or "")[:500]})
        ordered = has_top_level_order_by(gold_sql)
        ok = results_match(pred, gold, ordered, self.float_decimals)
        empty = not pred and not gold
        ok = ok and (self.empty_match or not empty)
        info = {"sql": pred_sql, "ordered": ordered, "empty": empty, "rows": len(pred)}
        if not ok:
            info["reason"] = "results differ" if not empty else "empty results (empty_match=False)"
        r = 1.0 if ok else self.executable_reward
        return Score(r, {"correct": float(ok), "executed": 1.0}, info)

    def validation_cases(self):
        meta = {"db_path": _demo_db()}
        ex = Example("sql-1", "French cities by population", "SELECT name FROM city WHERE country = 'FR'", meta=meta)
        ex_ord = Example("sql-2", "cities, biggest first", "SELECT name FROM city ORDER BY population DESC", meta=meta)
        cases = [(ex, "```sql\nSELECT name FROM city WHERE country='FR' ORDER BY name DESC;\n```", 1.0),
                 (ex, "SELECT name FROM city", 0.0), (ex, "DROP TABLE city", 0.0),
                 (ex, "SELECT 1; DROP TABLE city", 0.0),
                 (ex_ord, "SELECT name FROM city ORDER BY population DESC", 1.0),
                 (ex_ord, "SELECT name FROM city ORDER BY population ASC", 0.0)]
        return cases if self.executable_reward == 0.0 else [c for c in cases if c[2] == 1.0] + [(ex, "nonsense", 0.0)]


class SQLParams(Params):
    db_root: str | None = Field(None, description="directory that relative meta['db_path'] values resolve against")
    time_limit_s: float = Field(2.0, gt=0.0, le=60.0, description="wall-clock limit per query (gold and predicted)")
    max_rows: int = Field(100_000, gt=0, description="queries returning more rows fail")
    executable_reward: float = Field(0.0, ge=0.0, lt=1.0, description="reward for a predicted query that runs "
                                                                      "but returns a different result")
    float_decimals: int | None = Field(None, ge=0, le=15, description="round float cells to this many decimals "
                                                                      "before comparing (None: exact)")
    empty_match: bool = Field(True, description="whether empty-vs-empty results count as a match")
    max_chars: int = Field(20_000, gt=0, description="longest query accepted")


@VERIFIERS.register("sql_exec", SQLParams)
def _sql_exec(p: SQLParams) -> SQLVerifier:
    """Text2SQL execution match: 1 iff pred and gold results agree (multisets; ordered if gold has ORDER BY)."""
    return SQLVerifier(p.db_root, p.time_limit_s, p.max_rows, p.executable_reward, p.float_decimals,
                       p.empty_match, p.max_chars)
