"""LATR: lookahead tree-based rollouts (``rollout.strategy: {name: latr}``).

Xing, Wang, Yang, Dai, Ren 2025, "Lookahead Tree-Based Rollouts for Enhanced Trajectory-Level Exploration in RLVR",
arXiv:2510.24302; code ``starreeze/latr`` (``model/generation.py``, ``model/sample_filter.py``,
``model/metrics.py``, ``model/utils.py``, ``scripts/grpo-kt-math.sh``; docs/methods.md, `rollout.strategy: latr`).

Per request of n completions, k = round(n eta) are grown as one tree from the prompt and n - k are sampled
i.i.d. by the engine (eta = ``mix_ratio``, or ``mix_schedule`` by training step). Tree phase, all roots
batched, for step s = 0 .. min(force_return_step, R_max) - 1 over the live, unfinished branches:

    p = softmax(logits) [A, V] (raw, no temperature);   (p_1..p_m, y_1..y_m) = top-m(p)   [A, m]
    candidate j >= 2 forks iff  p_j > tau_abs  and  p_1 - p_j < tau_rel
    at most k branches per root (finished ones count); extra candidates suppressed in (j, row) order
    every branch appends y_1 (greedy: the official sample_nk="none"); a fork = its parent's tokens + y_j
    then a branch born r steps ago (r in ``lookahead``; windows holding an end token are skipped) is pruned,
    with its descendants, when its last r tokens a and its parent's b over the same steps have
        ROUGE-L F = 2 LCS(a, b) / (|a| + |b|) > tau_rouge  or  suffix_match(a, b) > tau_sm
        or  edit_distance(a, b) / r < tau_ed   (suffix_match: longest suffix of one found in the other, / r)
    exit when every branch has finished, or when sum_roots(k if all its branches finished else #branches)
        >= round(sum_roots(k) (thr_0 - decay s / R_max)) and every branch, roots (born at 0) included, is
        more than max(lookahead) steps old
Completion phase: the engine continues each unfinished branch (a prefix request, max_new_tokens = R_max -
len, the run's sampling); a root with fewer than k branches repeats its first (``fill_return_sequences``).
Completion k of request i has group i, the k tree ones first (the tree's tokens are a ``"prefix"`` segment).
Deviation: when that first branch already ended in the tree, the padding is sampled from the prompt (the
official copies would be the same completion again: with short completions, zero-variance groups).

EXACT (official code): raw top-m, the absolute test, the cap and its suppression order, greedy original
branches, lookahead pruning (ROUGE-L / suffix match / edit distance, recursive), the exit rule, padding.

rlvr's additions and deviations:

- The relative test: the paper states p_1 - p_j < tau_rel (a close runner-up forks); the official ``ProbFilter``
  computes ``p_1 - p_j > tau_rel``, yet its parameter scheduler treats a lower tau_rel as stricter, true only of
  the paper's form. rlvr uses the paper's (``official_rel_test: true``: the code's).
- ``exempt_math_symbols`` (official ``keep_math_symbols``, on there) skips pruning when the parent's token at
  the fork is a math symbol; the official filter drops those comparisons from one of two zipped lists, so
  its exemption lands on other branches. rlvr exempts the intended ones; off by default.
- Behaviour log-probs: tree tokens were chosen greedily or by forking, not sampled at temperature T; they
  carry the policy's log_softmax(logits / T) (``prefix_logprobs``), what the trainer recomputes (ratio 1).
  The paper and the official code train on them as on-policy samples, as rlvr does; they are not samples
  of the behaviour policy, and no importance correction can see that.
- Cost: no KV cache: a full forward over prompt + branch for every live branch at every step
  (``forward_rows`` a pass), O(steps x branches x length), for short completions and small models.
- ``mix_schedule`` is read at the number of weight syncs seen (one per optimizer step; a skipped update
  does not count; kept in checkpoints); with ``rollout.param_noise`` (it syncs around every call) it is a
  config error. Not implemented: the cumulative-probability, stop-word and model filters, ``sample_nk``
  other than ``none``. Requests with their own prefix are generated as asked.

Metrics since the last report, ``engine/latr/``: ``branches_{created,pruned,suppressed}``, ``tree_tokens``
(pruned branches' included), ``tree_steps``, ``branches_per_root`` (at exit, before padding),
``padded_rows``, ``distinct_per_group`` (distinct completions per request), ``mix_ratio``, ``tree_time_s``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Annotated, Any, Callable, Sequence

from pydantic import Field, NonNegativeInt, PositiveInt

from rlvr.core.types import Completion, GenerationRequest, SamplingParams, Segment
from rlvr.lazy import F, no_grad, torch
from rlvr.registry import Params
from rlvr.models.prompts import encode_prompt
from rlvr.rollout.strategies.base import ROLLOUT_STRATEGIES, require_single_turn, single_turn_problems

__all__ = ["LATRParams", "LATRWrapper", "Roots", "branch_mask", "rouge_l", "suffix_match", "edit_distance",
           "tree_count", "mix_ratio_at", "grow_tree", "build_latr"]

MATH_SYMBOLS = set("+-*/\\<>=()[]{}_^&%$0123456789")
_Eta = Annotated[float, Field(ge=0.0, le=1.0)]


class LATRParams(Params):
    mix_ratio: float = Field(1.0, ge=0.0, le=1.0, description="eta: round(n eta) of a group come from the tree")
    mix_schedule: dict[NonNegativeInt, _Eta] | None = Field(
        None, min_length=1, description="eta by training step {step: eta}, replacing mix_ratio (official: "
                                        "{0: 1, 100: 0.75, 200: 0.5, 300: 0.25})")
    max_branch_per_token: int = Field(2, ge=2, description="m: top candidates tested for a fork at each token")
    prob_abs: float = Field(0.15, ge=0.0, le=1.0, description="tau_abs: a candidate forks only if p_j > this")
    prob_rel: float = Field(0.25, ge=0.0, le=1.0, description="tau_rel: ... and p_1 - p_j < this")
    official_rel_test: bool = Field(False, description="use the official code's literal p_1 - p_j > tau_rel")
    lookahead: list[PositiveInt] = Field([8], min_length=1, description="r: steps after its birth at which a "
                                                                        "branch is compared with its parent")
    rouge_l: float | None = Field(0.5, ge=0.0, le=1.0, description="prune if ROUGE-L F of the windows > this")
    suffix_match: float | None = Field(0.2, ge=0.0, le=1.0, description="prune if the suffix-match ratio > this")
    edit_distance: float | None = Field(None, ge=0.0, description="prune if edit distance / r < this (off)")
    exempt_math_symbols: bool = Field(False, description="never prune a fork at a math symbol (keep_math_symbols)")
    return_threshold: float = Field(0.98, gt=0.0, le=1.0, description="thr_0: exit once branches >= this x sum k")
    return_threshold_decay: float = Field(0.05, ge=0.0, description="thr_0 falls by this x step / R_max")
    force_return_step: int | None = Field(None, gt=0, description="at most this many tree steps (None: R_max)")
    forward_rows: int = Field(64, gt=0, description="branches per forward pass in the tree phase")


def branch_mask(top: torch.Tensor, tau_abs: float, tau_rel: float, official: bool = False) -> torch.Tensor:
    """``[A, m - 1]``: which of candidates 2..m fork, from the top-m probabilities ``top [A, m]``."""
    gap = top[:, :1] - top[:, 1:]
    return (top[:, 1:] > tau_abs) & ((gap > tau_rel) if official else (gap < tau_rel))


def rouge_l(a: Sequence[int], b: Sequence[int]) -> float:
    """ROUGE-L F-measure from the longest common subsequence (the official ``rouge_l_score``)."""
    prev = [0] * (len(b) + 1)
    for x in a:
        cur = [0]
        for j, y in enumerate(b):
            cur.append(prev[j] + 1 if x == y else max(prev[j + 1], cur[j]))
        prev = cur
    return 2 * prev[-1] / (len(a) + len(b)) if prev[-1] else 0.0


def suffix_match(a: Sequence[int], b: Sequence[int]) -> float:
    """The longest suffix of either window occurring anywhere in the other, over the window length."""
    def found(p: list[int], t: list[int]) -> int:
        return next((k for k in range(len(p), 0, -1)
                     if any(t[i: i + k] == p[-k:] for i in range(len(t) - k + 1))), 0)

    return max(found(list(a), list(b)), found(list(b), list(a))) / len(a)


def edit_distance(a: Sequence[int], b: Sequence[int]) -> int:
    prev = list(range(len(b) + 1))
    for i, x in enumerate(a, 1):
        cur = [i]
        for j, y in enumerate(b, 1):
            cur.append(min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (x != y)))
        prev = cur
    return prev[-1]


def _prune(a: list[int], b: list[int], p: LATRParams) -> bool:
    return ((p.rouge_l is not None and rouge_l(a, b) > p.rouge_l)
            or (p.suffix_match is not None and suffix_match(a, b) > p.suffix_match)
            or (p.edit_distance is not None and edit_distance(a, b) / len(a) < p.edit_distance))


def tree_count(n: int, eta: float) -> int:
    return round(n * eta)  # k, with Python's round as the official code


def mix_ratio_at(params: LATRParams, step: int) -> float:
    """eta at ``step``: the schedule's last entry at or before it (its first entry before that)."""
    if params.mix_schedule is None:
        return params.mix_ratio
    items = sorted(params.mix_schedule.items())
    return next((e for s, e in reversed(items) if s <= step), items[0][1])


@dataclass(eq=False)
class _Branch:
    root: int
    tokens: list[int]
    logprobs: list[float]
    parent: _Branch | None = None
    birth: int = 0
    done: str | None = None  # finish reason once it ended in the tree phase


@dataclass
class Roots:
    """Per root: its k (0: no tree), length limit, end tokens, stop strings (checked with ``decode``)."""

    k: list[int]
    r_max: list[int]
    ends: list[set[int]]
    stops: list[tuple[str, ...]] | None = None
    decode: Callable[[list[int]], str] | None = None

    def finish(self, b: _Branch) -> None:
        if b.tokens[-1] in self.ends[b.root] or (self.stops and self.stops[b.root] and any(
                s in self.decode(b.tokens) for s in self.stops[b.root])):
            b.done = "stop"
        elif len(b.tokens) >= self.r_max[b.root]:
            b.done = "length"


def grow_tree(step_logits: Callable[[list[_Branch]], torch.Tensor], roots: Roots, params: LATRParams,
              temperature: float, r_total: int, stats: dict[str, float]) -> list[list[_Branch]]:
    """The tree phase: each root's live branches at exit, in creation order (``[]`` where k is 0).
    ``step_logits(branches)``: ``[A, V]`` next-token logits of unfinished branches; ``r_total``: the run's
    R_max (the exit threshold's decay); ``stats``: the metrics' counters, accumulated."""
    live = [_Branch(i, [], []) for i, k in enumerate(roots.k) if k > 0]
    limit = min(max((roots.r_max[b.root] for b in live), default=0), params.force_return_step or 1 << 62)
    for step in range(limit):
        active = [b for b in live if b.done is None]
        if not active:
            break  # every branch ended
        logits = step_logits(active).float()
        top_p, top_i = F.softmax(logits, -1).topk(min(params.max_branch_per_token, logits.shape[-1]), dim=-1)
        lp = F.log_softmax(logits / temperature, -1).gather(1, top_i).tolist()  # every chosen token is a candidate
        ok = branch_mask(top_p, params.prob_abs, params.prob_rel, params.official_rel_test).tolist()
        top_i = top_i.tolist()
        room = list(roots.k)
        for b in live:
            room[b.root] -= 1
        births = []
        for j in range(1, len(top_i[0])):  # candidate 2 of every row before candidate 3 of any
            for a, b in enumerate(active):
                if ok[a][j - 1] and room[b.root] > 0:
                    room[b.root] -= 1
                    births.append((a, j))
                elif ok[a][j - 1]:
                    stats["suppressed"] += 1
        born = []
        for a, j in sorted(births):  # created row by row, as the official code appends them
            par = active[a]
            born.append(_Branch(par.root, par.tokens + [top_i[a][j]], par.logprobs + [lp[a][j]], par, step))
        for a, b in enumerate(active):
            b.tokens.append(top_i[a][0])
            b.logprobs.append(lp[a][0])
        live += born
        for b in active + born:
            roots.finish(b)
        for key, v in (("created", len(born)), ("tree_tokens", len(active) + len(born)), ("steps", 1)):
            stats[key] += v
        live = _pruned(live, step + 1, roots, params, stats)
        if _exit(live, roots, params, step, r_total):
            break
    out: list[list[_Branch]] = [[] for _ in roots.k]
    for b in live:
        out[b.root].append(b)
    return out


def _pruned(live: list[_Branch], now: int, roots: Roots, params: LATRParams, stats: dict[str, float]
            ) -> list[_Branch]:
    """``live`` less the branches born r steps before ``now`` that repeat their parent, and descendants."""
    gone: set[int] = set()
    for b in live:
        r = now - b.birth
        if b.parent is None or r not in params.lookahead:
            continue
        a, p = b.tokens[b.birth: now], b.parent.tokens[b.birth: now]
        if len(a) < r or len(p) < r or any(t in roots.ends[b.root] for t in a + p):
            continue  # a window cut short by an end: the official code skips windows holding an EOS
        exempt = params.exempt_math_symbols and set(roots.decode([p[0]]).strip() or "?") <= MATH_SYMBOLS
        if not exempt and _prune(a, p, params):
            gone.add(id(b))
            stats["pruned"] += 1
    for b in live:  # parents precede their children, so one pass finds every descendant
        if b.parent is not None and id(b.parent) in gone:
            gone.add(id(b))
    return [b for b in live if id(b) not in gone]


def _exit(live: list[_Branch], roots: Roots, params: LATRParams, step: int, r_total: int) -> bool:
    groups = [[b for b in live if b.root == i] for i in sorted({b.root for b in live})]
    eff = sum(roots.k[g[0].root] if all(b.done for b in g) else len(g) for g in groups)
    thr = params.return_threshold - params.return_threshold_decay * step / max(r_total, 1)
    return (eff >= round(sum(roots.k[g[0].root] for g in groups) * thr)
            and all(b.birth + max(params.lookahead) < step for b in live))


class LATRWrapper:
    """Wraps an engine: part of each group grown as a tree by the policy (see the module docstring)."""

    name = "strategy"

    def __init__(self, inner: Any, model, tokenizer, params: LATRParams, chat_template: bool = False):
        self.inner, self.model, self.tokenizer = inner, model, tokenizer
        self.params, self.chat_template = params, chat_template
        self.step = 0  # weight syncs seen: the training step of the mix schedule
        self._m = self._zero()

    @staticmethod
    def _zero() -> dict[str, float]:
        return dict.fromkeys(("calls", "created", "pruned", "suppressed", "tree_tokens", "steps", "roots",
                              "branches", "padded", "groups", "distinct", "eta", "time"), 0.0)

    def sync_weights(self) -> None:
        self.step += 1
        self.inner.sync_weights()

    @no_grad
    def _step_logits(self, prompts: list[list[int]], branches: list[_Branch]) -> torch.Tensor:
        """``[A, V]`` next-token logits of each branch: a full forward over prompt + tokens, left-padded,
        positions counting real tokens only (as in the trainer's batch)."""
        model, rows = self.model, self.params.forward_rows
        device = next(model.parameters()).device
        trunk, head = getattr(model, model.base_model_prefix), model.get_output_embeddings()
        softcap = getattr(model.config, "final_logit_softcapping", None)
        out = []
        for s in range(0, len(branches), rows):
            seqs = [prompts[b.root] + b.tokens for b in branches[s: s + rows]]
            width = max(map(len, seqs))
            ids = torch.full((len(seqs), width), self.tokenizer.pad_token_id, dtype=torch.long)
            mask = torch.zeros_like(ids)
            for i, q in enumerate(seqs):
                ids[i, width - len(q):], mask[i, width - len(q):] = torch.tensor(q), 1
            pos = (mask.cumsum(1) - 1).clamp_min(0)
            h = trunk(input_ids=ids.to(device), attention_mask=mask.to(device), position_ids=pos.to(device),
                      use_cache=False).last_hidden_state[:, -1]
            logits = head(h).float()
            out.append(torch.tanh(logits / softcap) * softcap if softcap else logits)
        return torch.cat(out)

    def _grow(self, prompts, roots: Roots, sampling: SamplingParams) -> list[list[_Branch]]:
        was_training, t0 = self.model.training, time.perf_counter()
        self.model.eval()
        try:
            return grow_tree(lambda bs: self._step_logits(prompts, bs), roots, self.params,
                             1.0 if sampling.greedy else sampling.temperature, sampling.max_new_tokens, self._m)
        finally:
            self.model.train(was_training)
            self._m["time"] += time.perf_counter() - t0

    def generate(self, requests: Sequence[GenerationRequest], sampling: SamplingParams) -> list[Completion]:
        eta = mix_ratio_at(self.params, self.step)
        prompts = [encode_prompt(self.tokenizer, r.example.prompt, self.chat_template) for r in requests]
        r_max = [sampling.max_new_tokens if r.max_new_tokens is None else r.max_new_tokens for r in requests]
        ks = [0 if r.prefix_ids or r_max[i] == 0 else tree_count(r.n, eta) for i, r in enumerate(requests)]
        roots = Roots(ks, r_max, [{self.tokenizer.eos_token_id, *r.stop_token_ids} for r in requests],
                      [r.stop for r in requests], lambda t: self.tokenizer.decode(t, skip_special_tokens=True))
        tree = self._grow(prompts, roots, sampling) if any(ks) else [[] for _ in requests]
        slots: list[list[Completion | None]] = [[None] * r.n for r in requests]
        inner_reqs: list[GenerationRequest] = []
        origin: list[tuple[int, list[int], int]] = []  # per inner request: (request, its slots, tree length)
        for i, req in enumerate(requests):
            pads = self._continue(i, req, prompts[i], tree[i], ks[i], r_max[i], slots, inner_reqs,
                                  origin) if ks[i] else []
            free = pads + list(range(ks[i], req.n))  # sampled i.i.d. (all of a request the tree does not serve)
            if free:
                inner_reqs.append(req if ks[i] == 0 else GenerationRequest(
                    req.example, len(free), max_new_tokens=req.max_new_tokens, stop=req.stop,
                    stop_token_ids=req.stop_token_ids))
                origin.append((i, free, 0))
        taken = [0] * len(inner_reqs)
        for comp in self.inner.generate(inner_reqs, sampling) if inner_reqs else []:
            (i, where, cut), g = origin[comp.group], comp.group
            k, taken[g] = where[taken[g]], taken[g] + 1
            if cut:
                comp.segments = [Segment(0, cut, "prefix")] + (
                    [Segment(cut, len(comp.completion_ids))] if len(comp.completion_ids) > cut else [])
            comp.group = i
            slots[i][k] = comp
        for key, v in (("calls", 1), ("eta", eta), ("groups", sum(1 for r in requests if r.n)),
                       ("distinct", sum(len({tuple(c.completion_ids) for c in row}) for row in slots))):
            self._m[key] += v
        return [c for row in slots for c in row]  # type: ignore[misc]  (every slot is filled)

    def _continue(self, i, req, prompt, branches, k, r_max, slots, inner_reqs, origin) -> list[int]:
        """Request ``i``'s tree completions: ended branches as they are, the others and the padding (the first
        branch again) continued by the engine; returns the padding left to sample (the first branch ended)."""
        for key, v in (("roots", 1), ("branches", len(branches)), ("padded", k - len(branches))):
            self._m[key] += v
        rows = list(branches) + ([] if branches[0].done else [branches[0]] * (k - len(branches)))
        for slot, b in enumerate(rows):
            if b.done is not None:
                slots[i][slot] = Completion(req.example.id, list(prompt), list(b.tokens), list(b.logprobs), b.done,
                                            self.tokenizer.decode(b.tokens, skip_special_tokens=True), group=i,
                                            segments=[Segment(0, len(b.tokens), "prefix")])
                continue
            inner_reqs.append(GenerationRequest(req.example, 1, tuple(b.tokens), tuple(b.logprobs),
                                                max_new_tokens=r_max - len(b.tokens), stop=req.stop,
                                                stop_token_ids=req.stop_token_ids))
            origin.append((i, [slot], len(b.tokens)))
        return list(range(len(rows), k))

    def metrics(self) -> dict[str, float]:
        m, self._m = self._m, self._zero()
        if not m["calls"]:
            return {}
        out = {"latr/branches_created": m["created"], "latr/branches_pruned": m["pruned"],
               "latr/branches_suppressed": m["suppressed"], "latr/tree_tokens": m["tree_tokens"],
               "latr/tree_steps": m["steps"], "latr/padded_rows": m["padded"],
               "latr/mix_ratio": m["eta"] / m["calls"], "latr/tree_time_s": m["time"]}
        out.update({"latr/branches_per_root": m["branches"] / m["roots"]} if m["roots"] else {})
        out.update({"latr/distinct_per_group": m["distinct"] / m["groups"]} if m["groups"] else {})
        return out

    def state_dict(self) -> dict[str, Any]:
        return {"step": self.step}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.step = int(state.get("step", self.step))


def _check(cfg, params: LATRParams) -> list[str]:
    problems = single_turn_problems(cfg, "latr", "grows")
    if params.mix_schedule is not None and cfg.rollout.param_noise.sigma > 0:
        problems.append("rollout.strategy latr counts training steps by weight syncs, which rollout.param_noise "
                        "repeats around every call: use a constant mix_ratio with parameter noise")
    return problems


@ROLLOUT_STRATEGIES.register("latr", params=LATRParams, check=_check)
def build_latr(engine: Any, model, tokenizer, params: LATRParams, rollout_cfg, chat_template: bool = False
               ) -> LATRWrapper:
    """LATR: part of each group grown as a lookahead tree (fork at close runner-ups, prune repeats)."""
    require_single_turn(rollout_cfg, "latr", "grows")
    return LATRWrapper(engine, model, tokenizer, params, chat_template)
