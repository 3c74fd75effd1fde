"""Checkpoints you can trust: sealed with checksums and fsync'ed; a damaged newest checkpoint is named and the
previous intact one used; a full disk is one message that loses nothing saved; weights that are not numbers are
never checkpointed; a non-finite loss names the step's statistics; metrics.jsonl survives a partial last line
and is cut, never rewritten, on resume."""

from __future__ import annotations

import json
import os
import random

import pytest
import torch

from rlvr.config.run import load_config
from rlvr.core.integrity import MANIFEST, damage, seal
from rlvr.run.checkpoint import CheckpointError, intact_checkpoint, list_checkpoints
from rlvr.run.logging import MetricsLog, read_metrics
from rlvr.run.train import resume, train
from rlvr.train.update import NonFiniteError


def _cfg(tiny_cfg_overrides, *extra):
    return load_config(overrides=tiny_cfg_overrides + ["sft.steps=0", "train.steps=4", "train.checkpoint_every=1",
                                                       "train.keep_checkpoints=3", *extra])


def _flip(path, at: int) -> None:
    data = bytearray(path.read_bytes())
    data[at] ^= 0x01
    path.write_bytes(bytes(data))


def test_seal_finds_every_kind_of_damage(tmp_path):
    folder = tmp_path / "c"
    (folder / "sub").mkdir(parents=True)
    rng = random.Random(0)
    for name, size in (("a.bin", 5000), ("sub/b.json", 300), ("empty", 0)):
        (folder / name).write_bytes(bytes(rng.randrange(256) for _ in range(size)))
    seal(folder)
    assert damage(folder) == []
    for at in rng.sample(range(5000), 25):  # any one flipped bit anywhere
        _flip(folder / "a.bin", at)
        assert damage(folder) == ["a.bin does not match its checksum (damaged on disk)"]
        _flip(folder / "a.bin", at)
    (folder / "sub" / "b.json").write_bytes((folder / "sub" / "b.json").read_bytes()[:-1])
    assert damage(folder) == ["sub/b.json has 299 bytes, 300 written"]
    (folder / "sub" / "b.json").unlink()
    (folder / "empty").write_bytes(b"x")
    assert sorted(damage(folder)) == ["empty has 1 bytes, 0 written", "sub/b.json is missing"]
    (folder / MANIFEST).write_text("{not json")
    assert damage(folder) == [f"{MANIFEST} is unreadable"]
    assert damage(tmp_path) == []  # no manifest (a checkpoint from before checksums): nothing to check against


@pytest.mark.parametrize("how", ["truncate", "flip", "delete"])
def test_a_damaged_newest_checkpoint_is_named_and_the_previous_used(tiny_cfg_overrides, tmp_path, capsys, how):
    train(_cfg(tiny_cfg_overrides))
    run = tmp_path / "run"
    newest = list_checkpoints(run)[-1]
    assert newest.name == "step_000004" and json.loads((newest / MANIFEST).read_text())["files"]
    target = newest / ("optimizer.safetensors" if how != "delete" else "rng.safetensors")
    if how == "truncate":
        target.write_bytes(target.read_bytes()[:100])
    elif how == "flip":
        _flip(target, target.stat().st_size // 2)
    else:
        target.unlink()
    assert intact_checkpoint(run).name == "step_000003"
    assert "step_000004 is damaged" in capsys.readouterr().err
    with pytest.raises(CheckpointError, match=r"step_000004 is damaged: .*(optimizer|rng)\.safetensors.*previous "
                                              r"intact checkpoint is .*step_000003"):
        intact_checkpoint(newest)
    out = resume(run, ["train.steps=5"])
    assert out["steps"] == 5 and list_checkpoints(run)[-1].name == "step_000005"


def test_every_checkpoint_damaged_is_one_error(tiny_cfg_overrides, tmp_path):
    train(_cfg(tiny_cfg_overrides, "train.steps=2"))
    for ckpt in list_checkpoints(tmp_path / "run"):
        _flip(ckpt / "state.json", 3)
    with pytest.raises(CheckpointError, match="every checkpoint of .* is damaged"):
        intact_checkpoint(tmp_path / "run")


def test_a_full_disk_is_one_message_and_loses_nothing(tiny_cfg_overrides, tmp_path, monkeypatch):
    import rlvr.run.checkpoint as ck

    real = ck.save_file
    calls = []

    def full(tensors, path, *a, **k):
        calls.append(path)
        if "step_000003" in path:
            raise OSError(28, "No space left on device")
        return real(tensors, path, *a, **k)

    monkeypatch.setattr(ck, "save_file", full)
    with pytest.raises(CheckpointError, match=r"no space left on the device writing the checkpoint of step 3.*"
                                              r"step_000002 is intact.*rlvr train --resume"):
        train(_cfg(tiny_cfg_overrides))
    run = tmp_path / "run"
    assert [c.name for c in list_checkpoints(run)] == ["step_000001", "step_000002"]
    assert not list((run / "checkpoints").glob(".tmp_*"))  # no half-written folder left
    monkeypatch.setattr(ck, "save_file", real)
    assert resume(run)["steps"] == 4


def test_the_cli_says_a_full_disk_in_one_line(tiny_cfg_overrides, tmp_path, monkeypatch):
    from typer.testing import CliRunner

    import rlvr.run.checkpoint as ck
    from rlvr.cli.commands import app

    def full(*a, **k):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(ck, "save_file", full)
    sets = sum((["--set", o] for o in tiny_cfg_overrides + ["sft.steps=0", "train.steps=1"]), [])
    r = CliRunner().invoke(app, ["train", *sets])
    assert r.exit_code == 1 and "no space left on the device" in r.output and "Traceback" not in r.output


def test_weights_that_are_not_numbers_are_never_checkpointed(tiny_cfg_overrides, tmp_path, monkeypatch):
    """The update of step 3 leaves an infinite weight (a diverged step whose loss was still finite): the save
    after it refuses, naming the parameter; the checkpoints before it stay and resume."""
    import rlvr.train.loop as loop

    real = loop.update_policy

    def diverge(model, *a, **k):
        out = real(model, *a, **k)
        diverge.calls += 1
        if diverge.calls == 3:
            with torch.no_grad():
                next(model.parameters()).view(-1)[0] = float("inf")
        return out

    diverge.calls = 0
    monkeypatch.setattr(loop, "update_policy", diverge)
    with pytest.raises(NonFiniteError, match=r"weights are not finite after step 3 \(model.embed_tokens.weight: 1 "
                                             r"non-finite values\).*last good checkpoint.*step_000002"):
        train(_cfg(tiny_cfg_overrides))
    assert [c.name for c in list_checkpoints(tmp_path / "run")] == ["step_000001", "step_000002"]


def test_a_non_finite_loss_names_the_steps_statistics():
    from types import SimpleNamespace

    from rlvr.train.update import diagnosis

    mb = SimpleNamespace(rewards=torch.tensor([0.0, 1.0, float("inf")], dtype=torch.float64),
                         advantages=torch.tensor([[0.5, -2.0], [float("nan"), 1.0]]), old_logp=None,
                         behaviour_logp=torch.tensor([[-1.0, float("-inf")]]), ref_logp=None)
    sched = SimpleNamespace(get_last_lr=lambda: [1e-6])
    text = diagnosis(mb, sched)
    assert text == ("rewards [0, 1], 1 non-finite; advantages [-2, 1], 1 non-finite; behaviour_logp [-1, -1], "
                    "1 non-finite; lr 1e-06")


def test_metrics_survive_a_partial_last_line_and_are_cut_not_rewritten(tmp_path):
    path = tmp_path / "metrics.jsonl"
    whole = "".join(json.dumps({"step": s, "reward": s / 10}) + "\n" for s in range(1, 6))
    path.write_text(whole + '{"step": 6, "rew')  # a kill in the middle of a write
    assert [m["step"] for m in read_metrics(path)] == [1, 2, 3, 4, 5]
    inode = os.stat(path).st_ino
    log = MetricsLog(path, resume_step=3)
    log.write(4, {"reward": 9.0})
    log.close()
    assert os.stat(path).st_ino == inode  # the same file, cut in place: earlier lines never rewritten
    assert path.read_text().startswith(whole.split("\n")[0]) and [m["step"] for m in read_metrics(path)] == [1, 2, 3, 4]
    path.write_text(whole[:-1])  # no newline after the last line: it may be partial, so it goes
    MetricsLog(path, resume_step=10).close()
    assert [m["step"] for m in read_metrics(path)] == [1, 2, 3, 4]
    path.write_text(whole.replace('{"step": 2', '\x00\x00{"step": 2'))  # a damaged line: cut there
    MetricsLog(path, resume_step=10).close()
    assert [m["step"] for m in read_metrics(path)] == [1]


def test_a_run_and_its_report_survive_a_partial_metrics_line(tiny_cfg_overrides, tmp_path):
    train(_cfg(tiny_cfg_overrides, "train.steps=2"))
    run = tmp_path / "run"
    with open(run / "metrics.jsonl", "a") as f:
        f.write('{"step": 3, "rew')
    from rlvr.report.run import report_run

    report_run(run)
    assert resume(run, ["train.steps=3"])["steps"] == 3
    assert [m["step"] for m in read_metrics(run / "metrics.jsonl") if "reward" in m][-1] == 3


def test_a_damaged_warmup_checkpoint_is_said_and_the_warmup_starts_again(tmp_path, capsys):
    from rlvr.sft.checkpoint import WarmupCheckpoint

    ck = WarmupCheckpoint(tmp_path / "w")
    ck.write(2, 10, {"x": torch.zeros(4)}, None, {"losses": [1.0, 0.5]})
    assert WarmupCheckpoint(tmp_path / "w").state["step"] == 2
    _flip(tmp_path / "w" / "model.safetensors", -3)
    again = WarmupCheckpoint(tmp_path / "w")
    assert again.state is None and "warm-up checkpoint" in capsys.readouterr().err
