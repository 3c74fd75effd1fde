"""The weight and schedule every loss term has (:class:`LossTermParams`), and the pair source of terms on
off-policy preference pairs (:class:`PairSourceParams`, trait ``pair_batch``)."""

from __future__ import annotations

from pydantic import Field, model_validator

from rlvr.core.paths import LocalPathStr
from rlvr.registry import Params

__all__ = ["LossTermParams", "PairSourceParams", "term_weight", "term_active"]


class LossTermParams(Params):
    """``weight`` from ``start_step``; with ``anneal_steps``, linear from ``weight`` to ``final`` over that
    many steps, then ``final``. Before ``start_step`` the weight is 0."""

    weight: float = Field(1.0, ge=0.0, description="coefficient of the term in the loss")
    final: float | None = Field(None, ge=0.0, description="weight at the end of the anneal (null: weight)")
    anneal_steps: int | None = Field(None, gt=0, description="RL steps from start_step to final (null: constant)")
    start_step: int = Field(0, ge=0, description="first RL step with the term on")

    @model_validator(mode="after")
    def _anneal(self) -> "LossTermParams":
        if self.final is not None and self.anneal_steps is None:
            raise ValueError("final needs anneal_steps (the steps over which the weight moves to it)")
        return self


class PairSourceParams(Params):
    """Where a ``pair_batch`` loss term's preference pairs come from (:mod:`rlvr.passes.pairs`):
    ``pairs_per_step`` lines of ``path`` drawn each RL step (seeded by the run's seed and the step)."""

    path: LocalPathStr = Field(..., description="JSONL file of {prompt, chosen, rejected} lines (prompt: a string or chat "
                                       "messages), read once")
    pairs_per_step: int = Field(8, gt=0, description="preference pairs drawn each RL step")
    skip_malformed: bool = Field(False, description="leave out malformed lines (counted in one warning) instead "
                                                    "of stopping at the first with its file:line")


def term_weight(p: LossTermParams, step: int) -> float:
    """The term's coefficient at RL step ``step`` (from 0)."""
    if step < p.start_step:
        return 0.0
    if p.anneal_steps is None or p.final is None:
        return p.weight
    u = min((step - p.start_step) / p.anneal_steps, 1.0)
    return p.weight + (p.final - p.weight) * u


def term_active(p: LossTermParams, step: int) -> bool:
    return term_weight(p, step) > 0.0
