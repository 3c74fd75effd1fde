"""One GRPO step in one file: read this first.

The general step (:func:`rlvr.train.loop.train_step`) is this step plus registries (advantage estimators,
objectives, aggregations, transforms, the producers of extra tensors, the learners trained beside the
policy), rollout strategies and engine wrappers, and distribution. For the configuration this file accepts
(:func:`problems`: the ``hf`` engine, the ``grpo`` advantage, ``ppo_clip`` with the ``ratio`` clip rule,
``token_mean``, AdamW, no KL, one process: the defaults) the two run the same arithmetic, and
``tests/test_reference_step.py`` checks that they end with bit-identical weights.

One step, for P prompts with G completions each (N = P G rows):

    1. sample P prompts (a seeded shuffle of the train split, epoch by epoch) and G completions of each from
       the policy, with their behaviour log-probs                                          (the hf engine)
    2. score each completion with the task's verifier: rewards r [N]
    3. A_i = (r_i - mean_g r) / (std_g r + eps), 0 for a group whose rewards are all equal,
       the same A for every token of completion i                       (GRPO: Shao et al. 2024, arXiv:2402.03300)
    4. old log-probs of the sampled tokens, once, without gradient (the policy moves between the
       minibatches of the step, so the ratio below is measured against the policy that sampled)
    5. for each of M minibatches of a seeded shuffle of the rows, micro-batch by micro-batch:
           rho_t = exp(logp_t - old_logp_t)
           l_t   = max(-A rho_t, -A clip(rho_t, 1 - eps_low, 1 + eps_high))        (PPO: arXiv:1707.06347)
           L     = sum_{i,t} l_{i,t} / (completion tokens of the minibatch)      (token mean: DAPO, arXiv:2503.14476)
       backward each micro-batch's share, clip the gradient's norm, one AdamW step

Every tensor here is built once, in the order above; nothing is computed that this GRPO does not read.
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

import torch

from rlvr.algorithms.grouping import group_constant, group_mean, group_std
from rlvr.core.batch import RolloutBatch, build_batch
from rlvr.core.seeds import step_seed
from rlvr.core.types import GenerationRequest, SamplingParams
from rlvr.engines.hf import HFEngine
from rlvr.models import shared_prefix
from rlvr.models.logprobs import batch_logprobs, completion_logprobs
from rlvr.sampling.prompts import UniformSampler

__all__ = ["ReferenceGRPO", "problems"]


def problems(cfg: Any) -> list[str]:
    """Why ``cfg`` is not the configuration this file implements (empty when it is)."""
    alg, out = cfg.algorithm, []
    wanted = {"rollout.engine": (cfg.rollout.engine, "hf"), "algorithm.advantage": (alg.advantage.name, "grpo"),
              "algorithm.objective": (alg.objective.name, "ppo_clip"), "algorithm.clip": (alg.clip.name, "ratio"),
              "algorithm.aggregation": (alg.aggregation.name, "token_mean"),
              "algorithm.correction": (alg.correction.name, "none"), "optim.optimizer": (cfg.optim.optimizer.name, "adamw"),
              "optim.schedule": (cfg.optim.schedule, "constant"), "data.sampler": (cfg.data.sampler.name, "uniform"),
              "data.budget": (cfg.data.budget.name, "fixed"), "rollout.strategy": (cfg.rollout.strategy.name, "plain"),
              "algorithm.old_logp": (alg.old_logp, "recompute")}
    out += [f"{key} is {got!r}, not {want!r}" for key, (got, want) in wanted.items() if got != want]
    if getattr(alg.advantage.params, "std", "unbiased") != "unbiased" or \
            getattr(alg.objective.params, "dual_clip", None) is not None:
        out.append("the grpo advantage with the unbiased std and ppo_clip without a dual clip only")
    if alg.kl.coef or alg.reward_transforms or alg.advantage_transforms or alg.loss_terms:
        out.append("no KL, reward or advantage transforms, or loss terms")
    if alg.dynamic_sampling.enabled or alg.overlong.filter or alg.overlong.soft_penalty or alg.critic.heads:
        out.append("no dynamic sampling, overlong shaping or critic")
    if cfg.optim.warmup_steps or cfg.train.micro_batch_tokens or cfg.train.autocast or cfg.rollout.max_staleness:
        out.append("no learning-rate warm-up, token-capped micro-batches, autocast or asynchronous rollouts")
    if cfg.rollout.multiturn.env is not None or cfg.model.lora.rank or cfg.sft.interleave_every:
        out.append("single-turn rollouts, no LoRA, no interleaved SFT")
    if cfg.rollout.group_size < 2:
        out.append("groups of at least two completions")
    return out


class ReferenceGRPO:
    """The policy ``model`` (its ``tokenizer``) trained with GRPO on ``task``'s train split, as ``cfg`` says."""

    def __init__(self, model: torch.nn.Module, tokenizer: Any, task: Any, cfg: Any):
        bad = problems(cfg)
        if bad:
            raise ValueError("the reference GRPO step does not implement this config: " + "; ".join(bad))
        self.model, self.tokenizer, self.task, self.cfg = model, tokenizer, task, cfg
        if cfg.train.shared_prefix:  # each group's prompt through the trunk once: the same log-probs, less work
            shared_prefix.enable(model)
        self.engine = HFEngine(model, tokenizer, batch_size=cfg.rollout.batch_size,
                               chat_template=cfg.model.chat_template)
        self.prompts = UniformSampler(task.examples("train"), cfg.seed)
        self.params = [p for p in model.parameters() if p.requires_grad]
        o = cfg.optim  # (fused AdamW where torch has it for these tensors, as optim.optimizer adamw picks)
        fused = all(p.device.type in ("cpu", "cuda") and p.is_floating_point() for p in self.params)
        self.optimizer = torch.optim.AdamW(self.params, lr=o.lr, betas=o.betas, weight_decay=o.weight_decay,
                                           fused=fused or None)

    def step(self, step: int) -> dict[str, float]:
        """RL step ``step`` (from 0); its metrics."""
        cfg, r = self.cfg, self.cfg.rollout
        # 1. P prompts, G completions each (completion k of prompt i has group i), with behaviour log-probs
        examples = self.prompts.next(r.prompts_per_step, step)
        requests = [GenerationRequest(ex, r.group_size) for ex in examples]
        sampling = SamplingParams(r.temperature, r.top_p, r.max_new_tokens, seed=step_seed(cfg.seed, step))
        completions = self.engine.generate(requests, sampling)
        # 2. rewards from the task's verifier
        rewards = [self.task.score(examples[c.group], c.text).reward for c in completions]
        device = next(self.model.parameters()).device
        batch = build_batch(completions, rewards, self.tokenizer.pad_token_id).to(device)
        # 3. group-relative advantages, one per completion, on its tokens
        adv = grpo_advantages(batch.rewards, batch.group_index, cfg.algorithm.advantage.params.eps)
        advantages = (adv[:, None] * batch.completion_mask).float()
        # 4. the sampling policy's log-probs, recomputed without gradient
        temperature, chunk = cfg.algorithm.train_temperature or r.temperature, cfg.model.logprob_chunk_tokens
        old = batch_logprobs(self.model, batch, temperature, chunk, cfg.train.micro_batch_size).to(device)
        # 5. the update: minibatches of a seeded shuffle, each one optimizer step (none without a token to train)
        metrics = self.update(batch, advantages, old, step, temperature, chunk) if batch.completion_mask.any() else {}
        return {"reward": float(batch.rewards.mean()), "completion_length": float(batch.lengths.float().mean()),
                **metrics}

    def update(self, batch: RolloutBatch, advantages: torch.Tensor, old: torch.Tensor, step: int,
               temperature: float, chunk: int) -> dict[str, float]:
        """``algorithm.minibatches`` optimizer steps on the batch; the mean loss, gradient norm and entropy."""
        cfg, p = self.cfg, self.cfg.algorithm.objective.params
        batch = replace(batch, advantages=advantages, old_logp=old)
        self.model.train()
        shuffle = torch.Generator().manual_seed(step_seed(cfg.seed, step, salt=1))
        order = torch.randperm(batch.size, generator=shuffle) if cfg.algorithm.minibatches > 1 else \
            torch.arange(batch.size)
        losses, norms, entropy = [], [], [0.0, 0.0]  # entropy: sum over the step's tokens, and their count
        for rows in torch.tensor_split(order, min(cfg.algorithm.minibatches, batch.size)):
            mb = batch.select(rows)
            coef = 1.0 / max(float(mb.completion_mask.sum()), 1.0)  # token mean over the whole minibatch
            self.optimizer.zero_grad(set_to_none=True)
            total = 0.0
            for start in range(0, mb.size, cfg.train.micro_batch_size):
                micro = mb.select(torch.arange(start, min(start + cfg.train.micro_batch_size, mb.size))).trim()
                mask, a = micro.completion_mask, micro.advantages
                logp, ent = completion_logprobs(self.model, micro, temperature, chunk, with_entropy=True)
                ratio = torch.exp((logp - micro.old_logp).clamp(-p.log_ratio_clamp, p.log_ratio_clamp))
                clipped = torch.clamp(ratio, 1.0 - p.clip_low, 1.0 + p.clip_high)
                per_token = torch.maximum(-a * ratio, -a * clipped)
                loss = (torch.full_like(mask, coef) * mask * per_token).sum()  # this micro-batch's share
                loss.backward()
                total += float(loss.detach())
                entropy[0] += float((ent.detach() * mask).sum())
                entropy[1] += float(mask.sum())
            if not math.isfinite(total):
                raise FloatingPointError(f"loss is {total}; the optimizer step was not taken")
            norm = torch.nn.utils.clip_grad_norm_(self.params, cfg.optim.max_grad_norm or float("inf"))
            self.optimizer.step()
            losses.append(total)
            norms.append(float(norm))
        return {"loss": sum(losses) / len(losses), "grad_norm": sum(norms) / len(norms),
                "entropy": entropy[0] / max(entropy[1], 1.0)}


def grpo_advantages(rewards: torch.Tensor, groups: torch.Tensor, eps: float) -> torch.Tensor:
    """``[N]`` float32: each reward minus its group's mean, over the group's unbiased std (+ eps), with float64
    group statistics (:mod:`rlvr.algorithms.grouping`); exactly 0 for a group whose rewards are all equal."""
    r = rewards.to(torch.float64)
    dev = torch.where(group_constant(r, groups), torch.zeros_like(r), r - group_mean(r, groups))
    return (dev / (group_std(r, groups, unbiased=True) + eps)).to(torch.float32)
