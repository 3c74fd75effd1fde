"""Reward transforms and advantage transforms; one file per method.

- Reward transforms, ``(TransformInputs, params[, state]) -> (rewards [N], metrics)``, run in the order
  listed in ``algorithm.reward_transforms`` on the scored rewards, before the advantage estimator
  (verifier-noise corrections, confidence rewards for wrong answers, exploration bonuses, Lagrangian terms).
- Advantage transforms, ``(TransformInputs, params[, state]) -> (advantages [N, T], metrics)``, run in the
  order listed in ``algorithm.advantage_transforms`` on the estimator's output (question weighting, focal
  scaling, history-aware reweighting, per-token weights such as teacher-contrast credit). A positive
  per-token weight on the advantage equals the same weight on the clipped per-token loss, so token weights
  live here too.
"""
