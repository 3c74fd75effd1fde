"""The built-in demo (`rlvr train` with no config file and no recipe: rlvr/recipes/demo.yaml) meets its target,
RL raising held-out avg@4 by at least 20 points, and gives the same numbers whatever the thread count (the full
demo is slow: minutes; a shortened one runs in the default suite)."""

import json
import time

import pytest
import torch
from safetensors.torch import load_file

from rlvr.config.run import load_config
from rlvr.run.checkpoint import latest_checkpoint
from rlvr.run.train import train


def _demo(tmp_path, name, *extra):
    return load_config(overrides=[f"out={tmp_path / name}", *extra], recipe="demo")


def _final(run_dir):
    return load_file(str(latest_checkpoint(run_dir) / "model" / "model.safetensors"))


def _same_run(tmp_path, a, b, sa, sb):
    wa, wb = _final(tmp_path / a), _final(tmp_path / b)
    assert wa.keys() == wb.keys() and all(torch.equal(wa[k], wb[k]) for k in wa)
    assert sa["eval_before"] == sb["eval_before"] and sa["eval_after"] == sb["eval_after"]
    files = sorted(p.name for p in (tmp_path / a / "eval").iterdir())
    assert len(files) >= 2 and files == sorted(p.name for p in (tmp_path / b / "eval").iterdir())
    for f in files:  # every evaluation, each prompt's samples included
        ea, eb = (json.loads((tmp_path / r / "eval" / f).read_text()) for r in (a, b))
        assert ea["per_prompt"] == eb["per_prompt"]


def test_a_shortened_demo_is_bit_identical_with_one_and_two_threads(tmp_path):
    short = ["sft.steps=80", "train.steps=6", "eval.num_examples=24", "train.eval_every=3"]
    one = train(_demo(tmp_path, "one", *short, "train.threads=1"))
    two = train(_demo(tmp_path, "two", *short, "train.threads=2"))
    assert (one["threads"], two["threads"]) == (1, 2)
    _same_run(tmp_path, "one", "two", one, two)


@pytest.mark.slow
def test_the_demo_learns_and_gives_the_same_numbers_with_one_and_two_threads(tmp_path):
    t0 = time.perf_counter()
    two = train(_demo(tmp_path, "two", "train.threads=2"))
    elapsed = time.perf_counter() - t0
    before, after = two["eval_before"]["accuracy"], two["eval_after"]["accuracy"]
    assert after - before >= 0.20, (before, after)
    assert elapsed < 600, elapsed
    one = train(_demo(tmp_path, "one", "train.threads=1"))
    _same_run(tmp_path, "one", "two", one, two)


def _threads_probe(env_cbwr):
    import os
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if k not in ("MKL_CBWR", "RLVR_THREADS")}
    if env_cbwr is not None:
        env["MKL_CBWR"] = env_cbwr
    code = ("import rlvr.run.threads as t, os; "
            "print(t.gemm_thread_invariant(), t.usable_cores(), os.environ['MKL_CBWR'])")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    inv, cores, cbwr = out.stdout.split()
    return inv == "True", int(cores), cbwr


@pytest.mark.skipif(not torch.backends.mkl.is_available(), reason="MKL's reproducible mode needs torch built with MKL")
def test_importing_rlvr_makes_float32_products_independent_of_the_thread_count():
    inv, cores, cbwr = _threads_probe(None)
    assert cbwr == "AVX2,STRICT" and inv
    if cores < 2:
        pytest.skip("one usable core: nothing to split")
    off, _, cbwr = _threads_probe("AUTO")  # the user's own setting is kept; MKL's default splits the sum
    assert cbwr == "AUTO" and not off


def test_auto_threads_follow_the_load_only_where_they_cannot_change_results(monkeypatch):
    import rlvr.run.threads as t

    monkeypatch.delenv("RLVR_THREADS", raising=False)
    monkeypatch.delenv("LOCAL_WORLD_SIZE", raising=False)
    monkeypatch.setattr(t, "usable_cores", lambda: 4)
    monkeypatch.setattr(t, "_free_cores", lambda: 1)  # a busy machine
    monkeypatch.setattr(t, "gemm_thread_invariant", lambda: True)
    assert t.auto_threads() == 1
    monkeypatch.setattr(t, "gemm_thread_invariant", lambda: False)
    assert t.auto_threads() == 4  # the count that does not depend on the load
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "2")
    assert t.auto_threads() == 2
    monkeypatch.setenv("RLVR_THREADS", "3")
    assert t.auto_threads() == 3
