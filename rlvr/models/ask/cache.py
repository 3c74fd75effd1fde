"""The judge's reply cache and its spending budget.

The cache maps sha256(backend identity, rendered request) to the reply text: the backend identity holds the
endpoint or model directory, the model name, the API, the system prompt and the sampling settings, and the
rendered request holds the template and every field put into it, so a change to any of them asks again.
Replies, not scores, are kept, so a changed parser re-reads them without a request. Only replies that arrived
are kept (a failure is asked again next time). With ``cache_path`` the cache is also a JSONL file, appended as
replies arrive and read back when a run starts or resumes: a crash loses nothing paid for, and a torn last line
is skipped.

The budget counts requests (each retry is one) and tokens (the server's ``usage``, else about four characters a
token; the in-process model's exact counts) in this process. Once either is spent, the judge sends nothing
more: what it has not scored is an error of the judge, counted as such.
"""

from __future__ import annotations

import hashlib
import json
import threading
from pathlib import Path

__all__ = ["ReplyCache", "Budget", "cache_key"]


def cache_key(backend_key: str, request: str) -> str:
    return hashlib.sha256(f"{backend_key}\x00{request}".encode()).hexdigest()


class ReplyCache:
    def __init__(self, path: str | None = None, enabled: bool = True):
        self.enabled, self.path = enabled, Path(path) if path else None
        self._mem: dict[str, str] = {}
        self._lock = threading.Lock()
        if self.enabled and self.path is not None and self.path.exists():
            with self.path.open(encoding="utf-8", errors="replace") as f:
                for line in f:
                    try:
                        row = json.loads(line)
                        self._mem[str(row["k"])] = str(row["r"])
                    except (ValueError, KeyError, TypeError):
                        continue  # a line torn by a crash mid-write

    def __getstate__(self) -> dict:
        return {k: v for k, v in self.__dict__.items() if k != "_lock"}

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()

    def get(self, key: str) -> str | None:
        if not self.enabled:
            return None
        with self._lock:
            return self._mem.get(key)

    def put(self, key: str, reply: str) -> None:
        if not self.enabled:
            return
        with self._lock:
            if key in self._mem:
                return
            self._mem[key] = reply
            if self.path is not None:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                with self.path.open("a", encoding="utf-8") as f:
                    f.write(json.dumps({"k": key, "r": reply}) + "\n")

    def __len__(self) -> int:
        return len(self._mem)


class Budget:
    def __init__(self, max_requests: int | None = None, max_tokens: int | None = None):
        self.max_requests, self.max_tokens = max_requests, max_tokens
        self.requests = 0
        self.tokens = 0
        self._lock = threading.Lock()

    def __getstate__(self) -> dict:
        return {k: v for k, v in self.__dict__.items() if k != "_lock"}

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()

    def take_request(self) -> str | None:
        """Count one request; the reason it may not be sent, when the budget is spent."""
        with self._lock:
            if self.max_requests is not None and self.requests >= self.max_requests:
                return f"request budget spent (max_requests={self.max_requests})"
            if self.max_tokens is not None and self.tokens >= self.max_tokens:
                return f"token budget spent (max_tokens_total={self.max_tokens}, {self.tokens} used)"
            self.requests += 1
            return None

    def spend_tokens(self, n: int) -> None:
        with self._lock:
            self.tokens += n
