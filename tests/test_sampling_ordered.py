"""The difficulty-ordered curriculum (sampler difficulty_order; Li et al. 2025, arXiv:2507.17512): order, domain
balance and interleaving by hand, epochs, state, errors, and the recipe's real steps."""

import pytest

from rlvr.config.run import load_config
from rlvr.core.types import Example
from rlvr.sampling.ordered import DifficultyOrderParams, DifficultyOrderSampler


def ex(i, task, d):
    return Example(f"{task}{i}", "x" * (i + 1), "a", task=task, meta={"difficulty": d})


MATH = [ex(0, "math", 3), ex(1, "math", 1), ex(2, "math", 2), ex(3, "math", 1)]
CODE = [ex(0, "code", 2), ex(1, "code", 1)]


def ids(out):
    return [e.id for e in out]


def test_order_is_by_difficulty_with_domains_interleaved_on_ties():
    s = DifficultyOrderSampler(MATH + CODE, DifficultyOrderParams(balance=False))
    # level 1: code1, math1, math3 (interleaved: the 1st of each domain, then the 2nd); level 2: code0, math2; 3
    assert ids(s.next(6)) == ["code1", "math1", "math3", "code0", "math2", "math0"]
    assert ids(s.next(2)) == ["code1", "math1"] and s.epoch == 1  # epochs repeat the same order
    desc = DifficultyOrderSampler(MATH + CODE, DifficultyOrderParams(balance=False, descending=True))
    assert ids(desc.next(3)) == ["math0", "code0", "math2"]


def test_balance_caps_every_domain_at_the_smallest():
    s = DifficultyOrderSampler(MATH + CODE, DifficultyOrderParams(balance=True), seed=3)
    order = s.next(4)
    assert sorted(e.task for e in order) == ["code", "code", "math", "math"]
    assert [e.meta["difficulty"] for e in order] == sorted(e.meta["difficulty"] for e in order)
    again = DifficultyOrderSampler(MATH + CODE, DifficultyOrderParams(balance=True), seed=3)
    assert ids(again.next(4)) == ids(order)  # the subsample is seeded


def test_state_round_trip_and_errors():
    s = DifficultyOrderSampler(MATH, DifficultyOrderParams())
    s.next(3)
    fresh = DifficultyOrderSampler(MATH, DifficultyOrderParams())
    fresh.load_state_dict(s.state_dict())
    assert ids(fresh.next(3)) == ids(s.next(3))
    with pytest.raises(ValueError, match="data changed"):
        DifficultyOrderSampler(MATH[:2], DifficultyOrderParams()).load_state_dict(s.state_dict())
    with pytest.raises(ValueError, match=r"meta\['level'\] = None is not a number"):
        DifficultyOrderSampler(MATH, DifficultyOrderParams(key="level"))
    by_length = DifficultyOrderSampler(MATH, DifficultyOrderParams(key="prompt_chars"))
    assert ids(by_length.next(4)) == ["math0", "math1", "math2", "math3"]  # prompts of 1, 2, 3, 4 characters


def test_recipe_trains(tmp_path):
    from tests.methods.helpers import recipe_trains

    out = recipe_trains("difficulty_curriculum", tmp_path, ["reward", "loss"])
    assert all("sampler/curriculum_progress" in m for m in out["metrics"])
    prompts = [len(e.prompt) for e in out["c"].sampler.order]
    assert prompts == sorted(prompts)
