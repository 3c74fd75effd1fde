"""Standard benchmarks from local files, in their published schemas (docs/benchmarks-eval.md).

One registered task, ``benchmark``, takes the benchmark's name and its local copy's path
(``task: {name: benchmark, benchmark: math500, path: ...}``; ``rlvr eval --benchmark math500 --path ...``):
the benchmarks differ in schema, prompt and verifier, not in what a config or the command line needs to say,
so one task with a ``benchmark`` parameter (validated against the names below when the config loads) keeps
every benchmark on the same options and the same held-out route (``train:``, :mod:`.task`).

Modules: :mod:`.reader` (files and saved datasets), :mod:`.spec` (the benchmark record and shared checks),
:mod:`.mathbench` (MATH-500, AIME 2024/2025, GSM8K), :mod:`.gpqa` (GPQA-Diamond), :mod:`.codebench`
(HumanEval, MBPP), :mod:`.defabbench` (DeFAb), :mod:`.task` (the task).
"""

from rlvr.tasks.benchmarks import codebench, defabbench, gpqa, mathbench  # noqa: F401  (each registers its benchmarks)
from rlvr.tasks.benchmarks.spec import BENCHMARKS, NAMES, Benchmark, SchemaError
from rlvr.tasks.benchmarks.task import BenchmarkParams, HeldOutTask, benchmark_examples, benchmark_task

__all__ = ["BENCHMARKS", "NAMES", "Benchmark", "BenchmarkParams", "HeldOutTask", "SchemaError", "benchmark_examples",
           "benchmark_task"]
