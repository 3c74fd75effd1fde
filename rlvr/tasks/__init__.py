"""Tasks: examples in splits and the verifiers that score them."""

from rlvr.lazy import lazy_exports
from rlvr.tasks.base import TASKS, Task, WeightedVerifier  # (each task's module loads on lookup)

__all__ = ["TASKS", "DataError", "Task", "WeightedVerifier", "read_examples", "read_jsonl_examples"]

__getattr__ = lazy_exports(__name__, {"DataError": "dataset", "read_examples": "dataset",
                                      "read_jsonl_examples": "dataset"})
