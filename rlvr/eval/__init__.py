"""Evaluation on a task's held-out split: metrics with bootstrap intervals, significance tests, output."""

from rlvr.eval.evaluate import evaluate, scalar_metrics, summarise
from rlvr.eval.output import eval_table, write_eval

__all__ = ["evaluate", "summarise", "scalar_metrics", "eval_table", "write_eval"]
