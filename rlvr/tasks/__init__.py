"""Tasks: examples in splits and the verifiers that score them."""

from rlvr.tasks import arithmetic, dataset, defab, gym, lookup, math_data, mixture, rubric_task  # noqa: F401  (registration)
from rlvr.tasks.base import TASKS, Task, WeightedVerifier
from rlvr.tasks.dataset import DataError, read_examples, read_jsonl_examples

__all__ = ["TASKS", "DataError", "Task", "WeightedVerifier", "read_examples", "read_jsonl_examples"]
