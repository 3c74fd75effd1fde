"""What a benchmark is to rlvr: its published schema, its prompt template, how its rows become examples and
which verifier scores them; and the checks every loader shares (schema, ids, templates)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Callable, Sequence

from rlvr.core.types import Example
from rlvr.tasks.benchmarks.reader import Row
from rlvr.tasks.dataset import DataError

__all__ = ["Benchmark", "BENCHMARKS", "NAMES", "SchemaError", "register", "fill", "require", "unique_ids",
           "text_field"]

# every benchmark's name, in the order the docs list them (the task's ``benchmark`` param is one of these)
NAMES = ("math500", "aime2024", "aime2025", "gsm8k", "gpqa_diamond", "humaneval", "mbpp", "defab")


class SchemaError(DataError):
    """A file that is not in its benchmark's schema; the message names the missing fields and the schema."""


@dataclass(frozen=True)
class Benchmark:
    """One benchmark: ``required`` lists the fields every row needs (each a tuple of accepted spellings),
    ``load`` turns the rows into examples, ``verifier`` builds the verifier from ``verifier_params``
    (validated against the params of the registered verifier ``verifier_name``)."""

    name: str
    title: str
    source: str  # the published copy this schema is from (documentation; nothing is downloaded)
    required: tuple[tuple[str, ...], ...]
    optional: tuple[str, ...]
    template: str
    placeholders: tuple[str, ...]
    load: Callable[[Sequence[Row], Any, "Benchmark"], list[Example]]
    verifier: Callable[[dict[str, Any]], Any]
    verifier_name: str

    def schema(self) -> str:
        need = ", ".join(" or ".join(repr(f) for f in alts) for alts in self.required)
        extra = f"; optional {', '.join(repr(f) for f in self.optional)}" if self.optional else ""
        return f"{self.title} ({self.source}): fields {need}{extra}"


BENCHMARKS: dict[str, Benchmark] = {}


def register(bench: Benchmark) -> Benchmark:
    if bench.name not in NAMES or bench.name in BENCHMARKS:
        raise ValueError(f"benchmark {bench.name!r}: not in NAMES, or registered twice")
    BENCHMARKS[bench.name] = bench
    return bench


def require(bench: Benchmark, where: str, row: Any) -> None:
    """``row`` must be an object holding every required field; else one :class:`SchemaError` naming the
    missing fields and the expected schema."""
    if not isinstance(row, dict):
        raise SchemaError(f"{where}: expected an object in the {bench.schema()} schema, got {type(row).__name__}")
    missing = [" or ".join(repr(f) for f in alts) for alts in bench.required if not any(f in row for f in alts)]
    if missing:
        have = ", ".join(repr(k) for k in list(row)[:12]) + (", ..." if len(row) > 12 else "")
        raise SchemaError(f"{where}: not a {bench.title} row: missing field(s) {', '.join(missing)}. Expected "
                          f"the schema of {bench.schema()}. The row has: {have or 'no fields'}")


def text_field(where: str, row: dict, names: tuple[str, ...], empty_ok: bool = False) -> str:
    """The first of ``names`` present in ``row``, as a non-empty string (numbers are written out)."""
    for name in names:
        if name in row:
            value = row[name]
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                value = str(value)
            if not isinstance(value, str) or (not value.strip() and not empty_ok):
                raise DataError(f"{where}: {name!r} must be a non-empty string, got {value!r:.80}")
            return value
    raise DataError(f"{where}: none of the fields {', '.join(map(repr, names))}")


_PLACEHOLDER = re.compile(r"\{(\w+)\}")


def fill(template: str, values: dict[str, str]) -> str:
    """``template`` with each ``{name}`` of ``values`` replaced; any other braces are left as they are (so
    ``\\boxed{}`` and LaTeX need no escaping)."""
    return _PLACEHOLDER.sub(lambda m: values[m.group(1)] if m.group(1) in values else m.group(0), template)


def unique_ids(examples: list[Example], path: str) -> list[Example]:
    """``examples``, after checking that no id repeats (a repeated id would merge two prompts' results)."""
    seen: dict[str, int] = {}
    for e in examples:
        seen[e.id] = seen.get(e.id, 0) + 1
    twice = [i for i, n in seen.items() if n > 1]
    if twice:
        raise DataError(f"{path}: example ids repeat: {twice[:5]} ({len(twice)} in all); ids must be unique")
    if not examples:
        raise DataError(f"{path}: no examples")
    return examples
