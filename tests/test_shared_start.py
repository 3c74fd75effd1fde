"""The shared start (rlvr.sft.shared_start, ``sft.cache`` and ``sft.seed``): the warm-up trained once is reused by
every run whose warm-up it would be, bit for bit, whatever the run's seed and RL settings; anything that changes
the warm-up changes the key; a damaged or half-written start is never used; a cached run ends exactly where the
same run without a cache ends."""

from __future__ import annotations

import json

import pytest
import torch
from safetensors.torch import load_file

from rlvr.config.run import ConfigError, load_config
from rlvr.run.checkpoint import latest_checkpoint
from rlvr.run.train import train
from rlvr.sft.shared_start import cache_root, start_identity, start_key

BASE = ["model.tiny.hidden_size=32", "model.tiny.intermediate_size=64", "model.tiny.num_layers=1",
        "task.max_value=20", "task.num_eval=8", "rollout.prompts_per_step=4", "rollout.group_size=4",
        "rollout.max_new_tokens=4", "train.steps=2", "train.micro_batch_size=8", "train.checkpoint_every=0",
        "sft.steps=10", "sft.batch_size=16"]


def _cfg(tmp_path, name, *extra):
    return load_config(overrides=[f"out={tmp_path / name}", *BASE, *extra])


def _weights(path):
    return load_file(str(path))


def _equal(a, b):
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def _key(*extra):
    return start_key(start_identity(load_config(overrides=[*BASE, *extra])))


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    """Two runs of different seeds sharing one start (the first trains and stores it, the second fetches it),
    and a third with the second's seed and no cache."""
    tmp = tmp_path_factory.mktemp("shared")
    cache = tmp / "cache"
    first = train(_cfg(tmp, "a", "seed=1", "sft.seed=7", f"sft.cache={cache}"))
    second = train(_cfg(tmp, "b", "seed=2", "sft.seed=7", f"sft.cache={cache}"))
    plain = train(_cfg(tmp, "c", "seed=2", "sft.seed=7"))
    return tmp, cache, first, second, plain


def test_the_second_run_reuses_the_first_runs_warmup(pair):
    tmp, cache, first, second, plain = pair
    stored = [p for p in cache.iterdir()]
    assert len(stored) == 1 and not stored[0].name.startswith(".")  # one start, no temporary left behind
    assert first["sft_start"] == {"key": stored[0].name, "path": str(stored[0]), "reused": False}
    assert second["sft_start"] == {**first["sft_start"], "reused": True}
    assert plain["sft_start"] is None
    key = json.loads((stored[0] / "key.json").read_text())
    assert key["sft"]["seed"] == 7 and key["sft"]["steps"] == 10 and "cache" not in key["sft"]
    assert first["sft_seconds"] == second["sft_seconds"]  # the stored warm-up's own record


def test_a_run_from_a_cached_start_ends_where_the_same_run_without_a_cache_ends(pair):
    """b fetched the start a trained under another run seed; c trained its own: equal final weights show the
    start was stored and fetched bit for bit and did not depend on a's seed."""
    tmp, *_ = pair
    b = _weights(latest_checkpoint(tmp / "b") / "model" / "model.safetensors")
    c = _weights(latest_checkpoint(tmp / "c") / "model" / "model.safetensors")
    assert _equal(b, c)
    assert pair[3]["eval_before"] == pair[4]["eval_before"]


def test_rl_still_follows_each_runs_own_seed(pair):
    tmp, *_ = pair
    sampled = [[r["completion"] for r in map(json.loads, (tmp / run / "completions.jsonl").read_text().splitlines())]
               for run in ("a", "b", "c")]
    assert sampled[0] != sampled[1] and sampled[1] == sampled[2]


@pytest.mark.parametrize("change", ["task.max_value=21", "task.teacher_error=0.1", "sft.steps=11", "sft.lr=2e-3",
                                    "sft.batch_size=8", "sft.seed=8", "model.tiny.num_layers=2",
                                    "model.tiny.max_positions=64", "train.micro_batch_size=4", "data.label_noise.fraction=0.1",
                                    "sft.warmup_steps=3", "task.data_seed=1"])
def test_anything_that_changes_the_warmup_changes_the_key(change):
    assert _key("sft.seed=7") != _key("sft.seed=7", change)


@pytest.mark.parametrize("change", ["seed=5", "train.steps=9", "optim.lr=1e-3", "algorithm.kl.coef=0.1",
                                    "rollout.group_size=8", "eval.num_examples=3", "sft.checkpoint_every=3",
                                    "sft.interleave_every=4", "train.eval_every=1"])
def test_what_acts_only_after_the_warmup_keeps_the_key(change):
    assert _key("sft.seed=7") == _key("sft.seed=7", change)


def test_without_its_own_seed_the_start_follows_the_runs_seed():
    assert _key("seed=1") != _key("seed=2")
    assert _key("seed=3") == _key("sft.seed=3", "seed=9")


def test_a_warmup_that_generates_keys_on_the_rollout_settings_too():
    ssb = ["sft.method=ssb", "sft.seed=1"]
    assert _key(*ssb) != _key(*ssb, "rollout.temperature=0.5")
    assert _key("sft.seed=1") == _key("sft.seed=1", "rollout.temperature=0.5")


def test_a_damaged_start_is_trained_again_and_replaced(pair, tmp_path):
    _, cache, *_ = pair
    import shutil

    mine = tmp_path / "cache"
    shutil.copytree(cache, mine)
    (stored,) = list(mine.iterdir())
    f = stored / "model.safetensors"
    data = bytearray(f.read_bytes())
    data[-3] ^= 0xFF
    f.write_bytes(bytes(data))
    s = train(_cfg(tmp_path, "d", "seed=2", "sft.seed=7", f"sft.cache={mine}"))
    assert s["sft_start"] == {"key": stored.name, "path": str(stored), "reused": False}  # trained, then stored
    assert _equal(_weights(f), _weights(cache / stored.name / "model.safetensors"))  # replaced by an intact copy
    assert not [p for p in mine.iterdir() if p.name.startswith(".")]


def test_a_half_written_start_is_not_used(pair, tmp_path):
    _, cache, *_ = pair
    import shutil

    (stored,) = list(cache.iterdir())
    mine = tmp_path / "cache"
    shutil.copytree(stored, mine / stored.name)
    (mine / stored.name / "state.json").unlink()  # as if the copy had stopped half-way
    s = train(_cfg(tmp_path, "e", "seed=2", "sft.seed=7", f"sft.cache={mine}"))
    assert s["sft_start"]["reused"] is False
    assert (mine / stored.name / "state.json").is_file()  # and replaced by a whole one


def test_cache_locations_and_bad_settings(monkeypatch, tmp_path):
    monkeypatch.setenv("RLVR_CACHE", str(tmp_path / "c"))
    assert cache_root(load_config(overrides=[*BASE, "sft.cache=true"])) == tmp_path / "c" / "starts"
    assert cache_root(load_config(overrides=[*BASE, f"sft.cache={tmp_path}/x"])) == tmp_path / "x"
    assert cache_root(load_config(overrides=BASE)) is None
    with pytest.raises(ConfigError, match="sft.steps is 0"):
        load_config(overrides=[*BASE, "sft.steps=0", "sft.cache=true"])
    with pytest.raises(ConfigError, match="give a directory"):
        load_config(overrides=[*BASE, "sft.cache=' '"])


def test_a_model_object_with_a_cache_is_refused(tmp_path):
    from rlvr.models import build_tiny_model, char_tokenizer

    cfg = _cfg(tmp_path, "f", "sft.cache=true")
    tok = char_tokenizer()
    with pytest.raises(ValueError, match="sft.cache"):
        train(cfg, model=build_tiny_model(cfg.model.tiny, tok), tokenizer=tok)


def test_the_thread_count_in_force_is_part_of_the_key():
    """A long CPU run's numbers depend on the thread count (docs/cpu-threads.md), so a start trained with one
    count is not reused by a run with another."""
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        one = _key("sft.seed=7")
        torch.set_num_threads(2)
        two = _key("sft.seed=7")
    finally:
        torch.set_num_threads(before)
    assert one != two
