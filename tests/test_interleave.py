"""Interleaved SFT and RL phases (sft.interleave_every): when phases run, what they do to the policy,
that resumes repeat them exactly, and the settings they cannot combine with."""

import json

import pytest
import torch

from rlvr.config.run import ConfigError, load_config
from rlvr.core.batch import build_batch
from rlvr.models.logprobs import completion_logprobs
from rlvr.sft.interleave import interleaved_sft
from rlvr.run.setup import build_task
from rlvr.sft.supervised import sft_rows
from tests.methods.seed_support import train_and_resume


def _lines(run_dir):
    return [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]


def test_phases_run_after_every_nth_step_and_log_their_loss(tiny_cfg_overrides, tmp_path):
    from rlvr.run.train import train

    train(load_config(overrides=tiny_cfg_overrides + [
        "train.steps=4", "sft.steps=0", "sft.interleave_every=2", "sft.interleave_steps=3"]))
    lines = _lines(tmp_path / "run")
    with_phase = [line["step"] for line in lines if "sft/loss" in line]
    assert with_phase == [2, 4]  # logged after steps 2 and 4 (the 2nd and 4th updates)
    assert all(line["sft/steps"] == 3.0 and line["sft/loss"] > 0 for line in lines if "sft/loss" in line)


def _nll(model, tok, examples):
    rows = sft_rows(tok, examples, False)
    batch = build_batch(rows, [0.0] * len(rows), tok.pad_token_id)
    with torch.no_grad():
        logp, _ = completion_logprobs(model, batch)
    return float(-(logp * batch.completion_mask).sum() / batch.completion_mask.sum())


def test_a_phase_trains_toward_the_reference_completions_only_when_due():
    from rlvr.models import TinyModelConfig, build_tiny_model, char_tokenizer

    cfg = load_config(overrides=["sft.interleave_every=3", "sft.interleave_steps=20", "sft.interleave_lr=3e-3",
                                 "sft.batch_size=16", "task.max_value=20"])
    tok = char_tokenizer()
    model = build_tiny_model(TinyModelConfig(hidden_size=32, intermediate_size=64, num_layers=1), tok)
    task = build_task(cfg)
    phase = interleaved_sft(cfg, model, tok, task)
    examples = task.examples("train")[:32]
    before = _nll(model, tok, examples)
    w0 = [p.detach().clone() for p in model.parameters()]
    assert phase(0) == {} and phase(1) == {}  # steps 1 and 2: no phase
    assert all(torch.equal(a, b) for a, b in zip(w0, model.parameters()))
    out = phase(2)  # the third step
    assert out["sft/steps"] == 20.0
    assert _nll(model, tok, examples) < before - 0.5


def test_off_by_default_and_refused_without_reference_completions():
    from rlvr.core.types import Example

    cfg = load_config()
    assert interleaved_sft(cfg, None, None, build_task(cfg)) is None

    class NoTargets:
        splits = ("train", "eval")

        def examples(self, split):
            return [Example("a", "q", "")]

    on = load_config(overrides=["sft.interleave_every=2"])
    with pytest.raises(ValueError, match="no reference completions"):
        interleaved_sft(on, None, None, NoTargets())


def test_asynchronous_rollouts_are_refused():
    with pytest.raises(ConfigError, match="sft.interleave_every changes the policy between RL steps"):
        load_config(overrides=["sft.interleave_every=2", "rollout.max_staleness=1"])


def test_resume_repeats_the_phases_exactly(tmp_path):
    out = train_and_resume("grpo", tmp_path, ["sft.steps=0", "sft.interleave_every=1", "sft.interleave_steps=2"])
    a, b = out["weights"]
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert [line["sft/loss"] for line in _lines(tmp_path / "run")] == \
        [line["sft/loss"] for line in _lines(tmp_path / "part")]


def test_both_strategies_run_phases_and_fsdp_needs_a_whole_copy():
    # (a 2-rank DDP run with phases equals the 1-rank run; an FSDP phase equals the one-process phase:
    # tests/test_distributed.py)
    from rlvr.models import TinyModelConfig, build_tiny_model, char_tokenizer
    from rlvr.distributed.world import World, check_world
    from rlvr.sft.interleave import interleaved_sft

    cfg = load_config(overrides=["sft.interleave_every=2", "rollout.prompts_per_step=4"])
    check_world(cfg, World(0, 2, strategy="fsdp"))
    check_world(cfg, World(0, 2))
    check_world(cfg, World())
    tok = char_tokenizer()
    model = build_tiny_model(TinyModelConfig(hidden_size=32, intermediate_size=64, num_layers=1), tok)
    with pytest.raises(ValueError, match="whole copy of the policy"):
        interleaved_sft(cfg, model, tok, None, world=World(0, 2, strategy="fsdp"))


def test_under_ddp_a_phase_trains_every_ranks_rows_and_leaves_rank_0s_weights():
    # a stand-in for rank 1 of two: its rollout strategy gathered one row, rank 0's two; the phase must train
    # on all three (gathered in rank order) and then take rank 0's weights
    from rlvr.core.types import Completion
    from rlvr.models import TinyModelConfig, build_tiny_model, char_tokenizer
    from rlvr.distributed.world import World

    tok = char_tokenizer()
    model = build_tiny_model(TinyModelConfig(hidden_size=32, intermediate_size=64, num_layers=1), tok)

    def row(prompt, target):
        return Completion("x", tok(prompt)["input_ids"], tok(target)["input_ids"] + [tok.eos_token_id], None,
                          "stop", target)

    mine, rank0s = [row("1+1=", "2")], [row("2+2=", "4"), row("3+3=", "6")]

    class Strategy:  # the wrapper that hands out the rows it gathered
        name, inner = "gathers_rows", None

        def __init__(self, rows):
            self.rows = rows

        def sft_rows(self):
            out, self.rows = self.rows, []
            return out

    class RankOne(World):
        def __init__(self):
            super().__init__(1, 2)
            self.synced = 0

        def gather(self, obj):
            return [rank0s, obj]

        def sync_params(self, module):
            self.synced += 1

    cfg = load_config(overrides=["sft.interleave_every=2", "sft.interleave_source=rollouts",
                                 "sft.interleave_steps=1", "sft.batch_size=8"])
    world = RankOne()
    phase = interleaved_sft(cfg, model, tok, None, Strategy(mine), world)
    assert phase(0) == {} and world.synced == 0  # rows kept for the phase; nothing trained, nothing to sync
    out = phase(1)
    # step 0: rank 0's two and this rank's one; step 1: rank 0's two again, none here
    assert out["sft/rows"] == 5.0 and out["sft/steps"] == 1.0 and world.synced == 1


def _rows_at(run, step):
    from rlvr.sft.interleave import load_rows

    return load_rows(run / "checkpoints" / f"step_{step:06d}")


def test_a_meml_grpo_resume_keeps_the_hard_examples_gathered_before_the_checkpoint(tmp_path):
    """MEML-GRPO's phase every 3 steps trains on the hard examples of steps 1-3; a run resumed from step 2 must
    train it on steps 1-2's rows too (they are in the step-2 checkpoint) and end bit for bit where the
    uninterrupted run ends. Dropping them (the checkpoint without its rows) changes the result."""
    over = ["rollout.group_size=4", "rollout.contexts.per_context=1", "sft.interleave_every=3", "sft.batch_size=4",
            "sft.interleave_steps=2"]
    out = train_and_resume("meml_grpo", tmp_path, over)
    held = _rows_at(tmp_path / "run", 2)
    assert held and all(r.completion_ids and r.prompt_ids for r in held)  # rows waiting for the step-3 phase
    a, b = out["weights"]
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert [line.get("sft/rows") for line in _lines(tmp_path / "run")] == \
        [line.get("sft/rows") for line in _lines(tmp_path / "part")]

    import shutil

    from rlvr.run.train import resume
    from rlvr.sft.interleave import ROWS_FILE
    from tests.methods.seed_support import _weights

    lost = tmp_path / "lost"  # the same resume without the rows: a different phase, different weights
    shutil.copytree(tmp_path / "run", lost)
    shutil.rmtree(lost / "checkpoints" / "step_000004")
    (lost / "checkpoints" / "step_000002" / f"{ROWS_FILE}.json").unlink()
    from rlvr.core.integrity import seal

    seal(lost / "checkpoints" / "step_000002")  # a checkpoint as written without the rows, not a damaged one
    resume(lost / "checkpoints" / "step_000002")
    c = _weights(lost, 4)
    assert any(not torch.equal(a[k], c[k]) for k in a)


def test_a_propa_resume_equals_the_uninterrupted_run(tmp_path):
    """PROPA: tree search, its process reward model and a phase on the search's rows after every step; a run
    resumed from step 2 ends bit for bit where the uninterrupted one does."""
    out = train_and_resume("propa", tmp_path, ["rollout.strategy.iterations=2", "rollout.strategy.max_steps=2",
                                               "rollout.strategy.step_tokens=3", "sft.batch_size=4",
                                               "sft.interleave_steps=1"])
    a, b = out["weights"]
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert any(line.get("sft/steps") for line in _lines(tmp_path / "run"))  # phases ran
    assert (tmp_path / "part" / "checkpoints" / "step_000004" / "prm").is_dir()


def test_rows_round_trip_with_segments_masks_and_images(tmp_path):
    from rlvr.core.types import Completion, Segment
    from rlvr.core.vision import VisionInputs
    from rlvr.sft.interleave import load_rows, save_rows

    img = VisionInputs(torch.randn(4, 6), torch.tensor([[1, 2, 2]]))
    rows = [Completion("a", [1, 2], [3, 4, 5], [-0.5, -1.0, -2.0], "stop", "x", 2, [1.0, 0.0, 1.0],
                       [Segment(0, 1, "prefix"), Segment(1, 3)], 7),
            Completion("b", [9], [8], None, "length", "y", vision=img)]
    save_rows(rows, tmp_path)
    back = load_rows(tmp_path)
    assert [r.__dict__ | {"vision": None} for r in back] == [r.__dict__ | {"vision": None} for r in rows]
    assert torch.equal(back[1].vision.pixel_values, img.pixel_values) and back[1].vision.num_images == 1
    assert load_rows(tmp_path / "nothing") == []
