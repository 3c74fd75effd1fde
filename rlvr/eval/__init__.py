"""Evaluation on a task's held-out split."""

from rlvr.eval.evaluate import evaluate

__all__ = ["evaluate"]
