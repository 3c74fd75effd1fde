"""Policy objectives: ``(ObjectiveInputs, params) -> (per-token loss [N, T], per-token metrics)``; one file per method."""

from rlvr.algorithms.objectives import ppo_clip  # noqa: F401  (registration)
