"""The critic (``algorithm.critic``): a value model trained beside the policy, for PPO's GAE and CDE's
multi-head bonus.

As verl's and OpenRLHF's critics: a separate model, a copy of the policy's trunk at the start of RL (the
policy's own weights, the usual initialisation from the actor) with ``heads`` linear value heads on its last
hidden state (weights ~ N(0, init_std^2), bias 0), and its own AdamW. ``V_k(s_t)``, the value of the state
before completion token t (prompt + y_<t), is head k at the position that predicts token t, like the
policy's logits. Each step:

- before the advantages, one no-grad forward gives the per-head values; the extras ``values`` (their mean)
  and ``values_std`` (their spread, population std over heads; 0 with one head) are what the advantage reads;
- after the policy's update, the critic trains on the same batch: per head, returns G_k = GAE(r, V_k) + V_k
  (:func:`rlvr.algorithms.advantages.gae.gae` with the advantage estimator's gamma, lambda and per-token
  bonus, so critic and advantage agree), for ``epochs`` passes of ``minibatches`` optimizer steps, with
  verl's clipped value loss, token-mean over the trained tokens of every head:

      L = 1/2 max( (V - G)^2, (clip(V, V_old - c, V_old + c) - G)^2 )        (c = value_clip)

  Head k trains only on the rows of its bootstrap mask b_{i,k} ~ Bernoulli(``bootstrap``), drawn from the
  step's seed, so K heads become an ensemble whose spread measures how unfamiliar a state is (CDE).

Checkpoints hold ``critic.safetensors`` (weights) and ``critic_optimizer.safetensors`` + ``critic.json``
(the AdamW state), so a resumed run continues the critic it had. Metrics ``critic/{loss, value_mean,
return_mean, explained_variance, clip_frac, grad_norm}``.

Under ``torchrun`` (DDP) every rank holds the whole critic, as it holds the whole policy: the old values are
computed by whole groups on each rank and gathered, each minibatch's micro-batches are dealt round-robin to
the ranks, and their gradients summed over ranks before the (identical) optimizer step, so every rank's
critic stays equal to a one-process run's. With FSDP the same: the critic is a whole replica on every rank
beside the sharded policy (built from a copy of the policy taken before sharding), so it costs each rank a
whole model and its AdamW state, as under DDP (a LoRA policy's critic trains adapters only). With a LoRA policy (``model.lora``) the critic's trunk is the
policy's merged weights, frozen, with adapters of the same configuration of its own: only they and the
heads train (:func:`rlvr.models.lora.side_trunk`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from rlvr.algorithms.advantages.gae import gae, token_rewards
from rlvr.algorithms.extra_producers import ExtraContext, produces
from rlvr.core.batch import RolloutBatch
from rlvr.core.optim_state import load_trained, save_trained, trained_meta
from rlvr.core.seeds import step_seed
from rlvr.models.logprobs import trunk_hidden
from rlvr.models.lora import side_trunk
from rlvr.distributed.world import World

__all__ = ["Critic", "build_critic", "value_loss"]


def value_loss(v: torch.Tensor, old: torch.Tensor, ret: torch.Tensor, clip: float | None) -> tuple[torch.Tensor,
                                                                                                   torch.Tensor]:
    """Per-token ``1/2 max((v - G)^2, (clip(v, old - c, old + c) - G)^2)`` and where the clipped term won."""
    loss = (v - ret) ** 2
    if clip is None:
        return 0.5 * loss, torch.zeros_like(loss, dtype=torch.bool)
    clipped = (old + (v - old).clamp(-clip, clip) - ret) ** 2
    return 0.5 * torch.maximum(loss, clipped), clipped > loss


class Critic:
    """A value model with ``cfg.heads`` heads on a copy of ``model``'s trunk (a learner: rlvr.learners.base)."""

    def __init__(self, model, cfg, device: torch.device, micro_batch_size: int, gamma: float = 1.0,
                 lam: float = 1.0, bonus: float = 0.0, bonus_clip: float | None = None, world: Any = None,
                 seed: int = 0):
        self.cfg, self.micro, self.seed = cfg, micro_batch_size, seed
        self.world = world if world is not None else World()
        self.gamma, self.lam, self.bonus, self.bonus_clip = gamma, lam, bonus, bonus_clip
        trunk = side_trunk(model)  # with a LoRA policy: merged weights, frozen, adapters of its own
        hidden = model.get_output_embeddings().in_features
        head = torch.nn.Linear(hidden, cfg.heads)
        with torch.no_grad():
            head.weight.normal_(0.0, cfg.init_std) if cfg.init_std > 0 else head.weight.zero_()
            head.bias.zero_()
        self.net = torch.nn.ModuleDict({"trunk": trunk, "head": head.to(next(trunk.parameters()).dtype)}).to(device)
        self.optimizer = torch.optim.AdamW([q for q in self.net.parameters() if q.requires_grad], lr=cfg.lr, weight_decay=cfg.weight_decay)
        self._memo: tuple[torch.Tensor, torch.Tensor] | None = None

    def _forward(self, mb: RolloutBatch) -> torch.Tensor:
        """``[n, t, K]`` values of a trimmed micro-batch (float32)."""
        h = trunk_hidden(self.net["trunk"], mb)
        p, t = mb.prompt_len, mb.completion_mask.shape[1]
        return self.net["head"](h[:, p - 1: p + t - 1]).float()

    @torch.no_grad()
    def values(self, batch: RolloutBatch) -> torch.Tensor:
        """``[N, T, K]`` per-head values (eval mode, mode restored)."""
        was = self.net.training
        self.net.eval()
        out = torch.zeros(*batch.completion_mask.shape, self.cfg.heads)
        try:
            for rows in batch.micro_batch_rows(self.micro):
                v = self._forward(batch.select(rows).trim()).cpu()
                out[rows, : v.shape[1]] = v
        finally:
            self.net.train(was)
        self._memo = (batch.input_ids.detach().cpu(), out)
        return out

    def extras(self, batch: RolloutBatch) -> dict[str, torch.Tensor]:
        """The extras ``values`` and ``values_std`` ``[N, T]`` (0 on padding)."""
        v = self.values(batch)
        mask = batch.completion_mask.cpu()
        std = v.std(-1, unbiased=False) if v.shape[-1] > 1 else torch.zeros_like(v[..., 0])
        return {"values": v.mean(-1) * mask, "values_std": std * mask}

    def _old_values(self, batch: RolloutBatch) -> torch.Tensor:
        memo = self._memo
        if memo is not None and memo[0].shape == batch.input_ids.shape and torch.equal(memo[0], batch.input_ids.cpu()):
            return memo[1]
        if self.world.distributed:  # each rank's groups, gathered
            t = batch.completion_mask.shape[1]
            return self.world.gather_rows(batch.size, batch.group_index,
                                          lambda rows: {"v": self.values(batch.select(rows.to(batch.input_ids.device)))}
                                          )["v"][:, :t]
        return self.values(batch)

    def targets(self, batch: RolloutBatch, old: torch.Tensor) -> torch.Tensor:
        """``[N, T, K]`` returns per head from the batch's rewards and the heads' old values."""
        mask = batch.completion_mask.cpu().double()
        lengths = batch.lengths.cpu()
        inside = (torch.arange(mask.shape[1])[None, :] < lengths[:, None]).double()
        r = token_rewards(batch.rewards.cpu(), lengths, tuple(mask.shape))
        if self.bonus > 0:
            std = old.std(-1, unbiased=False) if old.shape[-1] > 1 else torch.zeros_like(old[..., 0])
            std = std.clamp(max=self.bonus_clip) if self.bonus_clip else std
            r = r + self.bonus * std.double() * mask
        return torch.stack([gae(r, old[..., k], inside, self.gamma, self.lam)[1] for k in range(old.shape[-1])], -1)

    def update(self, batch: RolloutBatch, step: int = 0, seed: int | None = None) -> dict[str, float]:
        """Train on ``batch`` (after the policy's update); returns the step's critic metrics ({} for a batch
        without completion tokens). Bootstrap masks and minibatches are drawn from ``seed``, by default the
        step's own (:func:`rlvr.core.seeds.step_seed` of the run's seed, salt 2)."""
        if not batch.completion_mask.any():
            return {}
        seed = step_seed(self.seed, step, salt=2) if seed is None else seed
        cfg = self.cfg
        old = self._old_values(batch)
        ret = self.targets(batch, old)
        gen = torch.Generator().manual_seed(seed)
        boot = (torch.rand(batch.size, cfg.heads, generator=gen) < cfg.bootstrap).float()
        mask = batch.completion_mask.cpu().float()
        weight = mask[..., None] * boot[:, None, :]  # [N, T, K]: the tokens each head trains on
        dev = batch.input_ids.device
        sums = {"loss": 0.0, "clip": 0.0, "tok": 0.0, "norm": 0.0, "steps": 0}
        self.net.train()
        for _ in range(cfg.epochs):
            order = torch.randperm(batch.size, generator=gen)
            for part in torch.tensor_split(order, min(cfg.minibatches, batch.size)):
                denom = float(weight[part].sum())
                if denom == 0:
                    continue
                self.optimizer.zero_grad(set_to_none=True)
                chunks = list(range(0, len(part), self.micro))
                for s in chunks[self.world.rank:: self.world.size]:  # this rank's micro-batches
                    rows = part[s: s + self.micro]
                    mb = batch.select(rows.to(dev)).trim()
                    t = mb.completion_mask.shape[1]
                    v = self._forward(mb)
                    o, g, wk = (x[rows, :t].to(v.device) for x in (old, ret.float(), weight))
                    loss_tok, won = value_loss(v, o, g, cfg.value_clip)
                    sums["clip"] += float((won.float() * wk).sum())
                    loss = (loss_tok * wk).sum() / denom
                    loss.backward()
                    sums["loss"] += float(loss.detach())
                self.world.sum_grads_([q for q in self.net.parameters() if q.requires_grad])
                norm = (torch.nn.utils.clip_grad_norm_(self.net.parameters(), cfg.max_grad_norm)
                        if cfg.max_grad_norm is not None else _grad_norm(self.net))
                self.optimizer.step()
                sums["norm"] += float(norm)
                sums["tok"] += denom
                sums["steps"] += 1
        self._memo = None
        sums["loss"], sums["clip"] = self.world.sum([sums["loss"], sums["clip"]])
        sel = mask.bool()
        v_mean, g_mean = old.mean(-1)[sel], ret.mean(-1)[sel].float()
        var = float(g_mean.var()) if g_mean.numel() > 1 else 0.0
        steps = max(sums["steps"], 1)
        return {"critic/loss": sums["loss"] / steps, "critic/value_mean": float(v_mean.mean()) if sel.any() else 0.0,
                "critic/return_mean": float(g_mean.mean()) if sel.any() else 0.0,
                "critic/explained_variance": 1.0 - float((g_mean - v_mean).var()) / var if var > 0 else 0.0,
                "critic/clip_frac": sums["clip"] / sums["tok"] if sums["tok"] else 0.0,
                "critic/grad_norm": sums["norm"] / steps}

    def save(self, folder: str | Path) -> None:
        save_trained(folder, "critic", self.net, self.optimizer, heads=self.cfg.heads)

    def load(self, folder: str | Path) -> None:
        meta = trained_meta(folder, "critic")
        if meta is None:
            raise ValueError(f"{folder} holds no critic (critic.safetensors): it was written by a run without "
                             f"algorithm.critic")
        if meta["heads"] != self.cfg.heads:
            raise ValueError(f"{folder}: the critic has {meta['heads']} heads, the config asks for {self.cfg.heads}")
        load_trained(folder, "critic", self.net, self.optimizer, meta)
        self._memo = None


def _grad_norm(net: torch.nn.Module) -> torch.Tensor:
    grads = [p.grad.detach().norm() for p in net.parameters() if p.grad is not None]
    return torch.stack(grads).norm() if grads else torch.tensor(0.0)


def build_critic(cfg, model, device: torch.device, world: Any = None, needs: frozenset[str] = frozenset()
                 ) -> Critic | None:
    """The run's critic, or None without ``algorithm.critic.heads``; ``needs``: the extras the run's components
    read (a critic none of them reads is refused)."""
    c = cfg.algorithm.critic
    if c.heads == 0:
        return None
    if not {"values", "values_std"} & needs:
        raise ValueError("algorithm.critic is set but no component reads its values (the gae advantage does)")
    p = cfg.algorithm.advantage.params  # the critic's returns use the advantage's discount, lambda and bonus
    return Critic(model, c, device, cfg.train.micro_batch_size, getattr(p, "gamma", 1.0), getattr(p, "lam", 1.0),
                  getattr(p, "std_bonus", 0.0), getattr(p, "std_bonus_clip", None), world, cfg.seed)


@produces("values", "values_std")
def _values(ctx: ExtraContext, keys: frozenset[str]) -> dict[str, torch.Tensor]:
    """The critic's values and their spread over heads: one no-grad forward of the critic."""
    critic = ctx.learner(Critic, "a component reads the critic's values, but the run has no critic (algorithm.critic)")
    return critic.extras(ctx.batch)
