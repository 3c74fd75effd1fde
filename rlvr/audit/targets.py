"""What an audit scores: a task (its examples and weighted verifiers), the kinds of its verifiers, and any
completions known to earn reward.

- :func:`from_task`: a built task (``rlvr audit --task NAME`` / ``-c my.yaml``): the first N examples of a split.
- :func:`from_verifier`: a registered verifier on a small built-in set of examples (``rlvr audit --verifier
  NAME``): the gold cases of its own ``validation_cases`` plus, for plain-answer verifiers, a few
  numbers and phrases (:data:`EXTRA_ANSWERS`); wrapped in a one-verifier task as ``rlvr verify`` does.
- :func:`from_callable`: a user's reward function on given examples (only the generic families apply).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

from rlvr.audit.kinds import is_partial, kinds_of_verifiers
from rlvr.audit.probes import AuditInputError
from rlvr.core.types import Example

__all__ = ["Target", "from_task", "from_verifier", "from_callable", "EXTRA_ANSWERS"]

# plain answers a verifier of this name scores without any example meta (each becomes an example)
EXTRA_ANSWERS: dict[str, tuple[str, ...]] = {
    "numeric": ("42", "-7", "0.25", "1/3", "1,234"),
    "math": ("42", "-7", "0.25", "\\frac{1}{3}"),
    "geosym": ("42", "-7", "sqrt(2)"),
    "exact": ("Paris", "42"),
    "table_em": ("Paris", "1998"),
    "table_f1": ("Paris", "1998"),
}


@dataclass
class Target:
    """``task`` scores every probe; ``examples`` are the ones probed; ``golds`` maps an example id to
    completions known to earn reward (tried first when looking for the gold completion)."""

    name: str
    task: Any
    examples: list[Example]
    kinds: frozenset[str]
    verifier: str  # the weighted verifiers' names, joined with "+"
    partial: bool = False
    golds: dict[str, list[str]] = field(default_factory=dict)
    source: str = ""  # how the target was named: task, verifier, config, callable


def _weighted(task) -> list[Any]:
    vs = [wv.verifier for wv in getattr(task, "verifiers", []) if getattr(wv, "weight", 1.0) != 0.0]
    return vs or [wv.verifier for wv in getattr(task, "verifiers", [])]


def from_task(task, split: str | None = None, n: int = 8, source: str = "task") -> Target:
    """The first ``n`` examples of ``split`` (default: ``eval`` if the task has it, else ``train``, else its
    first split)."""
    splits = list(task.splits)
    if split is None:
        split = next((s for s in ("eval", "train") if s in splits), splits[0] if splits else None)
    if split is None or split not in splits:
        raise AuditInputError(f"task {task.name!r} has no split {split!r}; it has {', '.join(splits) or 'none'}")
    examples = list(task.examples(split))[:max(0, n)]
    if not examples:
        raise AuditInputError(f"task {task.name!r} has no examples in split {split!r}")
    vs = _weighted(task)
    return Target(f"{task.name}/{split}", task, examples, kinds_of_verifiers(vs),
                  "+".join(getattr(v, "name", type(v).__name__) for v in vs), any(is_partial(v) for v in vs),
                  source=source)


def from_verifier(name: str, params: dict[str, Any] | None = None, n: int = 8) -> Target:
    """A registered verifier on its built-in examples (see the module doc)."""
    from pydantic import ValidationError

    from rlvr.registry import RegistryError
    from rlvr.tasks.base import Task, WeightedVerifier
    from rlvr.verifiers import VERIFIERS, build_verifier

    try:
        verifier = build_verifier(name, params)
    except RegistryError:
        raise AuditInputError(f"unknown verifier {name!r}; valid names: {', '.join(VERIFIERS.names())}") from None
    except ValidationError as e:
        from rlvr.config.errors import format_params_error

        raise AuditInputError(format_params_error(f"params of verifier {name!r}", VERIFIERS.get(name).params, e)) \
            from None
    examples: list[Example] = []
    golds: dict[str, list[str]] = {}
    cases = verifier.validation_cases() if hasattr(verifier, "validation_cases") else []
    for ex, text, want in cases:
        if want >= 1.0:
            if ex.id not in golds:
                examples.append(ex)
            golds.setdefault(ex.id, []).append(text)
    for i, ans in enumerate(EXTRA_ANSWERS.get(name, ())):
        ex = Example(f"{name}-audit-{i}", f"(audit example {i})", ans, task=name)
        examples.append(ex)
        golds[ex.id] = [ans]
    if not examples:
        raise AuditInputError(f"verifier {name!r} has no built-in examples (no gold validation case); audit it on "
                              "a task's data instead (--task or -c)")
    examples = examples[:max(1, n)]
    task = Task(name, {"audit": examples}, [WeightedVerifier(verifier)])
    return Target(name, task, examples, kinds_of_verifiers([verifier]), getattr(verifier, "name", name),
                  is_partial(verifier), {k: v for k, v in golds.items()}, source="verifier")


def from_callable(fn: Callable[..., Sequence[float]], examples: Sequence[Example | tuple[str, str]],
                  name: str | None = None) -> Target:
    """A user's batch reward function ``(prompts, completions, **kw) -> floats`` (as ``task.verifier:
    module:fn``) on ``examples`` (:class:`Example` objects, or ``(prompt, answer)`` pairs)."""
    from rlvr.tasks.base import Task, WeightedVerifier
    from rlvr.verifiers import from_callable as adapt

    exs = [e if isinstance(e, Example) else Example(f"ex-{i}", e[0], e[1]) for i, e in enumerate(examples)]
    if not exs:
        raise AuditInputError("no examples to audit the reward function on")
    verifier = adapt(fn, name)
    task = Task(verifier.name, {"audit": exs}, [WeightedVerifier(verifier)])
    return Target(verifier.name, task, exs, frozenset({"generic"}), verifier.name, False, source="callable")
