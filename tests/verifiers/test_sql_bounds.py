"""Text2SQL: a hard wall-clock bound inside execution (slow built-ins, long queries, huge results), literal
rows that read no table, and coincidental or hard-coded matches caught on perturbed copies of the database
(test-suite accuracy) while equivalent queries keep full reward (docs/verifiers.md, Text2SQL)."""

import hashlib
import random
import sqlite3
import time

import pytest

from rlvr.core.types import Example
from rlvr.tasks.scoring import _is_error
from rlvr.verifiers.sql import MAX_QUERY_CHARS, SQLError, SQLVerifier, db_variants, run_readonly_query

LIMIT = 0.3
SLACK = 2.0  # the 0.5 s kill grace, the worker's restart on a busy machine, the gold query


@pytest.fixture(scope="module")
def db(tmp_path_factory):
    path = tmp_path_factory.mktemp("sqlb") / "world.sqlite"
    rng = random.Random(0)
    with sqlite3.connect(path) as conn:
        conn.execute("PRAGMA foreign_keys = ON")
        conn.execute("CREATE TABLE country(code TEXT PRIMARY KEY, name TEXT UNIQUE, continent TEXT)")
        conn.execute("CREATE TABLE city(id INTEGER PRIMARY KEY, name TEXT, country_code TEXT REFERENCES country(code),"
                     " population INTEGER, area REAL)")
        countries = [("FR", "France", "Europe"), ("DE", "Germany", "Europe"), ("JP", "Japan", "Asia"),
                     ("BR", "Brazil", "America"), ("EG", "Egypt", "Africa"), ("IT", "Italy", "Europe")]
        conn.executemany("INSERT INTO country VALUES (?, ?, ?)", countries)
        for i in range(40):
            code = countries[i % len(countries)][0]
            conn.execute("INSERT INTO city(name, country_code, population, area) VALUES (?, ?, ?, ?)",
                         (f"City{i:02d}", code, rng.randrange(10_000, 5_000_000), round(rng.uniform(10, 900), 1)))
    conn.close()
    return str(path)


def ex(db, gold):
    return Example("sql", "q", gold, meta={"db_path": db})


def timed(fn):
    t0 = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - t0


def digest(path):
    return hashlib.sha256(open(path, "rb").read()).hexdigest()


A = "printf('%.*c', 999000, 'a')"
SLOW = [
    "SELECT printf('%.*c', 2147483647, 'x')",
    "SELECT format('%.*c', 2147483647, 'x')",
    "SELECT length(printf('%.*c', 2147483647, 'é'))",
    "SELECT name FROM city WHERE printf('%.*c', 2000000000, name) IS NULL",
    "SELECT " + ", ".join(["printf('%.*c', 2147483647, 'x')"] * 200),
    f"SELECT instr({A}, printf('%.*c', 450000, 'a') || 'b')",
    "SELECT length(ltrim(printf('%.*c', 300000, 'a'), printf('%.*c', 300000, 'b') || 'a'))",
    "SELECT length(rtrim(printf('%.*c', 300000, 'a'), printf('%.*c', 300000, 'b') || 'a'))",
    "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT printf('%.*c', 2147483647, 'x') FROM c",
    "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT count(*) FROM c",
    "SELECT count(*) FROM city a, city b, city c, city d, city e, city f",
]


@pytest.mark.parametrize("query", SLOW)
def test_slow_queries_are_killed_at_the_limit(db, query):
    before = digest(db)
    v = SQLVerifier(time_limit_s=LIMIT)
    s, took = timed(lambda: v(ex(db, "SELECT name FROM city WHERE country_code = 'FR'"), query))
    assert s.reward == 0.0 and not _is_error(s), s.info
    assert took < LIMIT + SLACK, (query[:60], took)
    assert digest(db) == before
    # the worker that was killed is replaced: the next query runs normally
    assert run_readonly_query(db, "SELECT count(*) FROM country", time_limit_s=LIMIT) == [(6,)]


def test_the_limit_holds_however_long_the_query():
    """The query length no longer multiplies the time: the longest accepted query, all slow calls, is one
    kill; anything longer is refused unread."""
    call = "printf('%.*c', 2147483647, 'x')"
    n = (MAX_QUERY_CHARS - len("SELECT ")) // (len(call) + 2)
    longest = "SELECT " + ", ".join([call] * n)
    assert len(longest) <= MAX_QUERY_CHARS
    db = _tiny_db()
    v = SQLVerifier(time_limit_s=LIMIT)
    s, took = timed(lambda: v(ex(db, "SELECT 1"), longest))
    assert s.reward == 0.0 and "time limit" in s.info["reason"] and took < LIMIT + SLACK
    s, took = timed(lambda: v(ex(db, "SELECT 1"), longest + ", " + call))
    assert s.reward == 0.0 and "longer than" in s.info["reason"] and took < 0.5


def _tiny_db():
    import tempfile

    path = tempfile.mktemp(suffix=".sqlite")
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE t(a)")
    conn.close()
    return path


def test_results_are_capped_in_rows_and_bytes(db):
    big = ("WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c LIMIT 500) "
           "SELECT printf('%.*c', 100000, 'x') FROM c")
    with pytest.raises(SQLError, match="bytes"):
        run_readonly_query(db, big, max_result_bytes=10_000_000)
    with pytest.raises(SQLError, match="rows"):
        run_readonly_query(db, "SELECT * FROM city a, city b", max_rows=1000)
    with pytest.raises(SQLError, match="too big"):
        run_readonly_query(db, "SELECT zeroblob(2000000)")


def test_in_process_execution_is_still_read_only(db):
    for attack in ("DELETE FROM city", "ATTACH DATABASE 'x.db' AS x", "SELECT 1; DROP TABLE city"):
        with pytest.raises(SQLError):
            run_readonly_query(db, attack, isolate=False)
    assert run_readonly_query(db, "SELECT count(*) FROM city", isolate=False) == [(40,)]


# ---- literal rows -------------------------------------------------------------------------------------

GOLDS = ["SELECT name FROM city WHERE country_code = 'FR'",
         "SELECT name, population FROM city WHERE population > 2000000",
         "SELECT country_code, count(*) FROM city GROUP BY country_code",
         "SELECT max(area) FROM city",
         "SELECT c.name FROM city c JOIN country k ON c.country_code = k.code WHERE k.continent = 'Asia'"]


def _lit(v):
    return "NULL" if v is None else repr(v) if isinstance(v, (int, float)) else "'" + str(v).replace("'", "''") + "'"


def literal_queries(rows, table="city"):
    """The gold rows written into the query, in every syntax that reads no table (or only the schema)."""
    selects = [" , ".join(_lit(v) for v in r) for r in rows]
    yield " UNION ALL ".join(f"SELECT {s}" for s in selects)
    values = ", ".join(f"({s})" for s in selects)
    yield f"VALUES {values}"  # refused: not a SELECT
    yield f"SELECT * FROM (VALUES {values})"
    yield f"WITH t AS (VALUES {values}) SELECT * FROM t"
    yield " UNION ALL ".join(f"SELECT {s} FROM sqlite_master LIMIT 1" for s in selects[:1]) if len(rows) == 1 else \
        f"SELECT * FROM (VALUES {values}) WHERE EXISTS (SELECT 1 FROM sqlite_master)"
    yield f"WITH RECURSIVE t(x) AS (SELECT 1) SELECT * FROM (VALUES {values}), t WHERE x = 1" if rows else ""


@pytest.mark.parametrize("gold", GOLDS)
def test_literal_rows_never_match_a_gold_that_reads_a_table(db, gold):
    rows = run_readonly_query(db, gold)
    assert rows
    v, partial = SQLVerifier(), SQLVerifier(executable_reward=0.1)
    n = 0
    for q in literal_queries(rows):
        if not q:
            continue
        s = v(ex(db, gold), q)
        assert s.reward == 0.0 and not _is_error(s), (q[:80], s.info)
        assert partial(ex(db, gold), q).reward in (0.0, 0.1)  # at most the credit of a wrong query that runs
        n += 1
    assert n >= 4
    assert v(ex(db, gold), gold).reward == 1.0


def test_a_literal_gold_accepts_a_literal_answer(db):
    assert SQLVerifier(float_decimals=6)(ex(db, "SELECT 0.1 + 0.2"), "SELECT 0.3").reward == 1.0


# ---- coincidences and rows hard-coded behind a table ---------------------------------------------------


def behind_a_table(rows):
    """The gold rows written into the query, each selected from a real table so the query reads one."""
    parts = [f"SELECT * FROM (SELECT {', '.join(_lit(v) for v in r)} FROM city LIMIT 1)" for r in rows]
    yield " UNION ALL ".join(parts)
    yield " UNION ALL ".join(p.replace("FROM city LIMIT 1", "FROM country LIMIT 1") for p in parts)
    keys = ", ".join(_lit(r[0]) for r in rows)
    if all(isinstance(r[0], str) and r[0].startswith("City") for r in rows) and len(rows[0]) == 2:
        yield f"SELECT name, population FROM city WHERE name IN ({keys})"  # hard-coded keys, numeric gold


@pytest.mark.parametrize("gold", GOLDS)
def test_rows_hard_coded_behind_a_table_fail_on_the_variants(db, gold):
    rows = run_readonly_query(db, gold)
    v = SQLVerifier()
    for q in behind_a_table(rows):
        assert v(ex(db, gold), q).reward == 0.0, q[:120]
        assert SQLVerifier(db_variants=0)(ex(db, gold), q).reward == 1.0  # single-database execution match
        assert "perturbed copy" in v(ex(db, gold), q).info["reason"]


COINCIDENCES = [  # (gold, a different query that returns the same rows on this database)
    ("SELECT name FROM (SELECT name FROM city ORDER BY area LIMIT 3)", "SELECT name FROM city WHERE area < {t}"),
    ("SELECT count(*) FROM city WHERE population > 1000000", "SELECT {n}"),
    ("SELECT count(*) FROM city WHERE population > 1000000", "SELECT count(*) + {n} - count(*) FROM city"),
    ("SELECT max(population) FROM city", "SELECT population FROM city WHERE id = {i}"),
]


def test_coincidental_matches_fail_on_the_variants(db):
    conn = sqlite3.connect(db)
    t = conn.execute("SELECT max(area) FROM (SELECT area FROM city ORDER BY area LIMIT 3)").fetchone()[0] + 0.01
    n = conn.execute("SELECT count(*) FROM city WHERE population > 1000000").fetchone()[0]
    i = conn.execute("SELECT id FROM city ORDER BY population DESC LIMIT 1").fetchone()[0]
    conn.close()
    for gold, pred in COINCIDENCES:
        pred = pred.format(t=t, n=n, i=i)
        old = SQLVerifier(db_variants=0, require_table=False)  # single-database execution match, as before
        assert old(ex(db, gold), pred).reward == 1.0, pred
        assert SQLVerifier()(ex(db, gold), pred).reward == 0.0, pred


EQUIVALENT = [  # (gold, an equivalent query): full reward on every variant, including FK-dependent rewrites
    ("SELECT name FROM city WHERE country_code = 'FR'",
     "SELECT c.name FROM city c WHERE c.country_code IN (SELECT code FROM country WHERE name = 'France')"),
    ("SELECT c.name FROM city c JOIN country k ON c.country_code = k.code WHERE k.continent = 'Europe'",
     "SELECT name FROM city WHERE EXISTS (SELECT 1 FROM country WHERE code = country_code AND continent = 'Europe')"),
    ("SELECT count(*) FROM city", "SELECT count(*) FROM city JOIN country ON city.country_code = country.code"),
    ("SELECT count(*) FROM city", "SELECT count(id) FROM city"),
    ("SELECT name FROM city WHERE population BETWEEN 100000 AND 900000",
     "SELECT name FROM city WHERE population >= 100000 AND population <= 900000"),
    ("SELECT country_code, max(population) FROM city GROUP BY country_code",
     "SELECT k.code, (SELECT max(population) FROM city WHERE country_code = k.code) FROM country k "
     "WHERE EXISTS (SELECT 1 FROM city WHERE country_code = k.code)"),
    ("SELECT name FROM city ORDER BY population DESC, id LIMIT 5",
     "SELECT name FROM (SELECT name, population, id FROM city) ORDER BY population DESC, id LIMIT 5"),
    ("SELECT DISTINCT continent FROM country", "SELECT continent FROM country GROUP BY continent"),
    ("SELECT avg(area) FROM city", "SELECT sum(area) / count(*) FROM city"),
]


@pytest.mark.parametrize("gold,pred", EQUIVALENT)
def test_equivalent_queries_keep_full_reward(db, gold, pred):
    s = SQLVerifier(float_decimals=6)(ex(db, gold), pred)
    assert s.reward == 1.0 and s.info["variants"] == 2, s.info
    assert SQLVerifier(float_decimals=6, db_variants=4)(ex(db, gold), pred).reward == 1.0


def test_variants_are_perturbed_consistent_and_cached(db):
    paths = db_variants(db, 2)
    assert len(paths) == 2 and db_variants(db, 2) == paths
    counts = [run_readonly_query(p, "SELECT count(*) FROM city")[0][0] for p in paths]
    assert all(0 < c < 40 for c in counts)
    ids = [set(r[0] for r in run_readonly_query(p, "SELECT id FROM city")) for p in paths]
    assert not ids[0] & ids[1]  # complementary: every row is missing from one of the two
    for p in paths:  # declared foreign keys still hold
        assert run_readonly_query(p, "SELECT count(*) FROM city WHERE country_code NOT IN "
                                     "(SELECT code FROM country)") == [(0,)]
    assert db_variants(db, 2, max_bytes=10) == []
    s = SQLVerifier(variant_max_bytes=10)(ex(db, GOLDS[0]), GOLDS[0])
    assert s.reward == 1.0 and s.info["variants"] == 0
