"""The contracts methods build on: whole-group batching, component state, requested extras, list components,
0-dim objectives and clip rules."""

from dataclasses import replace

import pytest
import torch
from pydantic import Field

from rlvr.algorithms.registry import (ADVANTAGE_TRANSFORMS, OBJECTIVES, REWARD_TRANSFORMS, ObjectiveInputs,
                                     aggregate)
from rlvr.config.run import ConfigError, algorithm_needs, configured_components, load_config
from rlvr.core.batch import build_batch
from rlvr.core.types import Completion
from rlvr.models import TinyModelConfig, build_tiny_model, char_tokenizer
from rlvr.registry import Params
from rlvr.train.algo_state import AlgorithmState, DictState
from rlvr.train.loop import settings
from rlvr.train.update import update_policy


def _batch(sizes=(3, 1, 4, 2), seed=0):
    g = torch.Generator().manual_seed(seed)
    comps, rewards = [], []
    for gi, n in enumerate(sizes):
        for _ in range(n):
            p = torch.randint(3, 60, (int(torch.randint(2, 6, (1,), generator=g)),), generator=g).tolist()
            c = torch.randint(3, 60, (int(torch.randint(1, 7, (1,), generator=g)),), generator=g).tolist()
            comps.append(Completion(str(gi), p, c, None, "stop", "x", gi))
            rewards.append(float(torch.rand(1, generator=g) > 0.5))
    return comps, build_batch(comps, rewards, 0)


def test_whole_group_minibatches_partition_groups():
    _, b = _batch((3, 1, 4, 2, 5, 1))
    for gen in (None, torch.Generator().manual_seed(3)):
        parts = b.minibatches(3, gen, whole_groups=True)
        assert len(parts) == 3
        seen = torch.cat([p.group_index for p in parts])
        assert sorted(seen.tolist()) == sorted(b.group_index.tolist())
        owners = {}
        for k, p in enumerate(parts):
            for gi in p.group_index.tolist():
                assert owners.setdefault(gi, k) == k  # a group never spans two minibatches


def test_whole_group_micro_batches_respect_size_except_one_big_group():
    _, b = _batch((3, 1, 4, 2, 5, 1))
    micros = list(b.micro_batches(4, whole_groups=True))
    for m in micros:
        groups = torch.unique(m.group_index)
        assert m.size <= 4 or len(groups) == 1
        for gi in groups.tolist():  # the whole group is there
            assert int((m.group_index == gi).sum()) == int((b.group_index == gi).sum())
    assert sum(m.size for m in micros) == b.size


def test_extras_follow_select_and_trim():
    _, b = _batch()
    tok = torch.arange(b.size * b.completion_mask.shape[1], dtype=torch.float32).view(b.size, -1)
    b = replace(b, extras={"entropy": tok, "hidden": torch.randn(b.size, b.completion_mask.shape[1])})
    sub = b.select(torch.tensor([1, 2])).trim()
    t = int(b.lengths[[1, 2]].max())
    assert torch.equal(sub.extras["entropy"], tok[[1, 2], :t])
    assert sub.extras["hidden"].shape[1] == b.completion_mask.shape[1]  # row extras are never trimmed


def test_list_components_validate_and_are_enumerated():
    cfg = load_config(overrides=["algorithm.clip=kl3"])
    paths = [p for p, _, _ in configured_components(cfg)]
    assert "algorithm.clip" in paths and "optim.optimizer" in paths
    with pytest.raises(ConfigError, match="reward_transforms"):
        load_config(overrides=["algorithm.reward_transforms=[{foo: 1}]"])
    with pytest.raises(ConfigError, match="unknown reward transform"):
        load_config(overrides=["algorithm.reward_transforms=[nope]"])
    with pytest.raises(ConfigError, match="does not clip a ratio"):
        load_config(overrides=["algorithm.clip=kl3", "algorithm.objective=cispo"])


class _ScaleParams(Params):
    factor: float = Field(2.0)


@pytest.fixture
def test_components():
    """Temporarily registered components: a stateful reward transform and an extras-reading transform."""
    seen = {}

    @REWARD_TRANSFORMS.register("_t_count", _ScaleParams, state=lambda p: DictState(calls=0))
    def count(inp, p, state):
        state["calls"] += 1
        return inp.rewards * p.factor, {"calls": state["calls"]}

    @ADVANTAGE_TRANSFORMS.register("_t_entropy", Params, needs=("entropy", "old_logp"))
    def ent(inp, p):
        seen["extras"] = dict(inp.extras)
        seen["adv"] = inp.advantages.clone()
        return inp.advantages, {}

    yield seen
    for reg, name in ((REWARD_TRANSFORMS, "_t_count"), (ADVANTAGE_TRANSFORMS, "_t_entropy")):
        reg._entries.pop(name)


def test_stateful_transform_state_and_extras_through_real_steps(jsonl_cfg_overrides, tmp_path, test_components):
    import json

    from rlvr.run.train import train

    cfg = load_config(overrides=jsonl_cfg_overrides + [
        "algorithm.reward_transforms=[{name: _t_count, factor: 3.0}]",
        "algorithm.advantage_transforms=[_t_entropy]", "train.eval_every=0"])
    assert {"entropy", "old_logp"} <= algorithm_needs(cfg)
    train(cfg)
    run = tmp_path / "run"
    lines = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()]
    assert [m["reward_transform/_t_count/calls"] for m in lines] == [1.0, 2.0, 3.0]
    state = json.loads((run / "checkpoints" / "step_000003" / "state.json").read_text())
    assert state["algorithm_state"] == {"algorithm.reward_transforms.0": {"calls": 3}}
    ex = test_components["extras"]
    assert set(ex) == {"entropy", "old_logp"}
    n, t = test_components["adv"].shape
    assert ex["entropy"].shape == (n, t) and (ex["entropy"] >= 0).all()
    for m in lines:  # the training reward is the transformed one; generated/* reports the task's reward
        assert m["reward"] == pytest.approx(3.0 * m["generated/reward"])
    assert any(m["reward"] > 0 for m in lines)


def test_algorithm_state_refuses_a_changed_algorithm(test_components):
    a = AlgorithmState(load_config(overrides=["algorithm.reward_transforms=[_t_count]"]))
    b = AlgorithmState(load_config())
    with pytest.raises(ValueError, match="algorithm changed"):
        b.load_state_dict(a.state_dict())


def test_scalar_objective_matches_per_token_form():
    """A 0-dim objective loss (owning its normalisation) gives the gradient of the equivalent per-token loss."""
    tok = char_tokenizer()
    _, batch = _batch((4, 4))
    adv = torch.randn(batch.size)[:, None] * batch.completion_mask

    @OBJECTIVES.register("_t_scalar", Params, traits=("whole_groups", "reduced_loss"))  # a 0-dim loss, declared
    def scalar(inp: ObjectiveInputs, p):
        per_tok = -inp.advantages * inp.logp
        return (per_tok * inp.mask).sum() / inp.n_rows, {}

    try:
        grads = {}
        for name, agg in (("_t_scalar", "seq_mean_token_sum"), ("ppo_clip", "seq_mean_token_sum")):
            model = build_tiny_model(TinyModelConfig(hidden_size=32, intermediate_size=64, num_layers=1), tok, seed=0)
            cfg = load_config(overrides=[f"algorithm.objective={name}", f"algorithm.aggregation={agg}",
                                         "algorithm.minibatches=1", "train.micro_batch_size=3",
                                         "optim.max_grad_norm=null", "rollout.prompts_per_step=2",
                                         "rollout.group_size=4"])
            opt = torch.optim.SGD(model.parameters(), lr=0.0)
            sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda i: 1.0)
            update_policy(model, opt, sched, replace(batch, advantages=adv), settings(cfg))
            grads[name] = [q.grad.clone() for q in model.parameters()]
        for a, b in zip(grads["_t_scalar"], grads["ppo_clip"]):
            torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-6)
    finally:
        OBJECTIVES._entries.pop("_t_scalar")


def test_whole_group_objectives_need_minibatches_dividing_prompts():
    @OBJECTIVES.register("_t_groups", Params, traits=("whole_groups",))
    def f(inp, p):
        return inp.logp * 0, {}

    try:
        with pytest.raises(ConfigError, match="keeps groups whole"):
            load_config(overrides=["algorithm.objective=_t_groups", "rollout.prompts_per_step=6",
                                   "algorithm.minibatches=4", "rollout.group_size=2"])
    finally:
        OBJECTIVES._entries.pop("_t_groups")


def test_reduced_loss_objectives_refuse_per_token_corrections():
    with pytest.raises(ConfigError, match="cannot apply"):
        load_config(recipe="pacs", overrides=["algorithm.correction=tis"])
    assert load_config(recipe="pacs").algorithm.correction.name == "none"
