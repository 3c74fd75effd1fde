"""SCOPE-RL's rewards: the correctness-gated process-shape reward (reward transform ``scope_shape``) and the
prefix-decomposed reward of scaffolded prompts (``scope_prefix``).

"SCOPE-RL: Scaffolded Chain Optimization with Process Efficiency" (arXiv id not known; code announced at
``tokencraft-lab/SCOPE-RL``, not available; docs/methods.md, `scope_shape` and `scope_prefix`). RECONSTRUCTED. Once
the model solves a problem, the reward of its correct trajectories also reflects the shape of the process, and an
incorrect one gets nothing whatever its shape:

    r_i <- 1[correct_i] (1 - lambda_p + lambda_p shape_i)
    shape_i = (useful_i + efficiency_i) / 2
    useful_i     = the fraction of the completion's steps that are useful (extra ``step_useful_frac``)
    efficiency_i = L_min / L_i,  L_min the shortest correct completion of the group (1 for the shortest)

with ``correct`` the score component (else reward >= 1). Steps (:func:`split_steps`) are the completion's
lines, a line with several sentences split at sentence ends; a step is useful when it is not a repeat of
an earlier step (after lower-casing and collapsing spaces and punctuation) and brings a number or a word
of three letters or more that no earlier step had. RECONSTRUCTED: the rule-based step checks (the paper
scores useful-step density, redundant or erroneous steps and token efficiency, the checks themselves are
not public), the equal weights and lambda_p's default. ``only_solved`` (default) applies the shape to
groups with at least one correct member only, and leaves the other groups' rewards as they are (stage 1's
business). With lambda_p = 0 correct rows keep reward 1 and incorrect ones 0 (the gate alone). Metrics:
``shape_mean`` and ``useful_mean`` over correct rows.

``scope_prefix`` (stage 1, Adaptive Scaffolded RL, with ``rollout.scaffold``): a completion of a scaffolded
prompt whose final answer is wrong earns the fraction of the scaffold's sub-answers it states (extra
``scaffold_credit``), times ``weight``; a correct one keeps its reward; other rows are unchanged:

    r_i <- r_i                           correct, or not scaffolded
    r_i <- weight * (1/m) #{a_k stated}  scaffolded and wrong

Metric: ``credit_mean`` over the scaffolded rows.
"""

from __future__ import annotations

import re

from pydantic import Field

from rlvr.algorithms.extra_producers import ExtraContext, produces
from rlvr.algorithms.registry import REWARD_TRANSFORMS, TransformInputs, TransformOutput
from rlvr.lazy import torch
from rlvr.registry import Params

__all__ = ["ScopeShapeParams", "ScopePrefixParams", "scope_shape", "scope_prefix", "split_steps", "useful_fraction"]

_SENTENCE = re.compile(r"(?<=[.!?;])\s+")
_CONTENT = re.compile(r"\d+(?:\.\d+)?|[^\W\d_]{3,}")


class ScopeShapeParams(Params):
    lambda_p: float = Field(0.3, ge=0.0, le=1.0, description="weight of the shape in a correct row's reward "
                                                             "(not reported; a guess)")
    only_solved: bool = Field(True, description="shape only groups with a correct member (others unchanged)")


class ScopePrefixParams(Params):
    weight: float = Field(1.0, ge=0.0, le=1.0, description="scale of the sub-answer credit of a wrong "
                                                           "scaffolded row (1: the fraction itself)")


def split_steps(text: str) -> list[str]:
    """The completion's steps: non-empty lines, each split at sentence ends."""
    return [s.strip() for line in text.splitlines() for s in _SENTENCE.split(line) if s.strip()]


def _norm(step: str) -> str:
    return " ".join(re.sub(r"[^\w\s]", " ", step.lower()).split())


def useful_fraction(text: str) -> float:
    """The fraction of useful steps (0 for a completion without steps)."""
    steps = split_steps(text)
    seen_steps: set[str] = set()
    seen_content: set[str] = set()
    useful = 0
    for s in steps:
        key = _norm(s)
        content = {m.lower() for m in _CONTENT.findall(s)}
        if key and key not in seen_steps and content - seen_content:
            useful += 1
        seen_steps.add(key)
        seen_content |= content
    return useful / len(steps) if steps else 0.0


@REWARD_TRANSFORMS.register("scope_shape", ScopeShapeParams, needs=("step_useful_frac",))
def scope_shape(inp: TransformInputs, p: ScopeShapeParams) -> TransformOutput:
    """SCOPE-RL: a correct row's reward becomes 1 - lambda_p + lambda_p shape; an incorrect one's 0."""
    r = inp.rewards.to(torch.float64)
    dev = r.device
    correct = inp.correct
    useful = inp.extras["step_useful_frac"].to(device=dev, dtype=torch.float64).reshape(-1)[: len(r)]
    lengths = inp.lengths.to(device=dev, dtype=torch.float64).clamp(min=1.0)
    out = r.clone()
    shapes, uses = [], []
    for g in torch.unique(inp.group_index).tolist():
        rows = (inp.group_index.to(dev) == g)
        ok = rows & correct
        if p.only_solved and not bool(ok.any()):
            continue
        l_min = lengths[ok].min() if bool(ok.any()) else torch.tensor(1.0, dtype=torch.float64, device=dev)
        shape = 0.5 * (useful + l_min / lengths)
        out[rows] = torch.where(correct[rows], 1.0 - p.lambda_p + p.lambda_p * shape[rows],
                                torch.zeros_like(r[rows]))
        shapes += shape[ok].tolist()
        uses += useful[ok].tolist()
    return out, {"shape_mean": sum(shapes) / len(shapes) if shapes else 0.0,
                 "useful_mean": sum(uses) / len(uses) if uses else 0.0}


@REWARD_TRANSFORMS.register("scope_prefix", ScopePrefixParams, needs=("scaffold_credit",))
def scope_prefix(inp: TransformInputs, p: ScopePrefixParams) -> TransformOutput:
    """SCOPE-RL stage 1: a wrong completion of a scaffolded prompt earns its share of the sub-answers."""
    r = inp.rewards.to(torch.float64)
    credit = inp.extras["scaffold_credit"].to(device=r.device, dtype=torch.float64).reshape(-1)[: len(r)]
    correct = inp.correct
    scaffolded = credit >= 0
    out = torch.where(scaffolded & ~correct, p.weight * credit.clamp(min=0.0), r)
    return out, {"credit_mean": float(credit[scaffolded].mean()) if bool(scaffolded.any()) else 0.0}


@produces("step_useful_frac")
def _step_useful_frac(ctx: ExtraContext, keys: frozenset[str]) -> dict:
    """The useful share of each completion's steps, from the texts (no model pass)."""
    return {"step_useful_frac": torch.tensor([useful_fraction(comp.text) for comp in ctx.completions])}
