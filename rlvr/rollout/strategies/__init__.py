"""Rollout strategies (``rollout.strategy``): how a step's rollouts are produced around an engine."""
