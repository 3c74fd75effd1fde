"""Turn-level advantages for multi-turn episodes: the turn tensors read off episodes' segments, hand-computed
advantages, GRPO as the lambda = 0 case, and a training run on two-turn episodes."""

import json

import pytest
import torch

from rlvr.algorithms.registry import ADVANTAGES, AdvantageInputs, call
from rlvr.config.run import load_config
from rlvr.core.types import Completion, Segment
from rlvr.envs.multiturn import EpisodeCompletion
from rlvr.envs.turns import turn_tensors


def _episode(ids, segments, turn_rewards, group=0):
    return EpisodeCompletion("e", [5], ids, [0.0] * len(ids), "stop", "", group=group,
                             segments=[Segment(*s) for s in segments], turns=len(turn_rewards),
                             turn_rewards=turn_rewards)


def test_turn_tensors_follow_the_segments():
    a = _episode([1] * 7, [(0, 2, "sampled"), (2, 4, "inserted"), (4, 7, "sampled")], [0.5, 2.0])
    b = _episode([1] * 3, [(0, 1, "prefix"), (1, 3, "sampled")], [1.0])  # a continued prefix opens turn 1
    c = Completion("s", [5], [1, 1], [0.0, 0.0], "stop", "")  # single-turn: one turn, reward 0
    mask = torch.ones(3, 8)
    idx, rew = turn_tensors([a, b, c], mask)
    assert idx.tolist() == [[1, 1, 0, 0, 2, 2, 2, 0], [1, 1, 1, 0, 0, 0, 0, 0], [1, 1, 0, 0, 0, 0, 0, 0]]
    assert rew.tolist()[0] == [0.5, 0.5, 0, 0, 2, 2, 2, 0] and rew.tolist()[1][:3] == [1, 1, 1]
    assert rew[2].abs().sum() == 0


def _inputs(rewards, turn_index, turn_reward, groups):
    mask = (turn_index > 0).float()
    return AdvantageInputs(torch.tensor(rewards, dtype=torch.float64), torch.tensor(groups), mask.sum(-1), mask,
                           {}, {"turn_index": turn_index, "turn_reward": turn_reward})


def test_hand_computed_turn_advantages():
    # one group of three episodes: turns 2, 2, 1; turn rewards (1, 0), (0, 1), (1,); outcome rewards 1, 0, 0
    ti = torch.tensor([[1, 1, 2, 2], [1, 2, 2, 0], [1, 1, 1, 0]], dtype=torch.float32)
    tr = torch.tensor([[1, 1, 0, 0], [0, 1, 1, 0], [1, 1, 1, 0]], dtype=torch.float32)
    entry = ADVANTAGES.get("turn_grpo")
    adv = call(entry, _inputs([1.0, 0.0, 0.0], ti, tr, [0, 0, 0]), entry.params(turn_weight=0.5, std="none"))
    # outcome (no std): 1 - 1/3 = 2/3, -1/3, -1/3. turn 1 rewards 1, 0, 1 (mean 2/3): 1/3, -2/3, 1/3;
    # turn 2 (episodes 0 and 1 only): 0, 1 (mean 1/2): -1/2, 1/2
    want = torch.tensor([[2 / 3 + 0.5 / 3, 2 / 3 + 0.5 / 3, 2 / 3 - 0.25, 2 / 3 - 0.25],
                         [-1 / 3 - 1 / 3, -1 / 3 + 0.25, -1 / 3 + 0.25, 0.0],
                         [-1 / 3 + 0.5 / 3, -1 / 3 + 0.5 / 3, -1 / 3 + 0.5 / 3, 0.0]])
    torch.testing.assert_close(adv, want.float(), rtol=0, atol=1e-6)
    # with std: turn 2 has two episodes, unbiased std of (0, 1) = 0.7071
    adv = call(entry, _inputs([1.0, 0.0, 0.0], ti, tr, [0, 0, 0]), entry.params(turn_weight=1.0))
    assert adv[1, 1].item() == pytest.approx(-0.57735 + 0.5 / (0.70711 + 1e-6), abs=1e-4)


def test_lambda_zero_is_grpo_and_groups_are_separate():
    g = torch.Generator().manual_seed(0)
    ti = torch.randint(1, 4, (10, 1), generator=g).float().expand(10, 6).cumsum(1).clamp(max=3)
    tr = torch.rand(10, 6, generator=g)
    rewards = torch.rand(10, generator=g).tolist()
    groups = [0] * 5 + [1] * 5
    turn, grpo = ADVANTAGES.get("turn_grpo"), ADVANTAGES.get("grpo")
    inp = _inputs(rewards, ti, tr, groups)
    ref = call(grpo, inp, grpo.params())[:, None] * inp.mask
    torch.testing.assert_close(call(turn, inp, turn.params(turn_weight=0.0)), ref)
    full = call(turn, inp, turn.params())
    alone = call(turn, _inputs(rewards[5:], ti[5:], tr[5:], [0] * 5), turn.params())
    torch.testing.assert_close(full[5:], alone)
    assert not torch.allclose(full, ref)  # the turn rewards do move the advantages


def test_a_training_run_with_turn_level_advantages(tmp_path, tiny_cfg_overrides):
    from rlvr.envs import ENVIRONMENTS
    from rlvr.registry import Params
    from rlvr.run.train import train
    from tests.test_multiturn import Countdown

    class TwoTurns(Countdown):
        def reset(self, example, seed):
            from rlvr.core.types import Example
            return super().reset(Example(example.id, example.prompt, example.answer, meta={"steps": 2}), seed)

    ENVIRONMENTS.register("_t_turns", Params)(lambda p: TwoTurns())
    try:
        train(load_config(overrides=tiny_cfg_overrides + [
            "rollout.multiturn.env=_t_turns", "rollout.multiturn.max_turns=2", "rollout.multiturn.max_tokens=40",
            "rollout.multiturn.reward=sum", "algorithm.advantage.name=turn_grpo", "train.steps=2",
            "sft.steps=0", "task.max_value=9"]))
    finally:
        ENVIRONMENTS.unregister("_t_turns")
    lines = [json.loads(x) for x in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert len(lines) == 2 and all(m["engine/env/turns_mean"] == 2.0 for m in lines)
    assert all(torch.isfinite(torch.tensor(m["loss"])) for m in lines)
