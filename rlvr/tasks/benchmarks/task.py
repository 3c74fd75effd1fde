"""The ``benchmark`` task: a standard benchmark's local copy as the ``eval`` split, optionally beside a task to
train on.

    task: {name: benchmark, benchmark: math500, path: data/MATH-500/test.jsonl}

    task:                                   # train on GSM8K's train file, hold out MATH-500
      name: benchmark
      benchmark: math500
      path: data/MATH-500/test.jsonl
      train: {name: gsm8k, train_path: data/gsm8k/train.jsonl, eval_fraction: 0}

Without ``train`` the task has only the ``eval`` split (``rlvr eval`` needs no more). With ``train`` its
splits are the train task's (its own ``eval`` split left out) plus the benchmark as ``eval``; each example
is scored by the task it came from, training metrics and rewards are the train task's, and a train task's
sampler weights, group scoring and saved state pass through. ``rlvr eval --benchmark NAME --path PATH`` sets
``task`` to ``{name: benchmark, benchmark: NAME, path: PATH}``.
"""

from __future__ import annotations

import warnings
from typing import Any, Literal, Sequence

from pydantic import Field, ValidationError, model_validator

from rlvr.config.errors import format_params_error
from rlvr.config.fields import component
from rlvr.core.paths import LocalPathStr
from rlvr.core.types import Example, Score
from rlvr.registry import Params
from rlvr.tasks.base import TASKS, Task, WeightedVerifier
from rlvr.tasks.benchmarks.reader import read_files
from rlvr.tasks.dataset import DataError
from rlvr.tasks.benchmarks.spec import BENCHMARKS, NAMES, SchemaError, require, unique_ids

__all__ = ["BenchmarkParams", "HeldOutTask", "benchmark_task", "benchmark_examples"]


class BenchmarkParams(Params):
    benchmark: Literal[NAMES] = Field(..., description=f"which benchmark: {', '.join(NAMES)} (docs/benchmarks-eval.md)")
    path: LocalPathStr = Field(..., description="its local copy: a .jsonl/.json/.csv/.parquet file, a datasets."
                                                "save_to_disk directory, or a directory of such files")
    format: Literal["auto", "jsonl", "json", "csv", "parquet", "hf"] = Field("auto", description="file format "
                                                                              "(auto: from the path)")
    split: str | None = Field(None, description="split of a saved DatasetDict, or the files of a directory whose "
                                                "path contains it (e.g. test)")
    template: str | None = Field(None, description="prompt template instead of the benchmark's standard one; "
                                                   "{placeholders} as listed in docs/benchmarks-eval.md")
    seed: int = Field(0, description="seed of the option shuffle (gpqa_diamond, defab's released layout)")
    rendering: Literal["formal", "semiformal", "annotated", "narrative", "mixed", "all"] = Field(
        "formal", description="defab (rlvr's layout): the prompts' rendering; all: each instance in all four "
                              "(rendering-robust accuracy)")
    verifier_params: dict[str, Any] = Field(default_factory=dict, description="params of the benchmark's verifier "
                                            "(math, choice or code)")
    train: component(TASKS, None) | None = Field(None, description="a task to train on, the benchmark its "
                                                                   "held-out eval split: {name: ..., <params>}")

    @model_validator(mode="after")
    def _check(self) -> "BenchmarkParams":
        from rlvr.verifiers.base import VERIFIERS

        bench = BENCHMARKS[self.benchmark]
        if self.template is not None and not any("{" + k + "}" in self.template for k in bench.placeholders):
            raise ValueError(f"template names none of {bench.name}'s placeholders "
                             f"({', '.join('{' + k + '}' for k in bench.placeholders)}): the prompt would lack the item")
        model = VERIFIERS.get(bench.verifier_name).params
        try:
            model.model_validate(self.verifier_params)
        except ValidationError as e:
            raise ValueError(format_params_error(f"verifier_params of {bench.name}'s {bench.verifier_name!r} verifier",
                                                 model, e)) from None
        if self.train is not None and self.train.name == "benchmark" and getattr(self.train.params, "train", None):
            raise ValueError("train: a benchmark task with its own train task cannot be nested")
        return self


def benchmark_examples(p: BenchmarkParams) -> list[Example]:
    """The benchmark's examples, read from ``p.path`` and checked against its schema.

    In a directory of several files (a downloaded snapshot), a file whose first row is not in the benchmark's
    schema is another kind of file (a summary, statistics, a README's JSON) and is passed over with a warning
    naming it; a file that starts in the schema must hold it throughout, and a directory with no file in it
    is an error."""
    bench = BENCHMARKS[p.benchmark]
    files = read_files(p.path, p.format, p.split, what=f"benchmark {bench.name} expects {bench.schema()}")
    out: list[Example] = []
    passed: list[tuple[str, SchemaError]] = []
    for source, rows in files:
        if len(files) > 1 and rows:
            try:
                require(bench, rows[0][0], rows[0][2])
            except SchemaError as e:
                passed.append((source, e))
                continue
        out += bench.load(rows, p, bench)
    if passed and not out:
        raise passed[0][1]
    if not out:
        raise DataError(f"{p.path}: no {bench.title} examples (the rows passed over are named in the warnings)")
    if passed:
        warnings.warn(f"{p.path}: {len(passed)} file(s) not in the {bench.title} schema passed over: "
                      + ", ".join(w for w, _ in passed[:5]) + (", ..." if len(passed) > 5 else ""), stacklevel=2)
    return unique_ids(out, p.path)


class HeldOutTask(Task):
    """A train task's splits, with a benchmark's examples as the ``eval`` split; each example is scored by the
    task it came from."""

    def __init__(self, train: Task, bench: Task):
        splits = {s: train.examples(s) for s in train.splits if s != "eval"}
        splits["eval"] = bench.examples("eval")
        super().__init__(bench.name, splits, train.verifiers)
        self.train_task, self.bench_task = train, bench
        self._bench_keys = {(e.task, e.id) for e in bench.examples("eval")}
        clash = [e.id for s in splits if s != "eval" for e in splits[s] if (e.task, e.id) in self._bench_keys]
        if clash:
            raise ValueError(f"train task examples share task and id with {bench.name}'s: {clash[:3]}")
        if getattr(train, "domain_weights", None):
            self.domain_weights = train.domain_weights

    def _part(self, example: Example) -> Task:
        return self.bench_task if (example.task, example.id) in self._bench_keys else self.train_task

    @property
    def batched(self) -> bool:
        return self.train_task.batched or self.bench_task.batched

    def score(self, example: Example, text: str) -> Score:
        return self._part(example).score(example, text)

    def score_batch(self, examples: Sequence[Example], texts: Sequence[str]) -> list[Score]:
        out: list[Score | None] = [None] * len(texts)
        for part in (self.train_task, self.bench_task):
            idx = [i for i, e in enumerate(examples) if self._part(e) is part]
            if idx:
                for i, s in zip(idx, part.score_batch([examples[i] for i in idx], [texts[i] for i in idx])):
                    out[i] = s
        return out  # type: ignore[return-value]

    def score_group(self, example: Example, texts: Sequence[str], scores: Sequence[Score]) -> list[Score]:
        return self._part(example).score_group(example, texts, scores)

    def state_dict(self) -> dict:
        return self.train_task.state_dict()

    def load_state_dict(self, state: dict) -> None:
        self.train_task.load_state_dict(state)


@TASKS.register("benchmark", BenchmarkParams)
def benchmark_task(p: BenchmarkParams) -> Task:
    """A standard benchmark (MATH-500, AIME, GSM8K, GPQA-Diamond, HumanEval, MBPP, DeFAb) from local files."""
    bench = BENCHMARKS[p.benchmark]
    task = Task(bench.name, {"eval": benchmark_examples(p)}, [WeightedVerifier(bench.verifier(p.verifier_params))])
    if p.train is None:
        return task
    return HeldOutTask(TASKS.get(p.train.name).fn(p.train.params), task)

