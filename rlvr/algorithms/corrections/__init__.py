"""Importance-sampling corrections for the mismatch between the rollout engine's and the trainer's
log-probs: ``(CorrectionInputs, params) -> (per-token weights [N, T], per-token metrics)``; the weights
multiply the per-token loss. One file per method."""

from rlvr.algorithms.corrections import none  # noqa: F401  (registration)
from rlvr.algorithms.corrections import mis, tis  # noqa: F401  (registration)
