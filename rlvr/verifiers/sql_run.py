"""One read-only SQLite query, bounded in time and size, in a worker process (``sql_exec``'s execution; the
rules are in :mod:`rlvr.verifiers.sql`'s docstring)."""

from __future__ import annotations

import atexit
import marshal
import os
import re
import select
import sqlite3
import struct
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

__all__ = ["SQLError", "run_readonly_query", "MAX_QUERY_CHARS", "MAX_RESULT_BYTES", "KILL_GRACE_S"]

_ALLOWED_ACTIONS = {sqlite3.SQLITE_SELECT, sqlite3.SQLITE_READ, sqlite3.SQLITE_FUNCTION,
                    getattr(sqlite3, "SQLITE_RECURSIVE", 33)}
_LEADING_COMMENTS = re.compile(r"^(?:\s+|--[^\n]*(?:\n|$)|/\*.*?\*/)*", re.DOTALL)
MAX_QUERY_CHARS = 8_000
MAX_RESULT_BYTES = 16_000_000
KILL_GRACE_S = 0.5


class SQLError(ValueError):
    """A query that may not or could not run."""


def _authorizer(action: int, *_: Any) -> int:
    return sqlite3.SQLITE_OK if action in _ALLOWED_ACTIONS else sqlite3.SQLITE_DENY


def _check_query(sql: str, max_chars: int) -> str:
    if not isinstance(sql, str):
        raise SQLError("empty query")
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
    conn.setlimit(sqlite3.SQLITE_LIMIT_SQL_LENGTH, 2 * MAX_QUERY_CHARS + 1000)
    conn.setlimit(sqlite3.SQLITE_LIMIT_LIKE_PATTERN_LENGTH, 1000)  # bounds pathological LIKE / GLOB patterns
    return conn


def _cell_bytes(v: Any) -> int:
    return len(v) + 8 if isinstance(v, (str, bytes)) else 8


def _execute(db_path: str, sql: str, time_limit_s: float, max_rows: int, max_chars: int, max_value_bytes: int,
             max_result_bytes: int = MAX_RESULT_BYTES) -> tuple[list[tuple], list[str]]:
    """(rows, tables read) of one read-only SELECT in this process; raises :class:`SQLError`."""
    sql = _check_query(sql, max_chars)
    conn = _connect(db_path, max_value_bytes)
    read: set[str] = set()

    def authorizer(action: int, arg1: Any, _arg2: Any, dbname: Any, _source: Any) -> int:
        if action == sqlite3.SQLITE_READ and isinstance(arg1, str) and dbname in (None, "main") \
                and not arg1.lower().startswith("sqlite_"):
            read.add(arg1)
        return _authorizer(action)

    conn.set_authorizer(authorizer)
    deadline = time.monotonic() + time_limit_s
    conn.set_progress_handler(lambda: int(time.monotonic() > deadline), 1000)
    timer = threading.Timer(time_limit_s, conn.interrupt)  # also stops loops inside SQLite between VM steps
    timer.daemon = True
    timer.start()
    try:
        cur = conn.execute(sql)
        rows: list[tuple] = []
        size = 0
        while batch := cur.fetchmany(1000):
            rows.extend(batch)
            if len(rows) > max_rows:
                raise SQLError(f"more than {max_rows} rows")
            size += sum(_cell_bytes(v) for row in batch for v in row)
            if size > max_result_bytes:
                raise SQLError(f"result larger than {max_result_bytes} bytes")
        return rows, sorted(read)
    except sqlite3.Error as e:
        if time.monotonic() > deadline:
            raise SQLError(f"time limit of {time_limit_s}s exceeded") from None
        raise SQLError(f"{type(e).__name__}: {e}") from None
    finally:
        timer.cancel()
        conn.close()


# ---- the worker process: a hard wall-clock bound ------------------------------------------------------

_HEADER = struct.Struct(">I")


def _send(fd: int, obj: Any) -> None:
    data = marshal.dumps(obj)
    view = memoryview(_HEADER.pack(len(data)) + data)
    while view:
        view = view[os.write(fd, view):]


def _read_exact(fd: int, n: int, deadline: float | None) -> bytes:
    chunks, got = [], 0
    while got < n:
        if deadline is not None:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                raise TimeoutError
        chunk = os.read(fd, min(n - got, 1 << 20))
        if not chunk:
            raise EOFError
        chunks.append(chunk)
        got += len(chunk)
    return b"".join(chunks)


def _recv(fd: int, deadline: float | None) -> Any:
    (n,) = _HEADER.unpack(_read_exact(fd, _HEADER.size, deadline))
    return marshal.loads(_read_exact(fd, n, deadline))


def _worker_main() -> None:
    """The worker loop: requests on stdin, replies on the original stdout (prints go to stderr)."""
    out = os.dup(1)
    os.dup2(2, 1)
    _send(out, ("ready",))
    while True:
        try:
            req = _recv(0, None)
        except (EOFError, OSError, ValueError):
            return
        try:
            rows, read = _execute(*req)
            _send(out, ("ok", rows, read))
        except SQLError as e:
            _send(out, ("err", str(e)))
        except Exception as e:  # noqa: BLE001 - reported to the parent, which turns it into a refusal
            _send(out, ("err", f"{type(e).__name__}: {e}"))


class _Worker:
    """One worker process, restarted after it is killed (a query past its time) or dies."""

    _all: list["_Worker"] = []
    _lock = threading.Lock()

    def __init__(self) -> None:
        self.proc: subprocess.Popen | None = None
        self.ready = False
        self.owner = os.getpid()
        with self._lock:
            self._all.append(self)

    def _start(self) -> subprocess.Popen:
        root = str(Path(__file__).resolve().parents[2])
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([root, *filter(None, sys.path)])}
        return subprocess.Popen([sys.executable, "-c", "from rlvr.verifiers.sql_run import _worker_main; _worker_main()"],
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env,
                                close_fds=True)

    def kill(self) -> None:
        proc, self.proc = self.proc, None
        if proc is not None and proc.poll() is None:
            proc.kill()
        if proc is not None:
            for f in (proc.stdin, proc.stdout):
                try:
                    f.close()
                except OSError:
                    pass
            proc.wait()

    def run(self, request: tuple, wall_s: float) -> tuple:
        failure = "the query worker died"
        for _ in range(2):
            try:
                if self.proc is None or self.proc.poll() is not None:
                    self.kill()
                    self.proc, self.ready = self._start(), False
                if not self.ready:  # its start (imports) does not count against the query
                    if _recv(self.proc.stdout.fileno(), time.monotonic() + 30.0) != ("ready",):
                        raise EOFError
                    self.ready = True
            except (TimeoutError, EOFError, OSError, ValueError) as e:
                self.kill()
                failure = f"could not start the SQL worker process ({type(e).__name__}: {e})"
                continue
            deadline = time.monotonic() + wall_s
            try:
                _send(self.proc.stdin.fileno(), request)
                return _recv(self.proc.stdout.fileno(), deadline)
            except TimeoutError:
                self.kill()
                self.proc, self.ready = self._start(), False  # the next query's worker starts now
                return ("timeout",)
            except (EOFError, OSError, ValueError):  # the worker died (killed from outside, out of memory)
                self.kill()
                failure = "the query worker died"
        return ("err", failure)


_LOCAL = threading.local()


@atexit.register
def _kill_workers() -> None:
    for w in list(_Worker._all):
        if w.owner == os.getpid():
            w.kill()


def run_readonly_query(db_path: str, sql: str, time_limit_s: float = 2.0, max_rows: int = 100_000,
                       max_chars: int = MAX_QUERY_CHARS, max_value_bytes: int = 1_000_000,
                       max_result_bytes: int = MAX_RESULT_BYTES, isolate: bool = True,
                       tables: list | None = None) -> list[tuple]:
    """Rows of one read-only SELECT; raises :class:`SQLError` for anything refused, failing or too slow.

    ``isolate`` (default) runs it in this thread's worker process, killed ``KILL_GRACE_S`` after
    ``time_limit_s``; ``tables``, when given, receives the names of the database's tables the query read."""
    _check_query(sql, max_chars)
    if not Path(db_path).resolve().is_file():
        raise SQLError(f"database {db_path!r} does not exist")
    args = (str(db_path), sql, time_limit_s, max_rows, max_chars, max_value_bytes, max_result_bytes)
    if isolate:
        worker = getattr(_LOCAL, "worker", None)
        if worker is None or worker.owner != os.getpid():  # a forked child never shares its parent's pipes
            worker = _LOCAL.worker = _Worker()
        reply = worker.run(args, time_limit_s + KILL_GRACE_S)
        if reply[0] == "timeout":
            raise SQLError(f"time limit of {time_limit_s}s exceeded (the query was killed)")
        if reply[0] == "err":
            raise SQLError(reply[1])
        rows, read = [tuple(r) for r in reply[1]], reply[2]
    else:
        rows, read = _execute(*args)
    if tables is not None:
        tables.extend(read)
    return rows


# ---- database variants (test-suite accuracy) -----------------------------------------------------------

_VARIANTS: dict[tuple, list[str]] = {}
_VARIANTS_LOCK = threading.Lock()
_VARIANT_DIR: list[str] = []
