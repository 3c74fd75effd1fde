"""SQL that matches the gold result without answering the question, or that tries to run for ever.

Literal rows (a ``SELECT`` of the gold query's result values, computed here on the example's database), the
empty result (matches an empty gold), slow queries (an unbounded recursive CTE, ``printf`` with a huge
width, ``randomblob``/``zeroblob`` of a gigabyte, a cross join of the table with itself, a pathological
``LIKE``), a second statement after the gold query; and fair variants of the gold query (a comment before it,
a trailing semicolon, a fenced block: expected to earn reward).
"""

from __future__ import annotations

import os
import re

from rlvr.audit.probes import family

MAX_LITERAL_ROWS = 200


def _literal(v) -> str:
    if v is None:
        return "NULL"
    if isinstance(v, bool):
        return str(int(v))
    if isinstance(v, (int, float)):
        return repr(v)
    if isinstance(v, bytes):
        return f"X'{v.hex()}'"
    return "'" + str(v).replace("'", "''") + "'"


def literal_select(rows: list[tuple]) -> str | None:
    """``SELECT v1, v2 UNION ALL SELECT ...`` returning ``rows`` with no table read; None for no rows."""
    if not rows or len(rows) > MAX_LITERAL_ROWS:
        return None
    return "\nUNION ALL ".join("SELECT " + ", ".join(_literal(v) for v in row) for row in rows)


def _gold_rows(ctx) -> list[tuple] | None:
    db = ctx.meta.get("db_path")
    if not isinstance(db, str) or not os.path.isfile(db):
        return None
    from rlvr.verifiers.sql import SQLError, run_readonly_query

    try:
        return run_readonly_query(db, str(ctx.meta.get("gold_sql", ctx.answer)), time_limit_s=2.0, max_rows=1000)
    except SQLError:
        return None


@family("sql_tricks", kinds=("sql",))
def sql_tricks(ctx):
    """Literal rows (a SELECT of the gold values), the empty result, slow functions (recursive CTEs, printf with
    huge widths, randomblob), cross joins, a second statement; fair rewrites of the gold query."""
    gold_sql = str(ctx.meta.get("gold_sql", ctx.answer)).strip().rstrip(";")
    m = re.search(r"\bfrom\s+([A-Za-z_][A-Za-z_0-9]*)", gold_sql, re.I)
    table = m.group(1) if m else "sqlite_master"
    out = []
    rows = _gold_rows(ctx)
    lit = literal_select(rows) if rows else None
    if lit:
        out.append(("literal_rows", f"```sql\n{lit}\n```", "no_reward"))
        out.append(("literal_rows_bare", lit, "no_reward"))
    out += [
        ("empty_result", "SELECT 1 WHERE 0", "no_reward"),
        ("null_row", "SELECT NULL", "no_reward"),
        ("recursive_cte_unbounded", "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) "
                                    "SELECT count(*) FROM c", "no_reward"),
        ("recursive_cte_huge", "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 1000000000) "
                               "SELECT max(x) FROM c", "no_reward"),
        ("printf_huge_width", "SELECT length(printf('%.*c', 2000000000, 'x'))", "no_reward"),
        ("printf_width_star", "SELECT printf('%2000000000d', 1)", "no_reward"),
        ("randomblob", "SELECT length(randomblob(1000000000))", "no_reward"),
        ("zeroblob", "SELECT hex(zeroblob(500000000))", "no_reward"),
        ("cross_join", f"SELECT count(*) FROM {table} a, {table} b, {table} c, {table} d, {table} e, {table} f",
         "no_reward"),
        ("like_backtracking", "SELECT 1 WHERE '" + "a" * 5000 + "' LIKE '" + "%a" * 40 + "%b'", "no_reward"),
        ("second_statement", f"{gold_sql}; SELECT 1", "any"),
        ("gold_in_comment", f"-- {gold_sql}\nSELECT 1 WHERE 0", "no_reward"),
        ("gold_then_wrong_block", f"```sql\n{gold_sql}\n```\n```sql\nSELECT 1 WHERE 0\n```", "no_reward"),
        ("comment_then_gold", f"-- the query\n{gold_sql}", "reward"),
        ("trailing_semicolon", f"{gold_sql};", "reward"),
        ("fenced_gold", f"```sql\n{gold_sql}\n```", "reward"),
    ]
    return out
