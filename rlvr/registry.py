"""Named registries for every pluggable component.

Each kind of component (advantage estimators, policy objectives, aggregations, KL estimators, tasks,
rollout engines, ...) has one :class:`Registry`. A component is registered under a unique name together
with a pydantic model of its parameters, so a config such as ``{name: grpo, std: unbiased}`` is validated
against that model when the config is loaded, long before any work starts.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Generic, TypeVar

from pydantic import BaseModel, ConfigDict

__all__ = ["Params", "Registry", "Entry", "RegistryError", "StateFactory"]

F = TypeVar("F", bound=Callable[..., Any])


class Params(BaseModel):
    """Base class for a component's parameters: typed, validated, frozen, no unknown keys."""

    model_config = ConfigDict(extra="forbid", frozen=True)


class RegistryError(KeyError):
    """An unknown or duplicate component name."""

    def __str__(self) -> str:  # KeyError quotes its message; we want it plain
        return str(self.args[0])


Check = Callable[[Any, Any], list[str]]  # (run config, params) -> reasons the combination is invalid
StateFactory = Callable[[Any], Any]  # params -> a fresh state object with state_dict() / load_state_dict()
Active = Callable[[Any, int], bool]  # (params, step) -> False when the component is the identity at that step


@dataclass(frozen=True)
class Entry(Generic[F]):
    name: str
    fn: F
    params: type[Params]
    summary: str
    check: Check | None = None
    state: StateFactory | None = None
    needs: frozenset[str] = frozenset()
    active: Active | None = None
    traits: frozenset[str] = frozenset()
    provides: frozenset[str] = frozenset()


class Registry(Generic[F]):
    """A name -> (function, params model) table for one kind of component."""

    def __init__(self, kind: str):
        self.kind = kind
        self._entries: dict[str, Entry[F]] = {}

    def register(self, name: str, params: type[Params] = Params, check: Check | None = None,
                 state: StateFactory | None = None, needs: tuple[str, ...] | frozenset[str] = (),
                 active: Active | None = None, traits: tuple[str, ...] | frozenset[str] = (),
                 provides: tuple[str, ...] | frozenset[str] = ()) -> Callable[[F], F]:
        """Decorator registering ``fn`` under ``name``; a second registration of a name fails.

        ``check(run_config, params)`` returns the reasons this component cannot work with the rest of a run's
        config (e.g. a leave-one-out baseline with groups of one); they are raised at config load.
        ``state(params)`` makes the explicit state of a component that keeps some across steps (a history
        anchor, a learned probe, dual variables); the function then receives it as a third argument and the
        trainer saves it in checkpoints. ``needs`` names the extra per-batch tensors the component reads
        (see :mod:`rlvr.train.extras`), which the trainer computes only when some component asks for them.
        ``active(params, step)`` (transforms only) returns False at steps where the component is the identity
        (a weight schedule that reached 0): the trainer then skips it and the extra passes it needs.
        ``traits`` names behaviour the component asks of the trainer rather than tensors it reads (an
        objective that keeps groups whole, reduces its own loss, or clips through the clip rule).
        ``provides`` names the score components a component writes for others to read (the AERO allocator's
        ``prior_pass_rate``, read by the AERO advantage): the channel between them is part of the contract.
        """

        def deco(fn: F) -> F:
            if name in self._entries:
                raise RegistryError(f"{self.kind} {name!r} is already registered")
            both = set(needs) & set(traits)
            if both:
                raise RegistryError(f"{self.kind} {name!r}: {sorted(both)} cannot be both a need and a trait")
            doc = (fn.__doc__ or "").strip().splitlines()
            self._entries[name] = Entry(name, fn, params, doc[0] if doc else "", check, state, frozenset(needs),
                                        active, frozenset(traits), frozenset(provides))
            return fn

        return deco

    def get(self, name: str) -> Entry[F]:
        try:
            return self._entries[name]
        except KeyError:
            raise RegistryError(
                f"unknown {self.kind} {name!r}; valid names: {', '.join(self.names())}"
            ) from None

    def names(self) -> list[str]:
        return sorted(self._entries)

    def unregister(self, name: str) -> None:
        """Remove ``name`` (a plugin replacing a component, or a test that registered one)."""
        self.get(name)
        del self._entries[name]

    def __contains__(self, name: object) -> bool:
        return name in self._entries

    def __len__(self) -> int:
        return len(self._entries)
