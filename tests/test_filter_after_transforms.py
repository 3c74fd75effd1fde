"""DAPO's dynamic-sampling filter sees the rewards after the reward transforms (rlvr.train.rewards): a transform
that makes a constant group informative keeps the group, a stateful transform's state advances once per step
(the filter peeks with a copy), and a transform that reads a tensor of the update's passes is left out of the
peek (the filter then sees the rewards before it)."""

from __future__ import annotations

import pytest
import torch

from rlvr.algorithms.registry import REWARD_TRANSFORMS
from rlvr.core.state import DictState
from rlvr.registry import Params
from tests.methods.helpers import run_recipe_steps

CONSTANT = ["task.verifier=tests.reward_fns:constant_zero", "algorithm.dynamic_sampling.enabled=true",
            "algorithm.dynamic_sampling.max_rounds=2", "algorithm.dynamic_sampling.on_shortfall=proceed"]


@pytest.fixture
def transforms():
    calls = {"peeked_states": []}

    @REWARD_TRANSFORMS.register("test_length_bonus", Params, state=lambda p: DictState(calls=0))
    def length_bonus(inp, p, state):
        """r + 0.01 x completion length: constant rewards become informative when lengths differ."""
        state["calls"] += 1
        calls["peeked_states"].append(state)
        return inp.rewards + 0.01 * inp.mask.sum(-1).to(torch.float64), {}

    @REWARD_TRANSFORMS.register("test_needs_old_logp", Params, needs=("old_logp",))
    def needs_old(inp, p):
        calls.setdefault("needs_old", 0)
        calls["needs_old"] += 1
        assert "old_logp" in inp.extras  # never called without it (the filter skips it)
        return inp.rewards, {}

    yield calls
    REWARD_TRANSFORMS.unregister("test_length_bonus")
    REWARD_TRANSFORMS.unregister("test_needs_old_logp")


def test_a_transform_that_makes_constant_groups_informative_keeps_them(tmp_path, transforms):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    plain = run_recipe_steps("grpo", tmp_path / "a", steps=1, overrides=CONSTANT)["metrics"][0]
    assert plain["rollout/filled_frac"] == 0.0  # every reward 0: nothing informative without the transform
    out = run_recipe_steps("grpo", tmp_path / "b", steps=1, overrides=CONSTANT + [
        "algorithm.reward_transforms=[{name: test_length_bonus}, {name: test_needs_old_logp}]",
        "rollout.max_new_tokens=6", "rollout.temperature=1.5"])
    m = out["metrics"][0]
    assert m["rollout/filled_frac"] > 0.0 and m["rollout/rounds"] >= 1
    state = out["c"].algo_state.get("algorithm.reward_transforms.0")
    assert state["calls"] == 1  # the advantage's call; the filter's peeks ran on copies
    assert any(s is not state for s in transforms["peeked_states"])
    assert transforms["needs_old"] == 1  # at the advantage only, with old_logp
