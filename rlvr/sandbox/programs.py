"""Host-side helpers shared by the code verifier and the ``code_feedback`` environment: the program in a
completion (:func:`extract_code`), the judge's sources to ship (:func:`judge_files`) and its authenticated
per-test report (:func:`read_report`), and how a stdin/stdout case's output is compared
(:func:`same_output`).

They live in the sandbox package (a layer below the verifiers, beside the environments) so that both read
programs and reports the same way; the judge that writes the report is ``judge.py`` next to this file.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import re
from functools import lru_cache
from pathlib import Path

__all__ = ["UntrustedReport", "extract_code", "judge_files", "read_report", "same_output"]

_HERE = Path(__file__).resolve().parent
_HELPERS = {"rlvr_sandbox_rpc.py": "rpc.py", "rlvr_sandbox_forms.py": "forms.py",
            "rlvr_sandbox_pytest.py": "pytest_shim.py"}  # shipped next to the judge in /box, under these names
_FENCE = re.compile(r"```[ \t]*([A-Za-z0-9_+-]*)[^\n]*\n(.*?)```", re.S)


def extract_code(text: str) -> str:
    """The last ```python block, else the last untagged ``` block, else the whole text."""
    blocks = _FENCE.findall(text)
    for want in (("python", "py", "python3"), ("",)):
        found = [body for lang, body in blocks if lang.lower() in want]
        if found:
            return found[-1]
    return text


@lru_cache(maxsize=1)
def judge_files() -> tuple[str, dict[str, str]]:
    """The judge (``judge.py``, the sandbox's main program for a test run) and its helpers' sources, under
    the names it imports them by."""
    return (_HERE / "judge.py").read_text(), {box: (_HERE / src).read_text() for box, src in _HELPERS.items()}


class UntrustedReport(Exception):
    """The judge's report is missing, incomplete or tampered with."""


def read_report(channel: bytes, key: bytes, nonce: str, n: int) -> list[dict]:
    """The judge's per-test records, after checking every MAC, the sequence, the count and the nonce
    (:class:`UntrustedReport`, or ValueError for a line that is not JSON, when any check fails)."""
    lines = channel.split(b"\n")
    if lines[-1] != b"":
        raise UntrustedReport("report cut off")
    recs = []
    for seq, raw in enumerate(lines[:-1]):
        body, _, mac = raw.rpartition(b"\t")
        if not hmac.compare_digest(hmac.new(key, body, hashlib.sha256).hexdigest().encode(), mac):
            raise UntrustedReport("report line with a bad MAC")
        rec = json.loads(body)
        if rec.get("seq") != seq:
            raise UntrustedReport("report out of sequence")
        recs.append(rec)
    if not recs or recs[-1].get("k") != "done" or recs[-1].get("nonce") != nonce or recs[-1].get("n") != n:
        raise UntrustedReport("the test run did not finish (no final record)")
    if [r.get("i") for r in recs[:-1]] != list(range(n)):
        raise UntrustedReport("report does not cover every test exactly once")
    return recs[:-1]


def same_output(got: str, want: str, how: str) -> bool:
    """A stdio case's output against the expected one: ``exact``, ``tokens`` (whitespace-split) or ``lines``
    (line by line, trailing whitespace, trailing blank lines and CRLF ignored)."""
    if how == "exact":
        return got == want
    if how == "tokens":
        return got.split() == want.split()
    norm = lambda s: [ln.rstrip() for ln in s.replace("\r\n", "\n").rstrip().split("\n")]  # noqa: E731
    return norm(got) == norm(want)
