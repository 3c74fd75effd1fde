"""A difficulty-ordered curriculum over a task mixture (sampler ``difficulty_order``), as in the multi-domain
RLVR study (Li et al. 2025, "Can One Domain Help Others? A Data-Centric Study on Multi-Domain Reasoning
via Reinforcement Learning", arXiv:2507.17512; its verl run concatenates the domain datasets, sizes
normalised, and orders them by difficulty with ``data.shuffle=False``). PARTIAL: the setup is from the
study's code; how it breaks difficulty ties is not stated.

Each example's difficulty is ``meta[key]`` (a number, or a string ordered as one where it parses), or with
``key: prompt_chars`` the prompt's length in characters (a proxy for tasks that ship no difficulty, such as
the demo's arithmetic). With ``balance`` every domain of a mixture keeps as many examples as the smallest
one (a seeded subsample), so no domain dominates by size. The order is ascending difficulty (``descending``
reverses it); examples of equal difficulty interleave the domains (the i-th of each domain, then the
(i+1)-th), so a mixture does not train one domain at a time within a difficulty. Epochs repeat the same order.
State: the position in the order (checkpointed).
"""

from __future__ import annotations

import random
from typing import Any, Sequence

from pydantic import Field

from rlvr.core.types import Example
from rlvr.registry import Params
from rlvr.sampling.base import SAMPLERS, Group, SamplerContext

__all__ = ["DifficultyOrderParams", "DifficultyOrderSampler", "difficulty"]


class DifficultyOrderParams(Params):
    key: str = Field("difficulty", description="meta field holding each example's difficulty, or prompt_chars")
    balance: bool = Field(True, description="cap every domain of a mixture at the smallest domain's size")
    descending: bool = Field(False, description="hardest first")


def difficulty(ex: Example, key: str) -> float:
    if key == "prompt_chars":
        text = ex.prompt if isinstance(ex.prompt, str) else "".join(m.get("content", "") for m in ex.prompt)
        return float(len(text))
    value = ex.meta.get(key)
    try:
        return float(value)
    except (TypeError, ValueError):
        raise ValueError(f"example {ex.id!r}: meta[{key!r}] = {value!r} is not a number; data.sampler.key names the "
                         f"field holding each example's difficulty (or prompt_chars)") from None


class DifficultyOrderSampler:
    def __init__(self, examples: Sequence[Example], p: DifficultyOrderParams, seed: int = 0):
        if not examples:
            raise ValueError("cannot sample prompts from an empty split")
        by_domain: dict[str, list[Example]] = {}
        for ex in examples:
            by_domain.setdefault(ex.task, []).append(ex)
        if p.balance and len(by_domain) > 1:
            n = min(len(v) for v in by_domain.values())
            by_domain = {d: sorted(random.Random(f"{seed}-{d}").sample(v, n), key=lambda e: e.id)
                         for d, v in by_domain.items()}
        sign = -1.0 if p.descending else 1.0
        keyed = []
        for d in sorted(by_domain):
            ranked = sorted(by_domain[d], key=lambda e: sign * difficulty(e, p.key))  # stable within a domain
            seen: dict[float, int] = {}
            for ex in ranked:
                level = sign * difficulty(ex, p.key)
                keyed.append((level, seen.get(level, 0), d, ex))
                seen[level] = seen.get(level, 0) + 1
        self.order = [ex for *_, ex in sorted(keyed, key=lambda t: t[:3])]
        self.pos, self.epoch = 0, 0

    def next(self, k: int, step: int = 0) -> list[Example]:
        out = []
        for _ in range(k):
            if self.pos == len(self.order):
                self.pos, self.epoch = 0, self.epoch + 1
            out.append(self.order[self.pos])
            self.pos += 1
        return out

    def observe(self, groups: Sequence[Group], step: int) -> None:
        return None

    def metrics(self) -> dict[str, float]:
        return {"curriculum_progress": self.pos / len(self.order), "epoch": float(self.epoch)}

    def state_dict(self) -> dict[str, Any]:
        return {"pos": self.pos, "epoch": self.epoch, "num_examples": len(self.order)}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if state.get("num_examples", len(self.order)) != len(self.order):
            raise ValueError(f"sampler state is for {state['num_examples']} examples, the curriculum has "
                             f"{len(self.order)}: the data changed since the checkpoint")
        self.pos, self.epoch = int(state.get("pos", 0)), int(state.get("epoch", 0))


@SAMPLERS.register("difficulty_order", DifficultyOrderParams)
def difficulty_order(ctx: SamplerContext, p: DifficultyOrderParams) -> DifficultyOrderSampler:
    """The mixture's examples in order of difficulty, domains balanced and interleaved, no shuffle."""
    return DifficultyOrderSampler(ctx.examples, p, ctx.seed)
