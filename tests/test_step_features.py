"""The step features config flags turn on are registered components with hand-checked behaviour."""

import pytest
import torch

from rlvr.algorithms.group_filters import informative_groups
from rlvr.algorithms.registry import (GROUP_FILTERS, MASK_TRANSFORMS, REWARD_SHAPERS, REWARD_TRANSFORMS,
                                     GroupFilterInputs, MaskInputs, ShapingInputs, TransformInputs)
from rlvr.algorithms.shaping import overlong_penalty
from rlvr.config.run import load_config
from rlvr.train.config_flags import step_features


def _groups(rewards, correct, index, n):
    return GroupFilterInputs(torch.tensor(rewards, dtype=torch.float64), torch.tensor(correct, dtype=torch.float64),
                             torch.tensor(index), n)


def test_informative_groups_by_hand():
    # group 0 mixed, 1 constant, 2 a singleton, 3 empty, 4 all correct (reward differs), 5 all wrong
    inp = _groups([1, 0, 0.5, 0.5, 1, 1, 0.9, 0, 0], [1, 0, 0, 0, 1, 1, 1, 0, 0], [0, 0, 1, 1, 2, 4, 4, 5, 5], 6)
    assert informative_groups(inp) == [0, 2, 4]
    assert informative_groups(inp, singletons=False) == [0, 4]
    assert informative_groups(inp, metric="correct") == [0, 2]  # group 4 is constant in correctness
    assert informative_groups(inp, drop="all_correct") == [0, 1, 5]  # only all-correct groups (2, 4) go
    p = GROUP_FILTERS.get("dynamic_sampling").params.model_validate({"metric": "correct"})
    assert GROUP_FILTERS.get("dynamic_sampling").fn(inp, p) == [0, 2]


def test_constant_means_exactly_equal():
    inp = _groups([0.3, 0.1 + 0.2], [0, 0], [0, 0], 1)  # 0.3 != 0.30000000000000004
    assert informative_groups(inp) == [0]


def test_overlong_filter_and_soft_penalty():
    mask = torch.ones(3, 4)
    out = MASK_TRANSFORMS.get("overlong_filter").fn(MaskInputs(mask, torch.tensor([False, True, False])), None)
    assert out.tolist() == [[1.0] * 4, [0.0] * 4, [1.0] * 4]
    shaper = REWARD_SHAPERS.get("soft_overlong")
    lengths = torch.tensor([10, 16, 18, 20])
    got = shaper.fn(ShapingInputs(lengths, 20), shaper.params.model_validate({"buffer_frac": 0.2, "factor": 0.5}))
    assert torch.equal(got, overlong_penalty(lengths, 20, 4, 0.5))
    assert got.tolist() == [0.0, 0.0, -0.25, -0.5]


def test_kl_penalty_subtracts_the_summed_kl():
    old = torch.tensor([[-1.0, -2.0, 0.0], [-0.5, -0.5, -0.5]])
    ref = torch.tensor([[-1.5, -1.0, 0.0], [-0.5, -1.0, -2.0]])
    mask = torch.tensor([[1.0, 1.0, 0.0], [1.0, 1.0, 1.0]])
    inp = TransformInputs(torch.tensor([1.0, 0.0], dtype=torch.float64), torch.tensor([0, 0]), mask,
                          extras={"old_logp": old, "ref_logp": ref}, kl_coef=0.5)
    entry = REWARD_TRANSFORMS.get("kl_penalty")
    rewards, m = entry.fn(inp, entry.params.model_validate({"estimator": "k1"}))
    # k1 = old - ref: row 0: 0.5 + -1.0 = -0.5; row 1: 0 + 0.5 + 1.5 = 2.0
    assert rewards.tolist() == pytest.approx([1.0 + 0.25, 0.0 - 1.0])
    assert m["kl"] == pytest.approx((0.5 - 1.0 + 0 + 0.5 + 1.5) / 5)


def test_flags_map_to_components():
    off = step_features(load_config(), has_reference=False)
    assert (off.reward_shapers, off.reward_transforms, off.mask_transforms, off.group_filter) == ([], [], [], None)
    cfg = load_config(overrides=["algorithm.overlong.filter=true", "algorithm.overlong.soft_penalty=true",
                                 "algorithm.overlong.factor=0.5", "algorithm.dynamic_sampling.enabled=true",
                                 "algorithm.dynamic_sampling.drop=all_correct", "algorithm.kl.coef=0.1",
                                 "algorithm.kl.placement=reward", "algorithm.kl.estimator=k2"])
    on = step_features(cfg, has_reference=True)
    assert [f.name for f in on.reward_shapers] == ["soft_overlong"] and on.reward_shapers[0].params.factor == 0.5
    assert [f.name for f in on.reward_transforms] == ["kl_penalty"] and on.reward_transforms[0].params.estimator == "k2"
    assert [f.name for f in on.mask_transforms] == ["overlong_filter"]
    assert on.group_filter.name == "dynamic_sampling" and on.group_filter.params.drop == "all_correct"
    assert step_features(cfg, has_reference=False).reward_transforms == []
