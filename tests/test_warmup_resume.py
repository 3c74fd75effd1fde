"""The warm-up's checkpoint (rlvr.sft.checkpoint): a supervised warm-up stopped or crashed at any step resumes
there and ends bit for bit where the uninterrupted warm-up ends (weights, losses, schedule, data order); a run
that stopped after its warm-up resumes without repeating it; a mismatched schedule is refused."""

from __future__ import annotations

import json

import pytest
import torch

from rlvr.config.run import load_config
from rlvr.core.types import Example
from rlvr.models import build_tiny_model, char_tokenizer
from rlvr.run.checkpoint import latest_checkpoint, list_checkpoints
from rlvr.run.setup import build_task
from rlvr.run.train import resume, train
from rlvr.sft.checkpoint import WarmupCheckpoint
from rlvr.sft.ssb import SSBRow, distill
from rlvr.sft.supervised import sft


@pytest.fixture(scope="module")
def setup():
    cfg = load_config(overrides=["model.tiny.hidden_size=32", "model.tiny.intermediate_size=64",
                                 "model.tiny.num_layers=1", "task.max_value=30"])
    tok = char_tokenizer()
    return cfg, tok, build_task(cfg).examples("train")[:23]  # 23 rows, batches of 5: epochs end mid-batch


def _model(cfg, tok):
    return build_tiny_model(cfg.model.tiny, tok, seed=0)


def _same(a, b) -> bool:
    sa, sb = a.state_dict(), b.state_dict()
    return sa.keys() == sb.keys() and all(torch.equal(sa[k], sb[k]) for k in sa)


class Crash(RuntimeError):
    pass


@pytest.mark.parametrize("stop_at,every", [(1, 1), (4, 0), (6, 3), (7, 3)])
def test_a_stopped_warmup_resumes_bit_for_bit(setup, tmp_path, stop_at, every):
    """Stopped after ``stop_at`` of 9 steps (Ctrl-C: saved at the stop), then resumed from a fresh model: the
    weights, every step's loss and the final state equal the uninterrupted warm-up's. Warm-up and cosine decay
    cross the stop, epochs end inside batches."""
    cfg, tok, examples = setup
    kw = dict(steps=9, batch_size=5, lr=3e-3, warmup_steps=3, seed=4, micro_batch_size=2)
    whole = _model(cfg, tok)
    want = sft(whole, tok, examples, **kw)

    first = _model(cfg, tok)
    seen: list[int] = []
    got = sft(first, tok, examples, **kw, on_step=lambda i, loss: seen.append(i), stop=lambda: len(seen) >= stop_at,
              checkpoint=WarmupCheckpoint(tmp_path / "warmup", every=every))
    assert got == want[:stop_at]
    state = json.loads((tmp_path / "warmup" / "state.json").read_text())
    assert state["step"] == stop_at and state["losses"] == want[:stop_at]

    second = _model(cfg, tok)
    ck = WarmupCheckpoint(tmp_path / "warmup")
    ck.load_weights(second)
    assert _same(second, first)
    resumed = sft(second, tok, examples, **kw, checkpoint=ck)
    assert resumed == want  # the earlier steps' losses come from the checkpoint, the rest are recomputed equal
    assert _same(second, whole)


def test_a_crash_resumes_from_the_last_scheduled_save(setup, tmp_path):
    """No signal: the process dies at step 7 (an exception, as a kill would leave things); saves every 3 steps
    leave step 6, which resumes to the uninterrupted result."""
    cfg, tok, examples = setup
    kw = dict(steps=9, batch_size=5, lr=3e-3, warmup_steps=2, seed=1, micro_batch_size=4)
    whole = _model(cfg, tok)
    want = sft(whole, tok, examples, **kw)

    def crash(i, loss):
        if i == 6:
            raise Crash()

    with pytest.raises(Crash):
        sft(_model(cfg, tok), tok, examples, **kw, on_step=crash,
            checkpoint=WarmupCheckpoint(tmp_path / "w", every=3))
    ck = WarmupCheckpoint(tmp_path / "w")
    assert ck.state["step"] == 6 and not ck.done
    second = _model(cfg, tok)
    ck.load_weights(second)
    assert sft(second, tok, examples, **kw, checkpoint=ck) == want and _same(second, whole)


def test_saves_by_time(setup, tmp_path, monkeypatch):
    """train.checkpoint_minutes: a save when the clock says so, whatever the step count."""
    cfg, tok, examples = setup
    clock = [0.0]
    monkeypatch.setattr("rlvr.core.clock.SaveClock.now", staticmethod(lambda: clock[0]))
    ck = WarmupCheckpoint(tmp_path / "w", minutes=5)

    def tick(i, loss):
        clock[0] += 60 * (6 if i == 2 else 1)  # step 3 ends 9 minutes in; the others a minute each

    sft(_model(cfg, tok), tok, examples, steps=8, batch_size=5, lr=1e-3, on_step=tick, checkpoint=ck)
    assert json.loads((tmp_path / "w" / "state.json").read_text())["step"] == 3  # 8: the end is finish()'s


def test_a_distillation_resumes_with_the_teacher_from_before_the_warmup(setup, tmp_path):
    """SSB's distillation: its teacher is the model before the warm-up; a resumed phase gets that copy
    (``teacher=``) while the student continues from the saved weights, and ends where the uninterrupted one does."""
    cfg, tok, examples = setup
    rows = [SSBRow(ex, Example(ex.id, "hint: " + ex.prompt, ex.answer, ex.task), tuple(tok(ex.answer)["input_ids"]),
                   ex.answer) for ex in examples[:7]]
    from rlvr.config.train import SSBConfig

    kw = dict(steps=6, batch_size=3, lr=3e-3, warmup_steps=1, seed=2, micro_batch_size=2)
    whole = _model(cfg, tok)
    want = distill(whole, tok, rows, SSBConfig(ce_weight=0.5), **kw)
    seen: list[int] = []
    distill(_model(cfg, tok), tok, rows, SSBConfig(ce_weight=0.5), **kw, on_step=lambda i, loss: seen.append(i),
            stop=lambda: len(seen) >= 2, checkpoint=WarmupCheckpoint(tmp_path / "w"))
    ck = WarmupCheckpoint(tmp_path / "w")
    student = _model(cfg, tok)
    teacher = _model(cfg, tok)  # as it was before the warm-up
    ck.load_weights(student)
    got = distill(student, tok, rows, SSBConfig(ce_weight=0.5), **kw, checkpoint=ck, teacher=teacher)
    assert got == want and _same(student, whole)


def test_another_schedule_is_refused(tmp_path):
    ck = WarmupCheckpoint(tmp_path / "w")
    ck.write(2, 10, {"x": torch.zeros(1)}, None, {"losses": [1.0, 0.5]})
    with pytest.raises(ValueError, match=r"sft.steps=10 \(stopped at step 2\).*sft.steps=12"):
        WarmupCheckpoint(tmp_path / "w").check_steps(12)
    WarmupCheckpoint(tmp_path / "w").check_steps(10)


def _final_weights(run):
    from safetensors.torch import load_file

    return load_file(str(latest_checkpoint(run) / "model" / "model.safetensors"))


def _run_cfg(tmp_path, name, *extra):
    return load_config(overrides=[f"out={tmp_path / name}", "model.tiny.hidden_size=32",
                                  "model.tiny.intermediate_size=64", "model.tiny.num_layers=1", "task.max_value=20",
                                  "task.num_eval=8", "rollout.prompts_per_step=4", "rollout.group_size=4",
                                  "rollout.max_new_tokens=4", "train.steps=3", "train.micro_batch_size=8",
                                  "train.checkpoint_every=0", "sft.steps=12", "sft.batch_size=16",
                                  "sft.checkpoint_every=5", *extra])


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("whole")
    summary = train(_run_cfg(tmp, "run"))
    return summary, _final_weights(tmp / "run")


def _equal_weights(a, b):
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def test_a_run_killed_in_its_warmup_resumes_to_the_uninterrupted_result(tmp_path, monkeypatch, uninterrupted):
    """A crash at SFT step 8 (saves every 5 steps): ``resume`` continues the warm-up from step 5, then runs RL;
    the final weights equal the uninterrupted run's bit for bit."""
    import rlvr.run.train as run_train

    real = run_train.sft

    def crashing(*a, on_step=None, **kw):
        def hook(i, loss):
            on_step(i, loss)
            if i == 7:
                raise Crash()
        return real(*a, on_step=hook, **kw)

    monkeypatch.setattr(run_train, "sft", crashing)
    with pytest.raises(Crash):
        train(_run_cfg(tmp_path, "run"))
    assert json.loads((tmp_path / "run" / "warmup" / "state.json").read_text())["step"] == 5
    monkeypatch.setattr(run_train, "sft", real)
    summary = resume(tmp_path / "run")
    assert summary["eval_after"]["accuracy"] == uninterrupted[0]["eval_after"]["accuracy"]
    assert _equal_weights(_final_weights(tmp_path / "run"), uninterrupted[1])


def test_a_run_stopped_after_its_warmup_does_not_repeat_it(tmp_path, monkeypatch, uninterrupted):
    """A crash in the first RL step, before any RL checkpoint: ``resume`` loads the finished warm-up (no SFT step
    runs again) and ends where the uninterrupted run ends."""
    import rlvr.run.train as run_train
    import rlvr.train.loop as loop_mod

    real_step = loop_mod.rl_step

    def crash(*a, **kw):
        raise Crash()

    monkeypatch.setattr(loop_mod, "rl_step", crash)
    with pytest.raises(Crash):
        train(_run_cfg(tmp_path, "run"))
    assert WarmupCheckpoint(tmp_path / "run" / "warmup").done and not list_checkpoints(tmp_path / "run")
    monkeypatch.setattr(loop_mod, "rl_step", real_step)
    monkeypatch.setattr(run_train, "sft", lambda *a, **kw: pytest.fail("the warm-up ran again"))
    resume(tmp_path / "run")
    assert _equal_weights(_final_weights(tmp_path / "run"), uninterrupted[1])


def test_a_run_that_saved_nothing_starts_again_on_resume(tmp_path, monkeypatch, uninterrupted):
    """Stopped in its set-up (nothing saved): ``resume`` starts it again in the same directory."""
    import rlvr.run.train as run_train

    real = run_train.prepare

    def crash(*a, **kw):
        raise Crash()

    monkeypatch.setattr(run_train, "prepare", crash)
    with pytest.raises(Crash):
        train(_run_cfg(tmp_path, "run"))
    assert (tmp_path / "run" / "config.yaml").is_file() and not (tmp_path / "run" / "warmup").exists()
    monkeypatch.setattr(run_train, "prepare", real)
    resume(tmp_path / "run")
    assert _equal_weights(_final_weights(tmp_path / "run"), uninterrupted[1])


def test_an_interrupted_rlvr_sft_saves_its_model_and_says_where(tmp_path, monkeypatch):
    """``rlvr sft`` has no --resume: a stop saves the model trained so far as a model directory and the message
    points there, not at a run to resume."""
    import os
    import signal

    import rlvr.run.train as run_train
    from rlvr.models.loading import ModelConfig, load_model

    real = run_train.sft

    def with_signal(*a, on_step=None, **kw):
        def hook(i, loss):
            on_step(i, loss)
            if i == 1:
                os.kill(os.getpid(), signal.SIGINT)
        return real(*a, on_step=hook, **kw)

    monkeypatch.setattr(run_train, "sft", with_signal)
    cfg = _run_cfg(tmp_path, "sft_out")
    with pytest.raises(KeyboardInterrupt) as e:
        run_train.run_sft(cfg)
    msg = str(e.value)
    assert "after step 2 of 12" in msg and f"The model trained so far is in {tmp_path / 'sft_out' / 'model'}" in msg
    assert "rlvr train --resume" not in msg
    load_model(ModelConfig(path=str(tmp_path / "sft_out" / "model")))  # a loadable directory
