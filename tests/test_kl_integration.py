"""KL placement (loss vs reward) and KL schedules wired through the loop and checkpoints."""

import copy

import pytest
import torch

import rlvr.train.loop as loop_mod
from rlvr.algorithms.kl import k1
from rlvr.config.run import load_config
from rlvr.train.kl_control import KLController
from rlvr.train.loop import rl_step
from tests.test_dapo import components


def _with_ref(c):
    ref = copy.deepcopy(c.model)
    with torch.no_grad():
        for p in ref.parameters():
            p.add_(0.05 * torch.randn_like(p))
    c.ref_model = ref.eval().requires_grad_(False)
    return c


def test_kl_in_reward_subtracts_sequence_kl_before_advantages(monkeypatch):
    seen = {}
    real = loop_mod.update_policy
    monkeypatch.setattr(loop_mod, "update_policy",
                        lambda m, o, sc, batch, s, g, *r: seen.update(batch=batch, s=s) or real(m, o, sc, batch, s, g, *r))
    cfg, c = components([[["a", "bb", "b", "a"]]], ["rollout.prompts_per_step=1", "algorithm.kl.coef=0.5",
                                                    "algorithm.kl.placement=reward", "algorithm.kl.estimator=k1"])
    c = _with_ref(c)
    m = rl_step(cfg, c, 0)
    b = seen["batch"]
    assert seen["s"].kl_coef == 0.0 and b.ref_logp is None  # no KL term left in the loss
    with torch.no_grad():
        from rlvr.models.logprobs import completion_logprobs
        old, _ = completion_logprobs(c.model, b)  # SGD lr 0: the policy did not move
        ref, _ = completion_logprobs(c.ref_model, b)
    seq_kl = (k1(old, ref) * b.completion_mask).sum(-1).double()
    assert torch.allclose(b.rewards, torch.tensor([1.0, 0, 0, 1.0], dtype=torch.float64) - 0.5 * seq_kl, atol=1e-5)
    assert m["kl"] != 0.0 and m["kl_coef"] == 0.5


def test_kl_in_loss_reports_kl_and_coef():
    cfg, c = components([[["a", "bb", "b", "a"]]], ["rollout.prompts_per_step=1", "algorithm.kl.coef=0.3"])
    c = _with_ref(c)
    m = rl_step(cfg, c, 0)
    assert m["kl"] > 0 and m["kl_coef"] == 0.3


def test_schedule_moves_coefficient_across_steps_and_resumes():
    cfg = load_config(overrides=["algorithm.kl.coef=0.1", "algorithm.kl.schedule.name=linear",
                                 "algorithm.kl.schedule.final=0.0", "train.steps=10"])
    ctl = KLController(cfg.algorithm.kl, cfg.train.steps)
    coefs = []
    for step in range(10):
        coefs.append(ctl.coef_at(step))
        ctl.observe({"kl": 0.01, "accuracy": 0.5})
    assert coefs[0] == pytest.approx(0.1) and coefs[5] == pytest.approx(0.05) and coefs[-1] == pytest.approx(0.01)
    adaptive = load_config(overrides=["algorithm.kl.coef=0.1", "algorithm.kl.schedule.name=adaptive",
                                      "train.steps=10"]).algorithm.kl
    a = KLController(adaptive, 10)
    a.coef_at(0)
    a.observe({"kl": 1.0})
    first = a.coef_at(1)
    b = KLController(adaptive, 10)
    b.load_state_dict(a.state_dict())
    a.observe({"kl": 1.0})
    b.observe({"kl": 1.0})
    assert first > 0.1 and a.coef_at(2) == b.coef_at(2)  # KL above target raises the coefficient


def test_resume_with_kl_schedule_matches_uninterrupted(jsonl_cfg_overrides, tmp_path):
    import shutil

    from safetensors.torch import load_file

    from rlvr.run.train import resume, train

    over = jsonl_cfg_overrides + ["train.steps=4", "train.checkpoint_every=2", "train.keep_checkpoints=5",
                                  "algorithm.kl.coef=0.1", "algorithm.kl.schedule.name=adaptive"]
    train(load_config(overrides=over))
    part = tmp_path / "part"
    shutil.copytree(tmp_path / "run", part)
    shutil.rmtree(part / "checkpoints" / "step_000004")
    resume(part / "checkpoints" / "step_000002")
    a = load_file(str(tmp_path / "run" / "checkpoints" / "step_000004" / "model" / "model.safetensors"))
    b = load_file(str(part / "checkpoints" / "step_000004" / "model" / "model.safetensors"))
    assert all(torch.equal(a[k], b[k]) for k in a)
