"""Text2SQL execution match on a read-only SQLite database.

Example keys: ``meta["db_path"]`` (an SQLite file; relative paths resolve against the ``db_root`` param) and
optionally ``meta["gold_sql"]`` (default: ``answer``). The predicted query is the last fenced ```` ```sql ````
block, else the last fenced block, else the last ``<answer>`` block, else the whole completion.

Reward (``sql_exec``; execution accuracy as in Spider / BIRD and the Text2SQL RL papers listed in
docs/verifiers.md, Text2SQL: execution match)::

    r = 1                  if pred and gold both run and their results are equal: as multisets of rows,
                           or as ordered lists when the gold query has ORDER BY at its top level, on the
                           database and on each of its ``db_variants`` perturbed copies
      = executable_reward  if pred ran but its result differs, or pred reads no table while gold does
                           (default 0; CogniSQL-style partial credit)
      = 0                  otherwise (parse error, not a single SELECT/WITH statement, denied, time limit)

Against accidental and hard-coded matches (docs/verifiers.md, Text2SQL: literal rows and test-suite
accuracy): a query whose rows are written in it (``SELECT 'Alice' UNION SELECT 'Bob'``, ``VALUES``, a CTE of
literals) reads no table, and when the gold query reads one it never matches. A query that does read a
table can still return the gold rows by coincidence (``WHERE area < 106`` for "the three smallest") or by
hard-coding them behind a table (``SELECT 'Alice' FROM t LIMIT 1``); as in the test-suite accuracy of Zhong,
Yu & Klein (EMNLP 2020, arXiv:2010.02840), a prediction that matches on the database is run again, with the
gold query, on ``db_variants`` (2) perturbed copies and must match on each. Each row of each table gets a
seeded coin: variant 1 keeps the heads and variant 2 the tails (so every row is missing from one of them,
and a gold row written into the query is caught), rows whose foreign keys would dangle are removed too (so
declared keys still hold), and variant 2 also permutes, within each table, the values of numeric columns
that are in no primary key, foreign key or unique index (so ``WHERE name IN ('Alice', 'Bob')`` no longer
stands for ``WHERE age > 30``). Further variants (``db_variants`` >= 3) keep a fresh ~60% of the rows and
permute every non-key column, text included: that also catches ``WHERE name IN ('Paris', 'Lyon')`` for
``WHERE country = 'FR'``, but breaks dependencies between non-key columns (``country`` and
``country_code``), so a correct query that uses one for the other can fail; it is opt-in. Copies are built
once per database file and seeded by its content (at most ``variant_max_bytes``; larger files skip this
check, ``info["variants"]`` says how many ran); a variant on which the gold query fails is skipped.

Safety and bounds: every query runs in a worker process (one per thread, restarted when killed) on a fresh
connection opened with the URI ``mode=ro`` (a missing file is an error, never created), an authorizer that
allows only reads, SELECT, functions and recursive CTEs (no writes, ATTACH, PRAGMA, transactions or DDL),
one statement per query of at most ``max_chars`` (8000) characters, ``SQLITE_LIMIT_LENGTH`` on values (no
``randomblob(1e9)``), a wall-clock limit enforced by a progress handler and an interrupt timer inside SQLite
(a query that runs forever is interrupted after ``time_limit_s``), at most ``max_rows`` rows and
``max_result_bytes`` of result. One built-in call can run long between two progress checks
(``printf('%.*c', 2147483647, 'x')`` takes 3-8 s, ``instr``, ``trim`` and ``ltrim`` of 1 MB strings are
quadratic), so the worker is killed when ``time_limit_s`` plus a 0.5 s grace has passed: the limit holds
whatever SQLite is doing (``isolate=False`` runs in-process, without that guarantee). Rows compare with
Python equality (``1 == 1.0``); ``float_decimals`` rounds floats first. Column order matters and column
names do not. Empty-vs-empty remains a known false positive of execution match; ``empty_match=False``
scores it 0 and ``info["empty"]`` flags it either way.
"""
from __future__ import annotations

import atexit
import os
import re
import shutil
import sqlite3
import tempfile
from collections import Counter
from typing import Any

from pydantic import Field

from rlvr.core.paths import LocalPathStr
from rlvr.core.types import Example, Score
from rlvr.registry import Params
from rlvr.verifiers.base import VERIFIERS, BaseVerifier
from rlvr.verifiers.format import extract_tag
from rlvr.verifiers.sql_run import (KILL_GRACE_S, MAX_QUERY_CHARS, MAX_RESULT_BYTES, SQLError,  # noqa: F401
                                    _connect, run_readonly_query)  # (KILL_GRACE_S, _connect: re-exported)
from rlvr.verifiers.sql_variants import db_variants

__all__ = ["SQLVerifier", "SQLParams", "SQLError", "run_readonly_query", "extract_sql", "has_top_level_order_by",
           "results_match", "db_variants"]

_FENCE = re.compile(r"```[ \t]*(\w*)[ \t]*\n(.*?)```", re.DOTALL)
_STRINGS = re.compile(r"'(?:[^']|'')*'|\"(?:[^\"]|\"\")*\"|`[^`]*`|\[[^\]]*\]|--[^\n]*|/\*.*?\*/", re.DOTALL)


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
    """Execution match of predicted vs gold SQL on a read-only SQLite database (and its variants)."""

    name = "sql_exec"

    def __init__(self, db_root: str | None = None, time_limit_s: float = 2.0, max_rows: int = 100_000,
                 executable_reward: float = 0.0, float_decimals: int | None = None, empty_match: bool = True,
                 max_chars: int = MAX_QUERY_CHARS, db_variants: int = 2, variant_max_bytes: int = 64_000_000,
                 require_table: bool = True, isolate: bool = True, max_result_bytes: int = MAX_RESULT_BYTES):
        self.db_root, self.time_limit_s, self.max_rows = db_root, time_limit_s, max_rows
        self.executable_reward, self.float_decimals, self.empty_match = executable_reward, float_decimals, empty_match
        self.max_chars, self.db_variants, self.variant_max_bytes = max_chars, db_variants, variant_max_bytes
        self.require_table, self.isolate, self.max_result_bytes = require_table, isolate, max_result_bytes
        self._gold_cache: dict[tuple[str, str], tuple[list[tuple], list[str]]] = {}
        self._variant_cache: dict[tuple[str, str], tuple[list[tuple], list[str]]] = {}

    def _run(self, db: str, sql: str, tables: list | None = None) -> list[tuple]:
        return run_readonly_query(db, sql, self.time_limit_s, self.max_rows, self.max_chars,
                                  max_result_bytes=self.max_result_bytes, isolate=self.isolate, tables=tables)

    def _gold_rows(self, db: str, sql: str, cache: dict | None = None) -> tuple[list[tuple], list[str]]:
        cache = self._gold_cache if cache is None else cache
        key = (db, sql)
        if key not in cache:
            if len(cache) >= 256:
                cache.pop(next(iter(cache)))
            tables: list[str] = []
            cache[key] = (self._run(db, sql, tables), tables)
        return cache[key]

    def _variants_agree(self, db: str, gold_sql: str, pred_sql: str, ordered: bool) -> tuple[bool, int, str]:
        """(pred matches gold on every variant on which gold runs, variants checked, reason)."""
        checked = 0
        for path in db_variants(db, self.db_variants, self.variant_max_bytes):
            try:
                gold, _ = self._gold_rows(path, gold_sql, self._variant_cache)
            except SQLError:
                continue  # the gold query cannot judge this variant
            checked += 1
            try:
                pred = self._run(path, pred_sql)
            except SQLError as e:
                return False, checked, f"fails on a perturbed copy of the database: {e}"
            if not results_match(pred, gold, ordered, self.float_decimals):
                return False, checked, ("results agree on the database but differ on a perturbed copy of it "
                                        "(test-suite accuracy): the match was a coincidence")
        return True, checked, ""

    def score(self, example: Example, text: str) -> Score:
        db = example.meta.get("db_path")
        if not db:
            return Score(0.0, {"correct": 0.0, "executed": 0.0}, {"reason": "example has no meta['db_path']"})
        db = os.path.join(self.db_root, db) if self.db_root and not os.path.isabs(db) else db
        gold_sql = example.meta.get("gold_sql", example.answer)
        try:
            gold, gold_tables = self._gold_rows(db, gold_sql)
        except SQLError as e:
            return Score(0.0, {"correct": 0.0, "executed": 0.0}, {"error": f"gold query failed: {e}"})
        pred_sql = extract_sql(text[-4 * self.max_chars:])
        tables: list[str] = []
        try:
            pred = self._run(db, pred_sql or "", tables)
        except SQLError as e:
            return Score(0.0, {"correct": 0.0, "executed": 0.0}, {"reason": str(e), "sql": (pred_sql or "")[:500]})
        ordered = has_top_level_order_by(gold_sql)
        ok = results_match(pred, gold, ordered, self.float_decimals)
        empty = not pred and not gold
        info: dict[str, Any] = {"sql": pred_sql, "ordered": ordered, "empty": empty, "rows": len(pred),
                                "tables": tables}
        if ok and empty and not self.empty_match:
            ok, info["reason"] = False, "empty results (empty_match=False)"
        elif ok and self.require_table and gold_tables and not tables:
            ok, info["reason"] = False, "the query reads no table: its rows are written in the query"
        elif ok:
            ok, info["variants"], why = self._variants_agree(db, gold_sql, pred_sql or "", ordered)
            if not ok:
                info["reason"] = why
        elif not ok:
            info["reason"] = "results differ"
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
        if self.executable_reward == 0.0:
            cases.append((ex, "SELECT 'Paris' UNION ALL SELECT 'Lyon'", 0.0))
        return cases if self.executable_reward == 0.0 else [c for c in cases if c[2] == 1.0] + [(ex, "nonsense", 0.0)]


class SQLParams(Params):
    db_root: LocalPathStr | None = Field(None, description="directory that relative meta['db_path'] values resolve "
                                                            "against")
    time_limit_s: float = Field(2.0, gt=0.0, le=60.0, description="wall-clock limit per query (gold and predicted); "
                                                                   "the query's worker is killed 0.5 s after it")
    max_rows: int = Field(100_000, gt=0, description="queries returning more rows fail")
    executable_reward: float = Field(0.0, ge=0.0, lt=1.0, description="reward for a predicted query that runs "
                                                                      "but returns a different result")
    float_decimals: int | None = Field(None, ge=0, le=15, description="round float cells to this many decimals "
                                                                      "before comparing (None: exact)")
    empty_match: bool = Field(True, description="whether empty-vs-empty results count as a match")
    max_chars: int = Field(MAX_QUERY_CHARS, gt=0, le=100_000, description="longest query accepted")
    db_variants: int = Field(2, ge=0, le=8, description="perturbed copies of the database a matching query must "
                                                        "also match on (test-suite accuracy; 0: the database only)")
    variant_max_bytes: int = Field(64_000_000, gt=0, description="databases larger than this are not copied "
                                                                 "(no variants)")
    require_table: bool = Field(True, description="a query that reads no table never matches a gold query that "
                                                  "reads one (literal rows)")
    max_result_bytes: int = Field(MAX_RESULT_BYTES, gt=0, description="queries returning more bytes fail")


@VERIFIERS.register("sql_exec", SQLParams)
def _sql_exec(p: SQLParams) -> SQLVerifier:
    """Text2SQL execution match: 1 iff pred and gold results agree (multisets; ordered if gold has ORDER BY),
    on the database and on perturbed copies of it, and pred reads a table when gold does."""
    return SQLVerifier(p.db_root, p.time_limit_s, p.max_rows, p.executable_reward, p.float_decimals,
                       p.empty_match, p.max_chars, p.db_variants, p.variant_max_bytes, p.require_table,
                       max_result_bytes=p.max_result_bytes)
