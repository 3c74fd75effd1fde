"""PROPA's process-value rewards and sibling-set advantages (``rollout.strategy: propa``).

Jiang et al. 2025, PROPA, arXiv:2511.10279 (code ``YanbeiJiang/PROPA``: ``create_GRPO_train_qwen.py``,
``swift/plugin/orm.py``; EXACT from code; docs/methods.md, `propa`). The strategy returns, per question, sets of
sibling candidate steps of its MCTS tree, each labelled l_c = ln(1 + 10 Q_c) / ln 11 (extra ``process_value``; the
set's parent node in ``tree_parent``).

- reward transform ``process_value``: r_i <- l_i for rows that carry a label (l >= 0), other rows unchanged
  (the reference's ``custom_grpo`` reward returns the stored label);
- advantage ``propa``: GRPO within each sibling set S (rows of one request with one ``tree_parent``):
  A_i = (r_i - mean_S r) / (std_S r + eps): the ``grpo`` estimator (its ``std`` and ``eps``, its conventions
  for constant and one-row sets) with the sibling sets as groups (ms-swift's GRPO, which the reference trains
  with, uses the unbiased std). Rows that are not tree rows (``tree_parent`` 0) form their request's group.

MURPHY (``rollout.strategy: murphy``, arXiv:2511.07833) reuses both as they are: its rows carry their retrospective
credit in ``process_value`` and its groups, the refinements of one attempt (the turn-1 attempts: ``tree_parent``
0), are sibling sets.
"""

from __future__ import annotations

from dataclasses import replace

from rlvr.algorithms.advantages.grpo import GRPOAdvantageParams, grpo_advantage
from rlvr.algorithms.registry import ADVANTAGES, REWARD_TRANSFORMS, AdvantageInputs, TransformInputs, TransformOutput
from rlvr.lazy import torch
from rlvr.registry import Params

__all__ = ["ProcessValueParams", "process_value", "PROPAAdvantageParams", "propa_advantage", "sibling_sets"]


class ProcessValueParams(Params):
    pass


@REWARD_TRANSFORMS.register("process_value", ProcessValueParams, needs=("process_value",))
def process_value(inp: TransformInputs, p: ProcessValueParams) -> TransformOutput:
    """PROPA: the reward of a tree row is its process value (its Q value, log-boosted)."""
    r = inp.rewards.to(torch.float64)
    label = inp.extras["process_value"].to(device=r.device, dtype=torch.float64).reshape(-1)[: len(r)]
    has = label >= 0
    out = torch.where(has, label, r)
    return out, {"labelled_frac": float(has.double().mean()) if len(r) else 0.0,
                 "label_mean": float(label[has].mean()) if bool(has.any()) else 0.0}


class PROPAAdvantageParams(GRPOAdvantageParams):
    pass


def sibling_sets(group_index: torch.Tensor, parent: torch.Tensor) -> torch.Tensor:
    """``[N]`` ids of the sibling sets: one per distinct (group, tree parent) pair, in first-seen order."""
    keys: dict[tuple[int, int], int] = {}
    ids = [keys.setdefault((int(g), int(q)), len(keys)) for g, q in zip(group_index.tolist(), parent.tolist())]
    return torch.tensor(ids, dtype=torch.long, device=group_index.device)


@ADVANTAGES.register("propa", PROPAAdvantageParams, needs=("tree_parent",))
def propa_advantage(inp: AdvantageInputs, p: PROPAAdvantageParams) -> torch.Tensor:
    """PROPA: GRPO within each set of sibling steps of the MCTS tree."""
    parent = inp.extras["tree_parent"]
    parent = parent[:, 0] if parent.dim() == 2 else parent
    sets = sibling_sets(inp.group_index, parent.round().long())
    return grpo_advantage(replace(inp, group_index=sets), p)
