"""Advantage estimators: ``(AdvantageInputs, params) -> [N]`` or ``[N, T]``; one file per method."""

from rlvr.algorithms.advantages import grpo  # noqa: F401  (registration)
