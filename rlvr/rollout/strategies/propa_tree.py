"""PROPA's search tree: nodes, UCB, the labels of sibling sets and the choice of SFT paths
(:mod:`rlvr.rollout.strategies.propa`; Jiang et al. 2025, arXiv:2511.10279, code ``YanbeiJiang/PROPA``)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Sequence

__all__ = ["Node", "log_boost", "ucb", "skipped", "sibling_labels", "best_paths", "prm_rows"]


@dataclass(eq=False)
class Node:
    ids: list[int]  # this step's tokens
    logprobs: list[float]
    parent: "Node | None" = None
    children: list["Node"] = field(default_factory=list)
    visits: int = 0
    value: float = 0.0
    terminal: bool = False
    depth: int = 0
    node_id: int = 1
    correct: float = 0.0  # a terminal node's own verdict

    def path(self) -> tuple[list[int], list[float]]:
        ids, lps, cur = [], [], self
        chain = []
        while cur is not None and cur.parent is not None:
            chain.append(cur)
            cur = cur.parent
        for n in reversed(chain):
            ids += n.ids
            lps += n.logprobs
        return ids, lps


def log_boost(q: float) -> float:
    """``ln(1 + 10 q) / ln 11``: 0 -> 0, 1 -> 1, 0.5 -> 0.7472."""
    return math.log(1.0 + 10.0 * q) / math.log(11.0)


def ucb(value: float, visits: int, parent_visits: int, c: float) -> float:
    """``Q/N + c sqrt(2 ln N_parent / N)``; +inf for an unvisited child."""
    if visits == 0:
        return math.inf
    return value / visits + c * math.sqrt(2.0 * math.log(max(parent_visits, 1)) / visits)


def skipped(labels: Sequence[float], min_span: float) -> bool:
    """A sibling set is left out when its labels are all 0, all 1, or span less than ``min_span``."""
    return all(x == 0.0 for x in labels) or all(x == 1.0 for x in labels) or max(labels) - min(labels) < min_span


def sibling_labels(children: Sequence["Node"], min_span: float) -> list[float] | None:
    """The children's log-boosted Q values, or None when the set is :func:`skipped`."""
    labels = [log_boost(ch.value / ch.visits) if ch.visits else 0.0 for ch in children]
    return None if skipped(labels, min_span) else labels


def _ancestors(node: "Node") -> list["Node"]:
    out, cur = [], node
    while cur is not None:
        out.append(cur)
        cur = cur.parent
    return out[::-1]  # root first


def best_paths(correct: Sequence["Node"], k: int = 2) -> list["Node"]:
    """At most ``k`` of the ``correct`` terminal nodes: all of them when there are at most ``k``, else the
    first pair (in order) whose lowest common ancestor is shallowest (the reference's
    ``select_best_node_pairs``, for k = 2; larger k extends it greedily)."""
    if len(correct) <= k:
        return list(correct)

    def lca_depth(a: "Node", b: "Node") -> int:
        depth = -1
        for x, y in zip(_ancestors(a), _ancestors(b)):
            if x is not y:
                break
            depth += 1
        return depth

    best, chosen = None, []
    for i in range(len(correct)):
        for j in range(i + 1, len(correct)):
            d = lca_depth(correct[i], correct[j])
            if best is None or d < best:
                best, chosen = d, [correct[i], correct[j]]
    rest = [n for n in correct if all(n is not c for c in chosen)]
    while len(chosen) < k and rest:  # k > 2: add the node sharing the shallowest ancestor with those chosen
        nxt = min(rest, key=lambda n: max(lca_depth(n, c) for c in chosen))
        chosen.append(nxt)
        rest = [n for n in rest if n is not nxt]
    return chosen




def prm_rows(example_id: str, root: "Node", prompt: list[int], vision=None) -> list[tuple[object, float]]:
    """The process reward model's rows of one tree (``create_RM_train_*_grpo.py``): every node but the root as
    ``(prompt + the steps from the root to it, label)``, label ln(1 + 10 Q) / ln 11 for a visited node; an
    unvisited node gets 0 when a sibling has a nonzero Q, else it is left out."""
    from rlvr.core.types import Completion

    out, stack = [], list(root.children)
    while stack:
        n = stack.pop(0)
        stack = list(n.children) + stack
        if n.visits:
            label = log_boost(n.value / n.visits)
        else:
            others = [s.value / s.visits if s.visits else 0.0 for s in n.parent.children if s is not n]
            if all(q == 0.0 for q in others):
                continue
            label = 0.0
        ids, lps = n.path()
        out.append((Completion(example_id, list(prompt), ids, None, "stop", "", vision=vision), label))
    return out
