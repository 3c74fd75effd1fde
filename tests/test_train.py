"""End-to-end training on a tiny model: learning signal, resume equivalence, NaN and Ctrl-C handling."""

import json
import os
import shutil
import signal

import pytest
import torch
from safetensors.torch import load_file

import rlvr.train.loop as loop_mod
import rlvr.train.update as update_mod
from rlvr.config.run import load_config
from rlvr.run.checkpoint import list_checkpoints
from rlvr.run.train import resume, train
from rlvr.train.update import NonFiniteError


def weights(run_dir, step):
    return load_file(str(run_dir / "checkpoints" / f"step_{step:06d}" / "model" / "model.safetensors"))


def same_weights(a, b):
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def test_end_to_end_run_writes_everything_and_changes_params(tiny_cfg_overrides, tmp_path):
    cfg = load_config(overrides=tiny_cfg_overrides + ["train.eval_every=2"])
    summary = train(cfg)
    run = tmp_path / "run"
    for name in ("config.yaml", "metrics.jsonl", "plot.png", "summary.json"):
        assert (run / name).is_file(), name
    assert not (run / "reference").exists()  # kl.coef = 0 loads no reference model
    on_disk = json.loads((run / "summary.json").read_text())
    assert on_disk["eval_before"]["accuracy"] == summary["eval_before"]["accuracy"]
    for key in ("eval_before", "eval_after"):
        assert 0.0 <= on_disk[key]["accuracy"] <= 1.0
    lines = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()]
    assert [m["step"] for m in lines] == [1, 2, 3]
    for m in lines:
        for key in ("reward", "accuracy", "completion_length", "kl", "entropy", "clip_frac", "grad_norm", "lr",
                    "tokens_per_s", "time/rollout", "time/score", "time/update"):
            assert isinstance(m[key], float) and m[key] == m[key] and abs(m[key]) != float("inf"), key
    assert "eval/accuracy" in lines[1]
    assert on_disk["peak_memory_mb"] > 0


def test_jsonl_task_with_reward_function_trains(jsonl_cfg_overrides, tmp_path):
    """Real steps on a user's JSONL data and reward function: parameters move, everything stays finite."""
    cfg = load_config(overrides=jsonl_cfg_overrides)
    train(cfg)
    run = tmp_path / "run"
    before, after = weights(run, 2), weights(run, 3)
    assert not same_weights(before, after)
    assert all(torch.isfinite(v).all() for v in after.values())
    rewards = [json.loads(x)["reward"] for x in (run / "metrics.jsonl").read_text().splitlines()]
    assert any(r > 0 for r in rewards)


def test_rl_raises_reward_on_a_fixed_prompt_set(tmp_path):
    """A learning signal, not just finite numbers: reward on four train prompts goes up."""
    cfg = load_config(overrides=[
        f"out={tmp_path / 'r'}", "model.tiny.hidden_size=32", "model.tiny.intermediate_size=64",
        "model.tiny.num_layers=1", "task.max_value=3", "task.num_eval=4", "task.num_train=4",
        "rollout.prompts_per_step=4", "rollout.group_size=8", "rollout.max_new_tokens=2",
        "sft.steps=6", "sft.lr=3e-3", "sft.batch_size=8", "sft.warmup_steps=0",
        "train.steps=60", "optim.lr=5e-3", "train.checkpoint_every=0", "algorithm.minibatches=1",
        "eval.split=train",
    ])
    summary = train(cfg)
    lines = [json.loads(x) for x in (tmp_path / "r" / "metrics.jsonl").read_text().splitlines()]
    early = sum(m["reward"] for m in lines[:5]) / 5
    late = sum(m["reward"] for m in lines[-5:]) / 5
    assert late > early + 0.3, (early, late)
    assert summary["eval_after"]["accuracy"] > summary["eval_before"]["accuracy"]


def test_resume_from_mid_run_checkpoint_matches_uninterrupted(jsonl_cfg_overrides, tmp_path):
    # the JSONL fixture's partial-credit reward gives every step a real update (prompts contain spaces too)
    over = jsonl_cfg_overrides + ["train.steps=4", "train.checkpoint_every=2", "train.keep_checkpoints=5",
                                  "algorithm.epochs=2", "algorithm.minibatches=2"]
    train(load_config(overrides=over))
    full = tmp_path / "run"
    assert not same_weights(weights(full, 2), weights(full, 4))  # the comparison below is not vacuous
    part = tmp_path / "part"
    shutil.copytree(full, part)
    shutil.rmtree(part / "checkpoints" / "step_000004")
    summary = resume(part / "checkpoints" / "step_000002")
    assert same_weights(weights(full, 4), weights(part, 4))
    before = json.loads((part / "checkpoints" / "step_000002" / "state.json").read_text())["rl_seconds"]
    assert 0 < before < summary["rl_seconds"]  # the summary counts the RL time before the resume too
    steps = [json.loads(x)["step"] for x in (part / "metrics.jsonl").read_text().splitlines()]
    assert steps == [1, 2, 3, 4]
    a = [json.loads(x)["reward"] for x in (full / "metrics.jsonl").read_text().splitlines()]
    b = [json.loads(x)["reward"] for x in (part / "metrics.jsonl").read_text().splitlines()]
    assert a == b


def test_n_steps_then_m_more_equals_n_plus_m(jsonl_cfg_overrides, tmp_path):
    base = [o for o in jsonl_cfg_overrides if not o.startswith("out=")]
    train(load_config(overrides=base + [f"out={tmp_path / 'a'}", "train.steps=4"]))
    train(load_config(overrides=base + [f"out={tmp_path / 'b'}", "train.steps=2"]))
    resume(tmp_path / "b", ["train.steps=4"])
    assert not same_weights(weights(tmp_path / "b", 2), weights(tmp_path / "b", 4))
    assert same_weights(weights(tmp_path / "a", 4), weights(tmp_path / "b", 4))
    opt_a = load_file(str(tmp_path / "a" / "checkpoints" / "step_000004" / "optimizer.safetensors"))
    opt_b = load_file(str(tmp_path / "b" / "checkpoints" / "step_000004" / "optimizer.safetensors"))
    assert same_weights(opt_a, opt_b)


def test_nan_loss_stops_and_keeps_last_good_checkpoint(tiny_cfg_overrides, tmp_path, monkeypatch):
    real_loss, real_step = update_mod._micro_loss, loop_mod.rl_step
    poison = {"on": False}

    def poisoned(*a, **k):
        loss = real_loss(*a, **k)
        return loss * float("nan") if poison["on"] else loss

    def step(cfg, c, i):
        poison["on"] = i == 2  # the third step's loss is NaN
        return real_step(cfg, c, i)

    monkeypatch.setattr(update_mod, "_micro_loss", poisoned)
    monkeypatch.setattr(loop_mod, "rl_step", step)
    with pytest.raises(NonFiniteError, match="optimizer step was not taken"):
        train(load_config(overrides=tiny_cfg_overrides + ["train.steps=5"]))
    run = tmp_path / "run"
    assert [p.name for p in list_checkpoints(run)] == ["step_000002"]
    assert all(torch.isfinite(v).all() for v in weights(run, 2).values())


def test_ctrl_c_saves_a_checkpoint_first(tiny_cfg_overrides, tmp_path, monkeypatch):
    real = loop_mod.rl_step

    def step_then_interrupt(cfg, c, step):
        out = real(cfg, c, step)
        if step == 0:
            os.kill(os.getpid(), signal.SIGINT)
        return out

    monkeypatch.setattr(loop_mod, "rl_step", step_then_interrupt)
    with pytest.raises(KeyboardInterrupt):
        train(load_config(overrides=tiny_cfg_overrides + ["train.steps=5", "train.checkpoint_every=0"]))
    ckpts = list_checkpoints(tmp_path / "run")
    assert [p.name for p in ckpts] == ["step_000001"]
    assert json.loads((ckpts[0] / "state.json").read_text())["step"] == 1


def test_refuses_to_overwrite_a_run(tiny_cfg_overrides):
    train(load_config(overrides=tiny_cfg_overrides + ["train.steps=1"]))
    with pytest.raises(FileExistsError, match="--resume"):
        train(load_config(overrides=tiny_cfg_overrides + ["train.steps=1"]))


def test_written_config_reproduces_the_run(tiny_cfg_overrides, tmp_path):
    first = train(load_config(overrides=tiny_cfg_overrides))
    again = train(load_config(tmp_path / "run" / "config.yaml", [f"out={tmp_path / 'again'}"]))
    assert same_weights(weights(tmp_path / "run", 3), weights(tmp_path / "again", 3))
    assert first["eval_after"] == again["eval_after"]


def test_defab_task_trains_a_step(tmp_path):
    cfg = load_config(overrides=[
        f"out={tmp_path / 'r'}", "task.name=defab", "task.n_train=8", "task.n_eval=4", "model.tiny.hidden_size=32",
        "model.tiny.intermediate_size=64", "model.tiny.num_layers=1", "model.tiny.max_positions=2048",
        "rollout.prompts_per_step=2", "rollout.group_size=2", "rollout.max_new_tokens=8", "sft.steps=1",
        "sft.batch_size=2", "train.steps=1", "train.checkpoint_every=0", "algorithm.minibatches=1"])
    summary = train(cfg)
    assert 0.0 <= summary["eval_after"]["accuracy"] <= 1.0
