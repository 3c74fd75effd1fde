"""Importance-sampling corrections for the mismatch between the rollout engine's and the trainer's
log-probs: ``(CorrectionInputs, params) -> (per-token weights [N, T], per-token metrics)``; the weights
multiply the per-token loss. One file per method."""
