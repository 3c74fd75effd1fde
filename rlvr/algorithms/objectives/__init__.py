"""Policy objectives: ``(ObjectiveInputs, params) -> (per-token loss [N, T], per-token metrics)``; one file per method."""

from rlvr.algorithms.objectives import ppo_clip  # noqa: F401  (registration)
from rlvr.algorithms.objectives import cispo, gspo, gspo_token  # noqa: F401  (registration)
