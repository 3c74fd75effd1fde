"""Tool calls in model text: the one parser that the tool-call verifiers and the multi-turn tool
environment share, so a call the environment executes is exactly a call the verifier scores.

Format: ``<tool_call>{"name": ..., "arguments": {...}}</tool_call>`` blocks (Hermes / Qwen), else one JSON
value in the last ``<answer>`` block, the last fenced ```` ```json ```` block, or the whole text: a call, a
list of calls, or ``{"tool_calls": [...]}``. OpenAI's ``{"function": {"name", "arguments": "<json>"}}``
wrapping is accepted. JSON is parsed strictly (no repair); a block that fails to parse is a malformed call.
It lives with the environments (below the verifiers) because both layers need it.
"""

from __future__ import annotations

import json
import re
from typing import Any

__all__ = ["parse_tool_calls", "normalise_call"]

_TOOL_CALL = re.compile(r"<tool_call>(.*?)</tool_call>", re.DOTALL)
_JSON_FENCE = re.compile(r"```(?:json)?[ \t]*\n(.*?)```", re.DOTALL)
_BAD = object()


def _loads(s: str) -> Any:
    try:
        return json.loads(s)
    except (ValueError, RecursionError):
        return _BAD


def normalise_call(obj: Any) -> dict | None:
    """``{"name", "arguments"}`` of one parsed call (OpenAI wrapping and string arguments undone), or None."""
    if isinstance(obj, dict) and isinstance(obj.get("function"), dict):
        obj = obj["function"]
    if not isinstance(obj, dict) or not isinstance(obj.get("name"), str):
        return None
    args = obj.get("arguments", obj.get("parameters", {}))
    args = _loads(args) if isinstance(args, str) else args
    return {"name": obj["name"], "arguments": args} if isinstance(args, dict) else None


def _last_answer(text: str) -> str | None:
    end = text.rfind("</answer>")
    start = text.rfind("<answer>", 0, end) if end >= 0 else -1
    return None if start < 0 or end < 0 else text[start + len("<answer>"):end].strip()


def _trace_values(text: str) -> list[Any]:
    blocks = _TOOL_CALL.findall(text)
    if blocks:
        return [_loads(b.strip()) for b in blocks]
    body = _last_answer(text)
    if body is None:
        fences = _JSON_FENCE.findall(text)
        body = fences[-1] if fences else text
    body = body.strip()
    return [_loads(body)] if body[:1] in "[{" and body else []


def parse_tool_calls(text: str, max_calls: int = 32) -> tuple[list[dict], int]:
    """``(calls, number of malformed calls)``; calls beyond ``max_calls`` count as malformed."""
    calls, malformed = [], 0
    for value in _trace_values(text):
        if isinstance(value, dict) and isinstance(value.get("tool_calls"), list):
            value = value["tool_calls"]
        for item in value if isinstance(value, list) else [value]:
            call = None if item is _BAD else normalise_call(item)
            if call is None:
                malformed += 1
            else:
                calls.append(call)
    if len(calls) > max_calls:
        malformed, calls = malformed + len(calls) - max_calls, calls[:max_calls]
    return calls, malformed
