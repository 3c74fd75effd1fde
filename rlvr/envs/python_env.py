"""A Python interpreter as a tool for math problems (``python_tool``).

**A turn** is either a tool call or the final answer:

- a *tool call* is code inside ``<python>`` ... ``</python>`` (a ```python fence inside the tags is
  allowed). The turn stops at ``</python>`` (``stop``), the code runs in the sandbox
  (:mod:`rlvr.sandbox`: no network, no host files, ``timeout_s`` wall clock, ``memory_mb`` memory, the
  standard library only unless ``python_site``) and the observation is what it printed (the value of a
  last bare expression too, as in a REPL), cut to ``max_output_chars``, then the error's traceback (its
  frames in the tool's code only) when it raised, or why it was stopped (time-out, memory, output flood).
  With ``persistent`` (default) a call sees the variables, functions and imports of the episode's earlier
  calls that succeeded: they are re-run, silently, before it (so their cost is paid again, within 15 s
  on top of ``timeout_s``, and a random value may differ). A call opened and never closed, one with empty code, or one past ``max_calls`` is
  answered by an observation saying so; it never crashes the episode;
- a *final answer* is the last ``\\boxed{...}`` of a turn without a call, else its last line starting
  ``Answer:``. It ends the episode with reward 1 when it equals ``example.answer`` (:func:`answers_match`:
  both read as exact fractions where they are numbers, after stripping ``$``, ``\\left``/``\\right``,
  thousands separators, ``\\frac{a}{b}``, ``\\dfrac``, a trailing period; otherwise compared as strings
  without whitespace, case-insensitive), else 0. Every earlier turn's reward is 0;
- a turn with neither gets an observation reminding the formats (the episode goes on to ``max_turns``).

This check is deliberately plain: symbolic equivalence (``\\sqrt{2}/2`` against ``1/\\sqrt{2}``) is the math
verifier's, which scores the policy's own text with ``rollout.multiturn.reward=verifier`` (the default) or
``sum``; the environment's reward is what ``reward=env`` trains on. ``info`` counts ``calls``, ``errors``
(calls that raised or were stopped) and ``malformed``, and gives ``answer``, ``correct`` and ``reason`` at
the end. A sandbox that cannot start ends the episode with reward 0 and ``info["reason"]``.
"""

from __future__ import annotations

import json
import re
from fractions import Fraction
from typing import TYPE_CHECKING

from pydantic import Field

from rlvr.core.types import Example
from rlvr.envs.base import ENVIRONMENTS, Step
from rlvr.registry import Params

if TYPE_CHECKING:
    from rlvr.sandbox import Sandbox

__all__ = ["PythonToolEnv", "PythonToolParams", "final_answer", "answers_match"]

_CALL = re.compile(r"<python>(.*?)</python>", re.S)
_INNER_FENCE = re.compile(r"^\s*```[ \t]*(?:python|py|python3)?[ \t]*\n(.*?)\n?```\s*$", re.S)
_REPLAY_S = 15.0  # re-running earlier calls (persistent) gets at most this much time on top of timeout_s

# Runs inside the sandbox: the episode's earlier cells silently, then the new one, REPL-style.
_RUNNER = r'''import ast, io, json, linecache, os, sys, traceback
with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "cells.json")) as f:
    cells = json.load(f)
g = {"__name__": "__main__", "__builtins__": __builtins__}

def run(src, name, show):
    linecache.cache[name] = (len(src), None, src.splitlines(True), name)
    tree = ast.parse(src, name)
    last = tree.body.pop() if show and tree.body and isinstance(tree.body[-1], ast.Expr) else None
    exec(compile(tree, name, "exec"), g)
    if last is not None:
        value = eval(compile(ast.Expression(last.value), name, "eval"), g)
        if value is not None:
            print(repr(value))

out = sys.stdout
for name, src in cells[:-1]:
    sys.stdout = sys.stderr = io.StringIO()
    try:
        run(src, name, False)
    except BaseException:
        pass
sys.stdout, sys.stderr = out, sys.__stderr__
try:
    run(cells[-1][1], cells[-1][0], True)
except SystemExit as e:
    if e.code not in (None, 0):
        print("SystemExit: %s" % (e.code,), file=sys.stderr)
        sys.exit(1)
except BaseException as e:
    frames = [f for f in traceback.extract_tb(e.__traceback__) if f.filename.startswith("<call")]
    sys.stdout.flush()
    print("Traceback (most recent call last):\n" + "".join(traceback.format_list(frames))
          + "".join(traceback.format_exception_only(type(e), e)), end="", file=sys.stderr)
    sys.exit(1)
'''


class PythonToolParams(Params):
    timeout_s: float = Field(5.0, gt=0, description="wall-clock seconds per call (re-running earlier calls, "
                                                    "with persistent, gets up to 15 s more)")
    memory_mb: int = Field(256, gt=0, description="memory of one call's sandbox run")
    max_output_chars: int = Field(2000, gt=0, description="an observation's output is cut to this")
    max_calls: int = Field(8, gt=0, description="tool calls per episode; later ones are refused")
    persistent: bool = Field(True, description="a call sees the state of the episode's earlier successful "
                                               "calls (they are re-run first, output discarded)")
    python_site: bool = Field(False, description="let the code import the sandbox interpreter's "
                                                 "site-packages (default: the standard library only)")


def final_answer(text: str) -> str | None:
    """The last ``\\boxed{...}`` (braces balanced), else the last ``Answer: ...`` line, else None."""
    found = None
    for m in re.finditer(r"\\boxed\s*\{", text):
        depth, i = 1, m.end()
        while i < len(text) and depth:
            depth += {"{": 1, "}": -1}.get(text[i], 0)
            i += 1
        if depth == 0:
            found = text[m.end(): i - 1]
    if found is not None:
        return found.strip()
    lines = re.findall(r"(?im)^\s*\**\s*(?:final\s+)?answer\s*\**\s*[:=]\s*\**\s*(.+?)\s*\**\s*$", text)
    return lines[-1] if lines else None


def _clean(s: str) -> str:
    s = s.strip().strip("$").strip()
    s = re.sub(r"\\(?:left|right|displaystyle|[,;!:]|\s)", "", s)
    s = re.sub(r"\\[dt]frac", r"\\frac", s)
    s = re.sub(r"\\frac\s*\{([^{}]*)\}\s*\{([^{}]*)\}", r"(\1)/(\2)", s)
    s = re.sub(r"\\text\{([^{}]*)\}", r"\1", s)
    s = re.sub(r"(?<=\d),(?=\d{3}(?!\d))", "", s)
    return s.rstrip(".").strip()


def _number(s: str) -> Fraction | None:
    s = re.sub(r"\s+", "", s)
    m = re.fullmatch(r"\(?([-+]?[\d.]+)\)?(?:/\(?([-+]?[\d.]+)\)?)?", s)
    if not m:
        return None
    try:
        value = Fraction(m.group(1))
        return value / Fraction(m.group(2)) if m.group(2) else value
    except (ValueError, ZeroDivisionError):
        return None


def answers_match(got: str, gold: str) -> bool:
    """Exact fractions where both are numbers, else whitespace-free case-insensitive text equality."""
    a, b = _clean(got), _clean(gold)
    na, nb = _number(a), _number(b)
    if na is not None and nb is not None:
        return na == nb
    return re.sub(r"\s+", "", a).lower() == re.sub(r"\s+", "", b).lower() != ""


def _cut(text: str, limit: int, tail: bool = False) -> str:
    """``text`` cut to ``limit`` characters: its head (output), or its tail (a traceback ends with the error)."""
    if len(text) <= limit:
        return text
    if tail:
        return f"[... {len(text) - limit} earlier characters]\n" + text[-limit:]
    return text[:limit] + f"\n[... {len(text) - limit} more characters]"


class PythonToolEnv:
    """One episode of tool calls and a final answer (see the module doc)."""

    stop = ("</python>",)

    def __init__(self, p: PythonToolParams, sandbox: Sandbox | None = None):
        self.p, self.sandbox = p, sandbox
        self.gold, self.cells, self.cell_s = "", [], []
        self.counts = {"calls": 0, "errors": 0, "malformed": 0}

    def reset(self, example: Example, seed: int) -> str:
        self.gold, self.cells, self.cell_s = str(example.answer), [], []
        self.counts = {"calls": 0, "errors": 0, "malformed": 0}
        return ""  # the prompt states the problem and the formats

    def step(self, action: str) -> Step:
        calls = _CALL.findall(action)
        if calls:
            return self._call(calls[0])  # the turn stops at its first </python>
        if "<python>" in action or "</python>" in action:
            return self._malformed("a tool call must be code between <python> and </python>")
        answer = final_answer(action)
        if answer is None:
            return Step("No tool call and no final answer. Call the tool with <python>code</python>, or "
                        "answer with \\boxed{...}.", 0.0, False, dict(self.counts))
        ok = answers_match(answer, self.gold)
        return Step("", float(ok), True, {**self.counts, "answer": answer, "correct": ok,
                                         "reason": "correct" if ok else "wrong answer"})

    def _malformed(self, why: str) -> Step:
        self.counts["malformed"] += 1
        return Step(f"Malformed tool call: {why}.", 0.0, False, {**self.counts, "reason": why, "tool_error": True})

    def _call(self, code: str) -> Step:
        from rlvr.sandbox import Limits, MiB, Program, default_sandbox

        fenced = _INNER_FENCE.match(code)
        code = (fenced.group(1) if fenced else code).strip("\n")
        if not code.strip():
            return self._malformed("the code is empty")
        if self.counts["calls"] >= self.p.max_calls:
            return self._malformed(f"the episode's {self.p.max_calls} tool calls are spent; give the final answer")
        self.counts["calls"] += 1
        cells = (self.cells if self.p.persistent else []) + [(f"<call {self.counts['calls']}>", code)]
        wall = self.p.timeout_s + (min(sum(self.cell_s), _REPLAY_S) if self.p.persistent else 0.0)
        out_cap = max(64 * 1024, 4 * self.p.max_output_chars)
        limits = Limits(wall_s=wall, cpu_s=int(wall) + 1, memory_bytes=self.p.memory_mb * MiB,
                        address_space_bytes=max(1024, 2 * self.p.memory_mb) * MiB, output_bytes=out_cap)
        res = (self.sandbox or default_sandbox()).run(
            Program(_RUNNER, files={"cells.json": json.dumps(cells)}, python_site=self.p.python_site), limits)
        if res.killed_reason == "setup_failed":
            why = "sandbox failed to start: " + res.stderr.decode("utf-8", "replace")[-300:]
            return Step("", 0.0, True, {**self.counts, "reason": why})
        out = res.stdout.decode("utf-8", "replace")
        err = res.stderr.decode("utf-8", "replace").strip()
        stopped = {"wall_time": f"stopped: the code ran longer than {self.p.timeout_s:g} s",
                   "cpu_time": "stopped: the code used too much CPU time",
                   "memory": f"stopped: the code used more than {self.p.memory_mb} MB of memory",
                   "output_limit": "stopped: the code printed too much output"}.get(res.killed_reason or "")
        failed = stopped is not None or not res.ok
        if failed:
            self.counts["errors"] += 1
        else:
            self.cells.append(cells[-1])
            self.cell_s.append(res.wall_s)
        text = _cut(out, self.p.max_output_chars).rstrip("\n")
        if err and (failed or not text):
            text += ("\n" if text else "") + _cut(err, max(self.p.max_output_chars // 2, 200), tail=True)
        if stopped:
            text = stopped + (":\n" + text if text else "")
        return Step(text or "(no output)", 0.0, False,
                    {**self.counts, "wall_s": round(res.wall_s, 3), "killed": res.killed_reason})


@ENVIRONMENTS.register("python_tool", PythonToolParams)
def _python_tool(p: PythonToolParams) -> PythonToolEnv:
    """A sandboxed Python interpreter as a tool for math; a boxed final answer ends the episode."""
    return PythonToolEnv(p)
