"""arrol: online pruning of partial rollouts by a learned quality head (``rollout.strategy: {name: arrol}``).

Hsu et al. 2026, "Prune as You Generate: Online Rollout Pruning for Faster and Better RLVR", arXiv:2603.24840 (the
repository holds only a README; docs/methods.md, `rollout.strategy: arrol`). RECONSTRUCTED. Per request of n
completions:

    start N_0 = ceil(over_provision * n) rollouts, generated up to the first checkpoint T_1
    at checkpoint k = 1..K (token counts ``checkpoints``), over the candidates (finished ones included):
        s_i = q(h_i) = sigmoid(w . h_i / ||h_i|| + b)     h_i: the policy's last hidden state at the candidate's
                                                           last token (one no-grad forward, eval mode)
        keep n_k = n + round((N_0 - n)(K - k) / K) of them (n at the last checkpoint) by the balanced rule:
            the top ceil(n_k / 2) and the bottom floor(n_k / 2) by s (the middle goes)
        the kept unfinished ones continue to T_{k+1} (after T_K: to the length limit), as prefix requests
    the n survivors are the request's completions (their generated prefix a ``"prefix"`` segment, with its
    behaviour log-probs); pruned rows never reach the batch

The head is trained online: after scoring, each survivor's features at every checkpoint it passed are
labelled with its correctness (``correct``, else reward >= 1) and the head takes ``head_steps`` full-batch
gradient steps of the mean BCE (lr ``head_lr``), the policy untouched (features detached). Pruned rows have
no label and are not used. RECONSTRUCTED: the checkpoint schedule, the linear shrink of n_k, the unit-norm
features of a linear head, the optimiser. Not implemented: the paper's test-time reweighting by the head.
With ``over_provision`` 1 nothing is pruned. The head (weights and step count) is saved in checkpoints.
Metrics ``engine/arrol/{pruned, generated_tokens, full_tokens, head_bce, head_accuracy, score_mean}``:
``full_tokens`` estimates what N_0 full rollouts would have cost (survivors' mean length x N_0).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Sequence

from pydantic import Field, field_validator

from rlvr.core.batch import build_batch
from rlvr.core.types import Completion, GenerationRequest, SamplingParams, Segment
from rlvr.lazy import F, no_grad, torch
from rlvr.registry import Params
from rlvr.rollout.strategies.base import ROLLOUT_STRATEGIES, require_single_turn, single_turn_problems
from rlvr.rollout.wrappers import as_subclass

__all__ = ["ArrolParams", "ArrolWrapper", "ArrolCompletion", "balanced_keep", "keep_counts", "build_arrol"]


class ArrolParams(Params):
    over_provision: float = Field(1.5, ge=1.0, description="N_0 / n: rollouts started per completion kept")
    checkpoints: list[int] = Field([256], min_length=1, description="token counts at which rollouts are pruned")
    head_lr: float = Field(0.5, gt=0.0, description="the quality head's learning rate")
    head_steps: int = Field(5, gt=0, description="the head's gradient steps per scored call")
    forward_rows: int = Field(64, gt=0, description="candidates per feature forward")

    @field_validator("checkpoints")
    @classmethod
    def _increasing(cls, v: list[int]) -> list[int]:
        if any(t <= 0 for t in v) or any(b <= a for a, b in zip(v, v[1:])):
            raise ValueError("checkpoints must be positive and increasing")
        return v


@dataclass
class ArrolCompletion(Completion):
    """A survivor: its quality score at the last checkpoint and its features at every checkpoint it passed."""

    quality: float = 0.5
    features: list[Any] = field(default_factory=list)


def balanced_keep(scores: Sequence[float], n: int) -> list[int]:
    """Indices of the top ceil(n/2) and bottom floor(n/2) by score (ties by position), in their order."""
    if n >= len(scores):
        return list(range(len(scores)))
    order = sorted(range(len(scores)), key=lambda i: (-scores[i], i))
    top, bottom = (n + 1) // 2, n // 2
    keep = set(order[:top]) | (set(order[len(order) - bottom:]) if bottom else set())
    return sorted(keep)


def keep_counts(n0: int, n: int, k: int) -> list[int]:
    """n_k at each of ``k`` checkpoints, shrinking linearly from N_0 toward n (n at the last)."""
    return [n + round((n0 - n) * (k - j) / k) for j in range(1, k + 1)]


class ArrolWrapper:
    """Wraps an engine; over-provisions each request and prunes partial rollouts with a quality head."""

    name = "strategy"

    def __init__(self, inner: Any, model, tokenizer, params: ArrolParams):
        self.inner, self.model, self.tokenizer, self.params = inner, model, tokenizer, params
        hidden = model.get_output_embeddings().in_features
        self.w, self.b = torch.zeros(hidden), torch.zeros(())
        self.head_updates = 0
        self._m = self._zero()

    @staticmethod
    def _zero() -> dict[str, float]:
        return dict.fromkeys(("calls", "pruned", "gen", "full", "bce", "acc", "fits", "score", "scored"), 0.0)

    def sync_weights(self) -> None:
        self.inner.sync_weights()

    def score(self, feats: torch.Tensor) -> torch.Tensor:
        return torch.sigmoid(feats @ self.w + self.b)

    @no_grad
    def _features(self, comps: list[Completion]) -> torch.Tensor:
        """``[N, H]`` unit-norm last hidden states at each candidate's last token (its prompt's for none)."""
        model, out = self.model, []
        trunk = getattr(model, model.base_model_prefix)
        device = next(model.parameters()).device
        was = model.training
        model.eval()
        try:
            for s in range(0, len(comps), self.params.forward_rows):
                part = comps[s: s + self.params.forward_rows]
                batch = build_batch(part, [0.0] * len(part), self.tokenizer.pad_token_id).to(device)
                h = trunk(input_ids=batch.input_ids, attention_mask=batch.attention_mask,
                          position_ids=batch.position_ids, use_cache=False).last_hidden_state.float()
                last = batch.prompt_len - 1 + batch.lengths  # the last real token of each row
                out.append(F.normalize(h[torch.arange(len(part), device=device), last], dim=-1).cpu())
        finally:
            model.train(was)
        return torch.cat(out)

    def generate(self, requests: Sequence[GenerationRequest], sampling: SamplingParams) -> list[Completion]:
        p = self.params
        grown = [i for i, r in enumerate(requests) if r.n > 0 and not r.prefix_ids and p.over_provision > 1.0]
        where = sorted(set(range(len(requests))) - set(grown))
        out: list[list[Completion]] = [[] for _ in requests]
        if where:
            for comp in self.inner.generate([requests[i] for i in where], sampling):
                comp.group = where[comp.group]
                out[comp.group].append(comp)
        r_max = {i: sampling.max_new_tokens if requests[i].max_new_tokens is None else requests[i].max_new_tokens
                 for i in grown}
        cand: dict[int, list[tuple[Completion, list]]] = {i: [] for i in grown}  # (partial, features so far)
        n0 = {i: math.ceil(p.over_provision * requests[i].n) for i in grown}
        first = [GenerationRequest(requests[i].example, n0[i], max_new_tokens=min(p.checkpoints[0], r_max[i]),
                                   stop=requests[i].stop, stop_token_ids=requests[i].stop_token_ids) for i in grown]
        for comp in self.inner.generate(first, sampling) if first else []:
            cand[grown[comp.group]].append((comp, []))
            self._m["gen"] += len(comp)
        counts = {i: keep_counts(n0[i], requests[i].n, len(p.checkpoints)) for i in grown}
        for k, t_k in enumerate(p.checkpoints):
            flat = [(i, j) for i in grown for j in range(len(cand[i]))]
            feats = self._features([cand[i][j][0] for i, j in flat]) if flat else torch.zeros(0, len(self.w))
            scores = self.score(feats).tolist()
            for (i, j), f, s in zip(flat, feats, scores):
                cand[i][j][1].append(f)
                self._m["score"] += s
                self._m["scored"] += 1
            by_req: dict[int, list[float]] = {}
            for (i, _), s in zip(flat, scores):
                by_req.setdefault(i, []).append(s)
            for i in grown:
                keep = balanced_keep(by_req.get(i, []), counts[i][k])
                self._m["pruned"] += len(cand[i]) - len(keep)
                cand[i] = [(cand[i][j][0], cand[i][j][1], by_req[i][j]) for j in keep]  # type: ignore[misc]
            nxt = p.checkpoints[k + 1] if k + 1 < len(p.checkpoints) else None
            self._continue(requests, grown, cand, r_max, nxt, sampling)
        for i in grown:
            for comp, feats, s in cand[i]:  # type: ignore[misc]
                out[i].append(as_subclass(comp, ArrolCompletion, group=i, quality=float(s), features=list(feats)))
            if cand[i]:
                mean_len = sum(len(c) for c, *_ in cand[i]) / len(cand[i])
                self._m["full"] += mean_len * n0[i]
        self._m["calls"] += 1
        return [c for row in out for c in row]

    def _continue(self, requests, grown, cand, r_max, nxt, sampling) -> None:
        """Extend every kept, unfinished candidate to the next checkpoint (``nxt``) or to its length limit."""
        asks, slots = [], []
        for i in grown:
            for j, (comp, feats, s) in enumerate(cand[i]):
                limit = r_max[i] if nxt is None else min(nxt, r_max[i])
                if comp.finish_reason == "stop" or len(comp) >= limit:
                    continue
                req = requests[i]
                asks.append(GenerationRequest(req.example, 1, tuple(comp.completion_ids),
                                              None if comp.logprobs is None else tuple(comp.logprobs),
                                              max_new_tokens=limit - len(comp), stop=req.stop,
                                              stop_token_ids=req.stop_token_ids))
                slots.append((i, j))
        for comp in self.inner.generate(asks, sampling) if asks else []:
            i, j = slots[comp.group]
            old, feats, s = cand[i][j]
            cut = len(old)
            comp.segments = [Segment(0, cut, "prefix")] + ([Segment(cut, len(comp))] if len(comp) > cut else [])
            cand[i][j] = (comp, feats, s)
            self._m["gen"] += len(comp) - cut

    def observe(self, completions: Sequence[Completion], scores: Sequence[Any]) -> None:
        """Train the head on the scored survivors' features (labels: correct)."""
        xs, ys = [], []
        for comp, sc in zip(completions, scores):
            if isinstance(comp, ArrolCompletion) and comp.features:
                ok = float(sc.components.get("correct", sc.reward) >= 1.0)
                xs += list(comp.features)
                ys += [ok] * len(comp.features)
        if not xs:
            return
        x, y = torch.stack(xs), torch.tensor(ys)
        w, b = self.w.clone().requires_grad_(True), self.b.clone().requires_grad_(True)
        for _ in range(self.params.head_steps):
            loss = F.binary_cross_entropy_with_logits(x @ w + b, y)
            gw, gb = torch.autograd.grad(loss, (w, b))
            with torch.no_grad():
                w -= self.params.head_lr * gw
                b -= self.params.head_lr * gb
        self.w, self.b = w.detach(), b.detach()
        self.head_updates += 1
        with torch.no_grad():
            logits = x @ self.w + self.b
            self._m["bce"] += float(F.binary_cross_entropy_with_logits(logits, y))
            self._m["acc"] += float(((logits > 0).float() == y).float().mean())
            self._m["fits"] += 1

    def metrics(self) -> dict[str, float]:
        m, self._m = self._m, self._zero()
        if not m["calls"]:
            return {}
        out = {"arrol/pruned": m["pruned"], "arrol/generated_tokens": m["gen"], "arrol/full_tokens": m["full"]}
        if m["scored"]:
            out["arrol/score_mean"] = m["score"] / m["scored"]
        if m["fits"]:
            out.update({"arrol/head_bce": m["bce"] / m["fits"], "arrol/head_accuracy": m["acc"] / m["fits"]})
        return out

    def state_dict(self) -> dict[str, Any]:
        return {"w": self.w.tolist(), "b": float(self.b), "updates": self.head_updates}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if "w" in state:
            self.w, self.b = torch.tensor(state["w"]), torch.tensor(float(state["b"]))
            self.head_updates = int(state.get("updates", 0))


def _check(cfg, params: ArrolParams) -> list[str]:
    return single_turn_problems(cfg, "arrol", "prunes")


@ROLLOUT_STRATEGIES.register("arrol", params=ArrolParams, check=_check)
def build_arrol(engine: Any, model, tokenizer, params: ArrolParams, rollout_cfg, chat_template: bool = False
                ) -> ArrolWrapper:
    """arrol: over-provisioned groups pruned at checkpoints by an online quality head, balanced around 0.5."""
    require_single_turn(rollout_cfg, "arrol", "prunes")
    return ArrolWrapper(engine, model, tokenizer, params)
