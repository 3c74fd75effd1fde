"""ROSE: semantic-entropy branching with epsilon-exploration (``rollout.strategy: {name: rose}``).

Zhao et al. 2026, "Reinforced Efficient Reasoning via Semantically Diverse Exploration", arXiv:2601.05053; code
``ZiqiZhao1/ROSE-rl`` (``vllm_rollout_spmd.py::generate_sequences_loop_entropy``, ``example.sh``). See
docs/methods.md, `rollout.strategy: rose`. The segment-level advantage over the tree is the ``rose`` advantage
estimator (:mod:`rlvr.algorithms.advantages.rose`).

Each request's n completions are grown one per round, all requests batched in a round:

    round 1:     y_1 ~ pi(. | x)                                            (from the root)
    round j > 1: with probability epsilon, y_j ~ pi(. | x)                  (from the root)
                 else (b*, t*) = argmax over earlier completions b and positions t of u_{b,t}
                      y_j = y_{b*}[:t*] + continuation ~ pi(. | x, y_{b*}[:t*])   (max length R_max - t*)
                      parent(j) = b*, branch(j) = t*           (the uncertain token itself is re-sampled)

with the token uncertainty ``u`` of ``branch_metric`` at each sampled position, from the policy's
distribution there, p = softmax(z / T) (T the rollout temperature), its top-k candidates i (k = ``top_k``)
with unit input-embedding vectors e_i, and H = -sum p log p over the top-k and the sampled token:

    cosine-entropy (default):  u = -(||sum_i p_i e_i||^2 - sum_i p_i^2) * H = -(sum_{i != j} p_i p_j cos(e_i, e_j)) * H
    cosine:                    u = -(sum_{i != j} p_i p_j cos(e_i, e_j))
    entropy:                   u = H

A child's positions before t* carry its parent's values (the official code copies them), and the argmax
takes the first maximum (earliest completion, earliest position), so several children may branch at one
point. EXACT (official code): the rounds, epsilon per request and round, the argmax over every earlier
completion and position, the prefix excluding the uncertain token, the length cap, the three metrics with
H over the returned candidates (top-k and the sampled token) and the cosine term over the top-k.

rlvr's choices: the official code reads vLLM's returned log-probs; rlvr computes ``u`` from one no-grad
forward of the trainer's model over each round's new completions (eval mode, mode restored;
``forward_rows`` rows a pass, the vocabulary projection ``chunk_tokens`` positions at a time) at the sampling temperature, the distribution the behaviour log-probs
belong to. A child's prefix carries its parent's behaviour log-probs (the same policy sampled them, within
one call) and is a ``"prefix"`` segment: trained, once in every completion that contains it, as in the
official code. Each round's sampling seed is derived from the call's (``seed + 7919 j``), so rounds do
not repeat each other; epsilon is drawn from a generator seeded by (the call's seed, example id, request
index), so a resumed run grows the trees the uninterrupted one did. Requests with their own prefix and
``n`` of 0 are generated as asked.

Every completion of a grown request is a :class:`TreeCompletion` (``tree_node`` 1..n in creation order,
``tree_parent`` 0 for a root, ``tree_branch``); the extras ``tree_node`` / ``tree_parent`` /
``tree_branch`` give them to the advantage. Cost: n sequential engine calls per step and one scoring
forward per round. Metrics since the last report, ``engine/rose/``: ``branched_frac`` (children / all
completions after the first round), ``mean_branch_pos``, ``reused_tokens`` (prefix tokens), ``rounds``.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, replace
from typing import Any, Literal, Sequence

from pydantic import Field

from rlvr.algorithms.extra_producers import ExtraContext, produces
from rlvr.core.batch import build_batch
from rlvr.core.types import Completion, GenerationRequest, SamplingParams
from rlvr.lazy import F, no_grad, torch
from rlvr.registry import Params
from rlvr.rollout.strategies.base import ROLLOUT_STRATEGIES, require_single_turn, tree_problems
from rlvr.rollout.wrappers import as_subclass

__all__ = ["ROSEParams", "ROSEWrapper", "TreeCompletion", "token_uncertainty", "choose_branch", "tree_rows",
           "build_rose"]

_SEED_STRIDE = 7919


class ROSEParams(Params):
    epsilon: float = Field(0.5, ge=0.0, le=1.0, description="chance a new completion starts from the root "
                                                            "(entropy_branching_epsilon)")
    branch_metric: Literal["cosine-entropy", "cosine", "entropy"] = Field(
        "cosine-entropy", description="the token uncertainty whose argmax is the branch point")
    top_k: int = Field(20, ge=2, description="candidates per position for H and the cosine term (cosine_top_k)")
    forward_rows: int = Field(64, gt=0, description="completions per scoring forward")
    chunk_tokens: int = Field(256, gt=0, description="positions whose full-vocabulary logits are held at once")


@dataclass
class TreeCompletion(Completion):
    """A completion of a grown tree: its node (1..n, creation order), its parent's (0: a root) and the
    position it branched at (its prefix length; 0 for a root)."""

    tree_node: int = 0
    tree_parent: int = 0
    tree_branch: int = 0


def token_uncertainty(logp: torch.Tensor, chosen: torch.Tensor, emb: torch.Tensor, metric: str,
                      top_k: int) -> torch.Tensor:
    """``u [K]`` from log-probs ``logp [K, V]`` at K positions, the sampled tokens ``chosen [K]`` and the input
    embeddings ``emb [V, H]`` (see the module docstring)."""
    k = min(top_k, logp.shape[-1])
    top_lp, top_ids = logp.topk(k, dim=-1)  # [K, k]
    p = top_lp.exp()
    ent = -(p * top_lp).sum(-1)
    lp_c = logp.gather(-1, chosen[:, None]).squeeze(-1)
    outside = ~(top_ids == chosen[:, None]).any(-1)  # the sampled token is returned beside the top-k
    ent = ent + torch.where(outside, -(lp_c.exp() * lp_c), torch.zeros_like(ent))
    if metric == "entropy":
        return ent
    e = F.normalize(emb[top_ids].float(), dim=-1)  # [K, k, H]
    y = (p[..., None] * e).sum(-2)
    similar = (y * y).sum(-1) - (p * p).sum(-1)  # sum_{i != j} p_i p_j cos(e_i, e_j)
    return -similar if metric == "cosine" else -similar * ent


def choose_branch(uncertainty: Sequence[Sequence[float]]) -> tuple[int, int] | None:
    """``(completion, position)`` of the first maximum of ``u`` over earlier completions (None: all empty)."""
    best, at = float("-inf"), None
    for b, us in enumerate(uncertainty):
        for t, u in enumerate(us):
            if u > best:
                best, at = u, (b, t)
    return at


def tree_rows(completions: Sequence[Completion], like: torch.Tensor) -> dict[str, torch.Tensor]:
    """The extras ``tree_node`` / ``tree_parent`` / ``tree_branch`` ``[N, T]`` (rows in the order of
    ``completions``; constant along each row; node 0 for a completion not grown as a tree)."""
    out = {}
    for key in ("tree_node", "tree_parent", "tree_branch"):
        col = torch.tensor([float(getattr(c, key, 0)) for c in completions], dtype=torch.float32)
        out[key] = col[:, None].expand(like.shape).clone().to(like.device)
    return out


@dataclass
class _Node:
    comp: Completion
    u: list[float]


class ROSEWrapper:
    """Wraps an engine; grows each request's completions as a branching tree, one completion per round."""

    name = "strategy"

    def __init__(self, inner: Any, model, tokenizer, params: ROSEParams):
        self.inner, self.model, self.tokenizer, self.params = inner, model, tokenizer, params
        self._m = self._zero()

    @staticmethod
    def _zero() -> dict[str, float]:
        return dict.fromkeys(("later", "children", "pos", "reused", "rounds", "calls"), 0.0)

    def sync_weights(self) -> None:
        self.inner.sync_weights()

    def generate(self, requests: Sequence[GenerationRequest], sampling: SamplingParams) -> list[Completion]:
        grown = [i for i, r in enumerate(requests) if r.n > 0 and not r.prefix_ids]
        where = sorted(set(range(len(requests))) - set(grown))  # generated as asked
        out: list[list[Completion]] = [[] for _ in requests]
        if where:
            for comp in self.inner.generate([requests[i] for i in where], sampling):
                comp.group = where[comp.group]
                out[comp.group].append(comp)
        trees: dict[int, list[_Node]] = {i: [] for i in grown}
        rngs = {i: random.Random(f"{sampling.seed}:{requests[i].example.id}:{i}") for i in grown}
        r_max = {i: sampling.max_new_tokens if requests[i].max_new_tokens is None else requests[i].max_new_tokens
                 for i in grown}
        for j in range(max((requests[i].n for i in grown), default=0)):
            batch, meta = [], []
            for i in (i for i in grown if requests[i].n > j):
                req, nodes = requests[i], trees[i]
                root = j == 0 or rngs[i].random() < self.params.epsilon
                at = None if root else choose_branch([n.u for n in nodes])
                if at is None:
                    batch.append(replace(req, n=1))
                    meta.append((i, 0, 0))
                    continue
                b, t = at
                parent = nodes[b].comp
                lps = parent.logprobs
                batch.append(replace(req, n=1, prefix_ids=tuple(parent.completion_ids[:t]),
                                     prefix_logprobs=None if lps is None else tuple(lps[:t]),
                                     prefix_source="prefix", max_new_tokens=r_max[i] - t))
                meta.append((i, b + 1, t))
            seed = None if sampling.seed is None else sampling.seed + _SEED_STRIDE * j
            comps = self.inner.generate(batch, replace(sampling, seed=seed))
            new = self._uncertainty(comps, [t for _, _, t in meta], sampling)
            for comp, (i, parent, t), u in zip(comps, meta, new):
                nodes = trees[i]
                head = nodes[parent - 1].u[:t] if parent else []
                node = as_subclass(comp, TreeCompletion, tree_node=len(nodes) + 1, tree_parent=parent,
                                   tree_branch=t if parent else 0)
                node.group = i
                nodes.append(_Node(node, head + u))
                out[i].append(node)
                if j:
                    self._m["later"] += 1
                    self._m["children"] += bool(parent)
                    self._m["pos"] += t if parent else 0
                    self._m["reused"] += t if parent else 0
            self._m["rounds"] += 1
        self._m["calls"] += 1
        return [c for row in out for c in row]

    @no_grad
    def _uncertainty(self, comps: list[Completion], starts: list[int], sampling: SamplingParams) -> list[list[float]]:
        """``u`` at each completion's positions from ``starts`` on (its own sampled tokens)."""
        model, p = self.model, self.params
        temp = 1.0 if sampling.greedy else sampling.temperature
        emb = model.get_input_embeddings().weight
        trunk, head = getattr(model, model.base_model_prefix), model.get_output_embeddings()
        softcap = getattr(model.config, "final_logit_softcapping", None)
        device = emb.device
        was_training = model.training
        model.eval()
        out: list[list[float]] = []
        try:
            for s in range(0, len(comps), p.forward_rows):
                part = comps[s: s + p.forward_rows]
                if not any(len(c) for c in part):
                    out += [[] for _ in part]
                    continue
                batch = build_batch(part, [0.0] * len(part), self.tokenizer.pad_token_id).to(device)
                hidden = trunk(input_ids=batch.input_ids, attention_mask=batch.attention_mask,
                               position_ids=batch.position_ids, use_cache=False).last_hidden_state
                pl = batch.prompt_len
                for r, c in enumerate(part):
                    a, e = starts[s + r], len(c)
                    us: list[float] = []
                    for k in range(a, e, p.chunk_tokens):  # full-vocabulary logits a chunk of positions at a time
                        z = k + min(p.chunk_tokens, e - k)
                        logits = head(hidden[r, pl - 1 + k: pl - 1 + z]).float()
                        logits = torch.tanh(logits / softcap) * softcap if softcap else logits
                        logp = F.log_softmax(logits / temp, dim=-1)
                        chosen = batch.input_ids[r, pl + k: pl + z]
                        us += token_uncertainty(logp, chosen, emb, p.branch_metric, p.top_k).tolist()
                    out.append(us)
        finally:
            model.train(was_training)
        return out

    def metrics(self) -> dict[str, float]:
        m, self._m = self._m, self._zero()
        if not m["calls"]:
            return {}
        out = {"rose/rounds": m["rounds"] / m["calls"], "rose/reused_tokens": m["reused"]}
        if m["later"]:
            out["rose/branched_frac"] = m["children"] / m["later"]
        if m["children"]:
            out["rose/mean_branch_pos"] = m["pos"] / m["children"]
        return out

    def state_dict(self) -> dict[str, Any]:
        return {}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        return None


def _check(cfg, params: ROSEParams) -> list[str]:
    return tree_problems(cfg, 'rose')


@ROLLOUT_STRATEGIES.register("rose", params=ROSEParams, check=_check)
def build_rose(engine: Any, model, tokenizer, params: ROSEParams, rollout_cfg, chat_template: bool = False
               ) -> ROSEWrapper:
    """ROSE: each group grown one completion a round, branching at the most semantically uncertain token."""
    require_single_turn(rollout_cfg, "rose", "grows")
    return ROSEWrapper(engine, model, tokenizer, params)


@produces("tree_node", "tree_parent", "tree_branch")
def _tree(ctx: ExtraContext, keys: frozenset[str]) -> dict[str, torch.Tensor]:
    """The rows' places in their group's rollout tree, set by this strategy (no model pass)."""
    return tree_rows(ctx.completions, ctx.batch.completion_mask)
