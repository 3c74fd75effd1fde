"""Parameter-space noise for rollouts (PSN-RLVR), with an adaptive noise scale (RECONSTRUCTED scheduler).

PSN-RLVR (arXiv:2602.02555; docs/methods.md, `rollout.param_noise`) generates rollouts from perturbed weights
``theta~ = theta + sigma * eps``, ``eps ~ N(0, I)``, for trajectory-level exploration, and corrects the
sampling-update mismatch with truncated importance sampling: the engine's behaviour log-probs are taken under
theta~, so ``algorithm.correction: {name: tis, cap: 2}`` weighs each token's loss by ``min(pi_old / pi_theta~, C)``
(:mod:`rlvr.algorithms.corrections.tis`).

This wrapper perturbs the module the wrapped engine generates with (engines that share the trainer's
module: ``hf``) in place, generates, and restores the saved weights bit for bit (even if generation
raises). One noise draw per ``generate`` call (every trajectory of the call sees the same theta~), seeded
from the call's sampling seed, which depends only on the run's seed and the step: a resumed run draws the
same noise. Every floating-point parameter is perturbed; the backup costs one copy of the weights.

Adaptive scale (``rollout.param_noise.adaptive``), RECONSTRUCTED: the paper drives sigma with "a lightweight
surrogate that combines semantic diversity with normalized self-certainty" instead of a KL target; its
exact rule is unknown. Here, after each call, with cheap stand-ins computed from the call's completions:

    D = mean over requests with n >= 2 of  #distinct completions / n          (lexical diversity, in (0, 1])
    C = mean over completions of exp(mean_t behaviour_logp)                   (per-token confidence, (0, 1])
    sigma <- sigma / factor   if C < certainty_floor or D >= diversity_target  (noise hurts, or is enough)
             sigma * factor   otherwise                                        (explore more)
    sigma clipped to [sigma_min, sigma_max]

as in Plappert et al. 2018's adaptive parameter noise (multiplicative steps towards a target), with the
diversity target replacing their policy-distance target and a confidence floor guarding coherence. State
(``sigma``, ``calls``, last ``diversity`` / ``certainty``) is saved in checkpoints. Metrics under
``engine/param_noise/``: the sigma used by the last call, its D and C.
"""

from __future__ import annotations

import math
from typing import Any, Sequence

from pydantic import BaseModel, ConfigDict, Field

from rlvr.core.types import Completion, GenerationRequest, SamplingParams
from rlvr.lazy import no_grad, torch
from rlvr.rollout.wrappers import ENGINE_WRAPPERS, base_engine

__all__ = ["ParamNoiseConfig", "ParamNoiseWrapper", "NoiseSchedule", "perturbed", "diversity", "certainty", "build_param_noise"]


class ParamNoiseConfig(BaseModel):
    """PSN-RLVR parameter-space noise on training rollouts (rlvr.rollout.param_noise)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    sigma: float = Field(0.0, ge=0.0, description="initial std of the Gaussian noise added to every weight "
                                                  "while generating training rollouts (0: off)")
    adaptive: bool = Field(False, description="adapt sigma after each generation call (RECONSTRUCTED rule)")
    diversity_target: float = Field(0.75, gt=0.0, le=1.0, description="distinct-completion fraction per group "
                                                                      "at which sigma stops growing")
    certainty_floor: float = Field(0.1, ge=0.0, lt=1.0, description="mean geometric-mean token probability "
                                                                    "under the noise below which sigma shrinks")
    factor: float = Field(1.01, gt=1.0, description="multiplicative sigma step (Plappert et al. 2018: 1.01)")
    sigma_min: float = Field(1e-6, gt=0.0, description="adaptive sigma lower bound")
    sigma_max: float = Field(0.1, gt=0.0, description="adaptive sigma upper bound")


def diversity(requests: Sequence[GenerationRequest], completions: Sequence[Completion]) -> float | None:
    """Mean over requests with at least two completions of (distinct completions / completions)."""
    by_group: dict[int, list[tuple[int, ...]]] = {}
    for c in completions:
        by_group.setdefault(c.group, []).append(tuple(c.completion_ids))
    fracs = [len(set(v)) / len(v) for v in by_group.values() if len(v) >= 2]
    return sum(fracs) / len(fracs) if fracs else None


def certainty(completions: Sequence[Completion]) -> float | None:
    """Mean over non-empty completions of the geometric-mean token probability under the behaviour policy."""
    vals = [math.exp(sum(c.logprobs) / len(c.logprobs)) for c in completions if c.logprobs]
    return sum(vals) / len(vals) if vals else None


class NoiseSchedule:
    """The noise scale and its adaptive rule; ``state_dict`` is JSON-able."""

    def __init__(self, cfg):
        self.cfg = cfg
        self.sigma, self.calls = float(cfg.sigma), 0
        self.last_diversity: float | None = None
        self.last_certainty: float | None = None
        self.last_sigma = float(cfg.sigma)

    def observe(self, d: float | None, c: float | None) -> None:
        self.calls += 1
        self.last_diversity, self.last_certainty, self.last_sigma = d, c, self.sigma
        if not self.cfg.adaptive:
            return
        shrink = (c is not None and c < self.cfg.certainty_floor) or (d is not None and d >= self.cfg.diversity_target)
        s = self.sigma / self.cfg.factor if shrink else self.sigma * self.cfg.factor
        self.sigma = min(max(s, self.cfg.sigma_min), self.cfg.sigma_max)

    def state_dict(self) -> dict[str, Any]:
        return {"sigma": self.sigma, "calls": self.calls, "last_diversity": self.last_diversity,
                "last_certainty": self.last_certainty, "last_sigma": self.last_sigma}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.sigma, self.calls = float(state["sigma"]), int(state["calls"])
        self.last_diversity, self.last_certainty = state.get("last_diversity"), state.get("last_certainty")
        self.last_sigma = float(state.get("last_sigma", self.sigma))


class perturbed:
    """Context manager: ``model``'s floating-point parameters += sigma * N(0, 1) (seeded), restored exactly."""

    def __init__(self, model, sigma: float, seed: int):
        self.model, self.sigma, self.seed = model, sigma, seed
        self.backup: list[tuple[torch.Tensor, torch.Tensor]] = []

    @no_grad
    def __enter__(self):
        gens: dict[torch.device, torch.Generator] = {}
        for p in self.model.parameters():
            if not p.is_floating_point():
                continue
            g = gens.get(p.device)
            if g is None:
                g = gens[p.device] = torch.Generator(device=p.device).manual_seed(self.seed)
            noise = torch.randn(p.shape, generator=g, device=p.device, dtype=torch.float32)
            self.backup.append((p, p.detach().clone()))
            p.add_((self.sigma * noise).to(p.dtype))
        return self

    @no_grad
    def __exit__(self, *exc):
        for p, saved in self.backup:
            p.copy_(saved)
        self.backup.clear()
        return False


class ParamNoiseWrapper:
    """Wraps an engine sharing ``model``: each ``generate`` runs under freshly drawn parameter noise."""

    name = "param_noise"

    def __init__(self, inner: Any, model, cfg):
        self.inner, self.model, self.schedule = inner, model, NoiseSchedule(cfg)

    def sync_weights(self) -> None:
        self.inner.sync_weights()

    def generate(self, requests: Sequence[GenerationRequest], sampling: SamplingParams) -> list[Completion]:
        seed = sampling.seed if sampling.seed is not None else self.schedule.calls
        seed = (seed * 2_654_435_761 + 97) % (2**31 - 1)  # not the sampling stream's own seed
        with perturbed(self.model, self.schedule.sigma, seed):
            self.inner.sync_weights()  # an engine with its own copy of the weights (vllm) takes the noisy ones
            out = self.inner.generate(requests, sampling)
        self.inner.sync_weights()  # and the clean ones again before its next call
        self.schedule.observe(diversity(requests, out), certainty(out))
        return out

    def metrics(self) -> dict[str, float]:
        s = self.schedule
        out = {"param_noise/sigma": s.last_sigma, "param_noise/next_sigma": s.sigma}
        if s.last_diversity is not None:
            out["param_noise/diversity"] = s.last_diversity
        if s.last_certainty is not None:
            out["param_noise/certainty"] = s.last_certainty
        return out

    def state_dict(self) -> dict[str, Any]:
        return self.schedule.state_dict()

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if state:
            self.schedule.load_state_dict(state)


@ENGINE_WRAPPERS.register("param_noise", order=200)
def build_param_noise(engine: Any, model, tokenizer, rollout_cfg,
                      chat_template: bool = False) -> ParamNoiseWrapper | None:
    """Parameter-space noise on every generation call when ``rollout.param_noise.sigma`` > 0 (outermost)."""
    pn = rollout_cfg.param_noise
    if pn.sigma <= 0:
        return None
    if getattr(base_engine(engine), "model", None) is not model:
        raise ValueError("rollout.param_noise perturbs the trainer's module in place, so it needs an engine "
                         f"that generates with it or syncs from it (hf, native, vllm); {rollout_cfg.engine!r} "
                         "does neither")
    return ParamNoiseWrapper(engine, model, pn)
