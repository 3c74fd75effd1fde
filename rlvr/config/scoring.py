"""The ``scoring`` section: how a step's completions are scored (workers, deadline, errors, appeals)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from rlvr.config.fields import Section
from rlvr.tasks.appeals import AppealConfig
from rlvr.tasks.noise import NoiseConfig

__all__ = ["ScoringConfig"]


class ScoringConfig(Section):
    workers: int = Field(1, gt=0, description="threads scoring completions (daemon threads: a hung call is abandoned)")
    backend: Literal["threads", "ray"] = Field("threads", description="ray: each completion a Ray task (the ray "
                                               "extra; cluster at rollout.ray.address)")
    timeout_s: float = Field(60.0, gt=0.0, description="deadline of one reward call, from its start (training, "
                             "evaluation, the gold check); late ones score 0 and count in score/timeouts")
    max_error_frac: float = Field(0.5, ge=0.0, le=1.0, description="stop the run when the verifier raises on more "
                                  "than this share of a step's completions (a broken reward function, not bad "
                                  "output; 1: never stop)")
    noise: NoiseConfig = Field(default_factory=NoiseConfig, description="controlled verifier noise on the training "
                               "scores (rlvr.tasks.noise): false positives and negatives at stated rates")
    appeal: AppealConfig = Field(default_factory=AppealConfig, description="appeals: a second verifier re-checks "
                                 "a sample of each step's negatives and estimates the false-negative rate (fn_rate)")
