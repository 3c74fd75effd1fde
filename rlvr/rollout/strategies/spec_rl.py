"""SPEC-RL: speculative reuse of the previous epoch's rollouts (``rollout.strategy: {name: spec_rl}``).

Liu, Wang, Min et al. 2025, "SPEC-RL: Accelerating On-Policy Reinforcement Learning via Speculative Rollouts",
arXiv:2509.23232; code ``ShopeeLLM/Spec-RL`` (``verl/utils/speculative_decoding.py``: ``spec_cut_with_knobs``; the
spec branch of ``RayPPOTrainer.fit``; docs/methods.md, `rollout.strategy: spec_rl`).

The completions of prompt q from the last time q was seen are a free draft. Per generation call, for each
request of n completions whose prompt has n stored drafts y (tokens y_1..y_L, behaviour log-probs
old_logp_t):

    new_logp_t = log pi_now(y_t | q, y_<t)           one teacher-forced forward of the trainer's model over
                                                      the drafts (no grad, eval mode, mode restored;
                                                      ``forward_rows`` rows per pass)             [N, T]
    D_t  = new_logp_t - old_logp_t                   [N, T]
    D'_t = s * (D_t - b),  b = -lenience             (official knobs; lenience 0, s 1: the exact test)
    accept_t = (D'_t >= 0) or (log U_t <= D'_t),     U_t ~ Uniform(0, 1), drawn from a generator seeded by
                                                      the call's sampling seed (a resumed run draws the same)
    cut = first rejected t (L when none is)          [N]
    cut == L : the draft is reused verbatim, nothing is generated
    cut <  L : prompt + y[:cut] is continued by the engine with max_new_tokens = R_max - cut

EXACT (from the official code): the acceptance test with its lenience/scale knobs (``bias = -lenience``),
the cut at the first rejection, verbatim reuse of fully accepted rows, ``max_new_tokens = R_max - cut``,
regeneration from the cut with the current policy, and saving this step's rollouts for next time.

rlvr's additions and deviations:

- Drafts are keyed by example id and rendered prompt (the official code keys by dataloader bucket and
  aligns by prompt text), so per-epoch reshuffling is fine; they are reused only when the request has no
  prefix of its own, asks for exactly as many completions as were stored, every draft fits in R_max, and
  the trainer has synced new weights since they were saved (so the stages of one step never reuse each
  other's completions; under ``rollout.param_noise``, which re-syncs around every call with fresh noise,
  they may). Anything else is generated normally. Each call's completions replace the stored
  ones of their prompt. A fully accepted draft that stopped at an older, shorter length limit is
  continued rather than reused.
- Behaviour log-probs of the reused prefix are the CURRENT policy's (``new_logp``), passed to the engine
  as ``prefix_logprobs``: the completion's ``logprobs`` are then exactly what the trainer recomputes, so
  importance ratios and the engine-vs-trainer mismatch metrics see a current-policy sample.
- ``exact: true``: the official regeneration from the cut is not the current policy's distribution (exact
  speculative sampling draws the rejected position from the residual max(0, p_new - p_old), which needs the
  old policy's full distribution there). Exact mode stores, with every saved completion, the distribution
  it was sampled from at each position (float32, at the sampling temperature and after top-p truncation,
  transformers' ``TemperatureLogitsWarper`` / ``TopPLogitsWarper`` as the engines apply them), tests
  acceptance on those: D_t = log p_new(y_t) - log p_old(y_t) with both processed (so lenience must be 0
  and s 1), samples y'_cut ~ norm(max(0, p_new - p_old)) at the first rejection and continues from
  y[:cut] + [y'_cut]. The output then follows pi_now exactly (``tests/methods/test_spec_rl.py`` checks it
  with a chi-square test). It costs a second forward (the distributions of the new completions) and stores
  T x V floats per completion: meant for small vocabularies and short completions; the builder and every
  save refuse (ValueError) beyond ``max_stored_floats``.

Usage: SPEC-RL pays off only when prompts recur, i.e. when training runs more than one epoch over the train
split (the default sampler draws without replacement, epoch by epoch, so every prompt comes back once per
``len(train) / prompts_per_step`` steps). With lenience > 0 the samples lean toward the old policy (the
paper's speed/fidelity knob; the official script uses 0.5). Drafts live in memory and in each checkpoint's
``state.json`` (under ``engine.strategy``): prompts x n x R_max token ids and log-probs. Metrics, since the
last report, under ``engine/spec_rl/``: ``reused_tokens``, ``generated_tokens``, ``draft_rows`` and, when
there were drafts, ``accept_rate`` (reused / draft tokens), ``mean_cut``, ``full_reuse_frac``.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any, Sequence

from pydantic import Field, model_validator

from rlvr.core.batch import build_batch
from rlvr.core.types import Completion, GenerationRequest, SamplingParams, Segment
from rlvr.lazy import F, no_grad, torch, transformers
from rlvr.registry import Params
from rlvr.models.prompts import encode_prompt
from rlvr.rollout.strategies.base import ROLLOUT_STRATEGIES, require_single_turn, single_turn_problems

__all__ = ["SpecRLParams", "SpecRLWrapper", "spec_cut", "sampling_probs", "build_spec_rl"]


class SpecRLParams(Params):
    lenience: float = Field(0.0, ge=0.0, description="accept iff U <= e^lenience * pi_new / pi_old (official "
                                                     "bias b = -lenience; 0: the exact speculative test)")
    scale: float = Field(1.0, gt=0.0, description="official knob s in D' = s (D - b); 1: exact")
    exact: bool = Field(False, description="store the sampling distributions and resample the first rejected "
                                           "token from the residual (exactly the current policy; small "
                                           "vocabularies only)")
    forward_rows: int = Field(64, gt=0, description="drafts per teacher-forced forward pass (bounds its memory)")
    max_stored_floats: float = Field(5e7, gt=0.0, description="exact mode: refuse to store more distribution "
                                                              "floats (vocab x tokens x completions) than this")

    @model_validator(mode="after")
    def _exact_needs_exact_test(self) -> "SpecRLParams":
        if self.exact and (self.lenience != 0.0 or self.scale != 1.0):
            raise ValueError("exact mode needs lenience 0 and scale 1 (any other test is not exact)")
        return self


def spec_cut(old_logp: torch.Tensor, new_logp: torch.Tensor, mask: torch.Tensor, log_u: torch.Tensor,
             lenience: float = 0.0, scale: float = 1.0) -> torch.Tensor:
    """``[N]`` index of the first rejected token of each row (its length when none is), all inputs ``[N, T]``."""
    valid = mask.bool()
    delta = (new_logp - old_logp).masked_fill(~valid, 0.0)
    d2 = scale * (delta + lenience)  # s (D - b) with b = -lenience
    bad = valid & ~((d2 >= 0) | (log_u <= d2))
    return torch.where(bad.any(1), bad.to(torch.int8).argmax(1), valid.sum(1))


def sampling_probs(logits: torch.Tensor, sampling: SamplingParams) -> torch.Tensor:
    """``[K, V]`` the distribution the engines sample from: temperature then top-p (transformers' warpers, in
    the engines' order), one-hot argmax when greedy."""
    if sampling.greedy:
        return F.one_hot(logits.argmax(-1), logits.shape[-1]).float()
    scores = logits.float()
    if sampling.temperature != 1.0:
        scores = transformers.TemperatureLogitsWarper(sampling.temperature)(None, scores)
    if sampling.top_p < 1.0:
        scores = transformers.TopPLogitsWarper(sampling.top_p)(None, scores)
    return F.softmax(scores, dim=-1)


@dataclass
class _Draft:
    ids: list[int]
    logprobs: list[float]
    finish: str
    probs: torch.Tensor | None = None  # [L, V] exact mode: the distribution each token was drawn from


@no_grad
def _score(model, completions: list[Completion], pad_id: int, sampling: SamplingParams, full: bool,
           rows: int) -> tuple[torch.Tensor, torch.Tensor | None, torch.Tensor | None]:
    """``logp [N, T]`` (log_softmax(logits / T) of each token, the trainer's convention) and, with ``full``,
    the sampling distributions ``[N, T, V]`` and the log-softmax ``[N, T, V]``; ``rows`` per forward, in eval
    mode (the model's mode restored)."""
    t = max(1, max(len(c.completion_ids) for c in completions))
    was_training = model.training
    model.eval()
    try:
        parts = [_score_rows(model, completions[s: s + rows], pad_id, sampling, full)
                 for s in range(0, len(completions), rows)]
    finally:
        model.train(was_training)

    def cat(k: int) -> torch.Tensor:  # right-pad every chunk's token axis to T
        return torch.cat([F.pad(x[k], (0, 0) * (x[k].dim() - 2) + (0, t - x[k].shape[1])) for x in parts])

    return (cat(0), cat(1), cat(2)) if full else (cat(0), None, None)


def _score_rows(model, completions: list[Completion], pad_id: int, sampling: SamplingParams, full: bool):
    device = next(model.parameters()).device
    batch = build_batch(completions, [0.0] * len(completions), pad_id).to(device)
    temp = 1.0 if sampling.greedy else sampling.temperature
    if not full:
        from rlvr.models.logprobs import completion_logprobs  # (defines a torch module)

        return (completion_logprobs(model, batch, temp)[0].cpu(),)
    trunk, head = getattr(model, model.base_model_prefix), model.get_output_embeddings()
    out = trunk(input_ids=batch.input_ids, attention_mask=batch.attention_mask, position_ids=batch.position_ids,
                use_cache=False)
    p, t = batch.prompt_len, batch.completion_mask.shape[1]
    logits = head(out.last_hidden_state[:, p - 1: p + t - 1]).float()
    softcap = getattr(model.config, "final_logit_softcapping", None)
    if softcap:
        logits = torch.tanh(logits / softcap) * softcap
    logsm = F.log_softmax(logits / temp, dim=-1)
    probs = sampling_probs(logits.reshape(-1, logits.shape[-1]), sampling).reshape(logits.shape)
    logp = logsm.gather(-1, batch.input_ids[:, p: p + t, None]).squeeze(-1)
    return logp.cpu(), probs.cpu(), logsm.cpu()


def _prompt_key(example_id: str, prompt_ids: Sequence[int]) -> str:
    return f"{example_id}#{hashlib.sha1(repr(list(prompt_ids)).encode()).hexdigest()[:16]}"


def _segments(cut: int, length: int) -> list[Segment] | None:
    if cut == 0:
        return None  # all sampled in this call
    return [Segment(0, cut, "prefix")] + ([Segment(cut, length, "sampled")] if length > cut else [])


class SpecRLWrapper:
    """Wraps an engine: rows whose previous completions the current policy accepts are reused, in part or
    whole (see the module docstring)."""

    name = "strategy"

    def __init__(self, inner: Any, model, tokenizer, params: SpecRLParams, chat_template: bool = False):
        self.inner, self.model, self.tokenizer = inner, model, tokenizer
        self.params, self.chat_template = params, chat_template
        self.drafts: dict[str, dict[str, Any]] = {}  # key -> {"version": int, "rows": [_Draft]}
        self.version, self.calls = 0, 0  # version: weight syncs seen (a draft is usable once it is older)
        self._m = self._zero()

    @staticmethod
    def _zero() -> dict[str, float]:
        return dict.fromkeys(("calls", "draft_rows", "draft_tokens", "reused", "full", "generated"), 0.0)

    def sync_weights(self) -> None:
        self.version += 1
        self.inner.sync_weights()

    def _usable(self, req: GenerationRequest, key: str, r_max: int, taken: set[str]) -> list[_Draft] | None:
        entry = self.drafts.get(key)
        if (entry is None or req.prefix_ids or req.n == 0 or key in taken or len(entry["rows"]) != req.n
                or entry["version"] >= self.version or any(len(d.ids) > r_max for d in entry["rows"])):
            return None
        if self.params.exact and any(d.probs is None or d.probs.shape[0] != len(d.ids) for d in entry["rows"]):
            return None
        taken.add(key)
        return entry["rows"]

    def generate(self, requests: Sequence[GenerationRequest], sampling: SamplingParams) -> list[Completion]:
        self.calls += 1
        seed = sampling.seed if sampling.seed is not None else self.calls
        gen = torch.Generator().manual_seed((seed * 2_654_435_761 + 40_503) % (2**31 - 1))
        prompts = [encode_prompt(self.tokenizer, r.example.prompt, self.chat_template) for r in requests]
        keys = [_prompt_key(r.example.id, p) for r, p in zip(requests, prompts)]
        r_max = [sampling.max_new_tokens if r.max_new_tokens is None else r.max_new_tokens for r in requests]
        taken: set[str] = set()
        drafts = {i: d for i, r in enumerate(requests) if (d := self._usable(r, keys[i], r_max[i], taken)) is not None}
        slots: list[list[Completion | None]] = [[None] * r.n for r in requests]
        inner_reqs: list[GenerationRequest] = []
        origin: list[tuple[int, int | None, int]] = []  # per inner request: (request, row or None, reused cut)
        for i, req in enumerate(requests):
            if i not in drafts:
                inner_reqs.append(req)
                origin.append((i, None, 0))
        self._speculate(requests, prompts, r_max, drafts, sampling, gen, slots, inner_reqs, origin)
        out = self.inner.generate(inner_reqs, sampling) if inner_reqs else []
        filled = [0] * len(inner_reqs)
        for comp in out:
            g = comp.group
            i, k, cut = origin[g]
            if k is None:  # a request generated as asked: its completions in order
                k, filled[g] = filled[g], filled[g] + 1
            else:
                comp.segments = _segments(cut, len(comp.completion_ids))
            self._m["generated"] += len(comp.completion_ids) - cut
            comp.group = i
            slots[i][k] = comp
        result: list[list[Completion]] = slots  # type: ignore[assignment]  (every slot is filled)
        self._m["calls"] += 1
        self._save(requests, keys, result, sampling)
        return [c for row in result for c in row]

    def _speculate(self, requests, prompts, r_max, drafts, sampling, gen, slots, inner_reqs, origin) -> None:
        """Score every draft row in one forward, cut, and fill ``slots`` (reused rows) or ``inner_reqs``."""
        rows = [(i, k, d) for i, ds in drafts.items() for k, d in enumerate(ds)]
        if not rows:
            return
        comps = [Completion("", prompts[i], d.ids, d.logprobs, d.finish, "") for i, _, d in rows]
        exact = self.params.exact
        new_lp, probs, logsm = _score(self.model, comps, self.tokenizer.pad_token_id, sampling, exact,
                                       self.params.forward_rows)
        n, t = new_lp.shape
        lengths = torch.tensor([len(d.ids) for _, _, d in rows])
        mask = torch.arange(t)[None, :] < lengths[:, None]
        if exact:  # D_t on the sampling distributions (after temperature and top-p)
            ids = torch.zeros(n, t, dtype=torch.long)
            old_p = torch.ones(n, t)
            for j, (_, _, d) in enumerate(rows):
                if d.ids:
                    ids[j, : len(d.ids)] = torch.tensor(d.ids)
                    old_p[j, : len(d.ids)] = d.probs.gather(1, ids[j, : len(d.ids), None]).squeeze(1)
            old, new = old_p.log(), probs.gather(-1, ids[..., None]).squeeze(-1).log()
        else:
            old = torch.zeros(n, t)
            for j, (_, _, d) in enumerate(rows):
                old[j, : len(d.logprobs)] = torch.tensor(d.logprobs, dtype=torch.float32)
            new = new_lp
        log_u = torch.rand((n, t), generator=gen).clamp_min(1e-12).log()
        cuts = spec_cut(old, new, mask, log_u, self.params.lenience, self.params.scale).tolist()
        m = self._m
        m["draft_rows"] += n
        m["draft_tokens"] += float(lengths.sum())
        m["reused"] += float(sum(cuts))
        for j, ((i, k, d), cut) in enumerate(zip(rows, cuts)):
            req, lps = requests[i], new_lp[j, :cut].tolist()
            prefix, done = list(d.ids[:cut]), None
            if cut == len(d.ids):
                if d.finish == "stop" or cut >= r_max[i]:
                    done = d.finish
                    m["full"] += 1
            elif exact:  # the rejected position: y' ~ norm(max(0, p_new - p_old))
                resid = (probs[j, cut] - d.probs[cut]).clamp_min(0)
                resid = resid if float(resid.sum()) > 0 else probs[j, cut]
                y = int(torch.multinomial(resid / resid.sum(), 1, generator=gen))
                prefix, lps = prefix + [y], lps + [float(logsm[j, cut, y])]
                if y in {self.tokenizer.eos_token_id, *req.stop_token_ids}:
                    done = "stop"
                elif len(prefix) >= r_max[i]:
                    done = "length"
                if done is not None:
                    m["generated"] += 1
            if done is not None:
                text = self.tokenizer.decode(prefix, skip_special_tokens=True)
                slots[i][k] = Completion(req.example.id, list(prompts[i]), prefix, lps, done, text, group=i,
                                         segments=_segments(cut, len(prefix)))
                continue
            inner_reqs.append(GenerationRequest(req.example, 1, prefix_ids=tuple(prefix), prefix_logprobs=tuple(lps),
                                                max_new_tokens=r_max[i] - len(prefix), stop=req.stop,
                                                stop_token_ids=req.stop_token_ids))
            origin.append((i, k, cut))

    def _save(self, requests, keys, result, sampling: SamplingParams) -> None:
        """Store each prefix-free request's completions as its prompt's drafts for next time."""
        keep = [i for i, r in enumerate(requests)
                if not r.prefix_ids and r.n > 0 and all(_storable(c) for c in result[i])]
        if not keep:
            return
        probs = None
        if self.params.exact:
            flat = [c for i in keep for c in result[i]]
            _, probs, _ = _score(self.model, flat, self.tokenizer.pad_token_id, sampling, True,
                                 self.params.forward_rows)
        j = 0
        for i in keep:
            rows = []
            for c in result[i]:
                p = probs[j, : len(c.completion_ids)].clone() if probs is not None else None
                rows.append(_Draft(list(c.completion_ids), [float(x) for x in c.logprobs], c.finish_reason, p))
                j += 1
            self.drafts[keys[i]] = {"version": self.version, "rows": rows}
        if self.params.exact:
            stored = sum(d.probs.numel() for e in self.drafts.values() for d in e["rows"] if d.probs is not None)
            if stored > self.params.max_stored_floats:
                raise ValueError(f"rollout.strategy spec_rl (exact): the stored distributions reached {stored:.3g} "
                                 f"floats, above max_stored_floats={self.params.max_stored_floats:.3g}; exact mode "
                                 "is for small vocabularies and short completions (raise the limit or use "
                                 "exact: false)")

    def metrics(self) -> dict[str, float]:
        m, self._m = self._m, self._zero()
        if not m["calls"]:
            return {}
        out = {"spec_rl/reused_tokens": m["reused"], "spec_rl/generated_tokens": m["generated"],
               "spec_rl/draft_rows": m["draft_rows"], "spec_rl/stored_prompts": float(len(self.drafts))}
        if m["draft_rows"]:
            out.update({"spec_rl/accept_rate": m["reused"] / max(m["draft_tokens"], 1.0),
                        "spec_rl/mean_cut": m["reused"] / m["draft_rows"],
                        "spec_rl/full_reuse_frac": m["full"] / m["draft_rows"]})
        return out

    def state_dict(self) -> dict[str, Any]:
        drafts = {k: {"version": e["version"],
                      "rows": [{"ids": d.ids, "logprobs": d.logprobs, "finish": d.finish,
                                **({"probs": d.probs.tolist()} if d.probs is not None else {})}
                               for d in e["rows"]]}
                  for k, e in self.drafts.items()}
        return {"version": self.version, "calls": self.calls, "drafts": drafts}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if not state:
            return
        self.version, self.calls = int(state["version"]), int(state["calls"])
        self.drafts = {k: {"version": int(e["version"]),
                           "rows": [_Draft([int(x) for x in r["ids"]], [float(x) for x in r["logprobs"]], r["finish"],
                                           _probs(r)) for r in e["rows"]]}
                       for k, e in state["drafts"].items()}


def _probs(row: dict[str, Any]) -> torch.Tensor | None:
    if "probs" not in row:
        return None
    if not row["ids"]:
        return torch.zeros(0, 0)
    return torch.tensor(row["probs"], dtype=torch.float32).reshape(len(row["ids"]), -1)


def _storable(c: Completion) -> bool:
    """A completion the policy sampled whole, with behaviour log-probs (no environment tokens)."""
    return c.logprobs is not None and c.loss_mask is None and not any(s.source == "inserted"
                                                                       for s in c.segments or ())


def _check(cfg, params: SpecRLParams) -> list[str]:
    return single_turn_problems(cfg, "spec_rl", "reuses")


@ROLLOUT_STRATEGIES.register("spec_rl", params=SpecRLParams, check=_check)
def build_spec_rl(engine: Any, model, tokenizer, params: SpecRLParams, rollout_cfg,
                  chat_template: bool = False) -> SpecRLWrapper:
    """SPEC-RL: reuse the previous epoch's completions as drafts, regenerate from the first rejected token."""
    require_single_turn(rollout_cfg, "spec_rl", "reuses")
    if params.exact:
        vocab = int(model.get_output_embeddings().weight.shape[0])
        rows = rollout_cfg.prompts_per_step * rollout_cfg.group_size
        need = vocab * rollout_cfg.max_new_tokens * rows
        if need > params.max_stored_floats:
            raise ValueError(f"rollout.strategy spec_rl exact mode stores vocab x max_new_tokens floats per "
                             f"completion: {vocab} x {rollout_cfg.max_new_tokens} x {rows} completions per step "
                             f"= {need:.3g} > max_stored_floats={params.max_stored_floats:.3g}; exact mode is for "
                             "small vocabularies and short completions")
    return SpecRLWrapper(engine, model, tokenizer, params, chat_template)
