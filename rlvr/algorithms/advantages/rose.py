"""ROSE's segment-level advantage over a rollout tree (advantage estimator ``rose``).

Zhao et al. 2026, "Reinforced Efficient Reasoning via Semantically Diverse Exploration", arXiv:2601.05053;
code ``ZiqiZhao1/ROSE-rl``, ``core_algos.py::compute_grpo_iterative_branching_outcome_advantage``
(``adv_estimator=grpo_iterative_branching``). EXACT from code (docs/methods.md, `rose`). The tree
comes from ``rollout.strategy: rose`` (extras ``tree_node``, ``tree_parent``, ``tree_branch``). Per group,
for completion b with final reward R_b, length L_b, parent a(b) and branch position k_b:

    P_b  = {0} + {k_c : c = b or an ancestor of b, c not a root}              (its own and inherited points)
    for each non-root b, k_b joins P_{a(b)}, then P_{a(a(b))} while k_b <= k_{a(b)} (the point lies on the
         shared prefix), and so on up                                           (descendants' points)
    then, in creation order, P_b gains the points of P_{a(b)} below k_b          (inheritance)
    V(k) = mean R over the group's completions whose P holds k                    (V(0): the group mean)
    points 0 = p_0 < p_1 < ... < p_m < L_b from P_b, and L_b:
        A[b, p_i : p_{i+1}] = V(p_{i+1}) - V(p_i),      with V(L_b) := R_b
    length penalty lambda > 0: S = the group's shortest completion with R != 0; for every other b with
        R_b != 0, k_c = the deepest point of P_S and P_b at most min(L_S, L_b) (0 if none),
        f = 1 - ((L_S - k_c) / (L_b - k_c))^lambda;  A[b, k_c : L_b] -= |A[b, k_c : L_b]| f   (when f > 0)

No std normalisation. Points are keyed by position only, as in the code: two branch points at one depth in
different subtrees share a value. A completion that is not a tree row (node 0) is a root: its advantage is
R_b - mean R of its group on every token. ``L_b`` is the completion's length (``AdvantageInputs.lengths``;
the code uses the mask's token count, the same for single-turn rows); tokens outside the mask get 0.
"""

from __future__ import annotations

from pydantic import Field

from rlvr.algorithms.registry import ADVANTAGES, AdvantageInputs
from rlvr.lazy import torch
from rlvr.registry import Params

__all__ = ["ROSEAdvantageParams", "rose_advantage", "branch_points", "tree_advantages"]


class ROSEAdvantageParams(Params):
    length_penalty: float = Field(0.0, ge=0.0, description="lambda: shrink longer correct completions' advantages "
                                                           "toward the shortest correct one's (0: off)")


def branch_points(parent: list[int], branch: list[int]) -> list[set[int]]:
    """``P_b`` for the nodes of one tree, indexed 0..n-1 in creation order; ``parent[b]`` is the parent's
    index (-1 for a root) and ``branch[b]`` its branch position."""
    n = len(parent)
    sets = []
    for b in range(n):  # its own point and every ancestor's
        s, cur, seen = {0}, b, set()
        while cur >= 0 and cur not in seen:
            seen.add(cur)
            if parent[cur] >= 0:
                s.add(branch[cur])
            cur = parent[cur]
        sets.append(s)
    for b in range(n):  # up: a child's point joins its ancestors while it lies on their shared prefix
        k, cur, seen = branch[b], parent[b], set()
        if cur < 0:
            continue
        while cur >= 0 and cur not in seen:
            seen.add(cur)
            sets[cur].add(k)
            if parent[cur] < 0 or not k <= branch[cur]:
                break
            cur = parent[cur]
    for b in range(n):  # down, in creation order: the parent's points before the child's own
        if parent[b] >= 0:
            sets[b] |= {k for k in sets[parent[b]] if k < branch[b]}
    return sets


def tree_advantages(rewards: list[float], lengths: list[int], parent: list[int], branch: list[int],
                    length_penalty: float = 0.0) -> list[list[float]]:
    """Per-token advantages of one tree's completions (lists of length ``lengths[b]``)."""
    n = len(rewards)
    sets = branch_points(parent, branch)
    value = {k: sum(rewards[b] for b in range(n) if k in sets[b]) / sum(k in sets[b] for b in range(n))
             for k in set().union(*sets)}
    out = []
    for b in range(n):
        big = lengths[b]
        adv = [0.0] * big
        points = sorted(k for k in sets[b] if k < big)
        if not points or points[0] != 0:
            points = [0] + points
        for k0, k1 in zip(points, points[1:] + [big]):
            v1 = rewards[b] if k1 == big else value[k1]
            adv[k0:k1] = [v1 - value[k0]] * (k1 - k0)
        out.append(adv)
    correct = [b for b in range(n) if abs(rewards[b]) > 1e-6]
    short = min(correct, key=lambda b: lengths[b]) if correct else -1  # the first shortest
    if length_penalty > 0 and len(correct) > 1 and lengths[short] > 0:
        ls = lengths[short]
        for b in correct:
            if b == short or lengths[b] <= 0:
                continue
            lim = min(lengths[b], ls)
            common = [k for k in sets[short] & sets[b] if k <= lim]
            kc = max(common) if common else 0
            if lengths[b] - kc <= 0:
                continue
            f = 1 - (max(ls - kc, 0) / (lengths[b] - kc)) ** length_penalty
            if f > 0:
                out[b][kc:] = [a - abs(a) * f for a in out[b][kc:]]
    return out


def _check(cfg, p: ROSEAdvantageParams) -> list[str]:
    if cfg.rollout.strategy.name != "rose":
        return [f"reads the rollout tree that rollout.strategy rose grows (the strategy is "
                f"{cfg.rollout.strategy.name!r}); set rollout.strategy.name=rose"]
    return []


@ADVANTAGES.register("rose", ROSEAdvantageParams, needs=("tree_node", "tree_parent", "tree_branch"),
                     traits=("token_level",), check=_check)
def rose_advantage(inp: AdvantageInputs, p: ROSEAdvantageParams) -> torch.Tensor:
    """ROSE: per segment between branch points, the change in the mean reward of the completions through them."""
    if inp.mask is None:
        raise ValueError("the rose advantage is per token and needs AdvantageInputs.mask")
    mask = inp.mask
    lengths = inp.lengths if inp.lengths is not None else mask.sum(-1)
    rows = {k: inp.extras[k].max(-1).values.round().long().tolist() if inp.extras[k].shape[-1] else
            [0] * len(inp.rewards) for k in ("tree_node", "tree_parent", "tree_branch")}
    out = torch.zeros(mask.shape, dtype=torch.float64)
    rewards, group = inp.rewards.double().tolist(), inp.group_index.tolist()
    for g in sorted(set(group)):
        members = [i for i, x in enumerate(group) if x == g]
        members.sort(key=lambda i: (rows["tree_node"][i] == 0, rows["tree_node"][i], i))  # creation order
        index = {rows["tree_node"][i]: m for m, i in enumerate(members) if rows["tree_node"][i] > 0}
        parent = [index.get(rows["tree_parent"][i], -1) if rows["tree_node"][i] > 0 else -1 for i in members]
        branch = [rows["tree_branch"][i] if parent[m] >= 0 else 0 for m, i in enumerate(members)]
        lens = [min(int(lengths[i]), mask.shape[1]) for i in members]
        adv = tree_advantages([rewards[i] for i in members], lens, parent, branch, p.length_penalty)
        for i, a in zip(members, adv):
            if a:
                out[i, : len(a)] = torch.tensor(a, dtype=torch.float64)
    return (out * mask.to(out.dtype)).to(torch.float32).to(mask.device)
