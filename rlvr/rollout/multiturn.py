"""Multi-turn rollouts as an engine wrapper: the ``rollout.multiturn`` config section and its builder.

With ``rollout.multiturn.env`` set, training rollouts go through :class:`rlvr.envs.multiturn.MultiTurnWrapper`
(registered in ``ENGINE_WRAPPERS`` as ``multiturn``, order 50: innermost, so guidance and parameter noise
wrap whole episodes). With it unset (the default) the builder returns ``None`` and the engine is untouched.
The environment's name and params are validated when the config loads, not at the first rollout.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from rlvr.envs.base import ENVIRONMENTS, env_factory
from rlvr.envs.multiturn import MultiTurnWrapper
from rlvr.envs.render import PLAIN_TEMPLATE
from rlvr.rollout.wrappers import ENGINE_WRAPPERS

__all__ = ["MultiTurnConfig", "build_multiturn"]


class MultiTurnConfig(BaseModel):
    """Multi-turn episodes against an environment (rlvr.envs.multiturn); off while ``env`` is unset."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    env: str | None = Field(None, description="environment name (rlvr.envs.ENVIRONMENTS, e.g. issue_tracker); "
                                              "unset: single-turn rollouts")
    params: dict[str, Any] = Field(default_factory=dict, description="the environment's parameters")
    max_turns: int = Field(4, ge=1, description="policy turns per episode at most")
    max_tokens: int | None = Field(None, gt=0, description="an episode's completion tokens at most, observations "
                                   "included (default: no bound beyond max_turns turns of turn_tokens and "
                                   "their observations)")
    turn_tokens: int | None = Field(None, gt=0, description="tokens per policy turn at most (default: "
                                    "rollout.max_new_tokens)")
    step_timeout_s: float | None = Field(30.0, gt=0.0, description="an environment reset/step running longer "
                                         "ends its episode with reward 0 (null: no limit)")
    observation_template: str = Field(PLAIN_TEMPLATE, description="text of an observation after a turn, for "
                                      "text prompts ({observation}); chat prompts use the chat template")
    observation_role: str = Field("user", description="chat role of observations (user or tool)")
    max_observation_tokens: int = Field(1024, gt=0, description="an observation is cut to this many tokens")
    env_workers: int = Field(1, ge=1, description="environment calls of one turn run this many at a time "
                             "(threads; 1 for environments that are not thread-safe)")
    reward: Literal["verifier", "env", "sum"] = Field("verifier", description="training reward of an episode: "
                                                     "the task's verifier on its text, the environment's reward, "
                                                     "or verifier + env_weight x environment (rlvr.envs.env_scores)")
    env_weight: float = Field(1.0, description="weight of the environment's reward when reward = sum")

    def completion_bound(self, max_new_tokens: int) -> int:
        """The most completion tokens an episode can have (for context-length checks): ``max_tokens``, else
        ``max_turns`` turns of ``turn_tokens`` (default ``max_new_tokens``) and the observations between."""
        if self.max_tokens is not None:
            return self.max_tokens
        turn = self.turn_tokens if self.turn_tokens is not None else max_new_tokens
        return self.max_turns * turn + (self.max_turns - 1) * self.max_observation_tokens

    @model_validator(mode="after")
    def _check(self) -> "MultiTurnConfig":
        if self.env is not None:
            env_factory(self.env, self.params)  # unknown name or bad params: a config error now
            own = ENVIRONMENTS.get(self.env).params(**self.params)
            if getattr(own, "max_turns", None) is not None and own.max_turns > self.max_turns:
                raise ValueError(f"environment {self.env!r} ends its episodes (and scores them) at its own "
                                 f"max_turns={own.max_turns}, beyond rollout.multiturn.max_turns={self.max_turns}: "
                                 "every episode would be cut before its reward; set rollout.multiturn.max_turns "
                                 f">= {own.max_turns} or params.max_turns <= {self.max_turns}")
        if "{observation}" not in self.observation_template:
            raise ValueError("observation_template must contain {observation}")
        return self


@ENGINE_WRAPPERS.register("multiturn", order=50, in_eval=True)
def build_multiturn(engine: Any, model, tokenizer, rollout_cfg, chat_template: bool = False
                    ) -> MultiTurnWrapper | None:
    """Multi-turn episodes against ``rollout.multiturn.env`` (innermost: inside guidance and parameter noise)."""
    cfg = getattr(rollout_cfg, "multiturn", None)
    if cfg is None or cfg.env is None:
        return None
    return MultiTurnWrapper(engine, tokenizer, env_factory(cfg.env, cfg.params), max_turns=cfg.max_turns,
                           max_tokens=cfg.max_tokens, turn_tokens=cfg.turn_tokens, step_timeout_s=cfg.step_timeout_s,
                           observation_template=cfg.observation_template, observation_role=cfg.observation_role,
                           max_observation_tokens=cfg.max_observation_tokens, chat_template=chat_template,
                           env_workers=cfg.env_workers)

