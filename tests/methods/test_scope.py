"""SCOPE-RL's process-shape reward (H7 stage 2, RECONSTRUCTED): the METHODS H7 gate oracles, the step
splitting and usefulness rules on hand cases (repeats, restatements, steps without content), the
efficiency against the group's shortest correct member, unsolved groups left alone; the recipe trains."""

import math

import pytest
import torch

from rlvr.algorithms.registry import TransformInputs
from rlvr.algorithms.transforms.scope import ScopeShapeParams, scope_shape, split_steps, useful_fraction
from tests.methods.helpers import run_recipe_steps
from tests.methods.seed_support import BINARY


def _inp(rewards, groups, lengths, useful, correct=None):
    t = max(lengths)
    mask = (torch.arange(t)[None, :] < torch.tensor(lengths)[:, None]).float()
    comps = {} if correct is None else {"correct": torch.tensor(correct, dtype=torch.float64)}
    return TransformInputs(torch.tensor(rewards, dtype=torch.float64), torch.tensor(groups), mask, components=comps,
                           extras={"step_useful_frac": torch.tensor(useful)})


def test_the_gate_oracles():
    # an incorrect row with a perfect shape gets 0; a correct one with shape 0 and lambda 0.3 gets 0.7
    out, _ = scope_shape(_inp([0.0, 1.0, 1.0], [0, 0, 0], [4, 4, 4], [1.0, 0.0, 0.0]), ScopeShapeParams())
    # rows 1 and 2 are the shortest correct (efficiency 1): shape = (0 + 1) / 2 = 0.5 -> 0.7 + 0.15
    assert out.tolist() == pytest.approx([0.0, 0.85, 0.85])
    out, _ = scope_shape(_inp([0.0, 1.0], [0, 0], [4, 4], [1.0, 0.0]), ScopeShapeParams(lambda_p=0.0))
    assert out.tolist() == [0.0, 1.0]  # the gate alone
    # a partial reward is not correct when the correct component says so: gated to 0
    out, _ = scope_shape(_inp([0.9, 1.0], [0, 0], [2, 2], [1.0, 1.0], correct=[0.0, 1.0]), ScopeShapeParams())
    assert out.tolist() == pytest.approx([0.0, 1.0])


def test_efficiency_is_against_the_groups_shortest_correct_member_and_unsolved_groups_stay():
    p = ScopeShapeParams(lambda_p=1.0)
    out, m = scope_shape(_inp([1.0, 1.0, 0.0, 0.0, 0.4], [0, 0, 0, 1, 1], [2, 8, 1, 3, 3], [1.0, 1.0, 1.0, 0.5, 0.5]),
                         p)
    # group 0: L_min = 2 (the 1-token row is wrong): shapes (1 + 1)/2 and (1 + 2/8)/2; group 1 unsolved: unchanged
    assert out.tolist() == pytest.approx([1.0, 0.625, 0.0, 0.0, 0.4])
    assert m["shape_mean"] == pytest.approx((1.0 + 0.625) / 2) and m["useful_mean"] == 1.0
    out, _ = scope_shape(_inp([0.0, 0.4], [0, 0], [3, 3], [0.5, 0.5]), ScopeShapeParams(only_solved=False))
    assert out.tolist() == [0.0, 0.0]


def test_steps_and_their_usefulness():
    assert split_steps("a = 3. So b = 4!\n\n  c is 5  \n") == ["a = 3.", "So b = 4!", "c is 5"]
    assert useful_fraction("") == 0.0
    # a repeat (up to case and punctuation) and a step with nothing new are not useful
    text = "Let x = 12.\nThen y = x + 3 = 15.\nlet X = 12\nSo the answer:\nThe answer is 15."
    assert useful_fraction(text) == pytest.approx(3 / 5)
    assert useful_fraction("12 + 7 = 19") == 1.0
    assert useful_fraction("ok.\nok.\nok.") == 0.0  # no content word of three letters or number


def test_the_recipe_trains_two_steps(tmp_path):
    out = run_recipe_steps("scope_rl", tmp_path, overrides=BINARY)
    for m in out["metrics"]:
        assert all(math.isfinite(v) for v in m.values() if isinstance(v, float)), m
        assert "reward_transform/scope_shape/shape_mean" in m
    assert any(not torch.equal(out["before"][k], out["after"][k]) for k in out["before"])
