"""HumanEval and MBPP, scored in rlvr's code sandbox by the ``code`` verifier (:mod:`rlvr.verifiers.code`).

HumanEval: the tests are the row's ``test`` (a ``check(candidate)`` function) run against ``entry_point``.
The program scored is built from the completion's code (its last ```` ```python ```` block, else the
last untagged block, else the whole text): when that code defines ``entry_point`` at top level it is
preceded by the part of the row's ``prompt`` before ``def <entry_point>`` (its imports and helper functions,
which the code may redefine); otherwise the code continues the prompt (a function body, as base models
write it) and the program is ``prompt + code``.

MBPP: the tests are ``test_list`` (one assert a test) with ``test_setup_code`` (the original layout) or
``test_imports`` (the sanitized layout) run before them; ``challenge_test_list`` is kept in the meta but not
scored, as in the original evaluation. The program is the completion's code.
"""

from __future__ import annotations

import json
import re
from typing import Any, Sequence

from rlvr.core.types import Example, Score
from rlvr.tasks.benchmarks.reader import Row
from rlvr.tasks.benchmarks.spec import Benchmark, fill, register, require, text_field
from rlvr.tasks.dataset import DataError
from rlvr.verifiers.base import BaseVerifier

__all__ = ["HUMANEVAL_TEMPLATE", "MBPP_TEMPLATE", "HumanEvalVerifier", "humaneval_program"]

HUMANEVAL_TEMPLATE = ("Complete the following Python function. Reply with the complete function (with any imports it "
                      "needs) in a ```python code block.\n\n```python\n{prompt}```")
MBPP_TEMPLATE = ("You are an expert Python programmer, and here is your task: {text} Your code should pass these "
                 "tests:\n\n{tests}\n\nReply with the code in a ```python code block.")


def humaneval_program(prompt: str, code: str, entry_point: str) -> str:
    """The program scored for a HumanEval completion whose code is ``code`` (see the module doc)."""
    name = re.escape(entry_point)
    if re.search(rf"(?m)^(?:async\s+)?def\s+{name}\s*\(", code):
        head = re.search(rf"(?m)^(?:async\s+)?def\s+{name}\s*\(", prompt)
        preamble = prompt[: head.start()] if head else ""
        return f"{preamble}\n{code}" if preamble.strip() else code
    return prompt + code


class HumanEvalVerifier(BaseVerifier):
    """The ``code`` verifier on the program :func:`humaneval_program` builds from the completion."""

    name = "code"

    def __init__(self, inner: Any):
        self.inner = inner

    def score(self, example: Example, text: str) -> Score:
        from rlvr.sandbox.programs import extract_code

        code = extract_code(text or "")
        if not code.strip():
            return Score(0.0, {"correct": 0.0, "pass_fraction": 0.0}, {"reason": "no code in completion"})
        program = humaneval_program(example.meta.get("code_prompt", ""), code, str(example.meta.get("entry_point")))
        return self.inner.score(example, program)

    def validation_cases(self) -> list[tuple[Example, str, float]]:
        prompt = 'from typing import List\n\n\ndef add(xs: List[int]) -> int:\n    """Sum of xs."""\n'
        ex = Example("HumanEval/x", prompt, prompt + "    return sum(xs)\n", "humaneval",
                     meta={"tests": {"code": "def check(candidate):\n    assert candidate([1, 2]) == 3\n",
                                     "entry_point": "add"}, "entry_point": "add", "code_prompt": prompt})
        return [(ex, "```python\ndef add(xs: List[int]) -> int:\n    return sum(xs)\n```", 1.0),
                (ex, "    return sum(xs)\n", 1.0), (ex, "```python\ndef add(xs):\n    return 0\n```", 0.0)]


def _code_params(params: dict[str, Any]):
    from rlvr.verifiers.code import CodeParams

    return CodeParams.model_validate(params)


def _humaneval_verifier(params: dict[str, Any]) -> HumanEvalVerifier:
    from rlvr.verifiers.code import CodeVerifier

    return HumanEvalVerifier(CodeVerifier(_code_params(params)))


def _mbpp_verifier(params: dict[str, Any]):
    from rlvr.verifiers import build_verifier

    return build_verifier("code", params)


def _humaneval(rows: Sequence[Row], p: Any, bench: Benchmark) -> list[Example]:
    out = []
    for where, default, row in rows:
        require(bench, where, row)
        prompt = text_field(where, row, ("prompt",))
        entry = text_field(where, row, ("entry_point",)).strip()
        if not entry.isidentifier():
            raise DataError(f"{where}: 'entry_point' must be a function name, got {entry!r}")
        test = text_field(where, row, ("test",))
        solution = row.get("canonical_solution")
        meta = {k: v for k, v in row.items() if k != "prompt"}
        meta.update(tests={"code": test, "entry_point": entry}, entry_point=entry, code_prompt=prompt)
        out.append(Example(str(row.get("task_id") or default), fill(p.template or bench.template, {"prompt": prompt}),
                           prompt + solution if isinstance(solution, str) else "", bench.name, None, meta))
    return out


def _str_list(where: str, value: Any, field: str) -> list[str]:
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError:
            value = [value]
    if value is None:
        return []
    if not isinstance(value, (list, tuple)) or not all(isinstance(t, str) for t in value):
        raise DataError(f"{where}: {field!r} must be a list of strings")
    return list(value)


def _mbpp(rows: Sequence[Row], p: Any, bench: Benchmark) -> list[Example]:
    out = []
    for where, default, row in rows:
        require(bench, where, row)
        text = text_field(where, row, ("text", "prompt")).strip()
        tests = _str_list(where, row.get("test_list"), "test_list")
        if not tests:
            raise DataError(f"{where}: 'test_list' is empty: nothing would be tested")
        setup = row.get("test_setup_code") or ""
        imports = _str_list(where, row.get("test_imports"), "test_imports")
        key = "text" if "text" in row else "prompt"
        meta = {k: v for k, v in row.items() if k != key}
        meta["tests"] = {"test_list": tests, "test_setup_code": setup if isinstance(setup, str) else "",
                         "test_imports": imports}
        code = row.get("code")
        out.append(Example(str(row.get("task_id") if row.get("task_id") is not None else default),
                           fill(p.template or bench.template, {"text": text, "tests": "\n".join(tests)}),
                           code if isinstance(code, str) else "", bench.name, None, meta))
    return out


register(Benchmark(
    "humaneval", "HumanEval", "openai_humaneval", (("task_id",), ("prompt",), ("test",), ("entry_point",)),
    ("canonical_solution",), HUMANEVAL_TEMPLATE, ("prompt",), _humaneval, _humaneval_verifier, "code"))
register(Benchmark(
    "mbpp", "MBPP", "mbpp / google-research-datasets/mbpp (full or sanitized)",
    (("task_id",), ("text", "prompt"), ("test_list",)),
    ("code", "test_setup_code", "challenge_test_list", "test_imports"), MBPP_TEMPLATE, ("text", "tests"), _mbpp,
    _mbpp_verifier, "code"))
