"""AERO's posterior baseline: constant groups get r - p~ with p~ the prompt's Beta mean before the step."""

import pytest
import torch

from rlvr.algorithms.advantages.aero import aero_advantage
from rlvr.algorithms.advantages.grpo import GRPOAdvantageParams, grpo_advantage
from rlvr.algorithms.registry import AdvantageInputs
from rlvr.config.run import ConfigError, load_config
from rlvr.train.rollouts import collect_rollouts
from tests.test_budget import rig


def _inputs(rewards, groups, prior):
    return AdvantageInputs(torch.tensor(rewards, dtype=torch.float64), torch.tensor(groups),
                           components={"prior_pass_rate": torch.tensor(prior, dtype=torch.float64)})


def test_constant_groups_use_the_posterior_mean_and_others_are_grpo():
    inp = _inputs([0, 0, 0, 1, 1, 1, 1, 0, 0, 1], [0, 0, 0, 1, 1, 1, 2, 2, 2, 2], [0.25] * 3 + [2 / 3] * 3 + [0.5] * 4)
    adv = aero_advantage(inp, GRPOAdvantageParams())
    torch.testing.assert_close(adv[:3], torch.full((3,), -0.25))  # all wrong: 0 - 0.25
    torch.testing.assert_close(adv[3:6], torch.full((3,), 1 / 3))  # all right: 1 - 2/3
    torch.testing.assert_close(adv[6:], grpo_advantage(inp, GRPOAdvantageParams())[6:])  # informative: GRPO
    assert (grpo_advantage(inp, GRPOAdvantageParams())[:6] == 0).all()  # what GRPO would have given


def test_missing_posterior_is_a_clear_error_and_config_needs_the_aero_budget():
    with pytest.raises(ValueError, match="prior_pass_rate"):
        aero_advantage(AdvantageInputs(torch.zeros(2, dtype=torch.float64), torch.zeros(2, dtype=torch.long)),
                       GRPOAdvantageParams())
    with pytest.raises(ConfigError, match="data.budget: aero"):
        load_config(overrides=["algorithm.advantage=aero"])


def test_allocator_writes_the_prior_before_this_steps_update():
    cfg, c = rig(lambda i, k: k <= 3, ["data.budget.name=aero", "data.budget.n_explore=4"], ids=("A",))
    ro = collect_rollouts(cfg, c, 0, lambda r: r)
    assert {s.components["prior_pass_rate"] for s in ro.scores} == {0.5}  # Beta(1, 1) prior, not (4, 2)
    c.sampler.pos = 0
    ro = collect_rollouts(cfg, c, 1, lambda r: r)
    assert [s.components["prior_pass_rate"] for s in ro.scores] == pytest.approx([2 / 3] * len(ro.scores))
