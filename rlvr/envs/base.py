"""The environment contract: episodes that the multi-turn driver (:mod:`rlvr.envs.multiturn`) runs.

An environment is registered by name in :data:`ENVIRONMENTS` with a pydantic model of its parameters,
like a verifier; the registered function is a *factory*: ``build(params) -> Environment``, called once per
episode, so every episode has its own instance and no state leaks between episodes (or between the
episodes of one group, which run side by side)::

    env = ENVIRONMENTS.get(name).fn(params)       # one per episode
    observation = env.reset(example, seed)        # "" when the prompt already says everything
    observation, reward, done, info = env.step(action_text)   # once per policy turn

``reset`` gets the episode's seed (:func:`episode_seed`: a pure function of the run's sampling seed, the
example id and the episode's index in its group), so an episode replays exactly. ``step`` receives the
decoded text of the policy's latest turn and returns a :class:`Step` (a named tuple, so a plain 4-tuple
is accepted too). ``reward`` is the turn's reward; the driver sums them into the episode's reward.

Environments keep no ``state_dict``: an episode starts and ends inside one rollout call, so it never
straddles a checkpoint, and a resumed run simply starts new episodes. An environment may raise or hang:
the driver ends that episode with reward 0 and the reason, and the run goes on (see the driver). An
environment may set ``stop`` (strings that end a policy turn, e.g. ``"</tool_call>"``) so a turn stops
where an action is complete instead of running to the token limit.
"""

from __future__ import annotations

import zlib
from typing import Any, Callable, NamedTuple, Protocol, runtime_checkable

from rlvr.core.types import Example
from rlvr.registry import Params, Registry

__all__ = ["Environment", "Step", "ENVIRONMENTS", "env_factory", "episode_seed"]


class Step(NamedTuple):
    """What one environment step returns: the next observation, the turn's reward, whether the episode is
    over, and free-form info (kept on the completion for inspection)."""

    observation: str
    reward: float = 0.0
    done: bool = False
    info: dict[str, Any] | None = None


@runtime_checkable
class Environment(Protocol):
    """One episode's environment. ``stop`` (optional attribute): strings that end a policy turn."""

    def reset(self, example: Example, seed: int) -> str:
        """Start the episode of ``example``; the opening observation ("" for none)."""
        ...

    def step(self, action: str) -> Step | tuple[str, float, bool, dict[str, Any] | None]:
        """Act on the policy's latest turn (its decoded text)."""
        ...


ENVIRONMENTS: Registry = Registry("environment")


def env_factory(name: str, params: dict[str, Any] | Params | None = None) -> Callable[[], Environment]:
    """A zero-argument factory of fresh ``name`` environments, its params validated now (not per episode)."""
    entry = ENVIRONMENTS.get(name)
    p = params if isinstance(params, entry.params) else entry.params(**(params or {}))
    return lambda: entry.fn(p)


def episode_seed(sampling_seed: int | None, example_id: str, index: int) -> int:
    """The seed of episode ``index`` of ``example_id``: stable across processes (no ``hash()``)."""
    return zlib.crc32(f"{sampling_seed}:{example_id}:{index}".encode()) & 0x7FFFFFFF
