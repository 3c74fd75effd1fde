"""The one-file GRPO step (rlvr/train/reference.py) and the general step (rlvr/train/loop.py) train alike: on
the demo's configuration, from the same warmed-up model, several steps end with bit-identical weights."""

import copy

import pytest
import torch

from rlvr.config.run import load_config
from rlvr.models.loading import load_model
from rlvr.run.setup import build_components, build_task
from rlvr.sft.supervised import sft
from rlvr.train.loop import rl_step
from rlvr.train.reference import ReferenceGRPO, grpo_advantages, problems

STEPS = 3


@pytest.fixture(scope="module")
def warmed():
    """The demo's model and task after a short supervised warm-up (so groups have rewards that differ)."""
    cfg = load_config()
    model, tok = load_model(cfg.model, seed=cfg.seed)
    task = build_task(cfg)
    sft(model, tok, task.examples("train"), 200, cfg.sft.batch_size, cfg.sft.lr, cfg.sft.warmup_steps, seed=cfg.seed)
    return model, tok, task


@pytest.mark.parametrize("over", [[], ["train.micro_batch_size=24", "algorithm.minibatches=2"]],
                         ids=["demo", "micro-batches"])
def test_the_reference_step_and_the_general_loop_end_with_bit_identical_weights(warmed, over):
    model, tok, task = warmed
    cfg = load_config(overrides=[f"train.steps={STEPS}", *over])
    assert problems(cfg) == []
    general, reference = copy.deepcopy(model), copy.deepcopy(model)
    c = build_components(cfg, general, tok, task)
    ref = ReferenceGRPO(reference, tok, task, cfg)
    start = {k: v.clone() for k, v in model.state_dict().items()}
    for step in range(STEPS):
        a, b = rl_step(cfg, c, step), ref.step(step)
        assert a["reward"] == b["reward"] and a["completion_length"] == b["completion_length"], step
        assert a["loss"] == b["loss"] and a["grad_norm"] == b["grad_norm"] and a["entropy"] == b["entropy"], step
        assert 0 < a["reward"] < 1  # groups with signal: the step learns something
    ga, gb = general.state_dict(), reference.state_dict()
    assert ga.keys() == gb.keys() and all(torch.equal(ga[k], gb[k]) for k in ga)
    assert any(not torch.equal(start[k], ga[k]) for k in ga)  # the weights moved


def test_grpo_advantages_equal_the_registered_estimator_on_ragged_real_valued_groups():
    from rlvr.algorithms.registry import ADVANTAGES, AdvantageInputs

    g = torch.Generator().manual_seed(0)
    rewards = torch.rand(11, generator=g, dtype=torch.float64)
    rewards[4:7] = 0.3  # a constant group: exactly 0
    groups = torch.tensor([0, 0, 0, 0, 1, 1, 1, 2, 2, 3, 3])
    entry = ADVANTAGES.get("grpo")
    want = entry.fn(AdvantageInputs(rewards, groups), entry.params())
    got = grpo_advantages(rewards, groups, entry.params().eps)
    assert torch.equal(got, want) and float(got[4:7].abs().sum()) == 0.0


@pytest.mark.parametrize("over, what", [
    (["algorithm.objective={name: gspo}"], "algorithm.objective"),
    (["algorithm.kl.coef=0.1"], "no KL"),
    (["rollout.engine=native"], "rollout.engine"),
    (["rollout.group_size=1", "algorithm.minibatches=1"], "two completions"),
    (["algorithm.dynamic_sampling.enabled=true"], "dynamic sampling"),
])
def test_a_config_it_does_not_implement_is_refused_naming_why(warmed, over, what):
    model, tok, task = warmed
    cfg = load_config(overrides=over)
    assert any(what in msg for msg in problems(cfg))
    with pytest.raises(ValueError, match="does not implement"):
        ReferenceGRPO(copy.deepcopy(model), tok, task, cfg)
