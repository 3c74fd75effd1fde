"""Warnings that save a day: a run that cannot learn says so, in its metrics and on its progress line.

Checked after every step (:class:`RunHealth`), from the step's own metrics:

- **truncated**: at least ``0.9`` of the step's completions hit the length limit (``truncated_frac``): the
  rewards then judge cut-off answers. Raise ``rollout.max_new_tokens``, or ask for shorter answers.
- **no signal**: no group of the last ``3`` steps had any spread of reward (``rollouts/informative_groups``
  0, or the update skipped): every group-relative advantage is 0 and nothing is learned. The reward is too
  hard (every answer wrong), too easy (every answer right) or binary on a model that never varies; partial
  credit, easier prompts, larger groups or ``algorithm.dynamic_sampling`` help.
- **flat reward**: the mean reward has not changed in the last ``8`` steps (to 1e-9): the verifier may be
  returning a constant (a reward function that always fails to parse, say).

Each condition sets ``warn/<name>`` to 1 in the step's metrics (0 otherwise, so a dashboard can plot them), and
its message is shown when the condition starts and again every ``repeat`` steps while it lasts.
"""

from __future__ import annotations

from collections import deque
from typing import Callable

__all__ = ["RunHealth"]

TRUNCATED_FRAC = 0.9
NO_SIGNAL_STEPS = 3
FLAT_STEPS = 8


class RunHealth:
    """Follows a run's step metrics; :meth:`check` returns the warnings of a step (and marks its metrics)."""

    def __init__(self, max_new_tokens: int, say: Callable[[str], None] | None = None, repeat: int = 25):
        self.max_new_tokens, self.say, self.repeat = max_new_tokens, say, repeat
        self._silent = 0  # consecutive steps without a group with signal
        self._rewards: deque[float] = deque(maxlen=FLAT_STEPS)
        self._since: dict[str, int] = {}  # condition -> steps since its message was last shown

    def _conditions(self, m: dict[str, float]) -> dict[str, str]:
        out = {}
        frac = m.get("truncated_frac")
        if frac is not None and frac >= TRUNCATED_FRAC:
            out["truncated"] = (f"{frac:.0%} of this step's completions hit the length limit (rollout.max_new_tokens="
                                f"{self.max_new_tokens}): the rewards judge cut-off answers; raise the limit or ask "
                                "for shorter answers")
        signal = m.get("rollouts/informative_groups")
        silent = m.get("update_skipped", 0.0) >= 1.0 or (signal is not None and signal == 0)
        self._silent = self._silent + 1 if silent else 0
        if self._silent >= NO_SIGNAL_STEPS:
            out["no_signal"] = (f"no group had any spread of reward for {self._silent} steps: every advantage is 0 "
                                "and nothing is learned (every answer wrong, or every answer right); try partial "
                                "credit, easier prompts, larger groups or algorithm.dynamic_sampling")
        if "reward" in m:
            self._rewards.append(float(m["reward"]))
            if len(self._rewards) == FLAT_STEPS and max(self._rewards) - min(self._rewards) <= 1e-9:
                out["flat_reward"] = (f"the mean reward has been {self._rewards[-1]:.4g} for {FLAT_STEPS} steps: is "
                                      "the verifier returning a constant? (rlvr verify scores a file of completions)")
        return out

    def check(self, step: int, m: dict[str, float]) -> list[str]:
        """``m`` gets ``warn/*`` flags; returns the messages to show at this step."""
        found = self._conditions(m)
        shown = []
        for name in ("truncated", "no_signal", "flat_reward"):
            m[f"warn/{name}"] = 1.0 if name in found else 0.0
            if name not in found:
                self._since.pop(name, None)
                continue
            since = self._since.get(name)
            if since is None or since >= self.repeat:
                shown.append(f"warning at step {step}: {found[name]}")
                self._since[name] = 0
            self._since[name] += 1
        for msg in shown:
            if self.say is not None:
                self.say(msg)
        return shown

    @staticmethod
    def tag(m: dict[str, float]) -> str:
        """A short mark for the progress line: the conditions in force."""
        names = {"truncated": "truncated", "no_signal": "no signal", "flat_reward": "flat reward"}
        on = [label for key, label in names.items() if m.get(f"warn/{key}")]
        return f"  [!] {', '.join(on)}" if on else ""
