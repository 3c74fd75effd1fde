"""MURPHY's execution-feedback rollout tree (``rollout.strategy: {name: murphy}``).

Ekbote, Lingam, Sanghavi, Omidvar-Tehrani, Huan, Deoras, Soatto 2025/26, "Murphy: Multi-Turn GRPO for
Self-Correcting Code Generation", arXiv:2511.07833 (docs/methods.md, `rollout.strategy: murphy`). RECONSTRUCTED: no
code was found; the structure is from the abstract and summaries, and the exact credit form, the pruning rule, the
feedback prompt and every default are rlvr's reading of them.

For each request (a prompt x, ``n`` = G), with the current policy:

    turn 1:     G attempts ~ pi(. | x), each scored by the task's verifier (bound with ``bind_task``):
                r = its pass fraction (``reward: pass_fraction``: the verifier's ``passed`` / ``total`` info,
                else a ``pass_fraction`` component, else its reward; ``reward: reward``: the reward), passing
                iff the score is ``correct``, feedback f = what the score says (below)
    turn t > 1: of the failing attempts of turn t-1 of this request, the ``keep_failed`` with the highest r
                (ties: the earlier one; all of them when unset) are expanded: ``branch`` (G') refinements
                each, sampled after  x ⊕ history ⊕ attempt ⊕ template(f)  and scored the same way
    up to ``turns`` (T) turns; a passing attempt, or one of turn T, is a leaf
    retrospective credit, from the leaves up:
        R(node) = r(node)                                        a leaf or a passing node
        R(node) = max(r(node), max_child R(child))               ``credit: max``  (MaRS)
        R(node) = mean({r(node)} ∪ {R(child) : children})        ``credit: mean`` (MeRS)

Returned per request: its sibling sets, the turn-1 attempts (parent: the prompt) and each expanded node's
refinements, every node once, labelled with R. A row is the node's context and its own attempt: the history
(the earlier attempts on its path, each followed by its feedback), then the new attempt. Only the new
attempt is trained: the earlier attempts (``"prefix"`` segments: the policy sampled them, but in the paper
they are the context the group shares) and the feedback (``"inserted"``: environment output) have loss
mask 0. The row's ``text`` is its own attempt (what the verifier scored). Each row is a
:class:`MurphyCompletion`: ``process_value`` = R (so the reward transform ``process_value`` puts it in the
reward), ``tree_node`` (1, 2, ... in creation order), ``tree_parent`` (0 for turn 1) and ``tree_branch``
(the prefix length). Its groups are exactly PROPA's sibling sets, so the ``propa`` advantage (GRPO within
rows of one request sharing a ``tree_parent``) is MURPHY's as it is.

**Feedback** (``feedback_text``): a string ``feedback`` in the score's info (any verifier's:
``<verifier>.feedback``) as it is; else its ``reason`` lines and its ``failures`` list (the code verifier
gives both: "2 of 3 tests failed; first: ...", and each failing test with why); else ``no_feedback`` (a
task without execution feedback, such as a text task with a binary reward, still works: each refinement
learns only that its parent was wrong). Cut to ``max_feedback_chars``, put in ``template`` and encoded as
plain text (no special tokens) right after the attempt, inside the same completion, for text and chat
prompts alike: rollout strategies cannot use the environments' chat renderer (a higher layer), so the
refinement continues the assistant's turn. A trailing EOS of the earlier attempt is dropped from the
history (the continuation must not start after an end of sequence).

rlvr's choices: the pruning is per level and per request; a refinement has the turn's ``max_new_tokens``
(the request's or the sampling's), capped so a row holds at most ``max_tokens`` completion tokens (default
that same ``max_new_tokens``, so no row is longer than the prompt-length check at set-up assumes; raise
``rollout.max_new_tokens`` to give refinements room; a node with no room left is not expanded); ``drop_constant`` leaves out sibling sets whose labels
are all equal (the paper's variance filter, RECONSTRUCTED; the turn-1 set is kept when nothing else is);
labels are meant to lie in [0, 1] (a negative R falls back to the trainer's reward, as an unlabelled row).
Requests that carry their own prefix, or ``n`` 0, are generated as asked. Each turn's sampling seed is the
call's + 7919 (t - 1). Cost: up to G + G·G'·(T - 1) generations and verifier calls per request (with
``keep_failed`` k: G + k·G'·(T - 1)), then the trainer scores every row again; ``workers`` threads score a
turn's attempts (verifiers that wait on a sandbox). Metrics since the last report, ``engine/murphy/``:
``groups``, ``nodes``, ``expanded``, ``dropped_sets``, ``first_pass`` (turn-1 attempts passing),
``refine_pass`` (refinements passing), ``solved`` (requests with a passing attempt), ``credit_mean``.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from typing import Any, Literal, Sequence

from pydantic import Field

from rlvr.core.types import Completion, GenerationRequest, SamplingParams, Score, Segment
from rlvr.registry import Params
from rlvr.rollout.strategies.propa import ProcessCompletion
from rlvr.rollout.strategies.base import ROLLOUT_STRATEGIES, require_single_turn, tree_problems
from rlvr.rollout.wrappers import as_subclass

__all__ = ["MurphyParams", "MurphyWrapper", "MurphyCompletion", "retrospective_credit", "top_failing",
           "feedback_text", "pass_fraction", "build_murphy"]

TEMPLATE = "\n\nExecution feedback:\n{feedback}\nThe attempt above is wrong; fix it.\n"
_SEED_STRIDE = 7919


class MurphyParams(Params):
    turns: int = Field(3, ge=1, description="turns T: attempts on a path (1: plain GRPO)")
    branch: int = Field(4, ge=1, description="refinements G' sampled from each expanded failing node")
    keep_failed: int | None = Field(2, ge=1, description="failing nodes expanded per level and request, those of "
                                                         "highest reward (None: all)")
    credit: Literal["max", "mean"] = Field("max", description="retrospective credit: max (MaRS) or mean (MeRS)")
    reward: Literal["pass_fraction", "reward"] = Field("pass_fraction", description="a node's r: its pass "
                                                       "fraction where the verifier reports one, or its reward")
    template: str = Field(TEMPLATE, description="the text after a failed attempt ({feedback}: what the score "
                                                "says)")
    no_feedback: str = Field("The answer is not correct.", description="feedback when the score says nothing")
    max_feedback_chars: int = Field(1500, gt=0, description="feedback is cut to this")
    max_tokens: int | None = Field(None, gt=0, description="most completion tokens of a row, history and new "
                                                           "attempt (None: the turn's max_new_tokens, the bound "
                                                           "the prompt-length check assumes)")
    drop_constant: bool = Field(False, description="leave out sibling sets whose labels are all equal")
    workers: int = Field(1, ge=1, description="threads scoring a turn's attempts")


def retrospective_credit(rewards: Sequence[float], passed: Sequence[bool], parents: Sequence[int],
                         rule: str = "max") -> list[float]:
    """R of every node of a forest in creation order (``parents[i]`` < i, -1 for a root): ``r`` for a leaf or a
    passing node, else ``max(r, max_child R)`` (``rule="max"``) or ``mean([r] + [R(child)...])`` (``"mean"``)."""
    if rule not in ("max", "mean"):
        raise ValueError(f"credit rule must be 'max' or 'mean', got {rule!r}")
    kids: list[list[int]] = [[] for _ in rewards]
    for i, p in enumerate(parents):
        if p >= i:
            raise ValueError(f"node {i}'s parent {p} comes after it (nodes must be in creation order)")
        if p >= 0:
            kids[p].append(i)
    out = [0.0] * len(rewards)
    for i in reversed(range(len(rewards))):
        vals = [out[c] for c in kids[i]]
        if passed[i] or not vals:
            out[i] = float(rewards[i])
        elif rule == "max":
            out[i] = max([float(rewards[i])] + vals)
        else:
            out[i] = (float(rewards[i]) + sum(vals)) / (1 + len(vals))
    return out


def top_failing(rewards: Sequence[float], passed: Sequence[bool], k: int | None) -> list[int]:
    """Indices of the failing nodes to expand: the ``k`` of highest reward (ties: the earlier), in index order."""
    failing = sorted((i for i, ok in enumerate(passed) if not ok), key=lambda i: (-rewards[i], i))
    return sorted(failing if k is None else failing[:k])


def _keyed(info: dict[str, Any], name: str) -> list[Any]:
    """``info[name]`` and every verifier's ``info["<verifier>.name"]`` (the task prefixes its verifiers' info)."""
    return [v for k, v in info.items() if k == name or k.endswith("." + name)]


def pass_fraction(score: Score) -> float:
    """The fraction of tests passed: the score's ``passed`` / ``total`` info, else its ``pass_fraction``
    component, else its reward."""
    passed, total = _keyed(score.info, "passed"), _keyed(score.info, "total")
    if passed and total and isinstance(total[0], (int, float)) and total[0] > 0:
        return float(passed[0]) / float(total[0])
    return float(score.components.get("pass_fraction", score.reward))


def feedback_text(score: Score, fallback: str = "The answer is not correct.") -> str:
    """What a failed attempt is told: the score's ``feedback`` info, else its ``reason`` lines and
    ``failures``, else ``fallback``."""
    for v in _keyed(score.info, "feedback"):
        if isinstance(v, str) and v.strip():
            return v.strip()
    lines: list[str] = []
    for v in _keyed(score.info, "reason"):
        if isinstance(v, str) and v.strip() and v.strip() not in lines:
            lines.append(v.strip())
    fails = [str(f) for v in _keyed(score.info, "failures") if isinstance(v, (list, tuple)) for f in v]
    if fails:
        lines += ["Failing tests:"] + [f"- {f}" for f in fails]
    return "\n".join(lines) or fallback


@dataclass
class MurphyCompletion(ProcessCompletion):
    """A node of a MURPHY tree: ``process_value`` is its retrospective credit R; ``turn`` its turn (1..T),
    ``node_reward`` its own r."""

    turn: int = 1
    node_reward: float = 0.0


@dataclass(eq=False)
class _Node:
    ids: list[int]  # this attempt's tokens
    logprobs: list[float] | None
    text: str
    finish: str
    prefix: list[int]  # the row's tokens before the attempt (history: earlier attempts and their feedback)
    prefix_lp: list[float] | None
    segments: list[Segment]  # the prefix's spans
    parent: "_Node | None" = None
    turn: int = 1
    node_id: int = 0
    r: float = 0.0
    passed: bool = False
    feedback: str = ""
    children: list["_Node"] = field(default_factory=list)


class MurphyWrapper:
    """Wraps an engine; grows a feedback-conditioned refinement tree per request and returns its sibling sets."""

    name = "strategy"
    forwards_trainer_model = False  # it rewrites requests; the engine underneath generates
    supports_images = True  # every request it sends keeps its example, so its images

    def __init__(self, inner: Any, tokenizer, params: MurphyParams):
        self.inner, self.tokenizer, self.params = inner, tokenizer, params
        self.task = None
        self._m = dict.fromkeys(("calls", "requests", "groups", "nodes", "expanded", "dropped", "first", "first_pass",
                                 "refined", "refine_pass", "solved", "credit"), 0.0)

    def bind_task(self, task) -> None:
        """The task whose verifier scores every attempt and says what failed (set by the trainer)."""
        self.task = task

    def sync_weights(self) -> None:
        self.inner.sync_weights()

    # ---- nodes ----------------------------------------------------------------------------------------

    def _score(self, examples: list, nodes: list[_Node]) -> None:
        p, task = self.params, self.task
        texts = [n.text for n in nodes]
        if p.workers > 1 and not getattr(task, "batched", False) and len(nodes) > 1:
            with ThreadPoolExecutor(p.workers) as pool:
                scores = list(pool.map(task.score, examples, texts))
        else:
            scores = list(task.score_batch(examples, texts))
        for n, s in zip(nodes, scores):
            n.r = pass_fraction(s) if p.reward == "pass_fraction" else float(s.reward)
            n.passed = s.correct
            n.feedback = "" if n.passed else feedback_text(s, p.no_feedback)[: p.max_feedback_chars]

    def _child_prefix(self, node: _Node) -> tuple[list[int], list[float] | None, list[Segment]]:
        """A refinement's prefix: ``node``'s, its attempt (trailing EOS dropped) and its feedback."""
        eos = self.tokenizer.eos_token_id
        k = len(node.ids) - 1 if node.ids and node.ids[-1] == eos else len(node.ids)
        fb = self.params.template.format(feedback=node.feedback)
        fb_ids = list(self.tokenizer(fb, add_special_tokens=False)["input_ids"]) if fb else []
        a, b = len(node.prefix), len(node.prefix) + k
        segs = list(node.segments) + ([Segment(a, b, "prefix")] if k else []) + \
            ([Segment(b, b + len(fb_ids), "inserted")] if fb_ids else [])
        lps = None if node.prefix_lp is None or node.logprobs is None else \
            node.prefix_lp + node.logprobs[:k] + [0.0] * len(fb_ids)
        return node.prefix + node.ids[:k] + fb_ids, lps, segs

    def _nodes(self, comps: list[Completion], parents: list[_Node | None], prefixes: list[tuple],
               turn: int) -> list[tuple[int, _Node]]:
        """``(comp.group, node)`` for each completion of one turn's call (``comp.group`` indexes ``parents`` and
        ``prefixes``), the nodes appended to their parents' children."""
        out = []
        for comp in sorted(comps, key=lambda c: c.group):  # creation order: by request (parent), then sample
            parent = parents[comp.group]
            prefix, prefix_lp, segs = prefixes[comp.group]
            new = list(comp.completion_ids[len(prefix):])
            lps = None if comp.logprobs is None else list(comp.logprobs[len(prefix):])
            node = _Node(new, lps, self.tokenizer.decode(new, skip_special_tokens=True), comp.finish_reason,
                         list(prefix), None if prefix_lp is None else list(prefix_lp), list(segs), parent, turn)
            if parent is not None:
                parent.children.append(node)
            out.append((comp.group, node))
        return out

    # ---- the engine contract ------------------------------------------------------------------------

    def generate(self, requests: Sequence[GenerationRequest], sampling: SamplingParams) -> list[Completion]:
        if self.task is None:
            raise RuntimeError("rollout.strategy murphy scores its attempts with the task's verifier; the "
                               "trainer binds it (bind_task), so build the engine through rlvr.run.setup")
        p = self.params
        grown = [i for i, r in enumerate(requests) if r.n > 0 and not r.prefix_ids]
        out: list[Completion] = []
        asked = sorted(set(range(len(requests))) - set(grown))
        if asked:
            for comp in self.inner.generate([requests[i] for i in asked], sampling):
                comp.group = asked[comp.group]
                out.append(comp)
        if not grown:
            return out
        reqs = [requests[i] for i in grown]
        comps = self.inner.generate(reqs, sampling)
        heads = {}
        for comp in comps:
            heads.setdefault(comp.group, (list(comp.prompt_ids), comp.vision))
        level = self._nodes(comps, [None] * len(reqs), [([], [], [])] * len(reqs), 1)
        trees: list[list[_Node]] = [[] for _ in reqs]
        for turn in range(1, p.turns + 1):
            self._score([reqs[k].example for k, _ in level], [n for _, n in level])
            for k, n in level:
                trees[k].append(n)
                n.node_id = len(trees[k])
            if turn == p.turns:
                break
            parents, prefixes, asks, owners = [], [], [], []
            for k, req in enumerate(reqs):
                room = req.max_new_tokens if req.max_new_tokens is not None else sampling.max_new_tokens
                mine = [n for kk, n in level if kk == k]
                cands = []
                for n in mine:
                    pre = self._child_prefix(n) if not n.passed else None
                    cap = room if p.max_tokens is None else p.max_tokens
                    left = room if pre is None else min(room, cap - len(pre[0]))
                    cands.append((n, pre, left))
                ok = [c for c in cands if c[1] is not None and c[2] > 0]
                for j in top_failing([c[0].r for c in ok], [False] * len(ok), p.keep_failed):
                    n, pre, left = ok[j]
                    parents.append(n)
                    owners.append(k)
                    prefixes.append(pre)
                    asks.append(replace(req, n=p.branch, prefix_ids=tuple(pre[0]), prefix_source="prefix",
                                        prefix_logprobs=None if pre[1] is None else tuple(pre[1]),
                                        max_new_tokens=left))
            if not asks:
                break
            self._m["expanded"] += len(asks)
            seed = None if sampling.seed is None else sampling.seed + _SEED_STRIDE * turn
            comps = self.inner.generate(asks, replace(sampling, seed=seed))
            level = [(owners[g], node) for g, node in self._nodes(comps, parents, prefixes, turn + 1)]
        for k, (i, req) in enumerate(zip(grown, reqs)):
            out += self._rows(i, req, trees[k], *heads[k])
        self._m["calls"] += 1
        self._m["requests"] += len(reqs)
        return out

    def _rows(self, group: int, req: GenerationRequest, nodes: list[_Node], prompt: list[int],
              vision: Any) -> list[Completion]:
        """The tree's sibling sets as completions (see the module docstring)."""
        index = {id(n): j for j, n in enumerate(nodes)}
        parents = [-1 if n.parent is None else index[id(n.parent)] for n in nodes]
        credit = retrospective_credit([n.r for n in nodes], [n.passed for n in nodes], parents, self.params.credit)
        sets = [[n for n in nodes if n.parent is None]] + [n.children for n in nodes if n.children]
        kept = [s for s in sets if not self.params.drop_constant or len({credit[index[id(n)]] for n in s}) > 1]
        self._m["dropped"] += len(sets) - len(kept)
        kept = kept or sets[:1]
        m = self._m
        m["groups"] += len(kept)
        m["nodes"] += len(nodes)
        m["first"] += len(sets[0])
        m["first_pass"] += sum(n.passed for n in sets[0])
        m["refined"] += len(nodes) - len(sets[0])
        m["refine_pass"] += sum(n.passed for n in nodes if n.parent is not None)
        m["solved"] += any(n.passed for n in nodes)
        m["credit"] += sum(credit) / len(credit)
        out = []
        for s in kept:
            for n in s:
                ids = n.prefix + n.ids
                lps = None if n.prefix_lp is None or n.logprobs is None else n.prefix_lp + n.logprobs
                comp = Completion(req.example.id, list(prompt), ids, lps, n.finish, n.text, group=group,
                                  loss_mask=[0.0] * len(n.prefix) + [1.0] * len(n.ids),
                                  segments=list(n.segments) + [Segment(len(n.prefix), len(ids))], vision=vision)
                out.append(as_subclass(comp, MurphyCompletion, tree_node=n.node_id,
                                       tree_parent=0 if n.parent is None else n.parent.node_id,
                                       tree_branch=len(n.prefix), process_value=credit[index[id(n)]],
                                       turn=n.turn, node_reward=n.r))
        return out

    def metrics(self) -> dict[str, float]:
        m, self._m = self._m, dict.fromkeys(self._m, 0.0)
        if not m["calls"]:
            return {}
        out = {"murphy/groups": m["groups"], "murphy/nodes": m["nodes"], "murphy/expanded": m["expanded"],
               "murphy/dropped_sets": m["dropped"], "murphy/first_pass": m["first_pass"] / max(m["first"], 1),
               "murphy/solved": m["solved"] / max(m["requests"], 1),
               "murphy/credit_mean": m["credit"] / max(m["requests"], 1)}
        if m["refined"]:
            out["murphy/refine_pass"] = m["refine_pass"] / m["refined"]
        return out


def _check(cfg, params: MurphyParams) -> list[str]:
    return tree_problems(cfg, 'murphy')


@ROLLOUT_STRATEGIES.register("murphy", params=MurphyParams, check=_check)
def build_murphy(engine: Any, model, tokenizer, params: MurphyParams, rollout_cfg, chat_template: bool = False
                 ) -> MurphyWrapper:
    """MURPHY: failing attempts refined after their execution feedback; sibling sets labelled by credit.

    The retrospective credit R (max or mean over a node's refinements) is each row's ``process_value``."""
    require_single_turn(rollout_cfg, "murphy", "grows")
    return MurphyWrapper(engine, tokenizer, params)
