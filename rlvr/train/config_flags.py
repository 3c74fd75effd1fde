"""The step features that config flags turn on, as the registered components the loop calls.

A user writes ``algorithm.kl.placement: reward``, ``algorithm.overlong.{filter, soft_penalty}`` or
``algorithm.dynamic_sampling.enabled``; the step runs them as components through the same seams as every
other: a reward shaper at scoring (:data:`~rlvr.algorithms.registry.REWARD_SHAPERS`), a reward transform
before the configured ones, a mask transform after the advantages, a group filter between generation rounds.
:func:`step_features` is the one place that maps the flags to those components.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from rlvr.algorithms.registry import GROUP_FILTERS, MASK_TRANSFORMS, REWARD_SHAPERS, REWARD_TRANSFORMS

__all__ = ["Feature", "StepFeatures", "step_features", "run_features"]


@dataclass(frozen=True)
class Feature:
    """A registered component with validated params (the shape of a config ``Component``); ``report`` names
    the step metrics its own metrics are reported as (the KL penalty's ``kl`` is the step's ``kl``)."""

    name: str
    params: Any
    report: dict[str, str] = field(default_factory=dict)


def _feature(registry, name: str, report: dict[str, str] | None = None, **params) -> Feature:
    return Feature(name, registry.get(name).params.model_validate(params), report or {})


@dataclass(frozen=True)
class StepFeatures:
    reward_shapers: list[Feature] = field(default_factory=list)  # at scoring, per generation call
    reward_transforms: list[Feature] = field(default_factory=list)  # before algorithm.reward_transforms
    mask_transforms: list[Feature] = field(default_factory=list)  # after the advantages
    group_filter: Feature | None = None  # between dynamic-sampling rounds


def step_features(cfg, has_reference: bool) -> StepFeatures:
    """The components ``cfg``'s feature flags turn on (a KL penalty in the reward needs a reference model)."""
    alg = cfg.algorithm
    ov, ds = alg.overlong, alg.dynamic_sampling
    return StepFeatures(
        reward_shapers=[_feature(REWARD_SHAPERS, "soft_overlong", buffer_frac=ov.buffer_frac, factor=ov.factor)]
        if ov.soft_penalty else [],
        reward_transforms=[_feature(REWARD_TRANSFORMS, "kl_penalty", {"kl": "kl"}, estimator=alg.kl.estimator)]
        if has_reference and alg.kl.placement == "reward" else [],
        mask_transforms=[_feature(MASK_TRANSFORMS, "overlong_filter")] if ov.filter else [],
        group_filter=_feature(GROUP_FILTERS, "dynamic_sampling", metric=ds.metric, drop=ds.drop)
        if ds.enabled else None,
    )


def run_features(cfg, c) -> StepFeatures:
    """The run's features (:func:`step_features`), built once and kept on its components ``c``."""
    if getattr(c, "features", None) is None:
        c.features = step_features(cfg, c.ref_model is not None)
    return c.features
