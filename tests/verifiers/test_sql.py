import hashlib
import sqlite3
import threading
import time

import pytest

import rlvr.verifiers.sql  # noqa: F401  (registers "sql_exec")
from rlvr.core.types import Example
from rlvr.verifiers import build_verifier
from rlvr.verifiers.sql import (SQLError, SQLVerifier, _connect, extract_sql, has_top_level_order_by,
                                results_match, run_readonly_query)


@pytest.fixture
def db(tmp_path):
    path = tmp_path / "world.sqlite"
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE city(name TEXT, country TEXT, population INTEGER, area REAL)")
        conn.executemany("INSERT INTO city VALUES (?, ?, ?, ?)", [
            ("Paris", "FR", 2100000, 105.4), ("Lyon", "FR", 520000, 47.87), ("Berlin", "DE", 3600000, 891.8),
            ("Hamburg", "DE", 1800000, 755.2), ("Nice", "FR", 340000, 71.9)])
    conn.close()
    return str(path)


def ex(db, gold):
    return Example("sql", "q", gold, meta={"db_path": db})


def digest(path):
    return hashlib.sha256(open(path, "rb").read()).hexdigest()


def test_registered_and_validates():
    v = build_verifier("sql_exec", {"time_limit_s": 1.0})
    assert isinstance(v, SQLVerifier) and v.name == "sql_exec"
    v.validate()
    build_verifier("sql_exec", {"executable_reward": 0.1}).validate()


def test_gold_one_wrong_zero(db):
    e = ex(db, "SELECT name FROM city WHERE country = 'DE'")
    v = SQLVerifier()
    assert v(e, e.answer).reward == 1.0
    assert v(e, "SELECT name FROM city WHERE country = 'FR'").reward == 0.0
    assert v(e, "SELECT name, country FROM city WHERE country = 'DE'").reward == 0.0  # extra column
    assert v(e, "I don't know").reward == 0.0


def test_multiset_and_order_semantics(db):
    v = SQLVerifier()
    unordered = ex(db, "SELECT country FROM city")
    assert v(unordered, "SELECT country FROM city ORDER BY country").reward == 1.0
    assert v(unordered, "SELECT DISTINCT country FROM city").reward == 0.0  # multiplicities matter
    ordered = ex(db, "SELECT name FROM city ORDER BY population DESC")
    assert v(ordered, "SELECT name FROM city ORDER BY population DESC").reward == 1.0
    assert v(ordered, "SELECT name FROM city ORDER BY population").reward == 0.0
    sub = ex(db, "SELECT name FROM (SELECT name FROM city ORDER BY area LIMIT 3)")
    assert not has_top_level_order_by(sub.answer)
    # a subquery's ORDER BY does not order the result: compared as multisets on this database. The query
    # matches here by coincidence, so the default test-suite check (perturbed copies) scores it 0
    # (tests/verifiers/test_sql_bounds.py); db_variants=0 is the single-database execution match
    assert SQLVerifier(db_variants=0)(sub, "SELECT name FROM city WHERE area < 106").reward == 1.0
    assert v(sub, "SELECT name FROM city WHERE area < 106").reward == 0.0
    assert has_top_level_order_by("select a from t\n order  by a") and not has_top_level_order_by("select 'order by'")
    assert results_match([(1,)], [(1.0,)], ordered=True)
    assert not results_match([(1, 2)], [(2, 1)], ordered=False)


def test_float_rounding_and_empty_results(db):
    e = ex(db, "SELECT 0.1 + 0.2 + 0.3")
    pred = "SELECT 0.3 + 0.2 + 0.1"  # 0.6000000000000001 vs 0.6
    assert SQLVerifier()(e, pred).reward == 0.0
    assert SQLVerifier(float_decimals=6)(e, pred).reward == 1.0
    empty = ex(db, "SELECT name FROM city WHERE country = 'US'")
    other_empty = "SELECT name FROM city WHERE population < 0"
    assert SQLVerifier()(empty, other_empty).reward == 1.0
    s = SQLVerifier(empty_match=False)(empty, other_empty)
    assert s.reward == 0.0 and s.info["empty"]


def test_extraction(db):
    text = "first\n```sql\nSELECT 1\n```\nthen\n```sql\nSELECT name FROM city WHERE country = 'DE';\n```"
    assert extract_sql(text).startswith("SELECT name")
    assert extract_sql("<answer>SELECT 2</answer>") == "SELECT 2"
    assert SQLVerifier()(ex(db, "SELECT name FROM city WHERE country = 'DE'"), text).reward == 1.0


@pytest.mark.parametrize("attack", [
    "DROP TABLE city",
    "SELECT 1; DROP TABLE city",
    "SELECT name FROM city WHERE name = ''; DROP TABLE city; --'",
    "DELETE FROM city",
    "UPDATE city SET population = 0",
    "INSERT INTO city VALUES ('x', 'y', 1, 1.0)",
    "CREATE TEMP TABLE t(a)",
    "ATTACH DATABASE 'other.db' AS o",
    "SELECT * FROM city; ATTACH DATABASE 'other.db' AS o",
    "PRAGMA writable_schema = 1",
    "BEGIN; DELETE FROM city; COMMIT",
    "VACUUM INTO 'copy.db'",
    "/* comment */ DROP TABLE city",
    "SELECT load_extension('evil')",
    "SELECT randomblob(2000000000)",
    "WITH x AS (SELECT 1) DELETE FROM city",
])
def test_injection_and_writes_are_refused(db, attack):
    before = digest(db)
    s = SQLVerifier()(ex(db, "SELECT count(*) FROM city"), attack)
    assert s.reward == 0.0 and s.components["executed"] == 0.0
    assert digest(db) == before
    assert run_readonly_query(db, "SELECT count(*) FROM city") == [(5,)]


def test_authorizer_and_read_only_mode_each_block_writes(db):
    conn = _connect(db, 1_000_000)
    with pytest.raises(sqlite3.DatabaseError, match="not authorized"):
        conn.execute("DELETE FROM city")
    conn.set_authorizer(None)  # even without the authorizer, mode=ro refuses writes
    with pytest.raises(sqlite3.OperationalError, match="readonly"):
        conn.execute("CREATE TABLE t(a)")
    conn.close()


def test_query_that_runs_forever_stops_within_the_limit(db):
    forever = "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT max(x) FROM c"
    result = []
    worker = threading.Thread(target=lambda: result.append(SQLVerifier(time_limit_s=0.2)(ex(db, "SELECT 1"), forever)),
                              daemon=True)  # a daemon, so a missing time limit fails this test instead of hanging
    worker.start()
    worker.join(timeout=5.0)
    assert not worker.is_alive() and result
    assert result[0].reward == 0.0 and "time limit" in result[0].info["reason"]
    cross = "SELECT count(*) FROM " + ", ".join(f"city t{i}" for i in range(16))  # 5**16 rows
    t0 = time.perf_counter()
    with pytest.raises(SQLError, match="time limit"):
        run_readonly_query(db, cross, time_limit_s=0.2)
    assert time.perf_counter() - t0 < 2.0


def test_row_cap_and_missing_database(db, tmp_path):
    rows = "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT x FROM c"
    with pytest.raises(SQLError, match="rows"):
        run_readonly_query(db, rows, time_limit_s=5.0, max_rows=1000)
    missing = tmp_path / "nope.sqlite"
    s = SQLVerifier()(ex(str(missing), "SELECT 1"), "SELECT 1")
    assert s.reward == 0.0 and "gold query failed" in s.info["error"]
    assert not missing.exists()


def test_executable_reward_and_gold_cache(db):
    v = SQLVerifier(executable_reward=0.1)
    e = ex(db, "SELECT name FROM city WHERE country = 'DE'")
    assert v(e, "SELECT 1").reward == 0.1
    assert v(e, "SELEC nonsense").reward == 0.0
    assert v(e, e.answer).reward == 1.0 and len(v._gold_cache) == 1


@pytest.mark.parametrize("text", ["\x00" * 100, "x" * 5_000_000, "SELECT " + "(" * 5000 + "1" + ")" * 5000,
                                  "SELECT " + "1+" * 50_000 + "1", bytes(range(256)).decode("latin-1")])
def test_adversarial_inputs_are_fast_zeros(db, text):
    t0 = time.perf_counter()
    s = SQLVerifier()(ex(db, "SELECT 1"), text)
    assert time.perf_counter() - t0 < 2.0
    assert s.reward == 0.0 and "verifier error" not in s.info.get("reason", "")
