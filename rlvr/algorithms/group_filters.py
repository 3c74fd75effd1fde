"""Group filters: which groups of a generation round a step keeps. One definition of an informative group.

``dynamic_sampling`` (DAPO, Yu et al. 2025, arXiv:2503.14476, §3.2; ``algorithm.dynamic_sampling`` turns
it on): a group is informative when its ``metric`` (the training reward, or the verifier's ``correct``,
verl's ``acc``) is not constant, max != min compared exactly, so a group-relative advantage is not all
zero. A group of one completion counts as informative when ``singletons`` (DAPO keeps it). With ``drop:
all_correct`` only groups whose every completion is correct are dropped (NGRPO's filter, which keeps
all-wrong groups for its virtual-sample advantage). Groups without completions are never kept.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from rlvr.algorithms.grouping import group_constant
from rlvr.algorithms.registry import GROUP_FILTERS, GroupFilterInputs
from rlvr.lazy import torch
from rlvr.registry import Params

__all__ = ["DynamicSamplingParams", "dynamic_sampling", "informative_groups"]


class DynamicSamplingParams(Params):
    metric: Literal["reward", "correct"] = Field("reward", description="the value whose spread makes a group informative")
    drop: Literal["constant", "all_correct"] = Field("constant", description="which groups are dropped")
    singletons: bool = Field(True, description="a group of one completion counts as informative")


def informative_groups(inp: GroupFilterInputs, metric: str = "reward", singletons: bool = True,
                       drop: str = "constant") -> list[int]:
    """Indices of the groups kept (see the module docstring), in increasing order."""
    sizes = torch.bincount(inp.group_index, minlength=inp.n_groups)
    if drop == "all_correct":
        solved = torch.ones(inp.n_groups, dtype=torch.long)
        solved.scatter_reduce_(0, inp.group_index, (inp.correct >= 1.0).long(), reduce="amin")
        return [g for g in range(inp.n_groups) if sizes[g] > 0 and not bool(solved[g])]
    values = inp.correct if metric == "correct" else inp.rewards
    constant = group_constant(values.to(torch.float64), inp.group_index)
    return [g for g in range(inp.n_groups) if (sizes[g] == 1 and singletons)
            or (sizes[g] > 1 and not bool(constant[inp.group_index == g].any()))]


@GROUP_FILTERS.register("dynamic_sampling", DynamicSamplingParams)
def dynamic_sampling(inp: GroupFilterInputs, p: DynamicSamplingParams) -> list[int]:
    """DAPO's dynamic-sampling filter: keep the groups whose rewards differ."""
    return informative_groups(inp, p.metric, p.singletons, p.drop)
