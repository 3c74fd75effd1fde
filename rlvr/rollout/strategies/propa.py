"""PROPA's step-level MCTS rollouts (``rollout.strategy: {name: propa}``).

Jiang, Lei, Ding, Ehinger, Lau 2025, "PROPA: Toward Process-level Optimization in Visual Reasoning via
Reinforcement Learning", arXiv:2511.10279; code ``YanbeiJiang/PROPA`` (``run_MCTS_train_qwen_grpo.py``,
``create_GRPO_train_qwen.py``, ``swift/plugin/orm.py``). See docs/methods.md, `rollout.strategy: propa`: the MCTS
and the GRPO data EXACT from the code; the interleaving with SFT and the process reward model are not built here
(see below).

For each request (a question x), with the current policy:

    node = one reasoning step (the tokens up to and including ``delimiter``, at most ``step_tokens``);
           the root is the question; a node is terminal if its step contains ``terminal`` (case-insensitive)
           or ends the completion (EOS), or it is ``max_steps`` deep, or its path holds the rollout's
           ``max_new_tokens`` (no path is longer than a plain completion could be)
    repeat ``iterations`` times:
      selection: from the root, the child of highest UCB = Q/N + c sqrt(2 ln N_parent / N_child)
                 (unvisited children: +inf, the first one) down to a leaf (the code's form; the paper
                 writes the bound without the 2)
      terminal leaf: reward r = 1 iff the path's text is correct (the task's verifier), backed up
      else expansion: ``expansions`` next steps sampled at the rollout temperature after the path so far
      simulation from each new child: a greedy continuation, step by step until a terminal step or
                 ``max_steps`` steps in all; r = 1 iff the path + continuation is correct
      backup: N += 1 and V += r on the child and every ancestor
    GRPO data: every non-terminal node with children gives one group, its children; label
        l_c = ln(1 + 10 Q_c) / ln 11,  Q_c = V_c / N_c (0 when unvisited)       (log_boost)
    skipped when the labels are all 0, all 1, or span less than ``min_span``

The reference builds these groups offline over a data batch and trains GRPO on them with the label as the
reward (``custom_grpo`` returns the stored label). Here every kept group is returned as the request's
completions: each child is a completion whose prefix (the path's steps, ``"prefix"`` segment, loss mask 0:
the reference's prompt holds them) is followed by its step (trained), with ``process_value`` = its label and
``tree_parent`` = its parent node, so the reward transform ``process_value`` puts the label in the reward and
the advantage ``propa`` normalises within each sibling set. rlvr's choices: the verifier replaces the
reference's string match of "the final answer is <gold>"; the greedy simulation is one engine call that is
then cut into steps (the same tokens as step-by-step greedy decoding under the step cap); a request keeps at
most ``max_groups`` sibling sets (default ``n // expansions``, at least 1), those whose labels vary most, so a
step's trained rows stay near the configured budget; when no node qualifies, the root's children are
returned (a group without signal, as GRPO has).

Interleaved SFT (``sft.interleave_every`` with ``sft.interleave_source: rollouts``): each tree also yields
supervised rows (:meth:`PROPAWrapper.sft_rows`), as ``create_SFT_train_*_after_grpo.py`` builds them: the paths
to at most ``sft_paths`` correct terminal nodes (when there are more, the pair whose lowest common ancestor is
shallowest), or, when the search found no correct path, the question's reference solution. The reference
writes one row per step (question + earlier steps -> step); one row per path, every step trained, holds the
same token losses. The reference's filter on the root's stored value is not reproduced.

Process reward model (``prm: true``, :mod:`rlvr.learners.prm`): trained after every search on its trees'
labelled prefixes (:func:`rlvr.rollout.strategies.propa_tree.prm_rows`), saved in checkpoints, and used at evaluation by
``rlvr eval --search prm`` (:mod:`rlvr.eval.prm_search`).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Sequence

from pydantic import Field

from rlvr.core.types import Completion, GenerationRequest, SamplingParams, Segment
from rlvr.registry import Params
from rlvr.rollout.strategies.propa_tree import Node, best_paths, log_boost, prm_rows, sibling_labels, skipped, ucb
from rlvr.rollout.strategies.rose import TreeCompletion
from rlvr.rollout.strategies.base import ROLLOUT_STRATEGIES, require_single_turn, tree_problems
from rlvr.rollout.wrappers import as_subclass

__all__ = ["PROPAParams", "PROPAWrapper", "ProcessCompletion", "log_boost", "ucb", "sibling_labels", "skipped",
           "best_paths", "build_propa"]


class PROPAParams(Params):
    iterations: int = Field(10, gt=0, description="MCTS iterations per question (num_iterations)")
    expansions: int = Field(4, ge=2, description="next steps sampled when a leaf is expanded")
    max_steps: int = Field(8, gt=0, description="steps in a path before it ends (simulations included)")
    step_tokens: int = Field(128, gt=0, description="most tokens in one step")
    c: float = Field(1.0, ge=0.0, description="UCB exploration constant")
    delimiter: str = Field("\n", min_length=1, description="the text that ends a step")
    terminal: str = Field("the final answer is", description="a step containing it ends the path (EOS does too)")
    min_span: float = Field(0.1, ge=0.0, description="a sibling set whose labels span less is skipped")
    max_groups: int | None = Field(None, gt=0, description="sibling sets kept per question (default n // expansions)")
    sft_paths: int = Field(2, gt=0, description="correct paths per question kept for the interleaved SFT phases")
    prm: bool = Field(False, description="train a process reward model on each step's tree labels (saved in "
                                         "checkpoints; what rlvr eval --search prm reads)")
    prm_lr: float = Field(1e-5, gt=0.0, description="the process reward model's AdamW learning rate")
    prm_batch_size: int = Field(32, gt=0, description="rows per process reward model step")
    prm_epochs: int = Field(1, gt=0, description="passes over each step's rows")


@dataclass
class ProcessCompletion(TreeCompletion):
    """A candidate step of a PROPA tree: ``process_value`` is its label (-1: none)."""

    process_value: float = -1.0


class PROPAWrapper:
    """Wraps an engine; grows a step-level MCTS tree per request and returns its sibling sets."""

    name = "strategy"
    supports_images = True  # every request it sends keeps its example, so its images (PROPA on a VLM)

    def __init__(self, inner: Any, tokenizer, params: PROPAParams, prm: Any = None):
        self.inner, self.tokenizer, self.params = inner, tokenizer, params
        self.prm = prm  # rlvr.learners.prm.ProcessRewardModel, trained on every call's trees (params.prm)
        self._prm_metrics: dict[str, float] = {}
        self.task = None
        self._prompt: dict[int, tuple[list[int], Any]] = {}  # request -> (rendered prompt ids, its images)
        self._rows: list[Completion] = []  # supervised rows since the last sft_rows()
        self._m = dict.fromkeys(("calls", "groups", "skipped", "sims", "correct_sims", "nodes"), 0.0)

    def bind_task(self, task) -> None:
        """The task whose verifier scores the simulations (set by the trainer)."""
        self.task = task

    def sync_weights(self) -> None:
        self.inner.sync_weights()

    # ---- tree steps ---------------------------------------------------------------------------------

    def _cut_step(self, ids: list[int], lps: list[float], reason: str) -> tuple[list[int], list[float], bool]:
        """The first step of ``ids`` (through the first delimiter or EOS) and whether it ends the path. Whether a
        prefix's text holds the delimiter only changes once as the prefix grows, so the shortest such prefix is
        found by bisection: O(log L) decodes, not one per token."""
        p = self.params
        eos = self.tokenizer.eos_token_id
        end = next((j + 1 for j, t in enumerate(ids) if t == eos), len(ids))  # through the first EOS

        def text(j: int) -> str:
            return self.tokenizer.decode(ids[:j], skip_special_tokens=True)

        def terminal(t: str) -> bool:
            return bool(p.terminal) and p.terminal.lower() in t.lower()

        if end and p.delimiter in text(end):
            lo, hi = 1, end
            while lo < hi:
                mid = (lo + hi) // 2
                lo, hi = (lo, mid) if p.delimiter in text(mid) else (mid + 1, hi)
            return ids[:lo], lps[:lo], ids[lo - 1] == eos or terminal(text(lo))
        if end < len(ids) or (ids and ids[-1] == eos):
            return ids[:end], lps[:end], True
        return ids, lps, reason == "stop" or terminal(text(len(ids)))

    def _correct(self, example, ids: list[int]) -> float:
        text = self.tokenizer.decode(ids, skip_special_tokens=True)
        return 1.0 if self.task.score(example, text).correct else 0.0

    def _select(self, root: Node) -> Node:
        node = root
        while node.children:
            node = max(node.children, key=lambda ch: ucb(ch.value, ch.visits, node.visits, self.params.c))
        return node

    @staticmethod
    def _backup(node: Node, r: float) -> None:
        while node is not None:
            node.visits += 1
            node.value += r
            node = node.parent

    def _budget(self, req: GenerationRequest, sampling: SamplingParams) -> int:
        """A path's token budget: the request's (or the sampling's) ``max_new_tokens``."""
        return sampling.max_new_tokens if req.max_new_tokens is None else req.max_new_tokens

    def _iteration(self, reqs: Sequence[GenerationRequest], roots: list[Node], sampling: SamplingParams,
                   it: int) -> None:
        p = self.params
        leaves = [self._select(root) for root in roots]
        expand = []
        for i, leaf in enumerate(leaves):
            if leaf.terminal or leaf.depth >= p.max_steps or len(leaf.path()[0]) >= self._budget(reqs[i], sampling):
                leaf.terminal = True
                leaf.correct = self._correct(reqs[i].example, leaf.path()[0])
                self._backup(leaf, leaf.correct)
            else:
                expand.append(i)
        if not expand:
            return
        asks = []
        for i in expand:
            ids, lps = leaves[i].path()
            room = self._budget(reqs[i], sampling) - len(ids)
            asks.append(replace(reqs[i], n=p.expansions, prefix_ids=tuple(ids), prefix_logprobs=tuple(lps),
                                prefix_source="prefix", max_new_tokens=min(p.step_tokens, room), stop=(p.delimiter,)))
        seed = None if sampling.seed is None else sampling.seed + 7919 * it
        comps = self.inner.generate(asks, replace(sampling, seed=seed))
        new: list[tuple[int, Node]] = []
        for comp in comps:
            i = expand[comp.group]
            self._prompt.setdefault(i, (list(comp.prompt_ids), comp.vision))
            leaf = leaves[i]
            start = len(asks[comp.group].prefix_ids)
            lps = list(comp.logprobs or [0.0] * len(comp.completion_ids))
            step, step_lp, done = self._cut_step(comp.completion_ids[start:], lps[start:], comp.finish_reason)
            full = start + len(step) >= self._budget(reqs[i], sampling)
            child = Node(step, step_lp, leaf, terminal=done or full or leaf.depth + 1 >= p.max_steps,
                          depth=leaf.depth + 1)
            leaf.children.append(child)
            new.append((i, child))
        self._simulate(reqs, new, sampling)

    def _simulate(self, reqs: Sequence[GenerationRequest], new: list[tuple[int, Node]],
                  sampling: SamplingParams) -> None:
        p = self.params
        sims, asks = [], []
        for i, child in new:
            ids, _ = child.path()
            if child.terminal:
                child.correct = self._correct(reqs[i].example, ids)
                self._backup(child, child.correct)
                continue
            sims.append((i, child, ids))
            room = min(p.step_tokens * (p.max_steps - child.depth), self._budget(reqs[i], sampling) - len(ids))
            asks.append(GenerationRequest(reqs[i].example, 1, prefix_ids=tuple(ids), prefix_source="prefix",
                                          max_new_tokens=room))
        if not asks:
            return
        greedy = replace(sampling, temperature=0.0, top_p=1.0)
        comps = sorted(self.inner.generate(asks, greedy), key=lambda c: c.group)
        for (i, child, ids), comp in zip(sims, comps):
            rest, steps = list(comp.completion_ids[len(ids):]), child.depth
            kept: list[int] = []
            while rest and steps < p.max_steps:
                step, _, done = self._cut_step(rest, [0.0] * len(rest), comp.finish_reason if len(rest) else "stop")
                kept += step
                rest = rest[len(step):]
                steps += 1
                if done:
                    break
            r = self._correct(reqs[i].example, ids + kept)
            self._m["sims"] += 1
            self._m["correct_sims"] += r
            self._backup(child, r)

    # ---- the engine contract ------------------------------------------------------------------------

    def generate(self, requests: Sequence[GenerationRequest], sampling: SamplingParams) -> list[Completion]:
        if self.task is None:
            raise RuntimeError("rollout.strategy propa scores its simulations with the task's verifier; the "
                               "trainer binds it (bind_task), so build the engine through rlvr.run.setup")
        grown = [i for i, r in enumerate(requests) if r.n > 0 and not r.prefix_ids]
        out: list[Completion] = []
        asked = sorted(set(range(len(requests))) - set(grown))
        if asked:
            for comp in self.inner.generate([requests[i] for i in asked], sampling):
                comp.group = asked[comp.group]
                out.append(comp)
        reqs = [requests[i] for i in grown]
        roots = [Node([], [], None) for _ in reqs]
        self._prompt = {}
        for it in range(self.params.iterations):
            self._iteration(reqs, roots, sampling, it)
        labelled: list[tuple[Completion, float]] = []
        for k, (i, root) in enumerate(zip(grown, roots)):
            out += self._groups(i, requests[i], root, *self._prompt[k])
            self._rows += self._sft_rows(requests[i], root, *self._prompt[k])
            labelled += prm_rows(requests[i].example.id, root, *self._prompt[k])
        if self.prm is not None and labelled:
            self._prm_metrics = self.prm.update([r for r, _ in labelled], [lab for _, lab in labelled],
                                                seed=0 if sampling.seed is None else sampling.seed)
        self._m["calls"] += 1
        return out

    def _groups(self, group: int, req: GenerationRequest, root: Node, prompt: list[int],
                vision: Any) -> list[Completion]:
        """The kept sibling sets of one tree as completions (see the module docstring)."""
        p = self.params
        nodes, stack = [], [root]
        while stack:  # number the nodes in creation (depth-first, child order) order
            n = stack.pop(0)
            n.node_id = len(nodes) + 1
            nodes.append(n)
            stack = list(n.children) + stack
        self._m["nodes"] += len(nodes)
        sets = []
        for n in nodes:
            if n.terminal or not n.children:
                continue
            labels = sibling_labels(n.children, p.min_span)
            if labels is None:
                self._m["skipped"] += 1
                continue
            spread = max(labels) - min(labels)
            sets.append((-spread, n.node_id, n, labels))
        keep = p.max_groups or max(1, req.n // p.expansions)
        chosen = [(n, labels) for _, _, n, labels in sorted(sets)[:keep]]
        if not chosen and root.children:
            chosen = [(root, [log_boost(ch.value / ch.visits) if ch.visits else 0.0 for ch in root.children])]
        self._m["groups"] += len(chosen)
        out = []
        for n, labels in chosen:
            prefix, prefix_lp = n.path()
            for ch, label in zip(n.children, labels):
                ids = prefix + ch.ids
                comp = Completion(req.example.id, list(prompt), ids, prefix_lp + ch.logprobs, "stop",
                                  self.tokenizer.decode(ids, skip_special_tokens=True), group=group,
                                  loss_mask=[0.0] * len(prefix) + [1.0] * len(ch.ids),
                                  segments=([Segment(0, len(prefix), "prefix")] if prefix else []) +
                                           [Segment(len(prefix), len(ids))], vision=vision)
                out.append(as_subclass(comp, ProcessCompletion, tree_node=ch.node_id, tree_parent=n.node_id,
                                       tree_branch=len(prefix), process_value=label))
        return out

    def _sft_rows(self, req: GenerationRequest, root: Node, prompt: list[int], vision: Any) -> list[Completion]:
        """The supervised rows of one tree (``create_SFT_train_*_after_grpo.py``): the paths to at most
        ``sft_paths`` correct terminal nodes (those whose lowest common ancestor is shallowest), or, when the
        search found none, the example's reference solution (``Example.sft_target``) when it has one."""
        correct, stack = [], [root]
        while stack:
            n = stack.pop()
            stack += n.children
            if n.terminal and n.correct >= 1.0:
                correct.append(n)
        ex = req.example
        if not correct:
            if not ex.sft_target:
                return []
            ids = self.tokenizer(ex.sft_target, add_special_tokens=False)["input_ids"] + [self.tokenizer.eos_token_id]
            return [Completion(ex.id, list(prompt), ids, None, "stop", ex.sft_target, vision=vision)]
        rows = []
        for n in best_paths(correct, self.params.sft_paths):
            ids, _ = n.path()
            rows.append(Completion(ex.id, list(prompt), ids, None, "stop",
                                   self.tokenizer.decode(ids, skip_special_tokens=True), vision=vision))
        return rows

    def sft_rows(self) -> list[Completion]:
        """The supervised rows gathered since the last call (``sft.interleave_source: rollouts``)."""
        rows, self._rows = self._rows, []
        return rows

    def metrics(self) -> dict[str, float]:
        m, self._m = self._m, dict.fromkeys(self._m, 0.0)
        if not m["calls"]:
            return {}
        out = {"propa/groups": m["groups"], "propa/skipped_sets": m["skipped"], "propa/nodes": m["nodes"],
               **{f"propa/{k}": v for k, v in self._prm_metrics.items()}}
        self._prm_metrics = {}
        if m["sims"]:
            out["propa/sim_accuracy"] = m["correct_sims"] / m["sims"]
        return out

    def save_files(self, folder) -> None:
        """The process reward model into a checkpoint folder (``prm/``)."""
        if self.prm is not None:
            self.prm.save(folder)

    def load_files(self, folder) -> None:
        if self.prm is not None:
            self.prm.load(folder)

    def state_dict(self) -> dict[str, Any]:
        return {}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        return None


def _check(cfg, params: PROPAParams) -> list[str]:
    return tree_problems(cfg, 'propa')


@ROLLOUT_STRATEGIES.register("propa", params=PROPAParams, check=_check)
def build_propa(engine: Any, model, tokenizer, params: PROPAParams, rollout_cfg, chat_template: bool = False
                ) -> PROPAWrapper:
    """PROPA: step-level MCTS per question; the sibling steps of its nodes, labelled by their Q values."""
    require_single_turn(rollout_cfg, "propa", "grows")
    prm = None
    if params.prm:
        from rlvr.learners.prm import ProcessRewardModel

        prm = ProcessRewardModel(model, tokenizer.pad_token_id, params.prm_lr, batch_size=params.prm_batch_size,
                                 epochs=params.prm_epochs)
    return PROPAWrapper(engine, tokenizer, params, prm)
