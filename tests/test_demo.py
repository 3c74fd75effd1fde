"""The built-in demo (`rlvr train` with no config file and no recipe: rlvr/recipes/demo.yaml) meets its target,
RL raising held-out avg@4 by at least 20 points (slow: minutes); MKL's strict mode, set by importing rlvr,
makes matrix products and a shortened demo independent of the thread count (a whole demo still parts at its
twelfth RL step, so the recipe fixes the count)."""

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
def test_the_demo_learns(tmp_path):
    t0 = time.perf_counter()
    summary = train(_demo(tmp_path, "demo"))
    elapsed = time.perf_counter() - t0
    before, after = summary["eval_before"]["accuracy"], summary["eval_after"]["accuracy"]
    assert after - before >= 0.20, (before, after)
    assert summary["threads"] == 2 and elapsed < 600, elapsed


def _threads_probe(env_cbwr):
    import os
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if k not in ("MKL_CBWR", "RLVR_THREADS")}
    if env_cbwr is not None:
        env["MKL_CBWR"] = env_cbwr
    code = ("import rlvr, os, torch; g = torch.Generator().manual_seed(0); "
            "a, b = torch.randn(8192, 64, generator=g), torch.randn(8192, 32, generator=g); "
            "torch.set_num_threads(1); one = a.T @ b; torch.set_num_threads(2); two = a.T @ b; "
            "print(torch.equal(one, two), len(os.sched_getaffinity(0)), os.environ['MKL_CBWR'])")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    inv, cores, cbwr = out.stdout.split()
    return inv == "True", int(cores), cbwr


@pytest.mark.skipif(not torch.backends.mkl.is_available(), reason="MKL's reproducible mode needs torch built with MKL")
def test_importing_rlvr_makes_float32_products_independent_of_the_thread_count():
    inv, cores, cbwr = _threads_probe(None)
    assert cbwr == "AVX2,STRICT" and (inv or cores < 2)
    _, _, cbwr = _threads_probe("AUTO")  # the user's own setting is kept
    assert cbwr == "AUTO"
