"""A key-value store as a one-tool environment (``lookup``), the multi-turn CPU demo's environment.

An episode asks for the value of one key (the ``lookup`` task's prompts read ``"key QX?\\n"``). Each policy
turn is one line (``stop = ("\\n",)``) and is one of:

- a **call**, ``get KEY``: for the episode's key the observation is ``KEY=VALUE`` (e.g. ``QX=482``); any other
  key is answered ``error: unknown key KEY``. The episode goes on;
- an **answer**, a line of digits only: it ends the episode with reward 1 when it equals the episode's value,
  else 0;
- anything else (an empty turn, text, a call cut short): the observation ``error: unknown command`` and the
  episode goes on (the driver ends it at ``rollout.multiturn.max_turns``).

Every turn but the answer has reward 0. **The value**: ``example.meta["value"]`` when the example carries one
(the ``lookup`` task does, so its verifier can score the policy's text, see :mod:`rlvr.tasks.lookup`), else,
or always with ``from_seed``, ``value_digits`` digits drawn from the episode's seed, so it differs from
episode to episode and only the tool can tell it. Nothing in the prompt determines the value either way, so
a policy can only be right by calling the tool and copying what it says. **The key**: ``meta["key"]``, else
read from a prompt ``key KEY?``, else ``K``.

``info`` counts ``calls``, ``bad_calls`` (unknown keys) and ``malformed`` turns and gives ``value``, and at
the end ``answer`` and ``correct``. :func:`parse_turn` is the one reading of a turn: the task's verifier uses
it too, so the verifier's verdict on an episode's text is the environment's reward.
"""

from __future__ import annotations

import random
import re

from pydantic import Field

from rlvr.core.types import Example
from rlvr.envs.base import ENVIRONMENTS, Step
from rlvr.registry import Params

__all__ = ["LookupEnv", "LookupParams", "parse_turn", "prompt_key"]

_CALL = re.compile(r"get ([A-Za-z0-9_]+)")
_ANSWER = re.compile(r"[0-9]+")
_PROMPT_KEY = re.compile(r"key ([A-Za-z0-9_]+)\?")


def parse_turn(text: str) -> tuple[str, str]:
    """``("call", key)``, ``("answer", digits)`` or ``("other", text)`` for one turn (surrounding whitespace
    ignored)."""
    t = text.strip()
    if m := _CALL.fullmatch(t):
        return "call", m.group(1)
    if _ANSWER.fullmatch(t):
        return "answer", t
    return "other", t


def prompt_key(prompt) -> str | None:
    """The key a prompt ``key KEY?`` asks for (None for another prompt)."""
    m = _PROMPT_KEY.search(prompt if isinstance(prompt, str) else " ".join(m["content"] for m in prompt))
    return m.group(1) if m else None


class LookupParams(Params):
    value_digits: int = Field(3, gt=0, le=18, description="digits of a value drawn from the episode seed")
    from_seed: bool = Field(False, description="always draw the value from the episode seed (default: the "
                                               "example's meta['value'] when it has one)")


class LookupEnv:
    """One episode: one key, one value, a ``get KEY`` tool, an answer (see the module doc)."""

    stop = ("\n",)

    def __init__(self, p: LookupParams):
        self.p, self.key, self.value = p, "", ""
        self.counts = {"calls": 0, "bad_calls": 0, "malformed": 0}

    def reset(self, example: Example, seed: int) -> str:
        meta = example.meta or {}
        self.key = str(meta.get("key") or prompt_key(example.prompt) or "K")
        if "value" in meta and not self.p.from_seed:
            self.value = str(meta["value"])
        else:
            rng = random.Random(seed)
            self.value = "".join(rng.choice("0123456789") for _ in range(self.p.value_digits))
        self.counts = {"calls": 0, "bad_calls": 0, "malformed": 0}
        return ""  # the prompt names the key

    def step(self, action: str) -> Step:
        if not self.key:
            raise RuntimeError("step() before reset()")
        kind, arg = parse_turn(action)
        if kind == "answer":
            ok = arg == self.value
            return Step("", float(ok), True, {**self.counts, "value": self.value, "answer": arg, "correct": ok})
        if kind == "call":
            self.counts["calls"] += 1
            if arg == self.key:
                return Step(f"{self.key}={self.value}", 0.0, False, {**self.counts, "value": self.value})
            self.counts["bad_calls"] += 1
            return Step(f"error: unknown key {arg}", 0.0, False, {**self.counts, "value": self.value,
                                                                   "tool_error": True})
        self.counts["malformed"] += 1
        return Step("error: unknown command", 0.0, False, {**self.counts, "value": self.value, "tool_error": True})


@ENVIRONMENTS.register("lookup", LookupParams)
def _lookup(p: LookupParams) -> LookupEnv:
    """A key-value store behind one tool, ``get KEY``; a line of digits is the answer and ends the episode."""
    return LookupEnv(p)
